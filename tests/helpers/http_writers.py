"""Several HTTP clients appending to one session of a running ``ctxledger serve`` at once."""

from __future__ import annotations

import threading

import httpx

CLIENTS = 4
PER_CLIENT = 15


def run_writers(base: str, session_id: str) -> list[str]:
    """`CLIENTS` clients (one connection each, so with ``--workers`` they land on different
    workers) append `PER_CLIENT` user messages each, concurrently; returns the error
    bodies of the appends that failed."""
    failures: list[str] = []

    def writer(name: str) -> None:
        with httpx.Client(base_url=base, timeout=30) as http:
            for i in range(PER_CLIENT):
                body = {"messages": [{"role": "user", "content": f"{name} {i}"}]}
                resp = http.post(f"/v1/sessions/{session_id}/messages", json=body)
                if resp.status_code != 200:
                    failures.append(resp.text)

    threads = [threading.Thread(target=writer, args=(f"w{k}",)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return failures


def written() -> list[str]:
    """Every message text the writers send, sorted."""
    return sorted(f"w{k} {i}" for k in range(CLIENTS) for i in range(PER_CLIENT))

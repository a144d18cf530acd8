"""Server-Sent Events read from an upstream: split a byte stream into events, each with
its raw bytes kept so the proxy forwards exactly what it received."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["SSEEvent", "SSEParser"]


@dataclass
class SSEEvent:
    raw: bytes
    event: str | None
    data: str


#: what ends an SSE event: a blank line, with either line ending
_SEPARATORS = (b"\n\n", b"\r\n\r\n")


class SSEParser:
    """Split a byte stream into SSE events, keeping each event's raw bytes for forwarding.

    Linear in the bytes fed, however they are chunked: each separator's search resumes
    where its last one stopped, and a separator found beyond the next event is kept
    for later (a stream of CRLF events looks for "\n\n" once, not once per event).
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._start = 0  # where the next event begins in the buffer
        #: per separator: where its next occurrence at or after the next event begins
        #: (-1: none known), and where a look for it resumes (none begins before that)
        self._next = [-1, -1]
        self._looked = [0, 0]

    def feed(self, chunk: bytes) -> Iterator[SSEEvent]:
        """The events `chunk` completes."""
        self._buffer += chunk
        while True:
            cut, sep = self._boundary()
            if cut < 0:
                if self._start:  # drop what was handed out (once per chunk, not per event)
                    del self._buffer[: self._start]
                    self._looked = [max(0, at - self._start) for at in self._looked]
                    self._start = 0
                return
            raw = bytes(self._buffer[self._start : cut + sep])
            self._start = cut + sep
            yield self._parse(raw)

    def _boundary(self) -> tuple[int, int]:
        """(start, length) of the earliest separator after the next event's start, or (-1, 0)."""
        best = (-1, 0)
        start, buffer = self._start, self._buffer
        for k, sep in enumerate(_SEPARATORS):
            at = self._next[k]
            if at < start:  # none known, or it was inside what was handed out
                at = buffer.find(sep, max(start, self._looked[k]))
                self._next[k] = at
                self._looked[k] = at if at >= 0 else max(start, len(buffer) - len(sep) + 1)
            if at >= 0 and (best[0] < 0 or at < best[0]):
                best = (at, len(sep))
        return best

    @staticmethod
    def _parse(raw: bytes) -> SSEEvent:
        name: str | None = None
        data: list[str] = []
        for line in raw.decode("utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if key == "event":
                name = value
            elif key == "data":
                data.append(value)
        return SSEEvent(raw=raw, event=name, data="\n".join(data))

    @property
    def pending(self) -> int:
        """Bytes held of an event not yet ended."""
        return len(self._buffer) - self._start

    def rest(self) -> bytes:
        rest = bytes(self._buffer[self._start :])
        self._buffer, self._start, self._next, self._looked = bytearray(), 0, [-1, -1], [0, 0]
        return rest

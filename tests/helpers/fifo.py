"""A FIFO with a writer, as a shell's process substitution (``<(…)``) gives a pipe."""

from __future__ import annotations

import array
import contextlib
import fcntl
import os
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def fifo_with_writer(path: Path, data: bytes) -> Iterator[Path]:
    """`path` made a FIFO holding `data` (at most the pipe's buffer, 64 KiB), its write end
    open from the start (as a process substitution's writer is); the write end closes
    once a reader has taken the data (so the reader then sees the end), or on the way
    out when nothing read it."""
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # a writer without waiting for a reader
    os.write(fd, data)
    lock = threading.Lock()
    open_ = [True]

    def close_once(when_read: bool) -> bool:
        with lock:
            if not open_[0]:
                return True
            pending = array.array("i", [0])
            fcntl.ioctl(fd, termios.FIONREAD, pending)
            if when_read and pending[0]:
                return False
            open_[0] = False
            os.close(fd)
            return True

    def close_when_read() -> None:
        while not close_once(when_read=True):
            time.sleep(0.005)

    closer = threading.Thread(target=close_when_read, daemon=True)
    closer.start()
    try:
        yield path
    finally:
        close_once(when_read=False)
        closer.join(timeout=5)

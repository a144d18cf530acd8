"""The fact cache's keys: a long string content is digested once per string object.

``FactCache.key`` must tell two messages apart exactly when their canonical JSON
differs, whichever form the key takes (long contents digested apart, the rest as
before), and a long content already digested is not hashed again.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.analysis import factviews
from ctxledger.analysis.factviews import LONG_CONTENT, FactCache, content_digest
from ctxledger.compressor.facts import extract_facts


def _long(seed: str, n: int = LONG_CONTENT + 10) -> str:
    return (seed * (n // max(1, len(seed)) + 1))[:n]


def test_equal_messages_in_different_objects_share_a_key() -> None:
    cache = FactCache()
    text = _long("see src/app.py ")
    copy = "".join([text[:5], text[5:]])
    assert copy == text and copy is not text
    a = {"role": "user", "content": text}
    b = {"content": copy, "role": "user"}  # key order does not matter (canonical JSON)
    assert cache.key(a) == cache.key(b)


@settings(max_examples=60, deadline=None)
@given(
    role=st.sampled_from(["user", "assistant", "tool"]),
    head=st.text(max_size=8),
    other=st.text(max_size=8),
    extra=st.one_of(st.none(), st.text(max_size=5)),
    long_a=st.booleans(),
    long_b=st.booleans(),
)
def test_keys_differ_exactly_when_the_messages_differ(
    role: str, head: str, other: str, extra: str | None, long_a: bool, long_b: bool
) -> None:
    cache = FactCache()
    a_text = _long(head or "x") if long_a else head
    b_text = _long(other or "x") if long_b else other
    a = {"role": role, "content": a_text}
    b = {"role": role, "content": b_text}
    if extra is not None:
        b["name"] = extra
    assert (cache.key(a) == cache.key(b)) == (a == b)


def test_a_long_content_equal_to_a_short_form_does_not_collide() -> None:
    """The short form hashes the JSON; the long form starts with a byte JSON never starts with."""
    cache = FactCache()
    text = _long("abc ")
    long_key = cache.key({"role": "user", "content": text})
    digest = content_digest(text)
    forged = {"role": "user", "content": None, "x": digest.hex()}
    assert long_key != cache.key(forged)
    assert long_key != hashlib.blake2b(b"\x00" + digest, digest_size=16).digest()


def test_a_long_content_is_hashed_once_per_string_object(monkeypatch: pytest.MonkeyPatch) -> None:
    hashed: list[int] = []
    real = hashlib.sha256

    def counting(data: bytes = b"") -> object:
        hashed.append(len(data))
        return real(data)

    monkeypatch.setattr(factviews.hashlib, "sha256", counting)
    cache = FactCache()
    text = _long("tests/test_x.py failed ")
    for _ in range(3):
        cache.key({"role": "user", "content": text})
    assert len(hashed) == 1
    cache.key({"role": "user", "content": "".join([text[:1], text[1:]])})  # another object
    assert len(hashed) == 2


def test_the_cached_facts_of_a_long_message_are_its_facts() -> None:
    cache = FactCache()
    text = _long("edit src/app.py then run `make test` on port 8080 ")
    message = {"role": "user", "content": text}
    first = cache.facts(message)
    assert first == extract_facts([message])
    assert cache.facts({"role": "user", "content": "".join([text[:3], text[3:]])}) is first
    assert cache.hits == 1 and cache.misses == 1

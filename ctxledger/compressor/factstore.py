"""A long message's facts, kept in the ledger's derived values (session 39, issue 14).

Extracting the facts of a 10 MB message costs ~300 ms; a cold what-if pays it once per
run. The facts are a pure function of the message *and of the extraction code*, so they
are computed once when such a message is appended and stored in the store's side table
of derived values (:meth:`~ctxledger.eventstore.base.EventStore.put_derived`: not an
event, not in the hash chain, like a checkpoint), keyed by

- the content's blob ref (sha256 of its UTF-8) and a digest of the rest of the message
  (its role, tool calls, ...), which is the ``kind``: ``facts/<digest>``;
- a ``version``: :data:`ENCODING` and :func:`fingerprint`, a digest of the source bytes of
  every ctxledger module extraction imports (from :data:`ROOT`, never a hand-kept list:
  :mod:`ctxledger.eventstore.fingerprints`), of the prompt files the summary markers
  read, and of the Python version and Unicode database. Any change to any of them gives
  another version, so a value stored by other extraction code is never read (it is
  simply not found, and the facts are computed as before).

Nothing here writes: :mod:`ctxledger.ledger.derived` stores values at append time.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping
from typing import Any

import msgspec

from ctxledger.compressor.factmatch import Fact
from ctxledger.compressor.facts import extract_facts
from ctxledger.compressor.normalstore import Getter
from ctxledger.eventstore.derived import STORED_MIN_CHARS
from ctxledger.eventstore.fingerprints import CodeVersion

#: the stored value's layout (bump when :func:`encode_facts` changes)
ENCODING = "facts-2"
#: the module whose imports the fingerprint follows: this one, which encodes and decodes
#: the value (its graph holds the extraction, ``compressor.facts``)
ROOT = __name__
#: data files read by modules of the graph (the summary markers' prompt texts)
DATA_DIRS = ("ctxledger/compressor/prompts",)

_ENCODER = msgspec.json.Encoder()
_VALUE = msgspec.msgpack.Encoder()
_DECODE = msgspec.msgpack.Decoder(list[tuple[str, str, str]])


#: the extraction code's fingerprint, taken when this module is imported (the code that
#: runs: an upgrade or edit on disk afterwards makes it None, see CodeVersion)
CODE = CodeVersion.take(ROOT, DATA_DIRS)


def fingerprint() -> str | None:
    """:data:`CODE`'s digest, or None (no source to fingerprint, or one changed since)."""
    return CODE.current()


def facts_version() -> str | None:
    """The facts' version, or None: then nothing is stored or read."""
    found = fingerprint()
    return f"{ENCODING}:{found}" if found is not None else None


def facts_kind(message: Mapping[str, Any]) -> str:
    """The derived-value kind of `message`'s facts: ``facts/`` and a digest of the message
    without its content (role, name, tool calls: extraction reads them too)."""
    rest = _ENCODER.encode({k: (None if k == "content" else v) for k, v in message.items()})
    return "facts/" + hashlib.blake2b(rest, digest_size=16).hexdigest()


def stored_content(message: Mapping[str, Any]) -> str | None:
    """`message`'s string content when its facts are the kind stored, else None."""
    content = message.get("content")
    if isinstance(content, str) and len(content) >= STORED_MIN_CHARS:
        return content
    return None


def encode_facts(facts: list[Fact]) -> bytes:
    """The stored value: each fact's (kind, value, normalized), msgpack, zlib-compressed;
    the rest of a fact of one message is its role and index 0 (:func:`decode_facts`)."""
    return zlib.compress(_VALUE.encode([(f.kind, f.value, f.normalized) for f in facts]), 1)


def decode_facts(value: bytes, message: Mapping[str, Any]) -> list[Fact] | None:
    """The facts :func:`encode_facts` stored for `message`, or None when the bytes do not
    decode as such (a damaged value is recomputed, never trusted half)."""
    try:
        items = _DECODE.decode(zlib.decompress(value))
    except (zlib.error, msgspec.DecodeError, msgspec.ValidationError):
        return None
    role = str(message.get("role") or "")
    return [Fact(kind=k, value=v, normalized=n, message_index=0, role=role) for k, v, n in items]


def computed_value(message: Mapping[str, Any]) -> bytes:
    """The value to store for `message` (its facts extracted now)."""
    return encode_facts(extract_facts([message]))


def read_facts(message: Mapping[str, Any], ref: str, get: Getter) -> list[Fact] | None:
    """`message`'s facts stored under blob `ref` (read with `get`), or None when absent,
    of another version, or no version can be told (:func:`facts_version`)."""
    version = facts_version()
    value = get(ref, facts_kind(message), version) if version is not None else None
    return decode_facts(value, message) if value is not None else None

"""A long content's normal forms, told by the ledger's derived values (session 40, issue 14).

A fact check reads a text in two normalized forms (:class:`~.factmatch.Haystack`:
``normalize_cased`` and its case folding). On a 10 MB content made of single-spaced
words, making them costs a cold what-if ~20 ms (mostly finding that the text holds no
double space), and the forms are the text itself. So when a long message is appended
its content is told apart once (:func:`computed_value`) and one byte is stored under
the content's blob ref, kind :data:`KIND`: whether ``normalize_cased`` gives the text
itself, and whether its case folding does too. A what-if reading the content then
takes the forms as they are (:func:`read_forms`) instead of making them.

Any other text stores a 0 (nothing known: the forms are made as before); telling it
apart costs a few ``memchr`` (a text holding a newline is not in normal form). The
version is :data:`ENCODING` and the fingerprint of the folding code (``factnormal``
and what it imports, :mod:`ctxledger.eventstore.fingerprints`): other code, no value.
"""

from __future__ import annotations

from collections.abc import Callable

from ctxledger.compressor.factnormal import fold_pieces, folds_to_itself, single_spaced
from ctxledger.compressor.factscan import casefolded
from ctxledger.eventstore.fingerprints import CodeVersion

__all__ = ["KIND", "Getter", "computed_value", "forms_of", "normal_version", "read_forms"]

#: the stored value's layout (bump when :func:`computed_value` changes)
ENCODING = "normal-1"
#: the derived-value kind (it depends on the content alone)
KIND = "normal"
#: the module whose imports the fingerprint follows: this one, which computes and reads
#: the byte (its graph holds ``factnormal``, where ``normalize`` lives)
ROOT = __name__

#: ``normalize_cased(text) == text``
CASED_IS_TEXT = 1
#: ``casefolded(text) == text`` as well (only told when CASED_IS_TEXT)
FOLDED_IS_TEXT = 2

#: the matching code's fingerprint, taken when this module is imported
CODE = CodeVersion.take(ROOT)


def normal_version() -> str | None:
    """The value's version, or None (no source to fingerprint, or one changed since)."""
    found = CODE.current()
    return f"{ENCODING}:{found}" if found is not None else None


def computed_value(text: str) -> bytes:
    """The value to store for `text`: one byte of flags (:data:`CASED_IS_TEXT`,
    :data:`FOLDED_IS_TEXT`). A text that is not single-spaced is never its own
    collapsed form, so it is told apart without normalizing it; a single-spaced one
    whose folding leaves it as it is, is (``normalize_cased`` collapses the folding)."""
    flags = 0
    parts = fold_pieces(text) if single_spaced(text) else None
    if parts is not None and folds_to_itself(parts):
        # (case folding maps each character alone: piece by piece, nothing joined)
        same = all(part.casefold() == part for part in parts)
        flags = CASED_IS_TEXT | (FOLDED_IS_TEXT if same else 0)
    return bytes((flags,))


def forms_of(text: str, value: bytes) -> tuple[str, str] | None:
    """``(normalize_cased(text), normalize(text))`` as `value` tells them, or None when
    it tells nothing (a 0) or is not such a value (a damaged one is not trusted)."""
    if len(value) != 1 or value[0] not in (CASED_IS_TEXT, CASED_IS_TEXT | FOLDED_IS_TEXT):
        return None
    return text, (text if value[0] & FOLDED_IS_TEXT else casefolded(text))


#: how a derived value is read: (blob ref, kind, version) -> the value, or None (also
#: the facts' reader's, :func:`ctxledger.compressor.factstore.read_facts`: one alias,
#: here, so the facts' import graph gains this small module and not the other way)
Getter = Callable[[str, str, str], "bytes | None"]


def read_forms(text: str, ref: str, get: Getter) -> tuple[str, str] | None:
    """`text`'s normal forms told by the value stored under blob `ref` (read with `get`),
    or None: absent, of another version, or telling nothing."""
    version = normal_version()
    value = get(ref, KIND, version) if version is not None else None
    return forms_of(text, value) if value is not None else None

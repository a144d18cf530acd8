"""Secret redaction for text that leaves the live window (summaries, serialized turns).

Every recognised secret is replaced by ``[REDACTED]`` while the text around it stays
readable: ``password=[REDACTED]``, ``postgres://app:[REDACTED]@db.internal:5432/x``,
``Authorization: Bearer [REDACTED]``. Recognised: OpenAI / Anthropic / Google keys,
GitHub and Slack tokens, AWS access key ids and secret keys, bearer / basic
credentials and Authorization headers, credential assignments (``api_key=...``,
``"password": "..."``, ``SECRET_KEY = '...'``, ``--password x``), credentials inside
connection-string URLs, PEM private key blocks, JSON Web Tokens, cookie headers
and dotenv assignments (``NAME_KEY=value``).

Speed: every pattern starts with a literal (word-boundary checks are lookbehinds
*after* the literal), because a leading ``\\b`` or case-insensitive flag makes Python's
regex engine try every position of a megabyte-sized tool output. Assignments are
found from their secret word in the lower-cased text and checked in Python.

Redaction is idempotent: redacting redacted text changes nothing.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping
from typing import Any

REDACTED = "[REDACTED]"

_PRIVATE_KEY = re.compile(
    r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)(?!\s*\[REDACTED\]\s*(?!-----END))"
    r"(?:.*?(-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)|[A-Za-z0-9+/=\s\\]*)",
    re.DOTALL,
)

# Vendor tokens have a recognisable shape, so they are redacted wherever they appear.
# ``(?<![\w-]sk-)`` after the literal means "the literal starts a word".
_VENDOR_TOKENS: tuple[re.Pattern[str], ...] = (
    re.compile(r"sk-(?<![\w\-]sk-)(?:ant-|proj-|svcacct-|admin-|live-|test-)?[A-Za-z0-9_\-]{20,}"),
    re.compile(r"github_pat_(?<![\w\-]github_pat_)[A-Za-z0-9_]{20,}"),
    re.compile(r"gh[pousr]_(?<![\w\-]gh._)[A-Za-z0-9]{30,}"),
    re.compile(r"xox[abposr]-(?<![\w\-]xox.-)[A-Za-z0-9\-]{10,}"),
    re.compile(r"A(?:KIA|SIA|GPA|IDA|ROA)(?<![\w]A...)[0-9A-Z]{16}(?![0-9A-Za-z])"),
    re.compile(r"AIza(?<![\w\-]AIza)[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"),
)

_SCHEMES = r"(?:bearer|basic|token|digest|apikey)"
# ``Authorization: Basic x`` / ``"authorization": "token x"``: keep the header and scheme.
_AUTH_HEADER = re.compile(
    r"(?i)(authorization(?<![A-Za-z0-9_]authorization)[\"']?\s*[:=]\s*[\"']?(?:"
    + _SCHEMES
    + r"\s+)?)"
    r"(?!\[REDACTED\])(?!" + _SCHEMES + r"\s)([A-Za-z0-9\-._~+/]{6,}=*)"
)
_BEARER = re.compile(
    r"(?i)(bearer(?<![A-Za-z0-9_]bearer)\s+)(?!\[REDACTED\])([A-Za-z0-9\-._~+/]{8,}=*)"
)
# ``scheme://user:password@host``: keep the scheme, the user and the host.
_URL_CREDENTIALS = re.compile(r"(://[^\s:/@'\"<>]*:)(?!\[REDACTED\]@)([^\s@/'\"<>]+)(@)")
_AWS_SECRET_NEAR = re.compile(
    r"(?i)(aws.{0,20}secret.{0,20}?[\"']?\s*[:=]\s*[\"']?)([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
)
_CLI_FLAG = re.compile(
    r"(--(?:password|passwd|api-key|apikey|token|secret|client-secret|auth-token)[= ]\s*)"
    r"(?:(\"|')((?:\\.|(?!\2)[^\\\n])*)\2|(?!\[REDACTED\])([^\s\"']+))",
    re.IGNORECASE,
)

# Assignment sites, searched in the lower-cased text: the last word of a secret name,
# an optional closing quote (plain or JSON-escaped), then ``=`` or ``:``.
_SITE = re.compile(
    r"(?P<word>key|secret|token|passw(?:or)?d|passphrase|pwd|credentials?)(\\?[\"'])?[ \t]*[:=][ \t]*"
)
# The whole name (lower-cased) must be one of these, optionally after a prefix like
# ``db_`` or ``openai_``; plain ``key``/``monkey``/``sort_key`` are not secrets.
_SECRET_NAME = re.compile(
    r"(?:[a-z0-9_\-]*[_\-])?(?:api[_\-]?key|apikey|x-api-key|secret[_\-]?key|secret|"
    r"client[_\-]?secret|(?:access|auth|refresh|bearer|session|api|id)?[_\-]?token|"
    r"password|passwd|passphrase|pwd|private[_\-]?key|aws_secret_access_key|credentials?)"
)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
_QUOTED_VALUE = re.compile(r"(\"|')((?:\\.|(?!\1)[^\\\n])*)\1")
_ESCAPED_QUOTED_VALUE = re.compile(r"(\\[\"'])((?:[^\\\n]|\\(?![\"']))+)(\\[\"'])")
_BARE_VALUE = re.compile(r"[^\s\"'\\&,;<>)}\]]+")

# A value that only names or points at a secret (a variable, a placeholder).
_PLACEHOLDER = re.compile(
    r"""^(?:
        \[REDACTED\]
      | \$\{?[A-Za-z_][A-Za-z0-9_]*\}?          # $VAR / ${VAR}
      | \{\{?\s*[\w.]+\s*\}?\}                  # {name} / {{ name }} templates
      | %[A-Za-z_][A-Za-z0-9_]*%                # %VAR%
      | <[^>]*>                                 # <placeholder>
      | \*+ | x+ | \.\.\. | …                   # masked already
      | (?:None|null|true|false|True|False|undefined|nil)
    )$""",
    re.VERBOSE,
)
# A bare (unquoted) value that is code, e.g. ``password = settings.DB_PASSWORD``.
_CODE_VALUE = re.compile(r"^[A-Za-z_]\w*(?:(?:\.[A-Za-z_]\w*)+(?:[(\[].*)?|[(\[].*)$")


# A JSON Web Token: three base64url parts, the first two JSON objects (``eyJ`` = ``{"``).
_JWT = re.compile(
    r"eyJ(?<![A-Za-z0-9_\-]eyJ)[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{8,}"
)
# ``Cookie:`` / ``Set-Cookie:`` headers (or JSON header keys): every pair's value goes.
_COOKIE_HEADER = re.compile(r"(?i)(cookie[\"']?\s*:\s*[\"']?)([^\r\n\"']+)")
_COOKIE_ATTRIBUTES = frozenset(
    {"path", "domain", "expires", "max-age", "samesite", "secure", "httponly", "priority"}
)
# dotenv assignments: an UPPER_CASE secret name, ``=`` with no spaces, the value literal
# whatever it looks like (``SENDGRID_API_KEY=SG.abc.def`` is not code, unlike
# ``password = settings.X``); only run when the text has such a name and ``=``
_DOTENV = re.compile(
    r"(?<![\w.$\-])((?:export[ \t]+)?[A-Z][A-Z0-9_]*"
    r"(?:KEY|SECRET|TOKEN|PASSWORD|PASSWD|PWD|PASSPHRASE|CREDENTIALS?)=)"
    r"(?![\"']?\[REDACTED\])([\"']?)([^\s\"'#]+)\2"
)


def _cookie_sub(match: re.Match[str]) -> str:
    pairs = []
    for pair in match.group(2).split(";"):
        name, eq, value = pair.partition("=")
        keep = not eq or name.strip().lower() in _COOKIE_ATTRIBUTES or value.strip() == REDACTED
        pairs.append(pair if keep else f"{name}={REDACTED}")
    return match.group(1) + ";".join(pairs)


def _dotenv_sub(match: re.Match[str]) -> str:
    value = match.group(3)
    if _PLACEHOLDER.match(value):
        return match.group(0)
    quote = match.group(2)
    return f"{match.group(1)}{quote}{REDACTED}{quote}"


def _keep_first(match: re.Match[str]) -> str:
    return f"{match.group(1)}{REDACTED}"


def _url_sub(match: re.Match[str]) -> str:
    return f"{match.group(1)}{REDACTED}{match.group(3)}"


def _private_key_sub(match: re.Match[str]) -> str:
    end = f"\n{match.group(2)}" if match.group(2) else ""
    return f"{match.group(1)}\n{REDACTED}{end}"


def _flag_sub(match: re.Match[str]) -> str:
    quote, quoted, bare = match.group(2), match.group(3), match.group(4)
    value = quoted if quote is not None else bare
    if not value or _PLACEHOLDER.match(value):
        return match.group(0)
    return f"{match.group(1)}{quote or ''}{REDACTED}{quote or ''}"


def _is_secret_value(value: str, *, quoted: bool, name: str) -> bool:
    if not value or _PLACEHOLDER.match(value):
        return False
    if quoted:
        # A literal string next to a secret name is the secret itself.
        return True
    if len(value) < 3 or _CODE_VALUE.match(value):
        return False
    # ``max_token=512``-style counters are not credentials.
    return not (value.isdigit() and "token" in name)


def _value_span(text: str, start: int, name: str) -> tuple[int, int] | None:
    """Where the secret value after an assignment site starts and ends, if it is one."""
    for pattern, quoted in (
        (_ESCAPED_QUOTED_VALUE, True),
        (_QUOTED_VALUE, True),
        (_BARE_VALUE, False),
    ):
        match = pattern.match(text, start)
        if match is None:
            continue
        group = 2 if quoted else 0
        if text.startswith(REDACTED, match.start(group)):
            return None
        if _is_secret_value(match.group(group), quoted=quoted, name=name):
            return match.start(group), match.end(group)
        return None
    return None


def _redact_assignments(text: str) -> str:
    lowered = text.lower()
    if len(lowered) != len(text):
        # Some characters change length when lower-cased; positions would not line up.
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    pieces: list[str] = []
    last = 0
    for site in _SITE.finditer(lowered):
        begin = site.start()
        while begin > 0 and lowered[begin - 1] in _NAME_CHARS:
            begin -= 1
        name = lowered[begin : site.end("word")]
        if begin < last or not _SECRET_NAME.fullmatch(name):
            continue
        span = _value_span(text, site.end(), name)
        if span is None:
            continue
        pieces.append(text[last : span[0]])
        pieces.append(REDACTED)
        last = span[1]
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


_VENDOR_TRIGGERS = (
    "sk-",
    "github_pat_",
    "gh",
    "xox",
    "akia",
    "asia",
    "agpa",
    "aida",
    "aroa",
    "aiza",
)
_Replacement = Callable[[re.Match[str]], str] | str
_Rule = tuple[tuple[str, ...], re.Pattern[str], _Replacement]

# (literal triggers in the lower-cased text, pattern, replacement). Whole-token shapes
# run before the generic assignment scan, so ``api_key=sk-...`` is redacted once.
_RULES: tuple[_Rule, ...] = (
    (("-----begin",), _PRIVATE_KEY, _private_key_sub),
    *((_VENDOR_TRIGGERS, pattern, REDACTED) for pattern in _VENDOR_TOKENS),
    (("authorization",), _AUTH_HEADER, _keep_first),
    (("bearer",), _BEARER, _keep_first),
    (("://",), _URL_CREDENTIALS, _url_sub),
    (("aws",), _AWS_SECRET_NEAR, _keep_first),
    (("--",), _CLI_FLAG, _flag_sub),
    (("eyj",), _JWT, REDACTED),
    (("cookie",), _COOKIE_HEADER, _cookie_sub),
    (
        ("key=", "secret=", "token=", "password=", "passwd=", "pwd=", "passphrase=", "credential"),
        _DOTENV,
        _dotenv_sub,
    ),
)


#: _RULES in runs of rules with the same triggers, in order: the triggers are looked for
#: once per run, not once per rule (the six vendor token rules share theirs; they are
#: looked for in the text as it came in, so the answer is the same for each rule of a run)
_RUNS: tuple[tuple[tuple[str, ...], tuple[tuple[re.Pattern[str], _Replacement], ...]], ...] = tuple(
    (triggers, tuple((pattern, replacement) for _, pattern, replacement in run))
    for triggers, run in itertools.groupby(_RULES, key=lambda rule: rule[0])
)


def redact(text: str) -> str:
    """`text` with every recognised secret replaced by ``[REDACTED]``."""
    if not text:
        return text
    folded = text.lower()
    for triggers, rules in _RUNS:
        if any(t in folded for t in triggers):
            for pattern, replacement in rules:
                text = pattern.sub(replacement, text)
    return _redact_assignments(text)


def _redact_content(content: Any) -> Any:
    if isinstance(content, str):
        return redact(content)
    if isinstance(content, list):
        parts: list[Any] = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                new_part = dict(part)
                new_part["text"] = redact(part["text"])
                parts.append(new_part)
            else:
                parts.append(part)
        return parts
    return content


def _redact_tool_calls(calls: Any) -> Any:
    if not isinstance(calls, list):
        return calls
    out: list[Any] = []
    for call in calls:
        if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
            out.append(call)
            continue
        fn = dict(call["function"])
        if isinstance(fn.get("arguments"), str):
            # [REDACTED] has no quote or backslash, so JSON arguments stay valid JSON.
            fn["arguments"] = redact(fn["arguments"])
        new_call = dict(call)
        new_call["function"] = fn
        out.append(new_call)
    return out


_TEXT_FIELDS = ("content", "reasoning_content", "reasoning", "refusal")


def redact_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A redacted copy of one OpenAI-shape message; the input is never mutated."""
    out = dict(message)
    for field in _TEXT_FIELDS:
        if field in out:
            out[field] = _redact_content(out[field])
    if "tool_calls" in out:
        out["tool_calls"] = _redact_tool_calls(out["tool_calls"])
    return out


__all__ = ["REDACTED", "redact", "redact_message"]

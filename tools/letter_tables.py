"""Write ctxledger/compressor/lettertables.py: the code point ranges of factletters'
regex classes, built from every code point with this Python's Unicode version.

    python tools/letter_tables.py   # after a change to a judge in factletters.JUDGES
"""

from __future__ import annotations

import textwrap
import unicodedata
from pathlib import Path

from ctxledger.compressor.factletters import JUDGES, built_ranges

TARGET = Path(__file__).resolve().parent.parent / "ctxledger" / "compressor" / "lettertables.py"

HEAD = '''"""The code point ranges of :mod:`.factletters`' regex classes for one Unicode version,
written by ``tools/letter_tables.py`` (review 2 of session 35: building them from every
code point cost a process whose first non-ASCII text holds a path 0.37 s). Each is hex
``first-last`` or ``code`` items; ``tests/test_audit_s35_paths.py`` checks them against
the build when Python's Unicode version is this one.
"""

from __future__ import annotations

'''


def main() -> None:
    body = [f'UNIDATA_VERSION = "{unicodedata.unidata_version}"', "", "TABLES: dict[str, str] = {"]
    for name in JUDGES:
        items = " ".join(f"{a:x}-{b:x}" if a < b else f"{a:x}" for a, b in built_ranges(name))
        lines = textwrap.wrap(items, 86, break_on_hyphens=False)
        body.append(f'    "{name}": (')
        body.extend(f'        "{line} "' for line in lines)
        body.append("    ),")
    body.append("}")
    TARGET.write_text(HEAD + "\n".join(body) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

"""Words for a folder before a slash path glued to caseless prose (session 38).

After a caseless letter a slash path's ``/`` either starts an absolute path glued to
prose (``修改/etc/hosts``: "modify /etc/hosts") or ends a relative path's first name
(``项目/data/x.csv``: the project's ``data/x.csv``). Sessions 36 and 37 read the
absolute path there when it starts at a system root (``factletters.system_root``),
since nothing in a text without blanks tells a verb from a noun; so ``项目/data/x.csv``
gave the false ``/data/x.csv``. A word that names a folder (project, directory,
folder, repository) is a noun whatever the text: a path after it is that folder's,
relative, and no absolute path is read there, by the extraction
(``factpathrules.cut_path``) or by the matcher (``factbounds.after_caseless``).
Other words keep the session 36 reading (``修改/data/x.csv`` gives ``/data/x.csv``).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["FOLDER_NOUNS", "folder_noun_before", "folder_noun_behinds"]

#: caseless words for a folder (Chinese, simplified and traditional; Japanese; Korean;
#: Thai; Arabic), as the matcher reads them (NFKC, case folded: unchanged)
FOLDER_NOUNS = (
    *("项目", "目录", "文件夹", "仓库", "工程", "專案", "項目", "目錄", "資料夾", "倉庫"),
    *("プロジェクト", "フォルダ", "フォルダー", "ディレクトリ", "リポジトリ"),
    *("프로젝트", "폴더", "디렉토리", "디렉터리", "저장소"),
    *("โฟลเดอร์", "ไดเรกทอรี", "โปรเจกต์", "مجلد", "مشروع"),
)
#: the most characters the longest noun takes as written (a halfwidth katakana and its
#: sound mark fold to one character)
_LOOK_BACK = 2 * max(len(noun) for noun in FOLDER_NOUNS)
#: what a noun's last character may be as written, folded alone (a halfwidth katakana's
#: sound mark folds to a combining one): most characters before a path are none of them
_LAST = frozenset(noun[-1] for noun in FOLDER_NOUNS) | {"\u3099", "\u309a"}


def folder_noun_before(text: str, start: int, *, folded: bool = False) -> bool:
    """Whether a folder noun ends right before `start` in `text`, read folded (`folded`:
    `text` is the matcher's normalized text already)."""
    if start < 1 or text[start - 1].isascii():
        return False
    if folded:
        return text[start - 1] in _LAST and text.endswith(FOLDER_NOUNS, 0, start)
    if unicodedata.normalize("NFKC", text[start - 1])[-1:] not in _LAST:
        return False
    before = unicodedata.normalize("NFKC", text[max(0, start - _LOOK_BACK) : start]).casefold()
    return before.endswith(FOLDER_NOUNS)


def folder_noun_behinds() -> list[str]:
    """One regex class of look behinds per noun (each of a fixed width), for a pattern
    that rejects an absolute path right after a folder noun."""
    return [re.escape(noun) for noun in FOLDER_NOUNS]

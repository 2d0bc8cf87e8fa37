"""History files: every superseded value of a document, kept beside it so the document can stay short. Pure, no I/O.

`entities/people/nadia-okafor.md` keeps its current facts and the newest superseded
values of each key (`consolidate.superseded_in_document`); the consolidator writes
every superseded value it knows of, oldest first per key, to the history file
beside it, `entities/people/nadia-okafor.history.md`. The file is a memory file
like any other (sync carries it, git keeps its history) whose whole body is one
`## Superseded` section (its front matter says only `type: semantic`), so grep, read and search hide it unless superseded facts
are asked for, and `ls` leaves it out of a listing of its folder.
"""

from __future__ import annotations

SUFFIX = ".history.md"
_DOCUMENT_SUFFIX = ".md"


def history_path(document: str) -> str:
    """The history file of a document: `entities/people/nadia-okafor.md` -> `...nadia-okafor.history.md`."""
    stem = document[: -len(_DOCUMENT_SUFFIX)] if document.endswith(_DOCUMENT_SUFFIX) else document
    return stem + SUFFIX


def is_history_path(rel: str) -> bool:
    """A file named `*.history.md`: the consolidator's history of the document beside it."""
    return rel.endswith(SUFFIX)


def document_of(history: str) -> str:
    """The document a history file belongs to (the inverse of `history_path`)."""
    return history[: -len(SUFFIX)] + _DOCUMENT_SUFFIX


def new_history_text() -> str:
    """The bytes of a history file before its first lines: front matter without a title or a name (nothing in
    it is current, so nothing that a default grep or search could find), then one section."""
    from fsmem.format.markdown import SUPERSEDED_HEADING  # the rest of this module is read by every listing

    return f"---\ntype: semantic\n---\n## {SUPERSEDED_HEADING}\n"

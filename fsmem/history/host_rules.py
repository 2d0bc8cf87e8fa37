"""Host-local rules: what fsmem writes on this host for git, never synced, whatever a remote sends.

fsmem's lines in `.gitattributes` and `.gitignore` at the memory's root
(written without following a link), fsmem's block in
`$GIT_DIR/info/attributes` (which git never syncs and which outranks every
`.gitattributes`, so memory files stay byte for byte and on fsmem's merge
driver whatever a tree says), and no `.fsmem` link. `fsmem.history.trust`
keeps a remote from changing any of them.
"""

from __future__ import annotations

import os
from pathlib import Path

from fsmem import faces
from fsmem.config import CONFIG_FILE, STATE_DIR
from fsmem.errors import HistoryError
from fsmem.history.repo import Repo
from fsmem.store.files import atomic_write
from fsmem.store.paths import shown

IGNORED = (".fsmem/", ".fsmem-tmp-*")
ATTRIBUTES = ("*.md merge=fsmem", "*.markdown merge=fsmem")
CONTROL = {".gitignore": IGNORED, ".gitattributes": ATTRIBUTES}  # fsmem's own files at the memory's root
# Attributes a tree could set to change a file's bytes, run a program on it, or merge it otherwise.
NEUTRAL = "-text !eol !crlf !filter !ident !working-tree-encoding !diff !conflict-marker-size"


def canonical(name: str) -> bytes:
    return ("\n".join(CONTROL[name]) + "\n").encode()


def write_info_attributes(repo: Repo) -> None:
    """fsmem's block in `$GIT_DIR/info/attributes`, written when missing or changed (one small read per sync)."""
    base = repo.prefix
    begin = f"# fsmem ({base or '/'}): memory files and fsmem's own, whatever a .gitattributes says; host-local"
    lines = [
        begin,
        f"{base}**/*.[mM][dD] {NEUTRAL} merge=fsmem",
        f"{base}**/*.[mM][aA][rR][kK][dD][oO][wW][nN] {NEUTRAL} merge=fsmem",
        *(f"/{base}{name} {NEUTRAL} !merge" for name in (CONFIG_FILE, *CONTROL)),
        f"# fsmem ({base or '/'}): end",
    ]
    block = "\n".join(lines) + "\n"
    path = repo.git_dir / "info" / "attributes"
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape") if path.is_file() else ""
    except OSError:
        text = ""
    if text.endswith(block):
        return
    kept = text
    if begin in text:  # an older block: taken out, the new one goes last (the last match wins in one file)
        start = text.index(begin)
        end = text.find(lines[-1], start)
        kept = text[:start] + (text[end + len(lines[-1]) + 1 :] if end != -1 else "")
    if kept and not kept.endswith("\n"):
        kept += "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (kept + block).encode("utf-8", "surrogateescape"))


def write_control_files(root: Path, notes: list[str]) -> None:
    """`.gitattributes` and `.gitignore` at the root with fsmem's lines: a link there is replaced (never read or
    written through, and said in `notes`); a file is given the lines it lacks, its other lines kept."""
    for name in CONTROL:
        path = root / name
        have = b""
        if os.path.islink(path):
            notes.append(f"{name}: was a symbolic link (to {shown(os.readlink(path))}); replaced by fsmem's own")
            os.unlink(path)
        elif os.path.isdir(path):
            raise HistoryError(
                f"{path} is a folder where fsmem's own file goes: remove it, then run {faces.call('sync', setup=True)} again"
            )
        elif path.is_file():
            have = path.read_bytes()
        want = with_fsmem_lines(name, have)
        if want != have:
            atomic_write(path, want)


def with_fsmem_lines(name: str, data: bytes) -> bytes:
    """`data` with fsmem's lines that it lacks added at its end (fsmem's own bytes when it is empty)."""
    text = data.decode("utf-8", "surrogateescape")
    missing = [line for line in CONTROL[name] if line not in text.splitlines()]
    if not missing:
        return data
    if text and not text.endswith("\n"):
        text += "\n"
    return (text + "\n".join(missing) + "\n").encode("utf-8", "surrogateescape")


def is_fsmem_alone(data: bytes | None, name: str) -> bool:
    """A control file that holds fsmem's lines and nothing else (or is not there): fsmem's own, kept exactly so.
    One that also holds lines of a project or a vault around the memory is shared with them."""
    return data is None or not [
        line for line in data.decode("utf-8", "replace").splitlines() if line.strip() and line not in CONTROL[name]
    ]


def remove_state_link(root: Path, notes: list[str]) -> None:
    """A `.fsmem` that is a link (a clone checks out what a remote pushed) would keep this host's state elsewhere."""
    path = root / STATE_DIR
    if os.path.islink(path):
        notes.append(
            f"{STATE_DIR}: was a symbolic link (to {shown(os.readlink(path))}), which would have kept this "
            "host's state outside the memory; removed"
        )
        os.unlink(path)


def canonical_id(repo: Repo, rel: str) -> str:
    return repo.store.id_of("blob", canonical(rel))

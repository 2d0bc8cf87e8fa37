"""The hostile memory and payloads shared by tests/test_containment.py and benchmarks/bench_hostile.py.

`build` makes an fsmem memory full of traps (links out of the root and into
`.fsmem/` and `.git/`, a FIFO, a loop, a name with a newline) beside a folder
holding a secret; `PAYLOADS` are the paths every face is given; `tree_state`
fingerprints a folder without following links or opening FIFOs.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from fsmem import Memory

SECRETS = ("SECRET-OUTSIDE", "SECRET-GIT", "SECRET-STATE", "SECRET-CONFIG", "SECRET-NAME")
DEEP = "/".join(["d"] * 2000) + "/x.md"
LONG_NAME = "x" * 300 + ".md"
LONG_PATH = "/".join(["p" * 200] * 25) + "/x.md"  # 25 components of 200 bytes: > 4096 bytes in all

# (what it tries, the path as a face is given it). "{outside}" is the absolute path of the outside folder.
PAYLOADS: list[tuple[str, str]] = [
    ("absolute path outside", "{outside}/secret.md"),
    ("absolute system path", "/etc/passwd"),
    ("dot-dot out of the root", "../outside/secret.md"),
    ("dot-dot in, then out", "topics/../../outside/secret.md"),
    ("dot-dot alone", ".."),
    ("folder link out of the root", "out/secret.md"),
    ("file link out of the root", "outlink.md"),
    ("folder link into .fsmem", "topics/state/state.md"),
    ("file link into .fsmem", "topics/statelink.md"),
    ("folder link into .git", "gitdir/config"),
    ("file link into .git", "gitlink.md"),
    ("file link to fsmem.yaml", "conflink.md"),
    ("configuration", "fsmem.yaml"),
    ("configuration, upper case", "FSMEM.YAML"),
    ("configuration, mixed case", "Fsmem.Yaml"),
    ("git configuration", ".git/config"),
    ("git configuration, other case", ".Git/config"),
    ("machine state", ".fsmem/state.md"),
    ("machine state, upper case", ".FSMEM/x.md"),
    ("newline in a name", "odd\nname.md"),
    ("carriage return in a name", "a\rb.md"),
    ("tab in a name", "a\tb.md"),
    ("DEL in a name", "a\x7fb.md"),
    ("NUL in a name", "a\x00b.md"),
    ("lone surrogate in a name", "\ud800.md"),
    ("2,000 components", DEEP),
    ("300-byte name", LONG_NAME),
    ("path over 4096 bytes", LONG_PATH),
    ("FIFO named .md", "fifo.md"),
    ("symbolic link loop", "loop.md"),
    ("file given as a folder", "topics/billing.md/x.md"),
    # names a Windows or macOS copy cannot hold (fsmem.format.portable): refused wherever fsmem would create them
    ("Windows device name", "topics/con.md"),
    ("Windows device name, in a folder", "Aux/x.md"),
    ("character Windows refuses", "topics/a:b.md"),
    ("trailing dot in a folder", "topics./x.md"),
    ("case twin of an existing file", "topics/Billing.md"),
]
# Refused where a file is wanted (read, write, edit); a folder is fine for ls and grep.
FOLDER_AS_FILE = ("folder given as a file", "topics")


# -- the hostile memory ---------------------------------------------------------------------
def build(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(base, root, outside): `base/memories` is an fsmem memory full of traps, `outside` holds a secret."""
    base = tmp_path / "base"
    root = base / "memories"
    Memory.init(root)
    config = root / "fsmem.yaml"
    config.write_text(config.read_text() + "# SECRET-CONFIG\n")
    (root / "topics").mkdir()
    (root / "topics" / "billing.md").write_text("---\ntitle: Billing\n---\n# Billing\n- proration: daily\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("SECRET-OUTSIDE proration\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text('[remote "origin"]\n\turl = https://SECRET-GIT-token@example.com/x\n')
    (root / ".fsmem").mkdir(exist_ok=True)
    (root / ".fsmem" / "state.md").write_text("SECRET-STATE proration\n")
    os.symlink(outside, root / "out")
    os.symlink(outside / "secret.md", root / "outlink.md")
    os.symlink(root / ".fsmem", root / "topics" / "state")
    os.symlink(root / ".fsmem" / "state.md", root / "topics" / "statelink.md")
    os.symlink(root / ".git", root / "gitdir")
    os.symlink(root / ".git" / "config", root / "gitlink.md")
    os.symlink(root / "fsmem.yaml", root / "conflink.md")
    os.symlink("loop.md", root / "loop.md")
    os.mkfifo(root / "fifo.md")
    (root / "odd\nname.md").write_text("SECRET-NAME proration\n")
    return base, root, outside


def tree_state(folder: Path) -> dict[str, str]:
    """Every entry under `folder` without following links or opening FIFOs: kind and content hash.

    fsmem's own state under `.fsmem/` (logs, caches, locks) is left out, except the planted file.
    """
    state: dict[str, str] = {}
    for current, folders, files in os.walk(folder):
        for name in folders + files:
            full = os.path.join(current, name)
            rel = os.path.relpath(full, folder)
            if rel.split(os.sep)[0] == ".fsmem" and rel != os.path.join(".fsmem", "state.md"):
                continue
            info = os.lstat(full)
            if os.path.islink(full):
                state[rel] = "link:" + os.readlink(full)
            elif os.path.isdir(full):
                state[rel] = "dir"
            elif os.path.isfile(full):
                state[rel] = "file:" + hashlib.sha256(Path(full).read_bytes()).hexdigest() + f":{info.st_mode:o}"
            else:
                state[rel] = f"special:{info.st_mode:o}"
    return state


def payloads(outside: Path, *, files: bool = False) -> list[tuple[str, str]]:
    """The payloads with the outside folder filled in; `files` adds a folder given where a file is wanted."""
    chosen = PAYLOADS + ([FOLDER_AS_FILE] if files else [])
    return [(what, path.replace("{outside}", str(outside))) for what, path in chosen]

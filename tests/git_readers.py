"""The `git cat-file` reader processes a process holds, read from /proc: what tests of the shared readers count."""

from __future__ import annotations

import os
from pathlib import Path


def cat_file_readers(pid: int, root: Path | None = None) -> list[str]:
    """The `git cat-file` children of process `pid`, started by any of its threads ('batch' or 'batch-check'
    each, sorted); with `root`, only those whose command line names it (`git -C ROOT ... cat-file`)."""
    found = []
    task = f"/proc/{pid}/task"
    for thread in os.listdir(task):
        try:
            with open(f"{task}/{thread}/children", encoding="ascii") as handle:
                children = handle.read().split()
        except OSError:
            continue
        for child in children:
            try:
                with open(f"/proc/{child}/cmdline", "rb") as handle:
                    words = handle.read().split(b"\0")
            except OSError:
                continue  # ended since
            if b"cat-file" in words and (root is None or os.fsencode(root) in words):
                found.append(words[-2].decode().lstrip("-"))  # the last word is the empty one after the NUL
    return sorted(found)

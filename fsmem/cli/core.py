"""`fsmem init`: make a folder a memory (the other core commands are built from their specs, `fsmem.cli.generated`)."""

from __future__ import annotations

import click

from fsmem.cli.options import command, emit, output_option


@command("init")
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@click.option(
    "--git",
    is_flag=True,
    help="With history: a git repository (or the work tree DIRECTORY is in), every change a commit. "
    "On an existing memory, turns history on.",
)
@output_option
def init_cmd(directory: str, git: bool, as_json: bool) -> None:
    """Make DIRECTORY a memory: a new folder gets the template; a folder of Markdown (an Obsidian vault) gets only
    what it lacks, its files unchanged. Never overwrites a memory; --git gives it history."""
    import os
    from pathlib import Path

    from fsmem.memory import Memory, template_dir
    from fsmem.store import template

    target = Path(directory).expanduser()
    existing = target.is_dir() and any(name != ".git" for name in os.listdir(target))
    adding = template.missing(template_dir(), target) if target.is_dir() else []
    memory = Memory.init(directory, git=git)
    emit(InitResult(str(memory.root), directory, git, added=adding if existing else None), as_json)


class InitResult:
    def __init__(self, root: str, given: str, git: bool = False, added: list[str] | None = None):
        self.root, self.given, self.git = root, given, git
        self.added = added  # None: a new memory from the template; else what a folder already in use was given

    def to_dict(self) -> dict[str, object]:
        return {"root": self.root, "git": self.git, "added": self.added}

    def to_text(self) -> str:
        import shlex

        history = " with history (git)" if self.git else ""
        hint = f"try: fsmem --root {shlex.quote(self.given)} ls"
        if self.added is None:
            return f"created a memory{history} in {self.root}; {hint}"
        added = ", ".join(self.added) or "nothing"
        kept = "no file already there was changed"
        if self.git:
            kept += " (history adds its lines to .gitignore and .gitattributes)"
        return f"made {self.root} a memory{history}: added {added}; {kept}; {hint}"

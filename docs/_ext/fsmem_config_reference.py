"""The configuration reference page, generated at build time from the declarations of fsmem.yaml's settings.

`reference/config.md` gets every section of `fsmem.config.Config` (`fsmem.config.sections`): each setting's
name, its default, what its value must be (the words a ConfigError uses) and the line that says what it does.
A setting is declared once, so the page, the template and the check cannot disagree. The page holds only its
introduction on disk; the tables are appended when Sphinx reads it, and it is read again on every build.

Run as a script, it prints the generated Markdown: `python docs/_ext/fsmem_config_reference.py`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from typing import Any

PAGE = "reference/config"
_LEAD = re.compile(r"^`[\w.]+:` ")  # a section's docstring opens with its name in the file (`grep:`)


def cell(value: str) -> str:
    """A declaration's line (Markdown already: `code` in backticks) inside a table cell; an option as code, so
    that its dashes are not made a typographer's dash."""
    return re.sub(r"(?<![\w`])(--[\w-]+)", r"`\1`", value).replace("|", "\\|")


def about(doc: str) -> str:
    """A section's docstring under its own heading: without the name it opens with, as a sentence."""
    doc = _LEAD.sub("", " ".join(doc.split()))
    return doc[:1].upper() + doc[1:]


def code(value: str) -> str:
    fence = "``" if "`" in value else "`"
    return f"{fence}{value}{fence}"


def shown(value: Any) -> str:
    """A default as fsmem.yaml would hold it (YAML's flow style is JSON's for these values)."""
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return code(json.dumps(value))


def sections(cls: type, keys: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], type, str]]:
    """Every section under `cls`, depth first in the file's order: its keys, its class and what it is for."""
    for f in dataclasses.fields(cls):
        if "section" in f.metadata:
            yield (*keys, f.name), f.metadata["section"], f.metadata["says"]
            yield from sections(f.metadata["section"], (*keys, f.name))
        elif "entries" in f.metadata:
            yield (*keys, f.name, "NAME"), f.metadata["entries"], f.metadata["says"]


def rows(cls: type) -> list[str]:
    made = cls()
    lines = []
    for f in dataclasses.fields(cls):
        if "rule" in f.metadata:
            must = f.metadata["rule"][1]
            lines.append(
                f"| {code(f.name)} | {shown(getattr(made, f.name))} | {cell(must)} | {cell(f.metadata['says'])} |"
            )
    return lines


def config_markdown() -> str:
    from fsmem.config import Config

    lines = ["## Top level", "", "| setting | default | must be | what it does |", "| --- | --- | --- | --- |"]
    lines += [*rows(Config), ""]
    for keys, cls, says in sections(Config):
        table = rows(cls)
        if not table:
            continue
        lead = cell(f"{says[:1].upper()}{says[1:]}. ") if keys[-1] == "NAME" else ""
        lines += [f"## {'.'.join(keys)}", "", lead + about(cls.__doc__ or ""), ""]
        lines += ["| setting | default | must be | what it does |", "| --- | --- | --- | --- |", *table, ""]
    renamed = __import__("fsmem.config.sections", fromlist=["RENAMED"]).RENAMED
    if renamed:
        lines += ["## Old names", "", "Still read when the new name is absent, and never written:", ""]
        lines += [f"- {code('.'.join(old))}: now {code('.'.join((*old[:-1], new)))}" for old, new in renamed.items()]
        lines.append("")
    return "\n".join(lines)


def add_generated(app: Any, docname: str, source: list[str]) -> None:
    if docname == PAGE:
        source[0] = source[0].rstrip("\n") + "\n\n" + config_markdown() + "\n"


def always_outdated(app: Any, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    return [PAGE] if PAGE in env.found_docs and PAGE not in added | changed else []


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", add_generated)
    app.connect("env-get-outdated", always_outdated)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    print(config_markdown())

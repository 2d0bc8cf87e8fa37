"""What the docs show runs: every snippet of README.md and docs/**/*.md is run here, or checked where it cannot run.

A fenced block belongs to the section of the heading above it, on its page
(two pages never share a section). Each section runs in a folder of its own that holds `demo-memory` (what `make demo`
builds from examples/, or the same with a history, below), with the clock
pinned (FSMEM_NOW), `$FSMEM_ROOT` pointing at that memory, a HOME of its own
per shell block, and git told that `git@example.com:team/memory.git` is a
bare repository in the folder, so the sync set-up runs offline as written:

- `python` blocks run, in one namespace per section, in that folder;
- `sh` blocks run in bash (`set -e`: every line must succeed);
- `console` blocks run each `$ ` command and compare what it prints with the
  lines shown (a line that is one plain `fsmem` command runs in this process,
  tests/cli_runner.py, as the `fsmem` script runs it; a line bash must read, in
  bash, as every `sh` block does): a line `…` stands for any lines, and a 12-digit hex id stands
  for the id the run printed in its place (a later command that names it gets
  the real one);
- `yaml`, `json` and `toml` blocks must parse;
- every `python` block is type-checked with mypy (the project's settings).

A block that cannot run so says why in an HTML comment on the line before
its fence, `<!-- snippet: KIND -->`:

- `history`: run on the memory with history: examples/ in a git work tree,
  `topics/billing.md` written on 2026-11-01 (researcher) and edited on 11-05
  (default) and 11-20 (researcher), and an `origin` remote;
- `illustration`: a console block whose figures are an illustration: the
  commands run (exit 0 or 1: nothing found is an answer), the output is not
  compared;
- `synopsis`: the form of a command, not a command: every option it names
  must exist;
- `needs network`, `needs an API key`: not run; a python block is compiled
  and its imports run; the options of every `fsmem` line must exist;
- `not run: REASON`: not run; the options of every `fsmem` line must exist,
  and every script a line runs must exist.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import cli_runner
import click
import pytest
import yaml

from fsmem import Memory

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]
NOW = "2026-12-01T08:00:00+00:00"  # after every note of examples/, as `make demo` consolidates
REMOTE_URL = "git@example.com:team/memory.git"
BIN = Path(sys.executable).parent
KINDS = ("history", "illustration", "synopsis", "needs network", "needs an API key", "not run")
RUN = ("python", "sh", "console")
PARSED = {"yaml": yaml.safe_load, "json": json.loads, "toml": tomllib.loads}
FENCE = re.compile(r"^```(\{[\w-]+\}|\S*)(?:(?<=\})\s.*)?\s*$")  # a MyST directive takes arguments
MARKER = re.compile(r"^<!-- snippet: (.+?) -->$")
HEX_ID = re.compile(r"\b[0-9a-f]{12}\b")


@dataclass
class Block:
    doc: str
    line: int  # the fence's line, 1-based
    lang: str
    text: str
    section: str
    kind: str = ""  # the marker's KIND ("" when none); for `not run`, without its reason

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


@dataclass
class Section:
    doc: str
    line: int
    title: str
    blocks: list[Block] = field(default_factory=list)

    @property
    def memory(self) -> str:
        return "history" if any(b.kind == "history" for b in self.blocks) else "demo"


def blocks_of(path: Path) -> Iterator[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    section, index = "", 0
    while index < len(lines):
        line = lines[index]
        opened = FENCE.match(line)
        if opened is None:
            if line.startswith("#"):
                section = line.lstrip("#").strip()
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].rstrip() == "```")
        marker = MARKER.match(lines[index - 1]) if index else None
        kind = marker.group(1) if marker else ""
        kind = "not run" if kind.startswith("not run: ") else kind
        text = "\n".join(lines[index + 1 : end]) + "\n"
        yield Block(path.relative_to(REPO).as_posix(), index + 1, opened.group(1), text, section, kind)
        index = end + 1


def all_blocks() -> list[Block]:
    return [block for path in DOCS for block in blocks_of(path)]


def docs_text() -> str:
    """README.md and every page of docs/, as one text (a sentence is found wherever it moved)."""
    return "\n".join(path.read_text(encoding="utf-8") for path in DOCS)


def prose_of(path: Path) -> str:
    """A page's text outside its fenced blocks."""
    kept, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line) and (not fenced or line.rstrip() == "```"):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return "\n".join(kept)


def sections() -> list[Section]:
    found: dict[tuple[str, str], Section] = {}
    for block in all_blocks():
        if block.lang in RUN and block.kind in ("", "history", "illustration"):
            key = (block.doc, block.section)
            found.setdefault(key, Section(block.doc, block.line, block.section)).blocks.append(block)
    return list(found.values())


# -- the memories the snippets run on ---------------------------------------------------------------------


def git_config(folder: Path) -> Path:
    """A global git config for the snippets: a user, and the example remote as a bare repository in `folder`."""
    remote = folder / "remote.git"
    if not remote.exists():
        subprocess.run(["git", "init", "--bare", "--quiet", str(remote)], check=True)
    config = folder / "gitconfig"
    config.write_text(
        "[user]\n\tname = Ada Quill\n\temail = ada@example.com\n[init]\n\tdefaultBranch = main\n"
        f'[url "{remote}"]\n\tinsteadOf = {REMOTE_URL}\n'
    )
    return config


@pytest.fixture(scope="module")
def memories(tmp_path_factory) -> dict[str, Path]:
    """The two memories the sections copy, built once: `demo` (make demo's) and `history`."""
    sys.path.insert(0, str(REPO / "examples"))
    try:
        from build_demo import build
    finally:
        sys.path.remove(str(REPO / "examples"))
    base = tmp_path_factory.mktemp("docs")
    built = {"demo": build(base / "demo").root, "history": base / "history"}
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith("FSMEM_")]:
            patch.delenv(name)
        patch.setenv("GIT_CONFIG_GLOBAL", str(git_config(base)))
        patch.setenv("FSMEM_NOW", "2026-10-31T09:00:00+00:00")
        root = Memory.init(built["history"], git=True).root
        examples = REPO / "examples" / "memory"
        shutil.copytree(examples, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("billing.md"))
        subprocess.run(["git", "-C", str(root), "remote", "add", "origin", REMOTE_URL], check=True)
        front, body = (examples / "topics" / "billing.md").read_text().split("---\n", 2)[1:]
        fields = {k: v for k, v in yaml.safe_load(front).items() if k not in ("updated", "created")}
        patch.setenv("FSMEM_NOW", "2026-11-01T09:00:00+00:00")
        Memory(root, agent="researcher").write("topics/billing.md", body, set=fields)
        patch.setenv("FSMEM_NOW", "2026-11-05T09:00:00+00:00")
        Memory(root).edit("topics/billing.md", old="monthly, on the 1st", new="monthly, on the 1st working day")
        patch.setenv("FSMEM_NOW", "2026-11-20T09:00:00+00:00")
        Memory(root, agent="researcher").edit(
            "topics/billing.md", old="the billing contact\n", new="the account owner\n"
        )
    return built


def stage(section: Section, memories: dict[str, Path], folder: Path) -> dict[str, str]:
    """Copy the section's memory into `folder` as demo-memory; the environment its snippets run in."""
    shutil.copytree(memories[section.memory], folder / "demo-memory", symlinks=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSMEM_", "GIT_"))}
    env.update(
        FSMEM_NOW=NOW,
        FSMEM_ROOT=str(folder / "demo-memory"),
        GIT_CONFIG_GLOBAL=str(git_config(folder)),
        GIT_CONFIG_NOSYSTEM="1",
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    return env


# -- running what a block shows -----------------------------------------------------------------------------


def shell(command: str, env: dict[str, str], cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    home.mkdir(exist_ok=True)
    return subprocess.run(
        ["bash", "-e", "-c", command],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**env, "HOME": str(home)},
        timeout=120,
    )


def console_steps(text: str) -> list[tuple[str, list[str]]]:
    """(command, the output lines shown under it) for each `$ ` line of a console block."""
    steps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"console output before any command: {line!r}"
            steps[-1][1].append(line)
    for _, shown in steps:
        while shown and not shown[-1].strip():
            shown.pop()
    return steps


def matches(shown: list[str], printed: list[str], ids: dict[str, str]) -> bool:
    """Whether `printed` is what `shown` shows: `…` is any lines; a hex id binds to the id printed there."""
    if not shown:
        return not printed
    if shown[0] == "…":
        return any(matches(shown[1:], printed[skip:], ids) for skip in range(len(printed) + 1))
    if not printed:
        return False
    written = HEX_ID.findall(shown[0])
    regex = "([0-9a-f]{12})".join(re.escape(piece) for piece in HEX_ID.split(shown[0]))
    found = re.fullmatch(regex, printed[0])
    if found is None:
        return False
    bound = dict(ids)
    for readme_id, real in zip(written, found.groups(), strict=True):
        if bound.setdefault(readme_id, real) != real:
            return False
    if matches(shown[1:], printed[1:], bound):
        ids.update(bound)
        return True
    return False


PLAIN = re.compile(r"[\w./:=,@+%-]")  # what bash passes on as written, outside quotes


def plain_fsmem(command: str) -> list[str] | None:
    """The arguments of `command` when it is one `fsmem` command that bash would pass on as written (quotes and
    a trailing comment at most: no variable, `~`, glob, escape, redirection, pipe or list); else None."""
    quote = ""
    for at, char in enumerate(command):
        if quote:
            if char == quote:
                quote = ""
            elif quote == '"' and char in "$`\\":
                return None
        elif char in "'\"":
            quote = char
        elif char == "#" and (at == 0 or command[at - 1].isspace()):
            break
        elif not (char.isspace() or PLAIN.fullmatch(char)):
            return None
    words = shlex.split(command, comments=True)
    return words[1:] if words and words[0] == "fsmem" else None


def run_console(block: Block, env: dict[str, str], cwd: Path, ids: dict[str, str]) -> None:
    for number, (command, shown) in enumerate(console_steps(block.text)):
        real = HEX_ID.sub(lambda m: ids.get(m.group(), m.group()), command)
        home = cwd / f"home-{block.line}-{number}"
        args = plain_fsmem(real)
        if args is None:
            done = shell(real, env, cwd, home)
        else:  # the process around the command is not what the block shows
            home.mkdir(exist_ok=True)
            done = cli_runner.run(args, cwd=cwd, env={**env, "HOME": str(home)}, text=True)
        allowed = (0, 1) if block.kind == "illustration" else (0,)
        assert done.returncode in allowed, f"{block.where}: $ {real}\nexit {done.returncode}\n{done.stderr}"
        assert "Traceback" not in done.stderr, f"{block.where}: $ {real}\n{done.stderr}"
        if shown and block.kind != "illustration":
            printed = done.stdout.rstrip("\n").splitlines()
            assert matches(shown, printed, ids), (
                f"{block.where}: $ {command}\nthe README shows:\n" + "\n".join(shown) + "\nit printed:\n" + done.stdout
            )


# what a snippet that runs here may not do: install, build this checkout, touch the system or the network
UNSAFE = re.compile(r"^\s*(?:\$ )?(?:pip|pipx|uv|make|sudo|systemctl|journalctl|curl|wget|ssh)\b", re.MULTILINE)


@pytest.mark.slow
@pytest.mark.parametrize("section", sections(), ids=lambda s: f"{s.doc}:{s.line} {s.title}")
def test_the_snippets_of_a_section_run(section, memories, tmp_path, monkeypatch, capsys):
    env = stage(section, memories, tmp_path)
    ids: dict[str, str] = {}
    namespace: dict[str, object] = {"__name__": "__snippet__"}
    for block in section.blocks:
        assert not (block.lang != "python" and UNSAFE.search(block.text)), (
            f"{block.where}: this block would install or touch the system here: mark it <!-- snippet: not run: WHY -->"
        )
        if block.lang == "console":
            run_console(block, env, tmp_path, ids)
        elif block.lang == "sh":
            done = shell(block.text, env, tmp_path, tmp_path / f"home-{block.line}")
            assert done.returncode == 0, f"{block.where}:\n{block.text}\nexit {done.returncode}\n{done.stderr}"
        else:
            with monkeypatch.context() as patch:
                for name, value in env.items():
                    patch.setenv(name, value)
                patch.setenv("HOME", str(tmp_path))
                patch.chdir(tmp_path)
                exec(compile(block.text, block.where, "exec"), namespace)
    capsys.readouterr()


# -- what does not run is still checked -----------------------------------------------------------------------


def test_every_marker_is_known_and_stands_before_a_block_it_applies_to():
    blocks = all_blocks()
    for block in blocks:
        assert block.kind in ("", *KINDS), f"{block.where}: unknown snippet marker {block.kind!r}"
        if block.kind == "history" or block.kind == "illustration":
            assert block.lang in RUN, block.where
        if block.lang in ("sh", "console") and block.kind in ("", "history", "illustration"):
            assert not UNSAFE.search(block.text), f"{block.where}: it would install or touch the system: mark it"
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            if MARKER.match(line):
                assert number < len(lines) and FENCE.match(lines[number]), (
                    f"{path.relative_to(REPO)}:{number}: a marker with no fence"
                )
    assert sum(b.lang in RUN and b.kind in ("", "history", "illustration") for b in blocks) >= 8


def test_the_data_blocks_parse():
    checked = 0
    for block in all_blocks():
        if block.lang in PARSED:
            try:
                PARSED[block.lang](block.text)
            except Exception as exc:  # any parser's error is the failure
                pytest.fail(f"{block.where}: the {block.lang} block does not parse: {exc}")
            checked += 1
    assert checked >= 10


def fsmem_calls(text: str) -> Iterator[list[str]]:
    """The words of each `fsmem ...` call in a block (after `&&`, `;`, `sudo -u X VAR=...`), comments dropped."""
    for line in text.splitlines():
        line = line.removeprefix("$ ")
        for part in re.split(r"&&|;|\|\|", line):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                words = part.split()
            for index, word in enumerate(words):
                if word == "fsmem" or word.endswith("/fsmem"):
                    yield words[index + 1 :]
                    break


def command_of(words: list[str]) -> tuple[click.Command, list[str], list[str]]:
    """The click command a call reaches, its path of names, and the words after it."""
    from fsmem.cli import cli

    ctx = click.Context(cli)
    command: click.Command = cli
    names: list[str] = []
    rest = list(words)
    while rest and isinstance(command, click.Group):
        word = rest.pop(0)
        if word in ("--root", "--agent"):
            rest = rest[1:]
            continue
        sub = command.get_command(ctx, word)
        assert sub is not None, f"fsmem {' '.join(names + [word])}: no such command"
        command, names = sub, [*names, word]
    return command, names, rest


def test_every_fsmem_line_that_is_not_run_names_real_commands_and_options():
    checked = 0
    for block in all_blocks():
        if block.lang not in ("sh", "console") or block.kind not in (
            "synopsis",
            "needs network",
            "needs an API key",
            "not run",
        ):
            continue
        for words in fsmem_calls(block.text):
            command, names, rest = command_of(words)
            known = options_of(command)
            for word in rest:
                for option in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", word):
                    assert option in known, f"{block.where}: fsmem {' '.join(names)} has no option {option}"
            checked += 1
        for line in block.text.splitlines():
            script = re.search(r"python\S*\s+(\S+\.py)\b", line)
            if script:
                assert (REPO / script.group(1)).is_file(), f"{block.where}: no script {script.group(1)}"
    assert checked >= 10


def options_of(command: click.Command) -> set[str]:
    from fsmem.cli import cli

    return {
        opt
        for param in [*command.params, *cli.params]
        for opt in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ()))
    } | {"--help", "-h"}


def test_every_fsmem_command_the_prose_names_exists_with_its_options():
    """`fsmem grep PATTERN [-i]` in a sentence or a table names a real command, and options it really has."""
    from fsmem.cli import cli

    checked = 0
    for path in DOCS:
        for span in re.findall(r"`(fsmem [^`]+)`", prose_of(path)):
            words = span.split()[1:]
            if words[0].startswith("<"):  # `fsmem <fsmem@HOST-ID>`: the committer of history, not a command
                continue
            if words[0].startswith("-") and words[0] not in ("--root", "--agent"):
                assert words[0] in options_of(cli), f"{path.name}: `{span}`: fsmem has no option {words[0]}"
                continue
            command, names, rest = command_of(words)
            for word in rest:
                for option in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", word):
                    assert option in options_of(command), (
                        f"{path.name}: `{span}`: fsmem {' '.join(names)} has no option {option}"
                    )
            checked += 1
    assert checked >= 100


FSMEM_IMPORT = re.compile(r"^\s*(from fsmem(?:\.\w+)* import [\w, ]+?)\s*(?:#.*)?$")


def test_every_fsmem_import_the_docs_show_imports():
    """Every `from fsmem… import …` of the docs, in a block of any kind or in a sentence, imports as written."""
    statements: dict[str, str] = {}
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), start=1):
            found = FSMEM_IMPORT.match(line.removeprefix(">>> "))
            if found:
                statements.setdefault(found.group(1), f"{path.relative_to(REPO)}:{number}")
        for span in re.findall(r"`(from fsmem[\w.]* import [^`]+)`", prose_of(path)):
            statements.setdefault(span, f"{path.relative_to(REPO)} (prose)")
    for statement, where in statements.items():
        try:
            exec(compile(statement, where, "exec"), {})
        except ImportError as exc:
            pytest.fail(f"{where}: {statement}: {exc}")
    assert len(statements) >= 4


def test_no_page_takes_the_name_of_a_page_sphinx_writes_itself():
    """docs/search.md would become search.html, which Sphinx's own search page overwrites without a warning."""
    own = {"search", "genindex", "py-modindex"}
    assert not own & {path.stem for path in DOCS if path.parent == REPO / "docs"}


# dotted names the docs use that are not Python objects: an entry-point group, a logger, a git setting
NOT_PYTHON = {
    "fsmem.extractors",
    "fsmem.feed",
    "fsmem.acceptConfig",
    "fsmem.hostId",
    "fsmem.distillCommand",
    "fsmem.distillTimeout",
    "fsmem.distillCommandSeal",
}


def test_every_file_and_python_name_the_docs_name_exists():
    """`fsmem/store/paths.py`, `tests/test_sync_trust.py`, `fsmem.store.feed`, `fsmem.server.create_app`: all real."""
    import importlib

    files = names = 0
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for rel in set(re.findall(r"(?<![\w/.-])((?:fsmem|tests|benchmarks|examples|docs)/[\w./-]*\w/?)", text)):
            if not rel.endswith("_"):  # `tests/test_<module>.py`, a pattern
                assert (REPO / rel).exists(), f"{path.name} names {rel}, which does not exist"
                files += 1
        for dotted in set(re.findall(r"(?<![\w/.-])(fsmem(?:\.[A-Za-z_]\w*)+)", text)) - NOT_PYTHON:
            if dotted.startswith(("fsmem.yaml", "fsmem.md")):
                continue
            parts = dotted.split(".")
            for cut in range(len(parts), 0, -1):
                try:
                    found: object = importlib.import_module(".".join(parts[:cut]))
                    break
                except ImportError:
                    continue
            for attribute in parts[cut:]:
                assert hasattr(found, attribute), f"{path.name} names {dotted}: no {attribute}"
                found = getattr(found, attribute)
            names += 1
    assert files >= 30 and names >= 15


def test_python_that_is_not_run_compiles_and_its_imports_work():
    checked = 0
    for block in all_blocks():
        if block.lang != "python" or block.kind not in ("needs network", "needs an API key", "not run"):
            continue
        tree = compile(block.text, block.where, "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        assert imports, f"{block.where}: nothing to import"
        exec(compile(ast.Module(imports, []), block.where, "exec"), {})
        checked += 1
    assert checked >= 2


@pytest.mark.slow
def test_every_python_snippet_type_checks(tmp_path):
    """mypy with the project's settings (and its cache, warm after `make lint`), one module per block."""
    files = []
    for block in all_blocks():
        if block.lang == "python":
            name = re.sub(r"\W", "_", block.doc)
            files.append(tmp_path / f"snippet_{name}_{block.line}.py")
            files[-1].write_text(block.text)
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"), *map(str, files)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


# -- sentences of the docs that the snippets do not show ------------------------------------------------------


def test_the_files_said_not_to_parse_are_reported_by_check_and_crlf_and_a_bom_parse(tmp_path):
    """The guide: 'A file that does not parse (...) is still listed, grepped and read; check reports the problem'."""
    listed = re.search(r"A file that does not parse \(([^)]*)\)", docs_text())
    assert listed, "the guide's list of files that do not parse"
    samples = {
        "broken YAML": "---\ntitle: [unclosed\n---\n# A\n",
        "YAML anchors or aliases": "---\na: &x 1\nb: *x\n---\n# A\n",
        "front matter over 64 KiB": "---\n" + "".join(f"k{i}: {'v' * 60}\n" for i in range(1200)) + "---\n# A\n",
        "front matter nested past 32 levels": "---\ntitle: " + "[" * 33 + "x" + "]" * 33 + "\n---\n# A\n",
        "no front matter": "# A\n\n- colour: blue\n",
        "invalid UTF-8": "---\ntitle: A\n---\n\udcff bad\n",
    }
    kinds = [kind.strip() for kind in listed.group(1).replace("\n  ", " ").split(",")]
    assert set(kinds) <= set(samples), f"no sample file for {set(kinds) - set(samples)}"
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    for number, kind in enumerate(kinds):
        data = samples[kind].encode("utf-8", "surrogateescape")
        (memory.root / "topics" / f"f{number}.md").write_bytes(data)
    problems = {path for path, _, _ in memory.check().problems}
    assert problems == {f"topics/f{number}.md" for number in range(len(kinds))}
    assert len(memory.ls("topics").entries) == len(kinds)

    lf = "---\ntitle: Crlf\ntopic: Crlf\n---\n# Crlf\n\n## Facts\n- colour: blue\n\n## Superseded\n- colour: red (2026-01-01 to 2026-02-01, x.md)\n"
    (memory.root / "topics" / "lf.md").write_text(lf)
    (memory.root / "topics" / "crlf.md").write_bytes(lf.replace("\n", "\r\n").encode())
    (memory.root / "topics" / "bom.md").write_bytes(b"\xef\xbb\xbf" + lf.encode())
    assert {path for path, _, _ in memory.check().problems} == problems  # neither is reported
    for name in ("crlf", "bom"):
        assert (
            memory.read(f"topics/{name}.md", section="Facts").lines
            == memory.read("topics/lf.md", section="Facts").lines
        )
        assert [m.line for m in memory.grep("colour", [f"topics/{name}.md"]).matches] == [
            8
        ]  # the superseded line hidden
        entry = next(e for e in memory.ls("topics").entries if e.path == f"topics/{name}.md")
        assert entry.title == "Crlf"
    memory.edit("topics/crlf.md", old="blue", new="teal")
    memory.edit("topics/bom.md", old="blue", new="teal")
    crlf, bom = (memory.root / "topics" / "crlf.md").read_bytes(), (memory.root / "topics" / "bom.md").read_bytes()
    assert crlf.count(b"\r\n") == crlf.count(b"\n") == lf.count("\n") + 1  # every line, the new `updated:` too
    assert b"- colour: teal\r\n" in crlf and b"blue" not in crlf
    assert bom.startswith(b"\xef\xbb\xbf---\ntitle: Crlf\n") and b"- colour: teal\n" in bom


def test_the_server_note_is_where_the_security_model_says(tmp_path):
    """The server's security model: a token's agent writes its session note `sessions/…/AGENT-HOSTID.md`.

    The server writes through `Memory(root, agent=<the token's agent>)`; tests/test_server_app.py checks the
    same file name over HTTP.
    """
    said = re.search(r"its session note \(`(sessions/[^`]+)`", docs_text())
    assert said, "the Security model's sentence on the session note"
    pattern = re.escape(said.group(1)).replace("…", ".+").replace("AGENT", "researcher")
    memory = Memory(Memory.init(tmp_path / "mem").root, agent="researcher")
    written = memory.note("- colour: blue").path
    assert re.fullmatch(pattern.replace("HOSTID", re.escape(memory.host_id)), written), (said.group(1), written)

"""The project digest: real Claude Code transcripts, saved by `fsmem import` and by the hook, become one topic
document per working folder with a line per session; no absolute path in any document; the same notes give the
same bytes however they arrived (two runs, a growing session, two hosts that sync)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import cli_runner
import sync_scenario as S
from import_samples import TURNS, transcript_records, write_jsonl

from fsmem import format as fmt
from fsmem.consolidate.digest import episode_line, project_name
from fsmem.format.portable import portable_problem

FSMEM = str(Path(sys.executable).with_name("fsmem"))
TRANSCRIPTS = Path(__file__).parent / "transcripts"
NOW = "2026-03-01T09:00:00Z"
DOV = "4d5611e5-241a-462a-8d15-5122611a9569"  # one long session in /home/USER/projects/spotter-worktrees/spotter-dov
SHORT = "55604662-cf2a-4331-851a-ec234028f8ca"  # two sessions in /home/marco/projects/spotter
PLAN = "491e126e-1e71-469c-ade2-fcc8af567c74"
# a path from the root of a file system: after a space, a quote, a backtick, a parenthesis or the start of a line
ABSOLUTE = re.compile(r"(?:^|[\s`'\"(=])(?:/[^\s/`'\")]+/|[A-Za-z]:\\\\)")


def run(root: Path, *args: str, stdin: str | None = None, process: bool = False) -> subprocess.CompletedProcess[str]:
    """The command line run here (`cli_runner`); with `process`, also as the `fsmem` script, held to its bytes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSMEM_", "GIT_"))}
    env["FSMEM_NOW"] = NOW
    argv = ["--root", str(root), *args]
    if process:
        return cli_runner.same_as_a_process(argv, text=True, input=stdin, env=env, timeout=300)
    return cli_runner.run(argv, text=True, input=stdin, env=env)


def consolidate(root: Path) -> tuple[int, dict]:
    proc = run(root, "consolidate", "--json")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}


def memory(tmp_path: Path, name: str = "mem") -> Path:
    root = tmp_path / name
    assert run(root, "init", str(root)).returncode == 0
    return root


def documents(root: Path) -> dict[str, str]:
    """Every file consolidation writes that is not a session note: entity and topic documents, INDEX.md."""
    found = {}
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root).as_posix()
        if not rel.startswith(("sessions/", ".fsmem/", "profile/")) and rel != "README.md":
            found[rel] = path.read_text("utf-8")
    return found


def no_absolute_path(texts: dict[str, str], *folders: str) -> None:
    for rel, text in texts.items():
        for folder in folders:
            assert folder not in text, (rel, folder)
        for line in text.splitlines():
            assert not ABSOLUTE.search(line), (rel, line)


def bullets(text: str) -> list[str]:
    return [line for line in text.split("## Sessions\n", 1)[1].splitlines() if line.startswith("- ")]


# -- real transcripts, through `fsmem import claude-code` -------------------------------------------------------


def test_real_sessions_become_one_digest_per_project(tmp_path):
    root = memory(tmp_path)
    imported = run(root, "import", "claude-code", str(TRANSCRIPTS))
    assert imported.returncode == 0 and "3 new" in imported.stdout, imported.stdout + imported.stderr
    note = (root / f"sessions/2026/02/12/claude-code-{DOV}.md").read_text()
    assert fmt.split(note).front_matter["cwd"] == "/home/USER/projects/spotter-worktrees/spotter-dov"
    code, report = consolidate(root)
    assert code == 0 and report["sessions_digested"] == 3
    assert {"topics/spotter.md", "topics/spotter-dov.md"} <= set(report["files_written"])

    spotter = (root / "topics/spotter.md").read_text()
    assert spotter.startswith("---\ntitle: spotter\ntype: semantic\ntopic: spotter\ncreated: 2026-02-10\n")
    assert bullets(spotter) == [
        '- "mix phx.server doesnt seem to start"; ran `mix phx.server 2>&1 | head -80`; 2 errors (first: "The user '
        "doesn't want to proceed with this tool use. The to…\"); ended: interrupted by the user "
        f"([2026-02-10](../sessions/2026/02/10/claude-code-{SHORT}.md))",
        '- "/handgemacht:create-beads websearch to learn how to fastest setup credo, dialyzer, mix_audit (basic…"; '
        'changed `plan.md`; ran `bd create --title="Setup Code Quality Tools (Cred…`, `bd create --title="Install '
        'quality tools and conf…`, `bd create --title="Add mix quality alias" --type=…` (+1 more); ended: "## Beads '
        'Created Epic \\`spotter-0p7\\`: Setup Code Quality Tools (Credo, Dialyxir, mix_audit) | Bead I…" '
        f"([2026-02-10](../sessions/2026/02/10/claude-code-{PLAN}.md))",
    ]
    (line,) = bullets((root / "topics/spotter-dov.md").read_text())
    assert line.startswith('- "Work on bead spotter-dov. Run bd show spotter-dov to see the issue details')
    # the files it wrote or edited, relative to its folder, three of eleven; the commands, three of 54
    assert (
        "; changed `lib/spotter_web/live/transcript_computers.ex`, `lib/spotter_web/components/transcript_components.…`"
        ", `lib/spotter_web/live/session_live.ex` (+8 more); ran `bd show spotter-dov`, `bd ready`, "
        '`bd show spotter-dov.1` (+51 more); 5 errors (first: "Exit code 1 The following paths are ignored by one '
        'of your…"); ended: "Background task completed successfully — all 15 SessionLive tests pass.'
    ) in line
    assert line.endswith(f"([2026-02-12](../sessions/2026/02/12/claude-code-{DOV}.md))")
    assert len(line) < 700  # each part is capped
    index = (root / "INDEX.md").read_text()
    assert "[spotter](topics/spotter.md)" in index and "[spotter-dov](topics/spotter-dov.md)" in index

    written = documents(root)
    no_absolute_path(written, "/home/", "/tmp/", "USER/projects", "marco/projects")
    # a citation leads to the episode, relative to the document, as consolidation's citations do
    for target in re.findall(r"\]\(\.\./(sessions/[^)]+)\)", spotter):
        assert (root / target).is_file()

    # again: nothing new, the same bytes
    code, report = consolidate(root)
    assert code == 1 and report["files_written"] == [] and report["sessions_digested"] == 0
    assert documents(root) == written


def test_the_same_sessions_give_the_same_bytes_in_any_order_and_batches(tmp_path):
    whole = memory(tmp_path, "whole")
    assert run(whole, "import", "claude-code", str(TRANSCRIPTS)).returncode == 0
    assert consolidate(whole)[0] == 0
    parts = memory(tmp_path, "parts")
    for session in (PLAN, DOV, SHORT):  # one at a time, the latest first, a consolidation after each
        assert run(parts, "import", "claude-code", str(TRANSCRIPTS / f"{session}.jsonl")).returncode == 0
        assert consolidate(parts)[0] == 0
    shutil.rmtree(parts / ".fsmem" / "consolidate")  # the host-local cache, lost: rebuilt from the notes
    assert consolidate(parts)[0] == 1
    assert documents(parts) == documents(whole)
    assert len(bullets(documents(whole)["topics/spotter.md"])) == 2


# -- the hook: the working folder is kept, a growing session updates its line ----------------------------------


def test_the_hook_keeps_the_working_folder_and_a_session_that_grew_updates_its_line(tmp_path):
    root = memory(tmp_path)
    records = (TRANSCRIPTS / f"{DOV}.jsonl").read_text().splitlines(keepends=True)
    transcript = tmp_path / "projects" / "-home-USER-projects-spotter-worktrees-spotter-dov" / f"{DOV}.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("".join(records[:40]))
    event = {"session_id": DOV, "transcript_path": str(transcript), "hook_event_name": "PreCompact", "cwd": "/x"}
    assert run(root, "hook", "claude-code", stdin=json.dumps(event)).returncode == 0
    note = next((root / "sessions").rglob(f"claude-code-{DOV}.md"))
    assert fmt.split(note.read_text()).front_matter["cwd"] == "/home/USER/projects/spotter-worktrees/spotter-dov"
    assert consolidate(root)[0] == 0
    (early,) = bullets((root / "topics/spotter-dov.md").read_text())
    assert "(+" not in early.split("; ran")[0]  # few files changed yet

    transcript.write_text("".join(records))  # the session went on
    event["hook_event_name"] = "SessionEnd"
    assert run(root, "hook", "claude-code", stdin=json.dumps(event)).returncode == 0
    code, report = consolidate(root)
    assert code == 0 and report["sessions_digested"] == 1
    (late,) = bullets((root / "topics/spotter-dov.md").read_text())  # one line per session, updated
    assert late != early and "(+8 more)" in late and "5 errors" in late

    imported = memory(tmp_path, "imported")  # the same session, imported whole at once
    assert run(imported, "import", "claude-code", str(TRANSCRIPTS / f"{DOV}.jsonl")).returncode == 0
    assert consolidate(imported)[0] == 0
    assert (imported / "topics/spotter-dov.md").read_bytes() == (root / "topics/spotter-dov.md").read_bytes()
    no_absolute_path(documents(root), "/home/", "/x")


# -- working folders, hostile or odd ---------------------------------------------------------------------------


HOSTILE = [
    ("", None),
    ("/", None),
    ("..", None),
    ("/srv/..", None),
    ("\x1b\x07", None),
    ("/home/ada/atlas/..", "topics/ada.md"),
    ("/home/ada/../../etc", "topics/etc.md"),
    ("/srv/\x1b[31mred\x1b[0m", "topics/31mred-0m.md"),
    ("/srv/two\nlines", "topics/two-lines.md"),
    ("/srv/con", "topics/con_.md"),
    ("/srv/.git", "topics/git.md"),
    ("/srv/[[Rosa Diaz]]", "topics/rosa-diaz.md"),
    ("/srv/a:b*c?", "topics/a-b-c.md"),
    ("C:\\Users\\ada\\Atlas", "topics/atlas.md"),
    ("/srv/Café Münster", "topics/cafe-munster.md"),
    ("/srv/" + "x" * 300, "topics/" + "x" * 80 + ".md"),
]


def test_a_hostile_working_folder_names_a_safe_document_or_none(tmp_path):
    root = memory(tmp_path)
    for number, (cwd, _) in enumerate(HOSTILE):
        records = transcript_records(f"s-{number}", TURNS)
        for record in records:
            record["cwd"] = cwd
        write_jsonl(tmp_path / "projects" / f"s-{number}.jsonl", records)
    imported = run(root, "import", "claude-code", str(tmp_path / "projects"))
    assert imported.returncode == 0, imported.stderr
    for number, (cwd, _) in enumerate(HOSTILE):
        note = (root / f"sessions/2025/03/10/claude-code-s-{number}.md").read_text()
        assert fmt.split(note).front_matter.get("cwd") == (cwd or None)  # kept as it was, whatever it holds
    code, report = consolidate(root)
    assert code == 0, report
    written = documents(root)
    assert sorted(rel for rel in written if rel.startswith("topics/")) == sorted(d for _, d in HOSTILE if d)
    for number, (_, document) in enumerate(HOSTILE):
        if document is None:
            assert f"claude-code-s-{number}.md" not in "".join(written.values())
            continue
        name = document.rsplit("/", 1)[1]
        assert portable_problem(name) is None and name == name.lower()
        assert bullets(written[document]) == [
            '- "Why does test_sync fail?"; ran `pytest -q tests/test_sync.py`; ended: "The clock is not pinned; pin it '
            f'with FSMEM_NOW." ([2025-03-10](../sessions/2025/03/10/claude-code-s-{number}.md))'
        ]
        front = fmt.split(written[document])
        assert not front.problems and all(c.isprintable() for c in str(front.front_matter["title"]))
    no_absolute_path(written, "/home/", "/srv/", "Users")
    check = run(root, "check", "--json", process=True)
    assert "Traceback" not in check.stderr
    assert not [p for p in json.loads(check.stdout)["problems"] if p["path"].startswith(("topics/", "INDEX"))]


def test_two_projects_with_one_name_share_a_document_and_each_is_made_relative(tmp_path):
    root = memory(tmp_path)
    for session, cwd in (("s-1", "/home/ada/work/api"), ("s-2", "/Users/ada/oss/api")):
        turns = [
            ("user", f"Fix the {session} bug"),
            (
                "assistant",
                [
                    {"type": "tool_use", "id": "e", "name": "Edit", "input": {"file_path": f"{cwd}/src/app.py"}},
                    {"type": "tool_use", "id": "w", "name": "Write", "input": {"file_path": "/etc/hosts"}},
                    {"type": "tool_use", "id": "b", "name": "Bash", "input": {"command": f"cd {cwd}/src && make"}},
                ],
            ),
            ("assistant", f"Fixed; see [[{session}]] and `{cwd}/src/app.py`."),
        ]
        records = transcript_records(session, turns)
        for record in records:
            record["cwd"] = cwd
        transcript = write_jsonl(tmp_path / f"{session}.jsonl", records)
        assert run(root, "import", "claude-code", str(transcript)).returncode == 0
    assert consolidate(root)[0] == 0
    assert bullets((root / "topics/api.md").read_text()) == [
        f'- "Fix the {s} bug"; changed `src/app.py`, `…/hosts`; ran `cd src && make`; ended: "Fixed; see '
        f'\\[\\[{s}\\]\\] and \\`src/app.py\\`." ([2025-03-10](../sessions/2025/03/10/claude-code-{s}.md))'
        for s in ("s-1", "s-2")
    ]
    no_absolute_path(documents(root), "/home/", "/Users/", "/etc")


def test_a_digest_beside_facts_keeps_its_place_and_hand_edits_elsewhere(tmp_path):
    root = memory(tmp_path)
    assert run(root, "import", "claude-code", str(TRANSCRIPTS / f"{SHORT}.jsonl")).returncode == 0
    assert consolidate(root)[0] == 0
    path = root / "topics/spotter.md"
    path.write_text(path.read_text().replace("# spotter\n", "# spotter\n\nA Phoenix app; written by hand.\n"))
    assert run(root, "note", "- owner: Marco", "--subject", "topic/spotter").returncode == 0
    assert run(root, "import", "claude-code", str(TRANSCRIPTS / f"{PLAN}.jsonl")).returncode == 0
    assert consolidate(root)[0] == 0
    text = path.read_text()
    assert "A Phoenix app; written by hand.\n" in text
    assert text.index("## Facts") < text.index("## Sessions")  # sections the consolidator adds go before it
    assert len(bullets(text)) == 2
    assert consolidate(root)[0] == 1


# -- the line, from an episode's text alone -------------------------------------------------------------------


def test_a_line_is_read_from_the_episode_alone_and_stays_short():
    calls = [f"tool call Edit: file_path=/w/p/f{n}.py, old_string=a, new_string=b" for n in range(9)]
    calls += [f"tool call Bash: command=echo {n} {'x' * 200}, description=say" for n in range(5)]
    body = "\n".join(
        [
            "# Claude Code session: t",
            "",
            "```text",
            "user: <command-name>/clear</command-name>",
            "user: " + "Rename the module " * 40,
            *calls,
            "tool error (3 lines): Exit code 2 /w/p/f1.py:3: syntax error",
            "assistant: Done; /opt/secret/place/file.txt untouched",
            "```",
        ]
    )
    front = {
        "title": "t",
        "type": "episodic",
        "source": "claude-code",
        "cwd": "/w/p",
        "created": "2026-01-02T03:04:05Z",
    }
    line = episode_line("sessions/2026/01/02/claude-code-x.md", fmt.render(front, body), "archive/sessions")
    assert line is not None and line.project == "p" and line.date == "2026-01-02"
    assert line.text.startswith('"Rename the module Rename the module')
    assert "; changed `f0.py`, `f1.py`, `f2.py` (+6 more); ran `echo 0 xxx" in line.text
    assert '(+2 more); 1 error (first: "Exit code 2 f1.py:3: syntax error"); ended: "Done; …/file.txt untouched"' in (
        line.text
    )
    assert len(line.text) < 500 and "/w/" not in line.text and "/opt" not in line.text
    subagent = fmt.render({**front, "parent_session": "claude-code-y"}, body)
    assert episode_line("sessions/2026/01/02/claude-code-y-agent-z.md", subagent, "archive/sessions") is None
    without = fmt.render({k: v for k, v in front.items() if k != "cwd"}, body)
    assert episode_line("sessions/2026/01/02/claude-code-x.md", without, "archive/sessions") is None


def test_project_name_is_the_last_component_or_none():
    assert project_name("/home/ada/atlas/") == "atlas"
    assert project_name("D:\\code\\Atlas") == "Atlas"
    assert [project_name(v) for v in ("", "/", ".", "..", "/a/..", "C:\\", None, 3)] == [None] * 8


# -- two hosts ------------------------------------------------------------------------------------------------


def test_two_hosts_that_sync_end_with_the_digest_one_memory_would_have(tmp_path):
    _origin, (first, second) = S.make_hosts(tmp_path, hosts=2, writers=1)
    assert run(first, "import", "claude-code", str(TRANSCRIPTS / f"{SHORT}.jsonl")).returncode == 0
    assert run(second, "import", "claude-code", str(TRANSCRIPTS / f"{PLAN}.jsonl")).returncode == 0
    assert run(second, "import", "claude-code", str(TRANSCRIPTS / f"{DOV}.jsonl")).returncode == 0
    for host in (first, second):
        assert consolidate(host)[0] == 0  # each host writes topics/spotter.md with its own session
    for host in (first, second, first):
        synced = run(host, "sync")
        assert synced.returncode == 0, synced.stderr
    one = memory(tmp_path, "one")
    assert run(one, "import", "claude-code", str(TRANSCRIPTS)).returncode == 0
    assert consolidate(one)[0] == 0
    for name in ("topics/spotter.md", "topics/spotter-dov.md"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
        merged, expected = fmt.split((first / name).read_text()), fmt.split((one / name).read_text())
        # the body byte for byte; the front matter field for field (git's merge of a document both hosts created
        # writes its fields in order of name)
        assert (
            merged.text.splitlines()[merged.body_start_line - 1 :]
            == expected.text.splitlines()[expected.body_start_line - 1 :]
        )
        assert merged.front_matter == expected.front_matter
    assert S.git("status", "--porcelain", cwd=first) == "" and S.git("status", "--porcelain", cwd=second) == ""
    assert fmt.MERGE_MARK not in (first / "topics/spotter.md").read_text()


def test_a_session_saved_before_the_folder_was_kept_gets_it_when_imported_again(tmp_path):
    root = memory(tmp_path)
    transcript = str(TRANSCRIPTS / f"{SHORT}.jsonl")
    assert run(root, "import", "claude-code", transcript).returncode == 0
    note = root / f"sessions/2026/02/10/claude-code-{SHORT}.md"
    note.write_text(note.read_text().replace("cwd: /home/marco/projects/spotter\n", ""))  # as fsmem wrote it before
    assert consolidate(root)[0] == 0 and not (root / "topics/spotter.md").exists()
    again = run(root, "import", "claude-code", transcript)
    assert again.returncode == 0 and "1 unchanged" in again.stdout  # no line added; the folder is
    assert fmt.split(note.read_text()).front_matter["cwd"] == "/home/marco/projects/spotter"
    assert consolidate(root)[0] == 0 and len(bullets((root / "topics/spotter.md").read_text())) == 1
    assert run(root, "import", "claude-code", transcript).returncode == 0
    assert consolidate(root)[0] == 1


def test_a_dry_run_shows_the_digest_and_writes_nothing(tmp_path):
    root = memory(tmp_path)
    assert run(root, "import", "claude-code", str(TRANSCRIPTS / f"{SHORT}.jsonl")).returncode == 0
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and ".fsmem" not in p.parts}
    proc = run(root, "consolidate", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "+++ b/topics/spotter.md" in proc.stdout and '+- "mix phx.server doesnt seem to start"' in proc.stdout
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and ".fsmem" not in p.parts} == before
    assert not (root / ".fsmem/consolidate/digest.json").exists()
    assert consolidate(root)[0] == 0 and (root / "topics/spotter.md").exists()


def test_a_planted_line_in_the_digest_cache_is_not_written_to_a_document(tmp_path):
    """The digest cache (`.fsmem/consolidate/digest.json`) came with an untrusted copy of a memory: it knows the
    episodes' mtimes and sizes (a copy keeps them), so a line it held for an episode with those stamps went into
    the project's document when another episode of the project came, though no episode says it. Each cached
    episode is checked on its inode too, which no copy keeps; its line is read again from the episode."""
    from fsmem.consolidate import digest_run

    root = memory(tmp_path)
    assert run(root, "import", "claude-code", str(TRANSCRIPTS / f"{SHORT}.jsonl")).returncode == 0
    assert consolidate(root)[0] == 0
    cache = root / ".fsmem/consolidate/digest.json"
    data = json.loads(cache.read_text())
    for entry in data["notes"].values():
        entry[3:] = [entry[3] + 1] if len(entry) > 3 else []  # the inode the episode had where the copy was made
    data["version"] = digest_run.CACHE_VERSION
    cache.write_text(json.dumps(data).replace("mix phx.server doesnt seem to start", "wire the money to X"))
    assert run(root, "import", "claude-code", str(TRANSCRIPTS / f"{PLAN}.jsonl")).returncode == 0
    assert consolidate(root)[0] == 0
    spotter = (root / "topics/spotter.md").read_text()
    assert "wire the money" not in spotter and "mix phx.server doesnt seem to start" in spotter

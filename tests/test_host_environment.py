"""The host's environment changes no answer and no byte written: the same memory and the same commands give the
same exit codes, stdout and stderr, and leave the same files, whatever the time zone, the operator's own git
config (`~/.gitconfig`), the hash seed, the locale, the terminal's variables or the umask.

What fsmem documents as its input (FSMEM_NOW, the agent, session and host names) is pinned; the rest is drawn.
The defects found here each have a test (what the environment did before); one property runs real processes of
the installed `fsmem` (the environment is the point: a hash seed or a locale is an interpreter's, from its start)
in a drawn environment and compares them with the same commands run in a plain one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem
from hypothesis import HealthCheck, Phase, example, given, settings, strategies as st

NOW = "2026-12-08T12:00:00Z"


def _env(home: Path | None = None, **variables: str) -> dict[str, str]:
    env = {**without_fsmem(), "FSMEM_NOW": NOW, "FSMEM_SOCKET": "off", "FSMEM_HOST_ID": "h1", **variables}
    if home is not None:  # git reads the operator's config from both
        env.update(HOME=os.fspath(home), XDG_CONFIG_HOME=os.fspath(home / ".config"))
    return env


def _fsmem(root: Path, *args: str, **variables: str) -> tuple[int, str, str]:
    done = cli_runner.run(["--root", root, *args], env=_env(**variables), text=True)
    return done.returncode, done.stdout, done.stderr


# -- a date is a time in UTC, whatever TZ says ----------------------------------------------------------------------


def _dated_history(root: Path) -> None:
    """A memory with history and two commits: a note at 2026-12-06T12:00Z, another at 2026-12-07T20:00Z."""
    assert cli_runner.run(["init", "--git", root], env=_env()).returncode == 0
    for now, value in (("2026-12-06T12:00:00Z", "one"), ("2026-12-07T20:00:00Z", "two")):
        code, _, err = _fsmem(root, "note", f"- v: {value}", "--subject", "topic/A", FSMEM_NOW=now)
        assert code == 0, err


def test_a_date_names_the_same_commits_in_every_time_zone(tmp_path):
    """`show --at 2026-12-06`, `log --since 2026-12-07` and `diff 2026-12-06` handed git the date as typed, which
    git reads in the host's time zone, and a date alone at the clock's time of day: at UTC+14 the first found no
    commit ("the history starts later"), at UTC-12 (or at UTC after 20:00 by the clock, FSMEM_NOW pinned or not)
    the second listed none. A date is its day in UTC, as everywhere in fsmem; a time without a zone is UTC."""
    _dated_history(tmp_path)
    first = next(tmp_path.glob("sessions/2026/12/06/*.md")).relative_to(tmp_path).as_posix()
    asked = [
        ("show", first, "--at", "2026-12-06"),
        ("show", first, "--at", "2026-12-06T13:00"),
        ("log", "--since", "2026-12-07"),
        ("log", "--since", "2026-12-06T12:00:01"),
        ("diff", "2026-12-06", "--json"),
    ]
    answers = {
        zone: [_fsmem(tmp_path, *args, TZ=zone) for args in asked] for zone in ("UTC", "Etc/GMT-14", "Etc/GMT+12")
    }
    for zone, found in answers.items():
        assert found == answers["UTC"], zone
    show, timed, since, since_time, diff = answers["UTC"]
    assert show[0] == 0 and "- v: one" in show[1], show
    assert timed == show
    assert since[0] == 0 and "[commits 1-1 of 1]" in since[1] and "2026-12-07 20:00" in since[1], since
    assert since_time == since
    assert diff[0] == 0 and "+- v: two" in diff[1], diff


# -- the operator's own git config (~/.gitconfig) --------------------------------------------------------------------

# What an operator may well have in ~/.gitconfig for their own repositories, each of which changed what fsmem's git
# saw or printed: a global ignore kept memory files out of history (and so out of every other host's copy),
# log.follow failed every `fsmem log` and `stat`, the diff settings changed `fsmem diff`'s text, merge.ff=only failed
# every sync that had to merge, commit.gpgSign with no gpg, i18n re-encoded what log prints.
HOSTILE_GITCONFIG = """\
[core]
\texcludesFile = ~/.config/ignore-these
\tautocrlf = true
\tsafecrlf = true
\tabbrev = 16
\tcommentChar = ";"
\tfileMode = false
[log]
\tfollow = true
\tdate = relative
\tdecorate = full
\tabbrevCommit = true
[diff]
\tnoprefix = true
\tmnemonicPrefix = true
\tcontext = 8
\trenames = copies
\texternal = false
\trelative = true
[merge]
\tff = only
\tlog = true
\tconflictStyle = zdiff3
\trenormalize = true
[commit]
\tgpgSign = true
\tcleanup = strip
\tverbose = true
[gpg]
\tprogram = false
[color]
\tui = always
[i18n]
\tlogOutputEncoding = ISO-8859-1
\tcommitEncoding = ISO-8859-1
[format]
\tpretty = oneline
[init]
\tdefaultBranch = trunk
[status]
\tshowUntrackedFiles = no
"""
IDENTITY = "[user]\n\tname = Operator\n\temail = operator@example.org\n"


def _home(folder: Path, gitconfig: str) -> Path:
    (folder / ".config" / "git").mkdir(parents=True)
    (folder / ".gitconfig").write_text(IDENTITY + gitconfig, encoding="utf-8")
    (folder / ".config" / "ignore-these").write_text("*.md\n", encoding="utf-8")
    (folder / ".config" / "git" / "ignore").write_text("topics/\n", encoding="utf-8")  # git's default global ignore
    return folder


def _files(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.relative_to(root).parts[0] not in (".git", ".fsmem")
    }


def _git(root: Path, *args: str) -> str:
    env = {k: v for k, v in without_fsmem().items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-C", root, *args], env=env, capture_output=True, text=True, check=True).stdout


def _history_under(folder: Path, home: Path) -> tuple[list[tuple[int, str, str]], dict[str, bytes], str]:
    """A memory made, written inside and outside fsmem, consolidated, asked about its history and synced with a
    second host, each command with HOME at `home`: what each printed, the files, and HEAD's tree."""
    remote, here, there = folder / "remote.git", folder / "here", folder / "there"
    folder.mkdir()
    _git(folder, "init", "-q", "--bare", "-b", "main", remote)

    def fsmem(root: Path, *args: str, now: str = NOW, host: str = "h1") -> tuple[int, str, str]:
        done = cli_runner.run(
            ["--root", root, *args], env=_env(home, FSMEM_NOW=now, FSMEM_HOST_ID=host), text=True, cwd=root
        )
        return done.returncode, done.stdout.replace(os.fspath(folder), "FOLDER"), done.stderr

    printed = [cli_runner.run(["init", "--git", here], env=_env(home), text=True).returncode]
    _git(here, "remote", "add", "origin", remote)
    (here / "topics").mkdir()
    (here / "topics" / "über-hand.md").write_text("# Über hand\n\n- owner: Ann\n- city: Zürich\n", encoding="utf-8")
    asked = [
        ("note", "- employer: Globex\n- city: Zürich", "--subject", "people/Zoë Ünal"),
        ("consolidate",),
        ("log",),
        ("log", "topics/über-hand.md", "--json"),
        ("stat", "topics/über-hand.md"),
        ("diff", "HEAD~2"),
        ("show", "topics/über-hand.md", "--at", "HEAD~1"),
        ("timeline", "people/Zoë Ünal", "--json"),
        ("sync",),
    ]
    printed += [fsmem(here, *args) for args in asked]
    _git(folder, "clone", "-q", remote, there)
    printed.append(fsmem(there, "note", "- role: lead", "--subject", "people/Zoë Ünal", host="h2"))
    printed.append(fsmem(there, "sync", host="h2"))
    printed.append(fsmem(here, "note", "- city: Genève", "--subject", "people/Zoë Ünal", now="2026-12-08T13:00:00Z"))
    printed.append(fsmem(here, "sync", now="2026-12-08T13:00:00Z"))  # a merge: both hosts wrote
    printed.append(fsmem(there, "sync", host="h2", now="2026-12-08T13:00:00Z"))
    assert _files(here) == _files(there)
    merge = _git(here, "rev-list", "--merges", "-1", "HEAD").strip()
    merged = _git(here, "cat-file", "commit", merge).split("\n\n", 1)  # made by git: its date is the clock's
    headers = [line for line in merged[0].splitlines() if line.split(" ")[0] not in ("author", "committer", "parent")]
    return printed, _files(here), _git(here, "rev-parse", "HEAD^{tree}") + "\n".join([*headers, merged[1]])


def test_the_operators_git_config_changes_no_answer_and_no_byte_of_history(tmp_path):
    """Run under an operator's ~/.gitconfig, the commands of a memory with history printed other answers and wrote
    another history: its global ignores (core.excludesFile, ~/.config/git/ignore) kept files made outside fsmem
    out of every commit, so no other host ever received them; `log.follow` failed `fsmem log` and `stat` (exit 2);
    `diff.noprefix`, `core.abbrev` and `diff.context` changed `fsmem diff`, i18n.logOutputEncoding the names
    `log` shows; `merge.ff=only` failed every sync that had to
    merge, and merge.log wrote another merge. fsmem's git now takes those from git's defaults; who the operator is, credentials and
    transports still come from their config."""
    plain = _history_under(tmp_path / "plain", _home(tmp_path / "plain-home", ""))
    hostile = _history_under(tmp_path / "hostile", _home(tmp_path / "hostile-home", HOSTILE_GITCONFIG))
    for asked, (one, other) in enumerate(zip(plain[0], hostile[0], strict=True)):
        assert one == other, asked
    assert plain[1] == hostile[1]
    assert plain[2] == hostile[2]
    assert all(answer == 0 or answer[0] == 0 for answer in plain[0]), plain[0]
    assert "topics/über-hand.md" in plain[1]
    assert "über-hand.md" in plain[0][3][1] and "Über hand" in plain[0][7][1], plain[0]


# -- the property: whatever the process's environment, the same answers and bytes ---------------------------------

# The clock is pinned in New York's hour that happens twice (summer time ends at 06:00Z on 2026-11-01), the day's
# date differing between UTC-12 and UTC+14.
DRAWN_NOW = "2026-11-01T06:30:00Z"
SCRIPT = (
    ("note", "- employer: Globex\n- city: Zürich\n- ğış İı: 1", "--subject", "people/Zoë Ünal"),
    ("consolidate",),
    ("ls", "--json"),
    ("grep", "-i", "zürich"),
    ("search", "who employs Zoë", "--json"),
    ("log", "--since", "2026-11-01", "--json"),
)
ENVIRONMENTS = st.fixed_dictionaries(
    {
        "PYTHONHASHSEED": st.sampled_from(["0", "1", "4294967295", "random"]),
        "TZ": st.sampled_from(
            ["UTC", "Etc/GMT-14", "Etc/GMT+12", "Asia/Kolkata", "Pacific/Chatham", "America/New_York"]
        ),
        "LC_ALL": st.sampled_from([None, "C", "C.UTF-8", "POSIX", "tr_TR.UTF-8"]),
        "LANG": st.sampled_from([None, "tr_TR.UTF-8", "C"]),
        "COLUMNS": st.sampled_from([None, "1", "20", "500"]),
        "TERM": st.sampled_from([None, "dumb", "xterm-256color"]),
        "NO_COLOR": st.sampled_from([None, "1"]),
        "TMPDIR": st.sampled_from([None, "/nonexistent", "/tmp"]),
        "HOME": st.sampled_from(["plain", "hostile", None, "/nonexistent"]),
    }
)
# `make test` runs the one explicit example (a hostile environment, against the plain one): some 10 processes of
# fsmem; `make fuzz` (FSMEM_FUZZ_SCALE) draws 3 environments a unit of scale besides
SCALE = int(os.environ.get("FSMEM_FUZZ_SCALE", "1"))
HOSTILE_ENVIRONMENT = {
    "PYTHONHASHSEED": "4294967295",
    "TZ": "Etc/GMT-14",
    "LC_ALL": "tr_TR.UTF-8",
    "LANG": "C",
    "COLUMNS": "1",
    "TERM": "xterm-256color",
    "NO_COLOR": "1",
    "TMPDIR": "/nonexistent",
    "HOME": "hostile",
}


@pytest.fixture(scope="module")
def committed_memory(tmp_path_factory):
    """A memory with history, every file committed, and the two homes a drawn environment may name."""
    folder = tmp_path_factory.mktemp("environment")
    root = folder / "memory"
    assert cli_runner.run(["init", "--git", root], env=_env(FSMEM_NOW=DRAWN_NOW)).returncode == 0
    (root / "topics").mkdir()
    (root / "topics" / "café.md").write_text(
        "---\ntitle: Café Zürich\ntype: semantic\ntags: [z, a, ç, İ]\n---\n# Café\n\n- owner: Zoë Ünal\n",
        encoding="utf-8",
    )
    assert cli_runner.run(["--root", root, "consolidate"], env=_env(FSMEM_NOW=DRAWN_NOW)).returncode in (0, 1)
    assert not _git(root, "status", "--porcelain"), "committed, as made outside fsmem"
    homes = {"plain": _home(folder / "plain-home", ""), "hostile": _home(folder / "hostile-home", HOSTILE_GITCONFIG)}
    return root, homes


def _run_script(root: Path, drawn: dict[str, str | None], homes: dict[str, Path], umask: int, cwd: str):
    env = _env(FSMEM_NOW=DRAWN_NOW)
    for name in ("HOME", "XDG_CONFIG_HOME", "LC_ALL", "LANG", "LC_CTYPE", "TZ", "COLUMNS", "LINES", "TERM", "TMPDIR"):
        env.pop(name, None)
    for name, value in drawn.items():
        if name == "HOME" and value in homes:
            env.update(HOME=os.fspath(homes[value]), XDG_CONFIG_HOME=os.fspath(homes[value] / ".config"))
        elif value is not None:
            env[name] = value
    where = {"root": root, "parent": root.parent, "inside": root / "topics"}[cwd]
    given = {"root": ".", "parent": root.name, "inside": ".."}[cwd]
    printed = []
    for args in SCRIPT:
        done = subprocess.run(
            [cli_runner.FSMEM, "--root", given, *args],
            env=env,
            cwd=where,
            umask=umask,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
        )
        printed.append((args, done.returncode, done.stdout, done.stderr))
    return printed


@settings(
    max_examples=3 * SCALE,
    phases=(Phase.explicit,) if SCALE == 1 else (Phase.explicit, Phase.generate),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@example(drawn=HOSTILE_ENVIRONMENT, umask=0o077, cwd="inside")
@given(
    drawn=ENVIRONMENTS, umask=st.sampled_from([0o022, 0o077, 0o002]), cwd=st.sampled_from(["root", "parent", "inside"])
)
def test_no_environment_changes_an_answer_or_a_byte_written(committed_memory, tmp_path_factory, drawn, umask, cwd):
    """The same memory and the same commands, run as processes of the installed fsmem in a drawn environment (hash
    seed, time zone with the clock pinned in an hour New York has twice, locale, terminal variables, TMPDIR, the
    operator's home and git config, umask, working folder and a relative --root), give the same exit codes, stdout
    and stderr, and leave the same files and the same history, as in a plain one."""
    template, homes = committed_memory
    plain = _BASELINE.get("plain")
    if plain is None:
        root = tmp_path_factory.mktemp("plain") / "memory"
        shutil.copytree(template, root, symlinks=True)
        plain = _BASELINE["plain"] = (
            _run_script(root, {"HOME": "plain"}, homes, 0o022, "root"),
            _files(root),
            _git(root, "rev-parse", "HEAD"),
        )
    root = tmp_path_factory.mktemp("drawn") / "memory"
    shutil.copytree(template, root, symlinks=True)
    printed = _run_script(root, drawn, homes, umask, cwd)
    for (args, *one), (_, *other) in zip(plain[0], printed, strict=True):
        assert one == other, (args, drawn, umask, cwd)
    assert _files(root) == plain[1]
    assert _git(root, "rev-parse", "HEAD") == plain[2]  # the same commits, ids and all
    for path in root.rglob("*"):
        if ".git" not in path.relative_to(root).parts:
            assert not path.lstat().st_mode & 0o002 & ~umask, path  # nothing made open to others beyond the umask


_BASELINE: dict[str, tuple] = {}


# -- standard output closed or full ---------------------------------------------------------------------------------


def _with_stdout(root: Path, redirect: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`fsmem --root ROOT ARGS` as a process whose stdout is `redirect` (a shell redirection: `>&-`, `>/dev/full`)."""
    command = ["sh", "-c", f'exec "$@" {redirect}', "sh", cli_runner.FSMEM, "--root", os.fspath(root), *args]
    return subprocess.run(command, env=_env(), capture_output=False, stderr=subprocess.PIPE, text=True, timeout=120)


def test_a_note_saved_with_stdout_closed_or_full_says_it_was_the_output_that_failed(tmp_path):
    """A note run with stdout closed (`>&-`) was saved, then failed with `fsmem: error: AttributeError: 'NoneType'
    object has no attribute 'write'` (exit 2); with stdout on a full disk (`>/dev/full`) it was saved, then said
    `fsmem: error: no space left on device`, as if the memory's disk were full and nothing stored: a script that
    retried saved it twice. A closed stdout is written nothing, as Python's print() does (exit 0); a stdout that
    refuses the answer is named as such."""
    assert cli_runner.run(["init", tmp_path / "memory"], env=_env()).returncode == 0
    root = tmp_path / "memory"
    closed = _with_stdout(root, ">&-", "note", "- closed: yes", "--subject", "topic/Out")
    assert (closed.returncode, closed.stderr) == (0, "")
    assert _with_stdout(root, ">&-", "ls").returncode == 0
    full = _with_stdout(root, ">/dev/full", "note", "- full: yes", "--subject", "topic/Out")
    assert full.returncode == 2
    assert full.stderr == "fsmem: error: could not write the answer to standard output: no space left on device\n"
    (note,) = root.glob("sessions/**/*.md")
    text = note.read_text(encoding="utf-8")
    assert text.count("- closed: yes") == 1 and text.count("- full: yes") == 1, text


def _watcher(root: Path, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """`fsmem watch` of `root` as a process (started in `cwd`), once it answers."""
    watcher = subprocess.Popen(
        [cli_runner.FSMEM, "--root", root, "watch"],
        env=_env(),
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert watcher.stderr is not None
    while "answering one-shot reads" not in watcher.stderr.readline().decode():
        assert watcher.poll() is None, "the watcher ended"
    return watcher


def test_a_watcher_whose_working_folder_was_removed_still_answers(tmp_path):
    """A watcher started in a folder removed since (a shell's cd into a scratch folder, then rm -r) dropped every
    request (`os.getcwd()` failed): each command walked, and with FSMEM_SOCKET=require failed ("the other side
    closed the connection")."""
    root, started_in = tmp_path / "memory", tmp_path / "scratch"
    assert cli_runner.run(["init", root], env=_env()).returncode == 0
    started_in.mkdir()
    watcher = _watcher(root, cwd=started_in)
    try:
        started_in.rmdir()
        for args in (("ls",), ("grep", "-i", "memory", "--json")):
            asked = cli_runner.real(["--root", root, *args], env=_env(FSMEM_SOCKET="require"), cwd=tmp_path)
            walked = cli_runner.run(["--root", root, *args], env=_env(), cwd=tmp_path)
            assert (asked.returncode, asked.stdout, asked.stderr) == (walked.returncode, walked.stdout, walked.stderr)
    finally:
        watcher.terminate()
        watcher.wait(60)


def test_stdout_closed_or_full_is_answered_alike_with_a_watcher_and_without(tmp_path):
    """The same command lines as above, with --json too, asked of a running watcher (FSMEM_SOCKET=require): a
    closed stdout ended the client in a traceback (its streams' None), a full one too."""
    root = tmp_path / "memory"
    assert cli_runner.run(["init", root], env=_env()).returncode == 0
    watcher = _watcher(root)
    try:
        for redirect, args in ((">&-", ("ls",)), (">/dev/full", ("ls",)), (">/dev/full", ("ls", "--json"))):
            walked = _with_stdout(root, redirect, *args)
            asked = subprocess.run(
                ["sh", "-c", f'exec "$@" {redirect}', "sh", cli_runner.FSMEM, "--root", root, *args],
                env=_env(FSMEM_SOCKET="require"),
                stderr=subprocess.PIPE,
                text=True,
                timeout=120,
            )
            assert (asked.returncode, asked.stderr) == (walked.returncode, walked.stderr), (redirect, args)
            assert "Traceback" not in asked.stderr
    finally:
        watcher.terminate()
        watcher.wait(60)


def test_a_memory_the_operators_own_ignore_keeps_out_of_their_project_stays_out(tmp_path):
    """What the operator's global ignore still decides: a memory inside a project's checkout that it ignores has
    no history, so fsmem never commits into the project (the ignores of AS_GIT_SHIPS are every other question's)."""
    home, project = _home(tmp_path / "home", ""), tmp_path / "project"
    (home / ".config" / "git" / "ignore").write_text("scratch/\n", encoding="utf-8")
    _git(tmp_path, "init", "-q", project)
    assert cli_runner.run(["init", project / "scratch"], env=_env(home)).returncode == 0
    done = cli_runner.run(["--root", project / "scratch", "note", "- a: b", "--subject", "topic/A"], env=_env(home))
    assert done.returncode == 0
    assert subprocess.run(["git", "-C", project, "rev-parse", "HEAD"], capture_output=True).returncode != 0

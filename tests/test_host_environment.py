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
from pathlib import Path

import cli_runner
from child_env import without_fsmem

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

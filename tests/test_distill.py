"""`fsmem distill`: a real command (tests/distill_command.py) run on real episodes through the real CLI; commands
that misbehave; host-local settings that no fsmem.yaml, clone or remote can set; two hosts and a sync."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem
from import_samples import CHATGPT, chatgpt_conversation, chatgpt_export

from fsmem import Memory
from fsmem.format import distilled

FSMEM = str(Path(sys.executable).with_name("fsmem"))
SCRIPT = Path(__file__).with_name("distill_command.py")
NOW = "2026-12-01T12:00:00Z"
EPISODE = "sessions/2025/01/01/chatgpt-6781a0c2-1111.md"
OTHER = "sessions/2025/01/01/chatgpt-6781a0c2-2222.md"


def command(*mode: str) -> str:
    return shlex.join([sys.executable, str(SCRIPT), *mode])


def run(
    root: Path, *args: str, host: str = "laptop", timeout: float = 120, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """The command line run here (`cli_runner`); with `process`, also as the `fsmem` script, held to its bytes."""
    env = without_fsmem()
    env.update(FSMEM_NOW=NOW, FSMEM_HOST_ID=host)
    argv = ["--root", str(root), *args]
    if process:
        return cli_runner.same_as_a_process(argv, text=True, env=env, timeout=timeout)
    return cli_runner.run(argv, text=True, env=env)


def derived(root: Path) -> dict[str, str]:
    """Every derived note, by path, with its text."""
    found = {}
    for path in sorted((root / "sessions").rglob("*.md")):
        text = path.read_text()
        if "\ndistilled_from: " in text:
            found[path.relative_to(root).as_posix()] = text
    return found


def files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".fsmem" not in p.parts and ".git" not in p.parts
    }


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = Memory.init(tmp_path / "mem").root
    done = run(root, "import", "chatgpt", str(chatgpt_export(tmp_path / "export", CHATGPT)))
    assert done.returncode == 0, done.stderr
    return root


def test_a_real_command_turns_each_episode_into_a_keyed_session_note_and_a_rerun_finds_nothing_new(memory):
    done = run(memory, "distill", "--command", command("keyed"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "distilled 2 part(s) of 2 episode(s); 0 had nothing new, 0 skipped",
        "  sessions/2025/01/01/chatgpt-6781a0c2-1111.laptop.1-5.md: 1 fact(s), 1 observation(s) from "
        f"{EPISODE} lines 1-5 of 5",
        "  sessions/2025/01/01/chatgpt-6781a0c2-2222.laptop.1-2.md: 1 fact(s), 1 observation(s) from "
        f"{OTHER} lines 1-2 of 2",
    ]
    assert (memory / "sessions/2025/01/01/chatgpt-6781a0c2-1111.laptop.1-5.md").read_text() == (
        "---\n"
        "title: 'Distilled: Billing migration'\n"
        f"description: Keyed notes distilled from {EPISODE}, lines 1-5\n"
        "type: episodic\n"
        "session: chatgpt-6781a0c2-1111.laptop.1-5\n"
        f"distilled_from: {EPISODE}\n"
        "distilled_lines: 1-5\n"
        "distilled_by: laptop\n"
        "created: 2026-12-01T12:00:00Z\n"
        "updated: 2026-12-01T12:00:00Z\n"
        "---\n"
        "## topic/Distilled\n"
        "- lines seen: 1-5 (as of 2025-01-01T10:01:00Z)\n"  # dated by the episode, not by the run
        "- Heard from the user: We move billing to Stripe in March.\n"
    )
    before = files(memory)
    again = run(memory, "distill", "--command", command("keyed"), process=True)
    assert (again.returncode, again.stdout) == (1, "nothing new to distill: every line of 2 episode(s) is distilled\n")
    assert files(memory) == before
    consolidated = run(memory, "consolidate")
    assert consolidated.returncode == 0, consolidated.stderr
    topic = (memory / "topics/distilled.md").read_text()
    assert "- Heard from the user: We move billing to Stripe in March. ([2025-01-01](../sessions/2025/01/01/" in topic


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("malformed", "its output is not keyed notes: line 1 is neither a `## subject` heading nor a"),
        ("huge", "it wrote more than 65536 bytes (stopped reading; ask it for less)"),
        ("hang", "it did not finish within 1 s (killed; give more with --timeout)"),
        ("fail", "it exited with code 7: the model is not available"),
        ("secret", "the command's output, line 2: looks like a GitHub token"),
    ],
)
def test_a_command_that_misbehaves_is_a_clear_error_and_nothing_is_written_for_its_episode(memory, mode, said):
    before = files(memory)
    started = time.monotonic()
    done = run(memory, "distill", "--command", command(mode), "--timeout", "1", timeout=60)
    took = time.monotonic() - started
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stdout.splitlines()
    assert lines[0] == "distilled 0 part(s) of 2 episode(s); 0 had nothing new, 2 skipped"
    assert lines[1].startswith(f"  skipped {EPISODE}: lines 1-5: {said}"), lines[1]
    assert lines[1].endswith("; nothing was written for it")
    assert files(memory) == before
    assert took < 15, took  # hang: two episodes, a second each, and the process group killed


def test_a_hanging_command_has_its_whole_process_group_killed(memory, tmp_path):
    pids = tmp_path / "pids"
    script = tmp_path / "hang.sh"
    script.write_text(f"#!/bin/sh\nsleep 300 &\necho $! >> {pids}\nsleep 300\n")
    script.chmod(0o755)
    done = run(memory, "distill", "--command", str(script), "--timeout", "0.5")
    assert done.returncode == 3
    for pid in pids.read_text().split():
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(int(pid)):
            time.sleep(0.05)
        assert not _alive(int(pid)), pid


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_an_episode_that_grew_is_distilled_only_for_its_new_lines(memory, tmp_path):
    assert run(memory, "distill", "--command", command("keyed")).returncode == 0
    turns = [("user", "Book a hotel in Alfama."), ("assistant", "Done."), ("user", "And a table at Ramiro.")]
    longer = [CHATGPT[0], chatgpt_conversation("6781a0c2-2222", "Trip to Lisbon", turns)]
    assert run(memory, "import", "chatgpt", str(chatgpt_export(tmp_path / "export2", longer))).returncode == 0
    done = run(memory, "distill", "--command", command("keyed"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "distilled 1 part(s) of 2 episode(s); 1 had nothing new, 0 skipped"
    grown = (memory / "sessions/2025/01/01/chatgpt-6781a0c2-2222.laptop.3-3.md").read_text()
    assert "distilled_lines: 3-3\n" in grown
    assert "- lines seen: 3-3 (as of " in grown and "- Heard from the user: And a table at Ramiro.\n" in grown
    assert "Alfama" not in grown
    assert run(memory, "distill", "--command", command("keyed")).returncode == 1


def test_a_long_episode_goes_to_the_command_in_parts_within_the_token_budget(tmp_path):
    root = Memory.init(tmp_path / "mem").root
    turns = [
        ("user" if n % 2 == 0 else "assistant", f"Line number {n} of a long talk about billing.") for n in range(40)
    ]
    export = chatgpt_export(tmp_path / "export", [chatgpt_conversation("long-1", "Long", turns)])
    assert run(root, "import", "chatgpt", str(export)).returncode == 0
    done = run(root, "distill", "--command", command("keyed"), "--episode-tokens", "200")
    assert done.returncode == 0, done.stderr
    ranges = sorted(distilled.covered(_front(text))[1:] for text in derived(root).values())
    assert len(ranges) > 1 and ranges[0][0] == 1 and ranges[-1][1] == 40
    assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:], strict=False))  # contiguous, no line twice
    assert "(lines " in done.stdout and " in later parts)" in done.stdout  # what was cut from each part is said


def _front(text: str) -> dict[str, object]:
    from fsmem import format as fmt

    return dict(fmt.split(text).front_matter)


def test_the_command_and_the_host_id_come_from_this_hosts_settings_never_from_fsmem_yaml(memory, tmp_path):
    marker = tmp_path / "ran"
    config = memory / "fsmem.yaml"
    plain = config.read_text()
    config.write_text(plain + f"distill:\n  command: {command('marker', str(marker))}\n")
    refused = run(memory, "distill")
    assert refused.returncode == 2
    assert "distill is not a setting of fsmem; a command to run is never read from fsmem.yaml" in refused.stderr
    assert not marker.exists()
    config.write_text(plain.replace("  host_id: null", "  host_id: everyone", 1))
    unset = run(memory, "distill")
    assert unset.returncode == 2 and "give the command to run with --command CMD" in unset.stderr
    assert not marker.exists()
    assert run(memory, "config", "--local", "distill.command", command("keyed")).returncode == 0
    assert run(memory, "config", "--local", "notes.host_id", "desk").returncode == 0
    assert '"distill.command"' in (memory / ".fsmem/host-settings.json").read_text()  # no git: kept in .fsmem/
    env = without_fsmem()
    done = subprocess.run(
        [FSMEM, "--root", str(memory), "distill"], env={**env, "FSMEM_NOW": NOW}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert sorted(derived(memory)) == [
        "sessions/2025/01/01/chatgpt-6781a0c2-1111.desk.1-5.md",
        "sessions/2025/01/01/chatgpt-6781a0c2-2222.desk.1-2.md",
    ]
    check = run(memory, "check")
    assert "fsmem.yaml:1: notes.host_id in fsmem.yaml is not read" in check.stdout


@pytest.mark.slow
def test_a_command_a_hostile_clone_puts_in_fsmem_yaml_is_never_run(tmp_path):
    import sync_scenario as S
    from hostile_remote import clone, git, push

    origin, (victim,) = S.make_hosts(tmp_path, hosts=1, writers=1)
    hostile = clone(origin, tmp_path / "hostile")
    marker = tmp_path / "ran"
    config = hostile / "fsmem.yaml"
    config.write_text(config.read_text() + f"distill:\n  command: {command('marker', str(marker))}\n")
    push(hostile)
    held = S.fsmem(victim, "sync", check=False)
    assert held.returncode == 2, held.stdout  # a change to fsmem.yaml waits for a person
    for accepting in (False, True):
        if accepting:
            git(victim, "config", "fsmem.acceptConfig", "settings")
            S.fsmem(victim, "sync", check=False)
        done = run(victim, "distill")
        assert done.returncode == 2 and not marker.exists(), (done.stdout, done.stderr)
    assert run(victim, "config", "--local", "distill.command").returncode == 1  # not set on this host
    assert "distillCommand" not in (victim / ".git/config").read_text()


@pytest.mark.slow
def test_two_hosts_distilling_one_episode_end_after_sync_with_each_note_once(tmp_path):
    import sync_scenario as S

    origin, (one, two) = S.make_hosts(tmp_path, hosts=2, writers=1)
    assert run(one, "import", "chatgpt", str(chatgpt_export(tmp_path / "export", CHATGPT))).returncode == 0
    assert run(one, "sync").returncode == 0
    assert run(two, "sync").returncode == 0
    assert run(one, "distill", "--command", command("keyed"), host="one").returncode == 0
    assert run(two, "distill", "--command", command("keyed"), host="two").returncode == 0
    for root in (one, two, one):
        synced = run(root, "sync")
        assert synced.returncode == 0, synced.stderr
    names = {root: sorted(derived(root)) for root in (one, two)}
    assert (
        names[one]
        == names[two]
        == [
            "sessions/2025/01/01/chatgpt-6781a0c2-1111.one.1-5.md",
            "sessions/2025/01/01/chatgpt-6781a0c2-1111.two.1-5.md",
            "sessions/2025/01/01/chatgpt-6781a0c2-2222.one.1-2.md",
            "sessions/2025/01/01/chatgpt-6781a0c2-2222.two.1-2.md",
        ]
    )
    for root in (one, two):
        assert not any("<<<<<<<" in text for text in derived(root).values())
        again = run(root, "distill", "--command", command("keyed"), host=root.name)
        assert again.returncode == 1, again.stdout
    # the other host's derived note alone counts: a third host distills nothing
    assert run(two, "distill", "--command", command("keyed"), host="three").returncode == 1


def test_distill_is_never_offered_to_an_agent(memory, tmp_path):
    from fsmem.agents import tools

    assert "distill" not in {definition["name"] for definition in tools.definitions(Memory(memory))}
    marker = tmp_path / "ran"
    answer = tools.call(Memory(memory), "distill", {"command": command("marker", str(marker))})
    assert answer.is_error and not marker.exists(), answer.text


@pytest.mark.parametrize(
    ("output", "problem"),
    [
        ("", None),
        ("## people/Ann Lee\n- employer: Globex\n- Likes tea.\n", None),
        ("- employer: Globex\n", "line 1 is a bullet before any `## subject` heading"),
        ("# Notes\n", "line 1 is a heading that is not `## subject`"),
        ("## people/Ann Lee\n\n## people/Bo\n- a: b\n", "the subject 'people/Ann Lee' has no bullet under it"),
        ("## x\n- a: b\n  continued\n", "line 3 is neither a `## subject` heading nor a"),
        ("## x\n```\n- a: b\n```\n", "line 2 is neither a `## subject` heading nor a"),
    ],
)
def test_only_subject_headings_with_facts_or_observations_are_taken(output, problem):
    lines, found = distilled.checked(output)
    if problem is None:
        assert found is None and lines == output.rstrip("\n").split("\n")[: len(lines)]
    else:
        assert found is not None and found.startswith(problem) and lines == []


def test_in_a_git_memory_the_command_is_kept_in_git_config_and_no_commit_carries_it(tmp_path):
    root = Memory.init(tmp_path / "mem", git=True).root
    assert run(root, "import", "chatgpt", str(chatgpt_export(tmp_path / "export", CHATGPT))).returncode == 0
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout
    assert run(root, "config", "--local", "distill.command", command("keyed")).returncode == 0
    assert "distillCommand = " in (root / ".git/config").read_text()
    assert not (root / ".fsmem/host-settings.json").exists()
    assert subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout == head
    shown = run(root, "config", "--local", "distill.command", "--json")
    assert shown.returncode == 0 and '"kept_in": "this repository\'s .git/config' in shown.stdout
    assert run(root, "distill").returncode == 0
    tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True).stdout.split()
    assert "sessions/2025/01/01/chatgpt-6781a0c2-1111.laptop.1-5.md" in tracked  # the notes are history
    assert not any("host-settings" in name or name.startswith(".fsmem") for name in tracked)
    assert run(root, "config", "--local", "distill.command", "--unset").returncode == 0
    assert run(root, "config", "--local", "distill.command").returncode == 1  # not set, as git config says
    assert run(root, "distill").returncode == 2


@pytest.mark.parametrize("with_git", [True, False])
def test_a_command_a_received_or_copied_memory_brings_in_its_host_settings_is_never_run(tmp_path, with_git):
    """A memory handed over as a tarball or a copied folder brings its .git/config and .fsmem/, where this host's
    settings live: a distill.command the sender put there (by hand, or with fsmem config on their own host) is
    refused until the operator sets one here; this host's own, set with fsmem config, still runs."""
    marker = tmp_path / "ran"
    sender = Memory.init(tmp_path / "sender", git=with_git).root
    assert run(sender, "import", "chatgpt", str(chatgpt_export(tmp_path / "export", CHATGPT))).returncode == 0
    assert run(sender, "config", "--local", "distill.command", command("marker", str(marker))).returncode == 0
    received = tmp_path / "received"
    shutil.copytree(sender, received, symlinks=True)
    refused = run(received, "distill")
    assert refused.returncode == 2 and not marker.exists(), refused.stderr
    assert "distill.command in " in refused.stderr and "was not set on this host for this folder" in refused.stderr
    if with_git:  # as the sender writes it by hand, with a seal of their own
        config = received / ".git" / "config"
        config.write_text(config.read_text() + f"[fsmem]\n\tdistillCommandSeal = {'0' * 64}\n")
        assert run(received, "distill").returncode == 2 and not marker.exists()
    assert run(received, "config", "--local", "distill.command", command("marker", str(marker))).returncode == 0
    done = run(received, "distill")
    assert done.returncode == 0 and marker.exists(), done.stderr

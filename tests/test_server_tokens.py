"""fsmem.server.tokens and `fsmem token`: printed once, stored as a salted hash, checked, listed, revoked."""

from __future__ import annotations

import datetime as dt
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import without_fsmem

from fsmem.errors import ConfigError, InvalidArgument, NotFound, PathEscape
from fsmem.server.tokens import TokenStore, default_path, parse_expiry

FSMEM = str(Path(sys.executable).with_name("fsmem"))


def test_a_token_is_returned_once_and_only_its_salted_hash_is_stored(tmp_path):
    store = TokenStore(tmp_path / "conf" / "tokens.json")
    created = store.create(memory="team", agent="researcher", paths=["topics/", "./entities/people"])
    token, record = created.token, created.record
    assert token.startswith(f"fsmem_{record.id}_") and len(token) == len("fsmem_") + 12 + 1 + 64
    text = store.path.read_text()
    secret = token.rsplit("_", 1)[1]
    assert secret not in text and token not in text
    saved = json.loads(text)["tokens"][0]
    assert saved["paths"] == ["entities/people", "topics"] and len(bytes.fromhex(saved["salt"])) == 16
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.path.parent).st_mode) == 0o700
    assert "salt" not in created.to_dict() and "hash" not in created.to_dict()
    other = store.create(memory="team", agent="researcher")
    assert other.record.salt != record.salt and other.record.hash != record.hash


def test_verify_names_every_way_a_token_fails(tmp_path):
    store = TokenStore(tmp_path / "tokens.json")
    good = store.create(memory="team", agent="a").token
    assert store.verify(good)[1] == "ok" and store.verify(good)[0].agent == "a"
    token_id, secret = good.split("_")[1:]
    wrong = f"fsmem_{token_id}_{'0' * 64}"
    unknown = f"fsmem_{'a' * 12}_{secret}"
    for token, why in (
        (None, "missing"),
        ("", "missing"),
        ("Bearer x", "malformed"),
        (wrong, "wrong"),
        (unknown, "unknown"),
    ):
        record, reason = store.verify(token)
        assert (record, reason) == (None, why), token
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=400)
    expiring = store.create(memory="team", agent="a", expires=(later - dt.timedelta(days=1)).date().isoformat())
    assert store.verify(expiring.token)[1] == "ok"
    assert store.verify(expiring.token, now=later)[1] == "expired"
    store.revoke(expiring.record.id)
    assert store.verify(expiring.token)[1] == "revoked"


def test_a_revocation_by_another_process_applies_to_the_next_check(tmp_path):
    path = tmp_path / "tokens.json"
    server_side = TokenStore(path)
    token = TokenStore(path).create(memory="team", agent="a")
    assert server_side.verify(token.token)[1] == "ok"
    TokenStore(path).revoke(token.record.id)
    assert server_side.verify(token.token)[1] == "revoked"


def test_a_hand_edit_that_keeps_the_stores_size_and_mtime_applies_to_the_next_check(tmp_path):
    """A store edited by hand (or restored with `cp -p`, `rsync -t`) with the same size and its mtime put back
    moves its change time alone: the server reads it again, so a token cut short there is expired at once."""
    path = tmp_path / "tokens.json"
    server_side = TokenStore(path)
    token = TokenStore(path).create(memory="team", agent="a", expires="2999-12-31")
    assert server_side.verify(token.token)[1] == "ok"
    before = path.stat()
    path.write_text(path.read_text().replace("3000-01-01", "2000-01-01"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert server_side.verify(token.token)[1] == "expired"


def test_bad_input_and_a_damaged_store_are_refused(tmp_path):
    store = TokenStore(tmp_path / "tokens.json")
    with pytest.raises(InvalidArgument, match="memory name"):
        store.create(memory="Team/x", agent="a")
    with pytest.raises(InvalidArgument, match="needs an agent"):
        store.create(memory="team", agent="")
    with pytest.raises(PathEscape):
        store.create(memory="team", agent="a", paths=["../elsewhere"])
    with pytest.raises(InvalidArgument, match="already past"):
        store.create(memory="team", agent="a", expires="2001-01-01")
    with pytest.raises(InvalidArgument, match="ISO 8601"):
        parse_expiry("next tuesday")
    with pytest.raises(NotFound):
        store.revoke("0123456789ab")
    store.path.write_text("{not json")
    with pytest.raises(ConfigError, match="damaged"):
        store.create(memory="team", agent="a")
    assert store.path.read_text() == "{not json"


def test_expiry_dates_mean_the_end_of_that_day_utc():
    assert parse_expiry("2999-12-31") == "3000-01-01T00:00:00+00:00"
    assert parse_expiry("2999-12-31T18:00+01:00") == "2999-12-31T17:00:00+00:00"
    assert parse_expiry(None) is None


def test_the_default_store_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FSMEM_TOKENS", str(tmp_path / "t.json"))
    assert default_path() == tmp_path / "t.json"
    monkeypatch.delenv("FSMEM_TOKENS")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert default_path() == tmp_path / "xdg" / "fsmem" / "tokens.json"


def fsmem(*args, tokens: Path):
    env = without_fsmem()
    env["FSMEM_TOKENS"] = str(tokens)
    return subprocess.run([FSMEM, *args], capture_output=True, text=True, env=env, timeout=60)


def test_token_commands(tmp_path):
    tokens = tmp_path / "tokens.json"
    created = fsmem(
        "token", "create", "--memory", "team", "--agent", "reviewer", "--read-only", "--path", "topics/", tokens=tokens
    )
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("fsmem_") and "shown only this once" in created.stderr and token not in created.stderr
    assert TokenStore(tokens).verify(token)[0].read_only
    as_json = fsmem("token", "create", "--memory", "lab", "--agent", "x", "--json", tokens=tokens)
    data = json.loads(as_json.stdout)
    assert data["token"].startswith("fsmem_") and data["memory"] == "lab" and data["status"] == "active"
    listed = fsmem("token", "list", "--json", tokens=tokens)
    records = json.loads(listed.stdout)["tokens"]
    assert [r["memory"] for r in records] == ["team", "lab"] and all("hash" not in r for r in records)
    assert token not in listed.stdout and data["token"] not in listed.stdout
    only = fsmem("token", "list", "--agent", "reviewer", tokens=tokens)
    assert only.returncode == 0 and "reviewer" in only.stdout and "lab" not in only.stdout
    revoked = fsmem("token", "revoke", records[0]["id"], tokens=tokens)
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    assert TokenStore(tokens).verify(token)[1] == "revoked"
    missing_agent = fsmem("token", "create", "--memory", "team", tokens=tokens)
    assert missing_agent.returncode == 2 and "--agent AGENT" in missing_agent.stderr
    none = fsmem("token", "list", "--memory", "nothing", tokens=tokens)
    assert none.returncode == 1


def _create_into(stdout_fd: int, tokens: Path, *extra: str) -> subprocess.Popen:
    """`fsmem token create` with `stdout_fd` as its stdout, its stderr a pipe to read."""
    env = without_fsmem()
    env["FSMEM_TOKENS"] = str(tokens)
    return subprocess.Popen(
        [FSMEM, "token", "create", "--memory", "team", "--agent", "reviewer", *extra],
        stdout=stdout_fd,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )


def _statuses(tokens: Path) -> list[str]:
    return [record.status() for record in TokenStore(tokens).load()]


@pytest.mark.parametrize("as_json", [False, True])
def test_a_token_whose_secret_could_not_be_shown_never_becomes_active(tmp_path, as_json):
    """stdout a pipe nobody reads from: the secret cannot be written, so the stored token stays pending."""
    tokens = tmp_path / "tokens.json"
    read_end, write_end = os.pipe()
    os.close(read_end)  # closed before the process starts: its first write to stdout fails (EPIPE)
    proc = _create_into(write_end, tokens, *(["--json"] if as_json else []))
    os.close(write_end)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "Traceback" not in err and "Exception ignored" not in err, err
    assert "was not shown (Broken pipe), so it was never activated; create another" in err
    assert _statuses(tokens) == ["pending"]
    listed = fsmem("token", "list", tokens=tokens)
    assert " pending " in listed.stdout


def test_a_token_create_killed_before_its_secret_is_shown_leaves_no_active_token(tmp_path):
    """Killed between storing the token and writing its secret: stdout is a full pipe, so the write blocks
    there; the line on stderr, printed after the token is stored, says when; then SIGKILL."""
    tokens = tmp_path / "tokens.json"
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        while True:
            os.write(write_end, b"x" * 65536)
    except BlockingIOError:
        pass  # full: the next write blocks until someone reads, which nobody does before the kill
    os.set_blocking(write_end, True)
    proc = _create_into(write_end, tokens)
    os.close(write_end)
    try:
        assert "it is shown only this once" in proc.stderr.readline()  # stored, and about to be printed
        assert _statuses(tokens) == ["pending"]
        proc.kill()
        proc.wait(timeout=60)
    finally:
        os.close(read_end)
        proc.stderr.close()
    assert _statuses(tokens) == ["pending"]  # never active: nobody saw its secret


def test_a_shown_token_is_active_and_a_pending_one_is_refused(tmp_path):
    store = TokenStore(tmp_path / "tokens.json")
    pending = store.create(memory="team", agent="a", active=False)
    assert store.verify(pending.token) == (pending.record, "pending")
    assert store.activate(pending.record.id).status() == "active"
    assert store.verify(pending.token)[1] == "ok"
    store.revoke(pending.record.id)
    assert store.activate(pending.record.id).status() == "revoked"  # a revoked token stays revoked
    with pytest.raises(NotFound):
        store.activate("0" * 12)


def test_the_token_commands_and_the_settings_load_no_web_stack():
    probe = (
        "import sys, fsmem.cli.server, fsmem.server, fsmem.server.settings, fsmem.server.tokens; "
        "print(sorted(m for m in ('mcp', 'uvicorn', 'starlette', 'anyio', 'httpx2', 'pydantic') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"

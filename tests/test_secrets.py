"""fsmem.format.secrets: fake secrets of every kind are found and redacted; hashes, ids and prose are not.

Every secret here is generated from a fixed seed and none is a real credential;
building them at run time keeps key-shaped literals out of the repository
(tests/secrets_corpus.py, which benchmarks/bench_secrets.py measures too).
"""

from __future__ import annotations

import json
import re
import string
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from secrets_corpus import AN, NEAR_MISSES, REFERENCES, positives, r

from fsmem.format.secrets import redact, scan


@pytest.mark.parametrize(
    "kind, text, secret", positives(), ids=lambda v: v if isinstance(v, str) and len(v) < 30 else ""
)
def test_each_kind_of_secret_is_found_and_fully_redacted(kind, text, secret):
    found = scan(text)
    assert [s.kind for s in found] == [kind]
    assert secret in text[found[0].start : found[0].end]
    assert found[0].line == text.count("\n", 0, found[0].start) + 1
    clean = redact(text)
    assert f"[REDACTED:{kind}]" in clean
    for line in secret.splitlines():
        assert line not in clean
    assert scan(clean) == []  # redacting twice changes nothing


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_hashes_ids_placeholders_and_prose_are_not_secrets(text):
    assert scan(text) == []


def test_recall_is_whole_on_every_kind_refused_before():
    """Issue 32: references are let through, and nothing the guard refused is lost — a fake of every provider
    format and rule, the planted fakes of issue 19, and literal assignments in every language of REFERENCES."""
    from fsmem.format.secrets import _FORMATS

    items = positives()
    assert all(any(re.search(pattern, text) for _, text, _ in items) for _, pattern, _ in _FORMATS)  # each pattern
    assert {kind for kind, _, _ in items} == {k for k, _, _ in _FORMATS} | {
        "private key",
        "secret assignment",
        "password",
    }
    missed = [
        text
        for kind, text, secret in items
        if not any(
            secret.splitlines()[0] in text[s.start : s.end] or text[s.start : s.end] in secret for s in scan(text)
        )
    ]
    assert missed == []


@pytest.mark.parametrize("text", REFERENCES)
def test_a_reference_to_a_secret_is_not_a_secret(text):
    """Issue 32, finding 3: 5 of 192 real conversations were skipped for code like these."""
    assert [(s.kind, text[s.start : s.end]) for s in scan(text)] == []


def test_a_value_on_the_next_line_is_not_the_keys_value():
    assert scan("password:\n  user=admin9!") == []
    assert [s.kind for s in scan("password: admin9!\n")] == ["secret assignment"]


def test_a_secret_says_where_it_is_but_never_what_it_is():
    text = "line one\n- stripe: sk_live_" + r(AN, 24) + "\n"
    (found,) = scan(text)
    assert found.describe() == "line 2: looks like a Stripe key"
    assert text[found.start : found.end].startswith("sk_live_")


def test_the_example_memory_holds_no_secret():
    for path in (Path(__file__).parent.parent / "examples" / "memory").rglob("*.md"):
        assert scan(path.read_text()) == [], path


LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo10.json"


@pytest.mark.skipif(not LOCOMO.exists(), reason="the shared LoCoMo data is not on this machine")
def test_no_locomo_turn_is_a_secret():
    samples = json.loads(LOCOMO.read_text())
    turns = [
        turn["text"]
        for sample in samples
        for key, session in sample["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
    ]
    assert len(turns) > 5000
    flagged = [text for text in turns if scan(text)]
    assert flagged == []


def test_adversarial_inputs_are_scanned_without_a_hang():
    """Every quantifier is bounded: inputs that make naive patterns backtrack finish (the guard is generous)."""
    inputs = [
        "key_" * 20000,
        "api_key-" * 20000,
        "password is " * 10000,
        "-----BEGIN RSA PRIVATE KEY-----\n" + "A" * 500_000,
        "postgres://" + "u" * 100_000 + ":" * 50_000,
        r(AN + "+/", 1_000_000),
        "eyJ" + "a" * 200_000 + ".eyJ" + "b" * 200_000,
    ]
    done: list[int] = []

    def work() -> None:
        for text in inputs:
            scan(text)
            done.append(1)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert len(done) == len(inputs)


# -- the policy, through every face ------------------------------------------------------------

from fsmem import Memory  # noqa: E402
from fsmem.agents import tools  # noqa: E402
from fsmem.agents.memory_tool import MemoryTool  # noqa: E402
from fsmem.errors import MemoryToolError, SecretFound  # noqa: E402
from fsmem.store import retrieval_log  # noqa: E402

TOKEN = "ghp_" + r(AN, 36)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.md"))}


def set_policy(memory: Memory, policy: str) -> Memory:
    config = memory.root / "fsmem.yaml"
    config.write_text(config.read_text().replace("policy: refuse", f"policy: {policy}"))
    return Memory(memory.root, agent=memory.agent)


def test_refuse_is_the_default_and_nothing_is_written_on_any_face(demo_memory, tmp_path):
    """Finding 13: a key written in a note travelled note -> document -> INDEX.md -> context, silently."""
    assert demo_memory.secrets_policy == "refuse"
    before = tree(demo_memory.root)
    with pytest.raises(SecretFound, match=r"the note, line 2: looks like a GitHub token; nothing was written"):
        demo_memory.note(f"- deploy: friday\n- github token: {TOKEN}", subject="topic/Deploys")
    with pytest.raises(SecretFound, match="the body"):
        demo_memory.write("topics/keys.md", f"# Keys\n{TOKEN}\n")
    with pytest.raises(SecretFound, match="field 'description'"):
        demo_memory.write("topics/billing.md", None, set={"description": f"see {TOKEN}"})
    with pytest.raises(SecretFound, match="the new text"):
        demo_memory.edit("topics/billing.md", old="net 30", new=f"net 30, key {TOKEN}")
    answer = tools.call(demo_memory, "note", {"text": f"- token: {TOKEN}"})
    assert answer.is_error and "looks like a GitHub token" in answer.text and TOKEN not in answer.text
    logged = json_lines(demo_memory)
    assert TOKEN not in logged and "[REDACTED:GitHub token]" in logged
    tool = MemoryTool.over(demo_memory)
    with pytest.raises(MemoryToolError, match="file_text looks like a GitHub token; nothing was written"):
        tool.create("/memories/topics/k.md", f"{TOKEN}\n")
    with pytest.raises(MemoryToolError, match="new_str"):
        tool.str_replace("/memories/topics/billing.md", "net 30", TOKEN)
    assert tree(demo_memory.root) == before


def json_lines(memory: Memory) -> str:
    return "\n".join(json.dumps(r) for r in retrieval_log.records(memory.root))


def test_redact_writes_the_text_with_the_secret_replaced(demo_memory):
    memory = set_policy(demo_memory, "redact")
    done = memory.note(f"- github token: {TOKEN}", subject="topic/Deploys")
    text = (memory.root / done.path).read_text()
    assert "- github token: [REDACTED:GitHub token]" in text and TOKEN not in text


def test_allow_writes_it_but_check_reports_it_and_context_never_shows_it(demo_memory):
    memory = set_policy(demo_memory, "allow")
    memory.write("profile/keys.md", f"---\ntitle: Keys\ndescription: the key is {TOKEN}\n---\n- token: {TOKEN}\n")
    assert TOKEN in (memory.root / "profile/keys.md").read_text()
    problems = [p for p in memory.check().problems if p[0] == "profile/keys.md"]
    assert problems == [
        ("profile/keys.md", 3, "looks like a GitHub token; secrets do not belong in memory"),
        ("profile/keys.md", 5, "looks like a GitHub token; secrets do not belong in memory"),
    ]
    block = memory.context().text
    assert TOKEN not in block and "[REDACTED:GitHub token]" in block
    listing = memory.ls("profile").to_text()
    assert TOKEN not in listing
    assert memory.grep("token").total >= 1 and memory.read("profile/keys.md").lines  # counted, read, grepped
    memory.search("the key token")
    memory.consolidate()
    for state in (memory.root / ".fsmem").rglob("*"):  # caches, ledger, search index, logs: no copy anywhere
        if state.is_file():
            data = state.read_bytes()
            assert TOKEN.encode() not in data and TOKEN.lower().encode() not in data, state


def test_a_bad_policy_is_a_configuration_error_when_the_memory_is_opened(demo_memory):
    """Checked where fsmem.yaml is loaded (it was at the first write), with the line it stands on."""
    from fsmem.errors import ConfigError

    config = demo_memory.root / "fsmem.yaml"
    line = config.read_text().splitlines().index("  policy: refuse") + 1
    before = tree(demo_memory.root)
    with pytest.raises(ConfigError) as raised:
        set_policy(demo_memory, "maybe")
    assert str(raised.value) == f"{config}:{line}: secrets.policy must be one of refuse, redact, allow, not 'maybe'"
    assert tree(demo_memory.root) == before


def test_a_secret_typed_into_a_note_goes_no_further(demo_memory):
    """Finding 13, the whole path: note -> entity document -> INDEX.md -> context. The note keeps the only copy."""
    memory = set_policy(demo_memory, "allow")  # as if a human had typed it into the note
    note = memory.note(f"- api token: {TOKEN}\n- Likes green tea.", subject="people/Adam Smith").path
    report = memory.consolidate()
    assert any("looks like a GitHub token; consolidated with it redacted" in m for _, _, m in report.problems)
    document = (memory.root / "entities/people/adam-smith.md").read_text()
    assert TOKEN not in document and "- api token: [REDACTED:GitHub token]" in document
    assert TOKEN not in (memory.root / "INDEX.md").read_text()
    assert TOKEN not in memory.context().text
    assert TOKEN in (memory.root / note).read_text()
    assert [p for p in memory.check().problems if p[0] == note and "GitHub token" in p[2]]


# Issue 19, finding 13: every kind, with the article it is said with ("looks like a Anthropic API key" was the bug).
ARTICLES = {
    "AWS access key id": "an",
    "GitHub token": "a",
    "GitLab token": "a",
    "Slack token": "a",
    "Slack webhook": "a",
    "DigitalOcean token": "a",
    "Databricks token": "a",
    "Shopify token": "a",
    "Mailchimp API key": "a",
    "Discord bot token": "a",
    "Stripe key": "a",
    "Anthropic API key": "an",
    "OpenAI API key": "an",
    "Google API key": "a",
    "Hugging Face token": "a",
    "npm token": "an",
    "PyPI token": "a",
    "SendGrid API key": "a",
    "Twilio API key": "a",
    "Telegram bot token": "a",
    "Azure storage key": "an",
    "JSON web token": "a",
    "URL password": "a",
    "private key": "a",
    "secret assignment": "a",
    "password": "a",
}


def test_every_kind_of_secret_is_named_with_the_right_article():
    from fsmem.format.secrets import _FORMATS, with_article

    assert {kind for kind, _, _ in _FORMATS} | {"private key", "secret assignment", "password"} == set(ARTICLES)
    assert {kind: with_article(kind) for kind in ARTICLES} == {k: f"{a} {k}" for k, a in ARTICLES.items()}


@pytest.mark.parametrize("kind", ["Anthropic API key", "AWS access key id", "npm token", "URL password"])
def test_refusals_and_check_say_an_where_it_is_said(kind, demo_memory):
    text = next(text for k, text, _ in positives() if k == kind)
    expected = f"looks like {ARTICLES[kind]} {kind}"
    assert scan(text)[0].describe() == f"line 1: {expected}"
    with pytest.raises(SecretFound, match=f"^the note {expected};"):
        demo_memory.note(text)
    memory = set_policy(demo_memory, "allow")
    note = memory.note(text, subject="topic/Keys").path
    assert (note, 10, f"{expected}; secrets do not belong in memory") in memory.check().problems
    report = memory.consolidate()
    assert any(m == f"{expected}; consolidated with it redacted" for _, _, m in report.problems)


# -- issue 32, finding 3: code that says where a secret is comes in; a secret still does not ----------------

import subprocess  # noqa: E402
import sys  # noqa: E402

from import_samples import chatgpt_conversation, chatgpt_export  # noqa: E402

FSMEM = str(Path(sys.executable).parent / "fsmem")


def test_a_note_that_says_where_the_password_is_is_written_from_the_cli(tmp_path):
    """It exited 2, advising to "write where to find it instead" — which the note did."""
    root = Memory.init(tmp_path / "mem").root
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "FSMEM_NOW": "2026-12-01T08:00:00+00:00"}
    text = "- config: the app reads password = os.environ.get('DB_PASSWORD') at start"
    done = subprocess.run([FSMEM, "--root", str(root), "note", text], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert text in (root / done.stdout.split()[2]).read_text()
    leak = f"- config: the app reads password = {TOKEN} at start"
    refused = subprocess.run([FSMEM, "--root", str(root), "note", leak], capture_output=True, text=True, env=env)
    assert refused.returncode == 2 and TOKEN not in refused.stderr
    assert refused.stderr.startswith("fsmem: error: the note looks like a GitHub token; nothing was written")


def test_an_export_whose_code_names_secrets_comes_in_and_one_holding_a_secret_is_skipped(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    code = "\n".join(REFERENCES[:40])
    conversations = [
        chatgpt_conversation(
            "code-1", "Django settings", [("user", "why does this fail?\n" + code), ("assistant", "ok")]
        ),
        chatgpt_conversation("leak-1", "Keys", [("user", "hello"), ("user", f"- stripe: sk_live_{r(AN, 24)}")]),
    ]
    report = memory.import_from("chatgpt", str(chatgpt_export(tmp_path / "in", conversations)))
    assert report.created_count == 1 and [why for _, why in report.skipped] == ["its line 2 looks like a Stripe key"]


def test_redact_replaces_the_value_only_and_leaves_references_as_they_are(demo_memory, monkeypatch):
    """Under redact, code was mangled (`password = [REDACTED:secret assignment]'wachtwoord').text`)."""
    monkeypatch.setenv("FSMEM_NOW", "2026-12-01T08:00:00+00:00")
    memory = set_policy(demo_memory, "redact")
    text = (
        "- reads password = XML.find('wachtwoord').text\n"
        "- 'PASSWORD': os.environ.get('DB_PASSWORD'),\n"
        "- password: S3cret!99 user = admin\n"
    )
    done = memory.note(text, subject="topic/Deploys")
    written = (memory.root / done.path).read_text().splitlines()
    for line in text.replace("S3cret!99", "[REDACTED:secret assignment]").splitlines():  # a fact gains its "as of"
        assert any(kept.startswith(line) for kept in written), (line, written)


_KEYWORD_PIECES = ["pass", "PASSWORD", "Pw", "pWd", "SeCrEt", "KEY", "ToKen", "credential", "CREDS", "login", "p", "k"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_KEYWORD_PIECES) | st.text(string.printable, max_size=6), max_size=30))
def test_keywords_are_found_at_the_same_places_in_an_ascii_texts_lower_case(pieces):
    """An ASCII text is searched for keywords in its lower case (same offsets), other texts case-insensitively:
    both find the same spans, so a scan's secrets do not depend on which was used."""
    from fsmem.format.secrets import _rules

    text = "".join(pieces)
    rules = _rules()
    lowered = [m.span() for m in rules.keyword_lower.finditer(text.lower())]
    assert lowered == [m.span() for m in rules.keyword.finditer(text)]


_SECRET_PIECES = [
    "password: =",
    "password= hunter2Xq9",
    "api_key = 'sk9Xq2LmZ8vR4tY7wQ1e'",
    "https://u:Pq8zLm2Xv@example.com",
    "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5",
    "\n",
    " ",
    "=",
    "pw",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_SECRET_PIECES) | st.text(string.printable, max_size=6), max_size=30))
def test_a_scan_gives_spans_in_order_none_overlapping_each_on_its_line(pieces):
    text = "".join(pieces)
    found = scan(text)
    assert [s.start for s in found] == sorted(s.start for s in found)
    assert all(a.end <= b.start for a, b in zip(found, found[1:], strict=False))
    assert [s.line for s in found] == [text.count("\n", 0, s.start) + 1 for s in found]


def test_a_line_of_thousands_of_secrets_is_scanned_in_linear_time():
    """Each secret was checked against all found before it: 8,000 on one line of 88,000 characters took 9 s."""
    spent = time.process_time()
    assert len(scan("password= " * 8_000)) == 7_999  # the last value is the end of the line
    assert time.process_time() - spent < 1

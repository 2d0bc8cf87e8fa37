import json
import os
import subprocess
import sys
from pathlib import Path

import cli_runner
import pytest

from fsmem import Memory
from fsmem.errors import InvalidArgument
from fsmem.evaluation import evaluate
from fsmem.evaluation.harness import ScoreStats, knee, load_evalset, parse_ks
from fsmem.store.retrieval_log import records

REPO = Path(__file__).resolve().parents[1]
LOCOMO = Path(os.environ.get("FSMEM_LOCOMO", REPO.parent / "shared" / "data" / "locomo10.json"))

FACTS = """---
title: Team
updated: 2026-01-01
---
## people/Adam Smith
- employer: Acme Corp
- role: finance lead
- favourite food: ramen

## people/Maria Lopez
- employer: Globex
- role: support engineer
- hobby: bouldering
"""

EVALSET = """questions:
  - question: Who is the employer of Adam Smith?
    gold: [{path: team.md, line: 6}]
  - question: What is Maria's hobby?
    gold: [{text: "hobby: bouldering"}]
  - question: Which food does Adam like?
    gold: ["favourite food"]
  - question: quantum chromodynamics lattice gauge
    gold: []
"""


@pytest.fixture
def memory(tmp_path, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-01-10T00:00:00+00:00")
    root = tmp_path / "mem"
    Memory.init(root)
    (root / "team.md").write_text(FACTS)
    return Memory(root)


def test_small_eval_set_reports_recall_tokens_knee_dprime_and_empty_share(memory, tmp_path):
    path = tmp_path / "eval.yaml"
    path.write_text(EVALSET)
    report = evaluate(memory, path, sweep=[1, 2, 4])
    assert report.questions == 4 and report.gold_questions == 3 and report.empty_gold_questions == 1
    assert [row["k"] for row in report.per_k] == [1, 2, 4]
    assert [row["recall"] for row in report.per_k] == [1.0, 1.0, 1.0]
    assert report.empty_gold_correct == 1.0
    assert report.knee == 1
    assert report.d_prime is not None and report.d_prime > 1.0
    assert all(row["mean_tokens"] > 0 and row["p95_latency_ms"] >= row["p50_latency_ms"] for row in report.per_k)
    assert report.per_k[0]["mean_tokens"] < report.per_k[2]["mean_tokens"]
    assert "empty-gold questions answered with nothing: 1.000" in report.to_text()
    assert not list(records(memory.root))  # an evaluation is not agent traffic


def test_jsonl_eval_set_and_a_miss(memory, tmp_path):
    path = tmp_path / "eval.jsonl"
    rows = [
        {"question": "Who is the support engineer?", "gold": [{"path": "team.md", "line": 12}]},
        {"question": "Who is the support engineer?", "gold": [{"text": "favourite food"}]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = evaluate(memory, path, sweep=[1])
    assert report.per_k[0]["recall"] == 0.5 and report.empty_gold_correct is None


def test_eval_set_errors_are_plain(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- question: x\n")
    with pytest.raises(InvalidArgument, match="needs 'gold'"):
        load_evalset(bad)
    bad.write_text("- question: x\n  gold: [{path: a.md}]\n")
    with pytest.raises(InvalidArgument, match=r"\{path, line\} or \{text\}"):
        load_evalset(bad)
    with pytest.raises(InvalidArgument, match="whole numbers"):
        parse_ks("1,two")
    assert parse_ks("8,1,2,2") == [1, 2, 8]


def test_knee_and_d_prime():
    assert knee([1, 2, 4, 8, 16, 32], [0.2, 0.5, 0.8, 0.85, 0.86, 0.86]) == 4
    assert knee([1, 2, 4], [0.5, 0.5, 0.5]) == 1
    stats = ScoreStats()
    stats.add([2.0, 3.0, 0.0, 1.0], [True, True, False, False])
    assert stats.d_prime() == pytest.approx(4.0)  # means 2.5 vs 0.5, each sd 0.5


def run_here(root, *args):
    """The command line run here (`cli_runner`), as the `fsmem` script runs it."""
    return cli_runner.run(["--root", str(root), *args], text=True, env=dict(os.environ))


def run_cli(root, *args, pythonpath=()):
    """A real process of this checkout's CLI, `pythonpath` ahead of it (a module that shadows an extra)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, pythonpath), str(REPO)])}
    return subprocess.run(
        [sys.executable, "-c", "from fsmem.cli import main; main()", "--root", str(root), *args],
        capture_output=True,
        text=True,
        env=env,
    )


def test_eval_cli_json_and_plot(memory, tmp_path):
    path = tmp_path / "eval.yaml"
    path.write_text(EVALSET)
    done = run_here(memory.root, "evaluate", str(path), "--sweep", "1,2", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [row["k"] for row in data["per_k"]] == [1, 2] and data["empty_gold_correct"] == 1.0
    # Without matplotlib (shadowed by a module that fails to import) --plot says how to get it.
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "matplotlib.py").write_text("raise ImportError('no matplotlib here')\n")
    without = run_cli(memory.root, "evaluate", str(path), "--plot", str(tmp_path / "q.png"), pythonpath=[shadow])
    assert without.returncode == 2 and "pip install 'fsmem[plot]'" in without.stderr
    assert not (tmp_path / "q.png").exists()
    missing = run_here(memory.root, "evaluate", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    pytest.importorskip("matplotlib", reason="the plot needs the plot extra: pip install 'fsmem[plot]'")
    plot = run_here(memory.root, "evaluate", str(path), "--sweep", "1,2,4", "--plot", str(tmp_path / "p.png"))
    assert plot.returncode == 0, plot.stderr
    png = (tmp_path / "p.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000  # a drawn figure, not an empty file


TINY_LOCOMO = [
    {
        "sample_id": "tiny",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a greyhound called Comet."},
                {
                    "speaker": "Bob",
                    "dia_id": "D1:2",
                    "text": "Lovely! I started pottery classes.",
                    "blip_caption": "a photo of a bowl",
                },
            ],
            "session_2_date_time": "9:00 am on 20 June, 2023",
            "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "My pottery bowl won a prize at the fair."}],
        },
        "qa": [
            {"question": "What is the name of Ann's dog?", "answer": "Comet", "evidence": ["D1:1"], "category": 4},
            {"question": "What did Bob win?", "answer": "a prize", "evidence": ["D2:1; D1:2"], "category": 1},
            {"question": "Adversarial", "adversarial_answer": "x", "evidence": ["D1:1"], "category": 5},
            {"question": "No evidence", "answer": "x", "evidence": [], "category": 2},
        ],
    }
]


def test_locomo_importer_writes_dated_notes_and_an_eval_set_by_dialog_id(tmp_path):
    from fsmem.evaluation.locomo import import_locomo

    source = tmp_path / "locomo.json"
    source.write_text(json.dumps(TINY_LOCOMO))
    called = []
    result = import_locomo(source, tmp_path / "out", steps=[called.append])
    assert (result.sessions, result.turns, result.questions) == (2, 3, 2) and len(called) == 1
    note = (tmp_path / "out" / "tiny" / "sessions" / "2023" / "05" / "08" / "tiny-s1.md").read_text()
    assert "updated: '2023-05-08T13:56:00+00:00'" in note
    assert "## people/Ann\n- I adopted a greyhound called Comet. [D1:1]\n" in note
    assert "- Lovely! I started pottery classes. (shared an image: a photo of a bowl) [D1:2]" in note
    questions = [json.loads(line) for line in (tmp_path / "out" / "tiny.eval.jsonl").read_text().splitlines()]
    assert [q["gold"] for q in questions] == [[{"text": "[D1:1]"}], [{"text": "[D2:1]"}, {"text": "[D1:2]"}]]
    # Three turns are too little text for the template's min_score: scores are relative to the memory's
    # own vocabulary, which (the root README.md being no memory) is only these turns.
    config = tmp_path / "out" / "tiny" / "fsmem.yaml"
    config.write_text(config.read_text().replace("  min_score: 0.06", "  min_score: 0.02", 1))
    memory = Memory(tmp_path / "out" / "tiny")
    report = evaluate(memory, tmp_path / "out" / "tiny.eval.jsonl", sweep=[1, 2])
    assert report.per_k[-1]["recall"] == 1.0
    hit = memory.search("Ann's dog name", max_results=1).hits[0]
    assert hit.path == "entities/people/ann.md"  # consolidated out of the session note
    assert hit.subject == "people/Ann" and "Comet. [D1:1]" in hit.text


@pytest.mark.skipif(not LOCOMO.exists(), reason="../shared/data/locomo10.json is not beside the repository")
def test_locomo_one_conversation_end_to_end(tmp_path):
    from fsmem.evaluation.locomo import import_locomo

    result = import_locomo(LOCOMO, tmp_path, samples=["conv-26"])
    assert result.sessions == 19 and result.turns == 419 and result.questions == 150
    report = evaluate(Memory(result.memories[0]), result.evalsets[0], sweep=[4, 30], max_tokens=2000)
    assert report.per_k[1]["recall"] > 0.75 and report.d_prime > 1.0

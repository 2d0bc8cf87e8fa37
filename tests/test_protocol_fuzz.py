"""The protocol fuzzer, bounded (issue 31): every kind of message, malformed or not, sent to a real `fsmem mcp`
and a real `fsmem serve` on 127.0.0.1 gets one well-formed answer or a documented refusal (none for a
notification), and both stay up. `make bench` runs it longer (benchmarks/bench_protocol_fuzz.py)."""

from __future__ import annotations

import pytest
from protocol_faces import Http, Stdio
from protocol_fuzz import KINDS, Tally, run
from test_tools import build_memory

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.slow


def test_every_kind_of_message_gets_one_answer_or_a_refusal_and_both_faces_stay_up(tmp_path):
    root = build_memory(tmp_path)
    faces = [Stdio(root), Http(root, tmp_path)]
    tally = Tally()
    try:
        run(faces, examples=4, tally=tally, seed=0)
        assert faces[1].alive()
    finally:
        codes = [face.stop() for face in reversed(faces)]
    assert codes == [0, 0]
    assert tally.missing([face.name for face in faces]) == []  # every kind of message, on both faces
    assert sum(tally.tried.values()) == 4 * (len(KINDS) + 1) * 2  # "malformed text" is drawn twice an example

"""The served memories warmed when a server starts (fsmem.server.warmup): caught up, holding their change feed for
the server's life, and a memory that cannot be warmed said in the log."""

from __future__ import annotations

import io
import json

from fsmem import Memory
from fsmem.server.log import RequestLog
from fsmem.server.warmup import Warmup
from fsmem.store import feed as feeds


def test_a_warmed_memory_holds_its_feed_and_its_caches_are_caught_up(tmp_path):
    root = tmp_path / "team"
    memory = Memory.init(root)
    memory.write("topics/billing.md", "---\ntitle: Billing\n---\n# Billing\n\n- Invoices go out monthly.\n")
    memory.search("invoices")  # a memory in use: a search index that holds files
    memory.close()
    (root / "topics" / "billing.md").write_text("---\ntitle: Billing\n---\n# Billing\n\n- Quokka invoices.\n")
    stream = io.StringIO()
    warmup = Warmup({"team": root}, RequestLog(stream=stream))
    warmup.start()
    assert warmup.done.wait(60)
    try:
        [line] = [json.loads(text) for text in stream.getvalue().splitlines()]
        assert line["event"] == "warmed" and line["memory"] == "team"
        assert feeds.running(root)  # a view opened now takes the running feed at its first call
        view = Memory(root, agent="researcher")
        found = view.search("quokka")
        assert [hit.path for hit in found.hits] == ["topics/billing.md"]  # the edit before the warm-up, indexed
        view.close()
    finally:
        warmup.close()
    assert not feeds.running(root)  # the warm memory let go: its feed with it


def test_a_memory_that_cannot_be_warmed_is_said_in_the_log_and_the_others_are_warmed(tmp_path):
    root = tmp_path / "team"
    Memory.init(root).close()
    stream = io.StringIO()
    warmup = Warmup({"gone": tmp_path / "nowhere", "team": root}, RequestLog(stream=stream))
    warmup.start()
    assert warmup.done.wait(60)
    warmup.close()
    lines = [json.loads(text) for text in stream.getvalue().splitlines()]
    assert [(line["event"], line["memory"]) for line in lines] == [("warning", "gone"), ("warmed", "team")]
    assert lines[0]["message"].startswith("not warmed: ")


def test_a_close_while_warming_leaves_the_memory_to_the_warmup_thread(tmp_path):
    root = tmp_path / "team"
    Memory.init(root).close()
    warmup = Warmup({"team": root}, RequestLog(stream=io.StringIO()))
    warmup.close()  # a shutdown before the thread started: nothing is opened after it
    warmup.start()
    assert warmup.done.wait(60)
    assert not feeds.running(root)

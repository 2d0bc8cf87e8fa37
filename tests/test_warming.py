"""A long-lived process settled after warming (fsmem.warming.settle): what answering imports is imported, and
the collector no longer walks what the process held then. Each case runs in a fresh interpreter, since this
one has imported every module already."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from fsmem import Memory

_PROBE = textwrap.dedent(
    """
    import gc, json, sys
    from fsmem import Memory
    from fsmem.warming import settle, warm

    memory = Memory(sys.argv[1])
    warm(memory)
    held = len(gc.get_objects())
    settle()
    walked = len(gc.get_objects())
    before = set(sys.modules)
    memory.search("invoices")
    memory.grep("invoices")
    memory.read("topics/billing.md")
    memory.ls()
    imported = sorted(name for name in set(sys.modules) - before if name.startswith(("fsmem", "yaml", "Stemmer")))
    print(json.dumps({"held": held, "walked": walked, "frozen": gc.get_freeze_count(), "imported": imported}))
    """
)


def _settled(root) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(root)], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout)


def test_answering_after_settle_imports_nothing_more_and_what_was_held_is_not_walked(tmp_path):
    root = tmp_path / "team"
    memory = Memory.init(root)
    memory.write("topics/billing.md", "---\ntitle: Billing\n---\n# Billing\n\n- Invoices go out monthly.\n")
    memory.search("invoices")  # a memory in use: its search index holds files, as a server's does
    memory.close()
    found = _settled(root)
    assert found["imported"] == []  # ANSWERING_MODULES lists every module a first answer imports
    assert found["frozen"] >= found["held"] > 1000  # every object held after warming is out of the walks
    assert found["walked"] < found["held"] // 10

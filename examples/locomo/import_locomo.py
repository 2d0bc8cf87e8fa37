"""Import LoCoMo into memories of dated session notes, one per conversation, each with an eval set.

    .venv/bin/python examples/locomo/import_locomo.py ../shared/data/locomo10.json OUT
    .venv/bin/fsmem --root OUT/conv-26 eval OUT/conv-26.eval.jsonl --max-tokens 1000

The same as `fsmem import locomo FILE OUT`: the session notes of each conversation are
consolidated into entities/people/<speaker>.md. Further steps that run on each memory
after that go in `steps`.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fsmem.evaluation.locomo import import_locomo  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(import_locomo(sys.argv[1], sys.argv[2]).to_text())

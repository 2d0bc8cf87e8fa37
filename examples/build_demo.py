"""Build the demo memory: a fresh `fsmem init` with the example files of examples/memory laid over it.

Usage: python examples/build_demo.py DIR   (DIR must not exist yet, or be empty)
"""

import shutil
import sys
from pathlib import Path

from fsmem import Memory


def build(target: Path) -> Memory:
    memory = Memory.init(target)
    shutil.copytree(Path(__file__).parent / "memory", target, dirs_exist_ok=True)
    return memory


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_demo.py DIR")
    built = build(Path(sys.argv[1]))
    print(f"built the demo memory in {built.root}")

"""The environment of a process a test starts (a pytest of its own, an fsmem of a new virtual environment).

Without the developer's FSMEM_* settings, and with bytecode written: where PYTHONDONTWRITEBYTECODE is set
(this project's machines set it), each such process compiled every module it imported anew, and each pytest
rewrote the asserts of its plugins' modules (hypothesis' 80, some 2 s of CPU a process) because it could not
keep them. Written, the next process reads them, as on a machine without that setting.
"""

from __future__ import annotations

import os


def without_fsmem() -> dict[str, str]:
    """os.environ without the developer's FSMEM_* settings: what a command a test starts must not be told."""
    return {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}


def child_env() -> dict[str, str]:
    """os.environ without FSMEM_* and PYTHONDONTWRITEBYTECODE."""
    return {k: v for k, v in without_fsmem().items() if k != "PYTHONDONTWRITEBYTECODE"}

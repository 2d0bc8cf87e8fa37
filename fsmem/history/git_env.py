"""The environment fsmem's git runs in: the caller's, less what would point git at another repository.

A git hook that calls fsmem (a post-commit hook running `fsmem log`, say) hands it `GIT_DIR`, `GIT_INDEX_FILE`
and the like, meant for the hook's own git; fsmem's git, run with them, would read and commit into that
repository instead of the memory's. `clean_env` drops them, and sets what keeps git from waiting on a person:
no prompt, pager or editor.
"""

from __future__ import annotations

import os
import re

# Variables a git hook may have set that would point our git elsewhere.
_REDIRECTS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_QUARANTINE_PATH",
    # what `git rev-parse --local-env-vars` names besides: settings and objects of another repository's
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_SHALLOW_FILE",
)
_CONFIG_PAIR = re.compile(r"^GIT_CONFIG_(KEY|VALUE)_\d+$")
PROTOCOLS = "file:http:https:ssh"  # GIT_ALLOW_PROTOCOL unless the environment sets it: no ext::, whatever config says


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of fsmem's git: the caller's, less what would point git elsewhere (`_REDIRECTS`, and the
    `GIT_CONFIG_KEY_n`/`VALUE_n` pairs of GIT_CONFIG_COUNT), and never a prompt, pager or editor."""
    env = {key: value for key, value in os.environ.items() if key not in _REDIRECTS and not _CONFIG_PAIR.match(key)}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_EDITOR="true",
        GIT_MERGE_AUTOEDIT="no",
        GIT_PAGER="cat",
        PAGER="cat",
    )
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    env.setdefault("GIT_ALLOW_PROTOCOL", PROTOCOLS)
    env.update(extra or {})
    return env

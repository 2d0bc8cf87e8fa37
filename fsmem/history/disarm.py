"""The programs a repository's own config names, disarmed for fsmem's git.

A memory received from someone else (a tarball, a zip, a copied folder) brings its `.git/config`, and git
runs what that names: a filter's clean command on `git status`, a textconv on `git blame`, a merge driver on
`git merge`, an upload-pack on `git fetch`, a credential helper. git's own guard, `safe.directory`, covers
only folders another user owns; an unpacked archive is the operator's. So fsmem's git takes these settings
only from the operator's own config (global, system): each one the repository's config (`.git/config`, the
worktree's, and what they include) sets is given on the command line, where git reads it last, as the value
the operator's config gives or else one that runs nothing of the repository's. Hooks, fsmonitor and
signature checks are switched off for every call (`SETTINGS`); the rest is read once per `Git` (`Disarm`).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable

# The keys of git's config that name a program git runs, lowercased as `git config` prints them.
PROGRAMS = re.compile(
    r"^(filter\..+\.(clean|smudge|process)|diff\..+\.textconv|merge\..+\.driver"
    r"|remote\..+\.(uploadpack|receivepack)|core\.askpass|credential\.(.+\.)?helper)$",
    re.DOTALL,
)
REPOSITORY_SCOPES = ("local", "worktree")
# What runs in place of a repository's program when the operator's config names none.
_NEUTRAL = {
    "clean": "",
    "smudge": "",
    "process": "",
    "textconv": "",
    "driver": "git merge-file --marker-size=%L %A %O %B",  # git's own text merge, as a merge driver
    "askpass": "",
}
# A remote's upload-pack and receive-pack are the first of their values that git reads, never the last: the
# repository's are replaced by these options of the commands that run them.
TRANSPORT = {
    "uploadpack": ({"fetch", "ls-remote"}, "--upload-pack=git-upload-pack"),
    "receivepack": ({"push"}, "--receive-pack=git-receive-pack"),
}
# settings of every fsmem git call (with git.settings()): no fsmonitor, hook or signature check of the repository's
SETTINGS = {
    "core.fsmonitor": "false",
    "core.hooksPath": os.devnull,
    "log.showSignature": "false",
    "merge.verifySignatures": "false",
}
# git commands that never run a filter, driver, transport or helper: fsmem calls them most, so they skip it.
PLUMBING = frozenset(
    {"config", "rev-parse", "cat-file", "update-ref", "rev-list", "ls-tree", "ls-files", "diff-tree"}
    | {"merge-base", "check-ignore", "remote", "branch", "diff-index", "gc", "commit-graph"}
)


def overrides(read_config: Callable[[], subprocess.CompletedProcess[bytes]]) -> tuple[list[str], dict[str, str]]:
    """The `-c` arguments that disarm every program the repository's config names, and the option each git
    command that runs a remote's program is given.

    `read_config` runs `git config --show-scope --includes -z --get-regexp` with `PROGRAMS`.
    """
    proc = read_config()
    if proc.returncode not in (0, 1):  # 1: no key matched
        return [], {}
    found: list[tuple[str, str, str]] = []
    fields = proc.stdout.decode("utf-8", "surrogateescape").split("\0")
    for scope, entry in zip(fields[0::2], fields[1::2], strict=False):  # the last field is empty
        key, _, value = entry.partition("\n")
        if PROGRAMS.match(key):
            found.append((scope, key, value))
    theirs = {key for scope, key, _ in found if scope in REPOSITORY_SCOPES}
    options = {
        command: option
        for variable, (commands, option) in TRANSPORT.items()
        if any(key.endswith("." + variable) for key in theirs)
        for command in commands
    }
    theirs = {key for key in theirs if key.rpartition(".")[2] not in TRANSPORT}
    pairs: list[tuple[str, str]] = []
    helpers = [(k, v) for scope, k, v in found if k.startswith("credential.") and scope not in REPOSITORY_SCOPES]
    if any(key.startswith("credential.") for key in theirs):
        pairs += [("credential.helper", ""), *helpers]  # an empty helper empties the list; the operator's again
    for key in sorted(theirs - {k for k in theirs if k.startswith("credential.")}):
        operators = [v for scope, k, v in found if k == key and scope not in REPOSITORY_SCOPES]
        pairs.append((key, operators[-1] if operators else _NEUTRAL[key.rpartition(".")[2]]))
        if key.startswith("filter.") and not operators and (key.rpartition(".")[0] + ".required", "false") not in pairs:
            pairs.append((key.rpartition(".")[0] + ".required", "false"))  # a filter git may run none of
    return [arg for key, value in pairs for arg in ("-c", f"{key}={value}")], options


class Disarm:
    """One repository's disarming arguments, read once (`git config`), the first time a git command needs them."""

    def __init__(self) -> None:
        self.found: tuple[list[str], dict[str, str]] | None = None

    def around(
        self, args: tuple[str, ...], settings: list[str], run: Callable[..., subprocess.CompletedProcess[bytes]]
    ) -> list[str]:
        """git's arguments after `-C`: the repository's programs disarmed (read with `run`, `Git.run`), then
        fsmem's `settings` (which win, as git reads the last), then `args` with the option that replaces a
        remote's program where one does."""
        at = next((i for i in range(0, len(args), 2) if args[i] != "-c"), len(args))  # past an identity's -c
        if at == len(args) or args[at] in PLUMBING:
            return [*settings, *args]
        if self.found is None:
            self.found = overrides(
                lambda: run("config", "--show-scope", "--includes", "-z", "--get-regexp", PROGRAMS.pattern, check=False)
            )
        disarmed, options = self.found
        option = [options[args[at]]] if args[at] in options else []
        return [*disarmed, *settings, *args[: at + 1], *option, *args[at + 1 :]]

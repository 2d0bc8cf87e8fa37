"""Typed errors raised by the library, and how an error from below them is worded at every face.

Every message says what went wrong and, where there is one, what to do instead,
because the reader is often a model that can only act on the text. Each face
(`Memory`'s methods, the CLI, the tool dispatcher and through it MCP and the
HTTP server, Claude's memory tool) has one boundary, and each turns what is not
an `FsmemError` into one with `translated`: an operating-system error reads
the same everywhere (`os_error_message`). The CLI exits with `exit_code`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

TYPE_CHECKING = False  # typing.TYPE_CHECKING: a plain grep starts rg before typing is imported (fsmem.cli.early)
if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")


class FsmemError(Exception):
    """Base class: anything fsmem refuses to do, with a message fit for a user or a model."""

    exit_code = 2


class RootNotFound(FsmemError):
    """No memory directory could be found for this command."""


class NotAMemory(RootNotFound):
    """A folder given as a memory (`--root`, `$FSMEM_ROOT`, `Memory(path)`) that holds no fsmem.yaml."""


class PathEscape(FsmemError):
    """An agent- or user-supplied path that would leave the memory root."""


class NotFound(FsmemError):
    """A path inside the memory that does not exist."""


class OutOfScope(NotFound):
    """A path outside the agent's scope: refused exactly as if nothing were there."""


class AlreadyExists(FsmemError):
    """A create or move that would overwrite something already stored."""


class InvalidArgument(FsmemError):
    """An argument that is malformed or out of range."""


class EditConflict(FsmemError):
    """An edit whose old text matches zero or several times."""


class ReadOnly(FsmemError):
    """A write attempted by an agent configured as read-only."""


class LockTimeout(FsmemError):
    """Another process holds the lock for longer than we are willing to wait."""


class ConsolidationRunning(LockTimeout):
    """Another `fsmem consolidate` holds the memory: this run changed nothing. Exit 75 (sysexits' EX_TEMPFAIL,
    "try again later"), its own code, so a scheduler can accept an overlap without accepting every error."""

    exit_code = 75


class PatternTimeout(FsmemError):
    """A grep pattern that ran past the configured time limit."""


class ConfigError(FsmemError):
    """fsmem.yaml is missing a required value or holds one of the wrong type."""


class ChangedOnDisk(FsmemError):
    """The file changed between our read and our write; nothing was overwritten."""


class MemoryToolError(FsmemError):
    """A `memory_20250818` command refused, with the reference backend's exact message for the model."""


class StorageError(FsmemError):
    """The file system refused an operation (permission denied, no space left, a name too long…)."""


class WorkerDied(FsmemError):
    """A worker process of a cold build ended (killed, out of memory) before sending a task's result."""


class MissingDependency(FsmemError):
    """An optional package a command needs (matplotlib for plots) is not installed."""


class SecretFound(FsmemError):
    """Text to be stored holds what looks like a secret, and fsmem.yaml's secrets.policy is 'refuse'."""


class HistoryOff(FsmemError):
    """A history command (log, show, diff, restore, revert, sync) on a memory that is not in a git work tree."""


class HistoryError(FsmemError):
    """git refused or failed (a revision that does not exist, a repository in a state fsmem cannot work in)."""


class SyncFailed(FsmemError):
    """`fsmem sync` could not finish (no network to the remote, a push refused too often); nothing is lost."""


class SyncRefused(SyncFailed):
    """What a remote sent crosses the trust boundary (`fsmem.history.trust`): nothing was merged or pushed."""


class ConfigHeld(SyncFailed):
    """A remote changes fsmem.yaml: shown and held, nothing merged or pushed, until `fsmem sync --accept-config`."""


def quoted(raw: str) -> str:
    """A user-given path as error messages quote it: escaped, and shortened when very long."""
    return repr(raw) if len(raw) <= 200 else repr(raw[:120]) + f"… ({len(raw)} characters)"


def os_error_message(exc: OSError, root: str | os.PathLike[str] | None = None, *, prefix: str = "") -> str:
    """One line for an operating-system error: the reason, and the file it concerns.

    A file inside `root` is named relative to it, after `prefix` (Claude's
    memory tool names them `/memories/...`): `no space left on device
    ('topics/billing.md')`.
    """
    where = ""
    if exc.filename is not None:
        name = os.fsdecode(exc.filename)
        base = os.fspath(root) if root is not None else None
        if base is not None and name.startswith(base.rstrip(os.sep) + os.sep):
            name = prefix + name[len(base.rstrip(os.sep)) + 1 :]
        where = f" ({quoted(name)})"
    return f"{(exc.strerror or str(exc)).lower()}{where}"


def translated(exc: BaseException, root: str | os.PathLike[str] | None = None) -> FsmemError | None:
    """The typed error that an exception from below the library stands for at a face, or None (a bug, which
    each face reports its own way). The same words at every face: an `OSError` is a `StorageError`
    (`os_error_message`), text that is not Unicode and input nested past Python's limit are `InvalidArgument`."""
    if isinstance(exc, FsmemError):
        return exc
    if isinstance(exc, OSError):
        return StorageError(os_error_message(exc, root))
    if isinstance(exc, UnicodeError):
        return InvalidArgument(f"text that is not valid Unicode ({getattr(exc, 'reason', exc)})")
    if isinstance(exc, RecursionError):
        return InvalidArgument("the input is nested too deeply to handle")
    return None


def guarded(
    call: Callable[[], T], root: str | os.PathLike[str] | Callable[[], str | os.PathLike[str] | None] | None = None
) -> T:
    """`call()`, letting only `FsmemError` out: what `translated` maps is raised as its typed error. `root` (or
    what it returns, asked only on a failure) is the memory whose files the message names relative to it."""
    try:
        return call()
    except FsmemError:
        raise
    except Exception as exc:
        mapped = translated(exc, root() if callable(root) else root)
        if mapped is None:
            raise
        raise mapped from (None if isinstance(exc, RecursionError) else exc)

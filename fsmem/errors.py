"""Typed errors raised by the library; the CLI maps each to one line and exit code 2.

Every message says what went wrong and, where there is one, what to do instead,
because the reader is often a model that can only act on the text.
"""


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

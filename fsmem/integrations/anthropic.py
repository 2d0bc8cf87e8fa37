"""fsmem as the backend of Claude's memory tool in the Anthropic SDK: change one import, keep every behaviour.

    from anthropic.tools import BetaLocalFilesystemMemoryTool     # before
    from fsmem.integrations.anthropic import FsmemMemoryTool       # after

`FsmemMemoryTool` and `AsyncFsmemMemoryTool` subclass the SDK's
`BetaAbstractMemoryTool` / `BetaAsyncAbstractMemoryTool`, so the SDK's tool
runner accepts them, and take the reference classes' constructor
(`base_path="./memory"`, with `.base_path` and `.memory_root`). The commands
run in `fsmem.memory_tool.MemoryTool`; its refusals reach the runner as the
SDK's `ToolError` with the reference's messages. This is the only fsmem module
that imports `anthropic` (install it with `pip install 'fsmem[anthropic]'`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

try:
    import anyio
    from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
    from anthropic.types.beta import (
        BetaCacheControlEphemeralParam,
        BetaMemoryTool20250818CreateCommand,
        BetaMemoryTool20250818DeleteCommand,
        BetaMemoryTool20250818InsertCommand,
        BetaMemoryTool20250818RenameCommand,
        BetaMemoryTool20250818StrReplaceCommand,
        BetaMemoryTool20250818ViewCommand,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "fsmem.integrations.anthropic needs the fsmem[anthropic] extra; install it with: pip install 'fsmem[anthropic]'"
    ) from exc

from fsmem.agents.memory_tool import MemoryTool
from fsmem.errors import MemoryToolError

if TYPE_CHECKING:
    from fsmem.memory import Memory

T = TypeVar("T")


def _as_tool_error(call: Callable[..., T], *args: Any) -> T:
    try:
        return call(*args)
    except MemoryToolError as exc:
        raise ToolError(str(exc)) from exc


class _Backed:
    """The constructor both drop-ins share: the reference classes' (`base_path`, `.base_path`, `.memory_root`,
    `cache_control`) plus fsmem's keyword arguments; the commands run in `self.backend`, a `MemoryTool`."""

    path_type: Callable[[str], Any] = Path
    create_root: bool | str = True  # the sync reference makes the folder at once, the async one on first use

    def __init__(
        self,
        base_path: str = "./memory",
        *,
        agent: str | None = None,
        max_tokens: int | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)  # type: ignore[call-arg]  # the SDK's base class, next in line
        self.base_path = self.path_type(base_path)
        self.memory_root = self.base_path / "memories"
        self.backend = MemoryTool(
            Path(base_path), agent=agent, max_tokens=max_tokens, state_dir=state_dir, create_root=self.create_root
        )


class FsmemMemoryTool(_Backed, BetaAbstractMemoryTool):
    """Drop-in for `BetaLocalFilesystemMemoryTool`: `/memories` is `base_path/memories`, created with mode 0o700.

    fsmem's optional keyword arguments: `agent` (its budget and read-only flag
    when the folder is an fsmem memory, and its name in the log), `max_tokens`
    (a cap on `view` answers: a longer one is cut after whole lines and names
    the next `view_range`), `state_dir` (the folder for fsmem's retrieval log
    and locks; without it nothing but the memories is written under
    `base_path`), `cache_control` (passed to the tool definition).
    `fsmem()` returns `fsmem.Memory` over the same folder.
    """

    def fsmem(self, *, init: bool = False) -> Memory:
        """`fsmem.Memory` over the memory folder (it must hold fsmem.yaml; `init=True` adds one)."""
        return self.backend.fsmem(init=init)

    def _validate_path(self, path: str) -> Path:
        """The resolved path `path` names, as the reference's method of the same name returns it."""
        return _as_tool_error(self.backend.validate_path, path)

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return _as_tool_error(self.backend.view, command.path, command.view_range)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return _as_tool_error(self.backend.create, command.path, command.file_text)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return _as_tool_error(self.backend.str_replace, command.path, command.old_str, command.new_str)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return _as_tool_error(self.backend.insert, command.path, command.insert_line, command.insert_text)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return _as_tool_error(self.backend.delete, command.path)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return _as_tool_error(self.backend.rename, command.old_path, command.new_path)

    def clear_all_memory(self) -> str:
        return _as_tool_error(self.backend.clear_all_memory)


class AsyncFsmemMemoryTool(_Backed, BetaAsyncAbstractMemoryTool):
    """Drop-in for `BetaAsyncLocalFilesystemMemoryTool`: the same commands, run in a worker thread.

    Like the reference, `.base_path` and `.memory_root` are `anyio.Path`s and
    the memory folder is created by the first command, not the constructor.
    Takes the same fsmem keyword arguments as `FsmemMemoryTool`.
    """

    path_type = anyio.Path
    create_root = "lazy"

    async def _run(self, call: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(_as_tool_error, call, *args)

    async def fsmem(self, *, init: bool = False) -> Memory:
        """`fsmem.Memory` over the memory folder (it must hold fsmem.yaml; `init=True` adds one)."""
        return await anyio.to_thread.run_sync(lambda: self.backend.fsmem(init=init))

    async def _ensure_memory_root(self) -> None:
        await anyio.to_thread.run_sync(self.backend.ensure_root)

    async def _validate_path(self, path: str) -> anyio.Path:
        return anyio.Path(await self._run(self.backend.validate_path, path))

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self._run(self.backend.view, command.path, command.view_range)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self._run(self.backend.create, command.path, command.file_text)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self._run(self.backend.str_replace, command.path, command.old_str, command.new_str)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self._run(self.backend.insert, command.path, command.insert_line, command.insert_text)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self._run(self.backend.delete, command.path)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self._run(self.backend.rename, command.old_path, command.new_path)

    async def clear_all_memory(self) -> str:
        return await self._run(self.backend.clear_all_memory)


__all__ = ["FsmemMemoryTool", "AsyncFsmemMemoryTool", "ToolError"]

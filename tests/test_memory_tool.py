"""fsmem.memory_tool: the memory_20250818 commands, their exact answers and errors, and what fsmem adds."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from fsmem import Memory
from fsmem.agents.memory_tool import NAMED_RANGES, MemoryTool, format_size, make_private_dirs
from fsmem.errors import MemoryToolError, RootNotFound

HEADER_DIR = "Here're the files and directories up to 2 levels deep in {}, excluding hidden items:"
EDITED = "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"


def content_of(path: str) -> str:
    return f"Here's the content of {path} with line numbers:\n"


@pytest.fixture
def tool(tmp_path: Path) -> MemoryTool:
    return MemoryTool(tmp_path / "base")


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones included) with its bytes."""
    return {
        Path(root, name).relative_to(folder).as_posix(): Path(root, name).read_bytes()
        for root, _, names in os.walk(folder)
        for name in names
    }


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- the memory folder ------------------------------------------------------------
@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077, 0o777])
def test_new_folders_are_0700_under_any_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        tool = MemoryTool(tmp_path / "nested" / "base")
        tool.create("/memories/a/b/c.txt", "x")
    finally:
        os.umask(old)
    for folder in (
        tmp_path / "nested",
        tmp_path / "nested" / "base",
        tool.memory_root,
        tool.memory_root / "a",
        tool.memory_root / "a" / "b",
    ):
        assert mode_of(folder) == 0o700, folder
    assert mode_of(tool.memory_root / "a" / "b" / "c.txt") == 0o600


def test_existing_folders_keep_their_mode(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir(mode=0o755)
    os.chmod(tmp_path / "base", 0o755)
    MemoryTool(tmp_path / "base")
    assert mode_of(tmp_path / "base") == 0o755
    assert mode_of(tmp_path / "base" / "memories") == 0o700


def test_lazy_root_is_made_by_the_first_command(tmp_path: Path) -> None:
    tool = MemoryTool(tmp_path / "base", create_root="lazy")
    assert not (tmp_path / "base").exists()
    viewed = tool.view("/memories")
    size = format_size((tmp_path / "base" / "memories").stat().st_size)  # a folder's is its filesystem's
    assert viewed == HEADER_DIR.format("/memories") + f"\n{size}\t/memories"
    assert mode_of(tmp_path / "base" / "memories") == 0o700


def test_attributes_match_the_reference(tmp_path: Path) -> None:
    tool = MemoryTool(tmp_path / "b")
    assert tool.base_path == tmp_path / "b"
    assert tool.memory_root == tmp_path / "b" / "memories"
    assert tool.max_tokens is None and tool.state_dir is None and tool.agent is None


def test_format_size() -> None:
    assert [format_size(n) for n in (0, 1, 1023, 1024, 1536, 4096, 1048576, 1572864, 5 * 1024**3, 3 * 1024**4)] == [
        "0B",
        "1B",
        "1023B",
        "1K",
        "1.5K",
        "4K",
        "1M",
        "1.5M",
        "5G",
        "3072G",
    ]


# -- create ---------------------------------------------------------------------
def test_create_writes_exact_bytes_and_nothing_else(tool: MemoryTool) -> None:
    assert (
        tool.create("/memories/notes.txt", "Hello, ☃\r\nline 2") == "File created successfully at: /memories/notes.txt"
    )
    assert tree(tool.base_path) == {"memories/notes.txt": "Hello, ☃\r\nline 2".encode()}
    assert mode_of(tool.memory_root / "notes.txt") == 0o600


def test_create_never_overwrites(tool: MemoryTool) -> None:
    tool.create("/memories/a.txt", "original")
    (tool.memory_root / "d").mkdir()
    for path in ("/memories/a.txt", "/memories/d", "/memories"):
        with pytest.raises(MemoryToolError, match=f"^File {path} already exists$"):
            tool.create(path, "new")
    assert (tool.memory_root / "a.txt").read_text() == "original"


def test_create_survives_short_writes(tool: MemoryTool, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    sizes: list[int] = []

    def short_write(fd: int, data: bytes) -> int:
        written = real_write(fd, bytes(data[:3]))
        sizes.append(written)
        return written

    monkeypatch.setattr(os, "write", short_write)
    tool.create("/memories/s.txt", "prefix-☃-suffix")
    assert (tool.memory_root / "s.txt").read_text(encoding="utf-8") == "prefix-☃-suffix"
    assert len(sizes) > 1


# -- view: files ------------------------------------------------------------------
def test_view_file_numbers_every_line(tool: MemoryTool) -> None:
    tool.create("/memories/f.txt", "alpha\nbeta\n")
    assert tool.view("/memories/f.txt") == content_of("/memories/f.txt") + "     1\talpha\n     2\tbeta\n     3\t"


def test_view_empty_file(tool: MemoryTool) -> None:
    tool.create("/memories/empty.txt", "")
    assert tool.view("/memories/empty.txt") == content_of("/memories/empty.txt") + "     1\t"


def test_view_keeps_carriage_returns(tool: MemoryTool) -> None:
    (tool.memory_root / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    assert (
        tool.view("/memories/crlf.txt") == content_of("/memories/crlf.txt") + "     1\tone\r\n     2\ttwo\r\n     3\t"
    )


@pytest.mark.parametrize(
    ("view_range", "shown"),
    [
        ([2, 4], [2, 3, 4]),
        ([2, -1], [2, 3, 4, 5]),
        ([0, 2], [1, 2]),
        ([4, 100], [4, 5]),
        ([1, -2], [1, 2, 3]),  # the reference slices: a negative end counts from the end
        ([9, 12], []),
        ([3], [1, 2, 3, 4, 5]),  # anything but two numbers is ignored, as by the reference
        (None, [1, 2, 3, 4, 5]),
    ],
)
def test_view_range(tool: MemoryTool, view_range: list[int] | None, shown: list[int]) -> None:
    tool.create("/memories/r.txt", "L1\nL2\nL3\nL4\nL5")
    expected = content_of("/memories/r.txt") + "\n".join(f"{n:>6}\tL{n}" for n in shown)
    assert tool.view("/memories/r.txt", view_range) == expected


def test_view_range_of_wrong_type_is_refused(tool: MemoryTool) -> None:
    tool.create("/memories/r.txt", "x")
    with pytest.raises(MemoryToolError, match=r"^Invalid `view_range` parameter: \['1', 2\]"):
        tool.view("/memories/r.txt", ["1", 2])


def test_view_refuses_non_utf8(tool: MemoryTool) -> None:
    (tool.memory_root / "bin.dat").write_bytes(b"\xff\xfe\x80 no")
    with pytest.raises(MemoryToolError, match=r"^The file /memories/bin.dat is not a valid UTF-8 text file\.$"):
        tool.view("/memories/bin.dat")


def test_view_refuses_more_than_999999_lines_without_a_cap(tool: MemoryTool) -> None:
    (tool.memory_root / "huge.txt").write_text("\n".join(["line"] * 1_000_000))
    with pytest.raises(
        MemoryToolError, match=r"^File /memories/huge.txt exceeds maximum line limit of 999,999 lines\.$"
    ):
        tool.view("/memories/huge.txt")


def test_view_missing_and_unsupported(tool: MemoryTool) -> None:
    with pytest.raises(
        MemoryToolError, match=r"^The path /memories/nope does not exist\. Please provide a valid path\.$"
    ):
        tool.view("/memories/nope")
    with pytest.raises(MemoryToolError, match="^The path /memories/nope/x does not exist"):
        tool.view("/memories/nope/x")
    os.mkfifo(tool.memory_root / "pipe")
    with pytest.raises(MemoryToolError, match="^Unsupported file type for /memories/pipe$"):
        tool.view("/memories/pipe")


# -- view: directories --------------------------------------------------------------
def test_view_directory_two_levels_deep_without_hidden_items(tool: MemoryTool, tmp_path: Path) -> None:
    root = tool.memory_root
    tool.create("/memories/b.txt", "12345")
    tool.create("/memories/a/one.txt", "1")
    tool.create("/memories/a/deep/two.txt", "22")
    tool.create("/memories/a/deep/deeper/three.txt", "333")
    tool.create("/memories/.hidden/x.txt", "x")
    tool.create("/memories/a/.secret", "x")
    (root / "empty.txt").write_bytes(b"")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.txt").write_text("secret")
    os.symlink(outside, root / "zlink")
    os.symlink(root / "b.txt", root / "alias.txt")
    size = lambda p: format_size(p.stat().st_size)  # noqa: E731
    expected = "\n".join(
        [
            HEADER_DIR.format("/memories"),
            f"{size(root)}\t/memories",
            f"{size(root / 'a')}\t/memories/a/",
            f"{size(root / 'a/deep')}\t/memories/a/deep/",
            "1B\t/memories/a/one.txt",
            "5B\t/memories/alias.txt",
            "5B\t/memories/b.txt",
            "0B\t/memories/empty.txt",
        ]
    )
    assert tool.view("/memories") == expected


def test_view_directory_keeps_the_path_as_given(tool: MemoryTool) -> None:
    tool.create("/memories/x.txt", "x")
    size = format_size(tool.memory_root.stat().st_size)
    assert tool.view("/memories/").splitlines()[1:] == [f"{size}\t/memories/", "1B\t/memories//x.txt"]


# -- str_replace -----------------------------------------------------------------
def test_str_replace_shows_two_lines_around_the_change(tool: MemoryTool) -> None:
    tool.create("/memories/s.txt", "1\n2\n3\n4\nold\n6\n7\n8")
    result = tool.str_replace("/memories/s.txt", "old", "new\nnewer")
    assert result == EDITED + "     3\t3\n     4\t4\n     5\tnew\n     6\tnewer\n     7\t6"
    assert (tool.memory_root / "s.txt").read_text() == "1\n2\n3\n4\nnew\nnewer\n6\n7\n8"


def test_str_replace_at_the_first_line(tool: MemoryTool) -> None:
    tool.create("/memories/s.txt", "old\nb")
    assert tool.str_replace("/memories/s.txt", "old", "") == EDITED + "     1\t\n     2\tb"


def test_str_replace_errors(tool: MemoryTool) -> None:
    tool.create("/memories/s.txt", "Hello\nMiddle\nHello")
    with pytest.raises(
        MemoryToolError,
        match=r"^No replacement was performed, old_str `Bye` did not appear verbatim in /memories/s\.txt\.$",
    ):
        tool.str_replace("/memories/s.txt", "Bye", "x")
    with pytest.raises(
        MemoryToolError,
        match=r"^No replacement was performed\. Multiple occurrences of old_str `Hello` in lines: 1, 3\. "
        r"Please ensure it is unique$",
    ):
        tool.str_replace("/memories/s.txt", "Hello", "Hi")
    with pytest.raises(
        MemoryToolError, match=r"^The path /memories/no\.txt does not exist\. Please provide a valid path\.$"
    ):
        tool.str_replace("/memories/no.txt", "a", "b")
    (tool.memory_root / "d").mkdir()
    with pytest.raises(MemoryToolError, match=r"^The path /memories/d is not a file\.$"):
        tool.str_replace("/memories/d", "a", "b")
    assert (tool.memory_root / "s.txt").read_text() == "Hello\nMiddle\nHello"


def test_str_replace_lists_at_most_a_hundred_lines_of_a_repeated_old_str(tool: MemoryTool) -> None:
    """An old_str found everywhere (empty, one letter, or one that overlaps itself) in a large file: the first
    hundred lines, then how many do not overlap (the reference looks for each, every line counted from the top:
    11 s and 1.4 MB for an empty one in a 200 KB file, minutes for a long one that overlaps itself)."""
    tool.create("/memories/many.txt", "x\n" * 20_000)
    first = ", ".join(str(line) for line in range(1, 101))
    with pytest.raises(MemoryToolError) as raised:
        tool.str_replace("/memories/many.txt", "x", "y")
    assert str(raised.value) == (
        f"No replacement was performed. Multiple occurrences of old_str `x` in lines: {first} and more; "
        "20,000 that do not overlap. Please ensure it is unique"
    )
    with pytest.raises(MemoryToolError, match=r"in lines: 1, 1, 2, 2, .* 50, 50 and more; 40,001 that do not"):
        tool.str_replace("/memories/many.txt", "", "y")  # before and after each x
    tool.create("/memories/one.txt", "a" * 400_000)
    with pytest.raises(MemoryToolError, match=r"in lines: (1, ){99}1 and more; 10 that do not overlap\. Please"):
        tool.str_replace("/memories/one.txt", "a" * 40_000, "b")  # found at each of 360,001 starts
    assert (tool.memory_root / "many.txt").read_text() == "x\n" * 20_000


def test_str_replace_repeats_a_long_old_str_by_its_start_and_length(tool: MemoryTool) -> None:
    """The reference repeats old_str whole in its errors: an agent's 100,000 characters came back as an answer of
    100 KB. Up to 200 characters it is repeated as the reference does."""
    tool.create("/memories/s.txt", "ab\nab\n")
    for old in ("z" * 100_000, "ab\n" + " " * 100_000):
        with pytest.raises(MemoryToolError) as raised:
            tool.str_replace("/memories/s.txt", old, "y")
        assert len(str(raised.value)) < 400 and f"({len(old):,} characters)" in str(raised.value)
    with pytest.raises(MemoryToolError, match=f"old_str `{'q' * 200}` did not appear verbatim"):
        tool.str_replace("/memories/s.txt", "q" * 200, "y")
    tool.create("/memories/long.txt", ("w" * 300 + "\n") * 2)
    with pytest.raises(MemoryToolError) as raised:
        tool.str_replace("/memories/long.txt", "w" * 300, "y")
    assert str(raised.value) == (
        f"No replacement was performed. Multiple occurrences of old_str `{'w' * 100}… (300 characters)` in lines: "
        "1, 2. Please ensure it is unique"
    )


def test_str_replace_reports_overlapping_matches_like_the_reference(tool: MemoryTool) -> None:
    tool.create("/memories/o.txt", "aaaa\naa")
    with pytest.raises(MemoryToolError, match="in lines: 1, 1, 1, 2. Please"):
        tool.str_replace("/memories/o.txt", "aa", "b")


def test_str_replace_keeps_crlf_and_the_file_mode(tool: MemoryTool) -> None:
    path = tool.memory_root / "c.txt"
    path.write_bytes(b"l1\r\nl2\r\n")
    os.chmod(path, 0o644)
    tool.str_replace("/memories/c.txt", "l2", "L2")
    assert path.read_bytes() == b"l1\r\nL2\r\n"
    assert mode_of(path) == 0o644


# -- insert -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("before", "line", "text", "after"),
    [
        ("L1\nL2", 1, "new", "L1\nnew\nL2\n"),
        ("L1\nL2", 0, "new", "new\nL1\nL2\n"),
        ("L1\nL2\n", 2, "new\n\n", "L1\nL2\nnew\n"),
        ("", 0, "only", "only\n"),
        ("l1\r\nl2\r\n", 1, "mid", "l1\r\nmid\nl2\r\n"),
    ],
)
def test_insert(tool: MemoryTool, before: str, line: int, text: str, after: str) -> None:
    (tool.memory_root / "i.txt").write_bytes(before.encode())
    assert tool.insert("/memories/i.txt", line, text) == "The file /memories/i.txt has been edited."
    assert (tool.memory_root / "i.txt").read_bytes() == after.encode()


def test_insert_errors(tool: MemoryTool) -> None:
    tool.create("/memories/i.txt", "L1\nL2")
    for line in (-1, 3, "1"):
        with pytest.raises(
            MemoryToolError,
            match=rf"^Invalid `insert_line` parameter: {line}\. It should be within the range \[0, 2\]\.$",
        ):
            tool.insert("/memories/i.txt", line, "x")  # type: ignore[arg-type]
    with pytest.raises(
        MemoryToolError, match=r"^The path /memories/no\.txt does not exist\. Please provide a valid path\.$"
    ):
        tool.insert("/memories/no.txt", 0, "x")
    with pytest.raises(MemoryToolError, match=r"^The path /memories is not a file\.$"):
        tool.insert("/memories", 0, "x")
    assert (tool.memory_root / "i.txt").read_text() == "L1\nL2"


# -- delete and rename -------------------------------------------------------------
def test_delete_file_and_directory(tool: MemoryTool) -> None:
    tool.create("/memories/f.txt", "x")
    tool.create("/memories/d/e/f.txt", "x")
    assert tool.delete("/memories/f.txt") == "Successfully deleted /memories/f.txt"
    assert tool.delete("/memories/d") == "Successfully deleted /memories/d"
    assert list(tool.memory_root.iterdir()) == []


def test_delete_errors(tool: MemoryTool) -> None:
    with pytest.raises(MemoryToolError, match="^The path /memories/no.txt does not exist$"):
        tool.delete("/memories/no.txt")
    for path in ("/memories", "/memories/", "/memories/a/.."):
        with pytest.raises(MemoryToolError, match="^Cannot delete the /memories directory itself$"):
            tool.delete(path)
    assert tool.memory_root.is_dir()


def test_rename_moves_and_makes_private_parents(tool: MemoryTool) -> None:
    tool.create("/memories/a.txt", "content")
    assert (
        tool.rename("/memories/a.txt", "/memories/x/y/b.txt")
        == "Successfully renamed /memories/a.txt to /memories/x/y/b.txt"
    )
    assert tree(tool.memory_root) == {"x/y/b.txt": b"content"}
    assert mode_of(tool.memory_root / "x") == mode_of(tool.memory_root / "x" / "y") == 0o700


def test_rename_errors_change_nothing(tool: MemoryTool) -> None:
    tool.create("/memories/a.txt", "A")
    tool.create("/memories/b.txt", "B")
    with pytest.raises(MemoryToolError, match="^The destination /memories/b.txt already exists$"):
        tool.rename("/memories/a.txt", "/memories/b.txt")
    with pytest.raises(MemoryToolError, match="^The path /memories/none.txt does not exist$"):
        tool.rename("/memories/none.txt", "/memories/new/dir/c.txt")
    with pytest.raises(MemoryToolError, match="^Cannot rename the /memories directory itself$"):
        tool.rename("/memories", "/memories/elsewhere")
    tool.create("/memories/d/x.txt", "x")
    # the reference lets the OSError out after making the destination's folders; fsmem refuses it first
    with pytest.raises(
        MemoryToolError, match=r"^Cannot rename /memories/d into itself: /memories/d/in/side lies inside it$"
    ):
        tool.rename("/memories/d", "/memories/d/in/side")
    assert tree(tool.memory_root) == {"a.txt": b"A", "b.txt": b"B", "d/x.txt": b"x"}
    assert not (tool.memory_root / "d" / "in").exists()


def test_clear_all_memory_keeps_the_folder_and_fsmem_state(tool: MemoryTool) -> None:
    tool.create("/memories/a/b.txt", "x")
    tool.create("/memories/c.txt", "x")
    (tool.memory_root / ".fsmem").mkdir()
    assert tool.clear_all_memory() == "All memory cleared"
    assert sorted(p.name for p in tool.memory_root.iterdir()) == [".fsmem"]


# -- paths ---------------------------------------------------------------------------
def test_paths_must_start_with_memories(tool: MemoryTool) -> None:
    for path in ("/invalid/x.txt", "memories/x.txt", "", "/Memories/x"):
        with pytest.raises(MemoryToolError, match=f"^Path must start with /memories, got: {path}$"):
            tool.view(path)


def test_dotdot_escape_is_refused_and_nothing_is_written(tool: MemoryTool) -> None:
    for path in ("/memories/../../../etc/passwd", "/memories/../x.txt", "/memories/a/../../x.txt"):
        with pytest.raises(MemoryToolError, match=rf"^Path {path} would escape /memories directory$"):
            tool.create(path, "x")
    assert tree(tool.base_path) == {}
    # like the reference, `..` that stays inside is allowed
    tool.create("/memories/../memories/ok.txt", "ok")
    assert (tool.memory_root / "ok.txt").read_text() == "ok"


def test_symlinks_out_of_the_root_are_refused(tool: MemoryTool, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside, tool.memory_root / "link")
    os.symlink(outside / "secret.txt", tool.memory_root / "file-link")
    attempts = [
        lambda: tool.view("/memories/link/secret.txt"),
        lambda: tool.view("/memories/file-link"),
        lambda: tool.create("/memories/link/new.txt", "x"),
        lambda: tool.create("/memories/link/deep/new.txt", "x"),
        lambda: tool.str_replace("/memories/file-link", "secret", "gone"),
        lambda: tool.insert("/memories/file-link", 0, "x"),
        lambda: tool.delete("/memories/link"),
        lambda: tool.rename("/memories/file-link", "/memories/moved"),
    ]
    for attempt in attempts:
        with pytest.raises(MemoryToolError, match=r"^Path /memories/\S+ would escape /memories directory$"):
            attempt()
    assert tree(outside) == {"secret.txt": b"secret"}


# each command, the path whose folder `d` is swapped for a link out, and the call after which it is swapped:
# the last check (`validate_path`), or the read an edit makes before it writes
RACES = [
    ("view", ("/memories/d/a.md",), "validate_path"),
    ("view", ("/memories/d",), "validate_path"),
    ("view", ("/memories/d/sub",), "validate_path"),
    ("create", ("/memories/d/new.md", "- fact: new\n"), "validate_path"),
    ("create", ("/memories/d/deeper/new.md", "- fact: new\n"), "validate_path"),
    ("str_replace", ("/memories/d/a.md", "fact", "claim"), "validate_path"),
    ("str_replace", ("/memories/d/a.md", "fact", "claim"), "_read_text"),
    ("insert", ("/memories/d/a.md", 0, "- fact: first"), "validate_path"),
    ("insert", ("/memories/d/a.md", 0, "- fact: first"), "_read_text"),
    ("delete", ("/memories/d/a.md",), "validate_path"),
    ("delete", ("/memories/d/sub",), "validate_path"),
    ("rename", ("/memories/d/a.md", "/memories/e/b.md"), "validate_path"),
    ("rename", ("/memories/e/c.md", "/memories/d/b.md"), "validate_path"),
    ("rename", ("/memories/e/c.md", "/memories/d/deeper/b.md"), "validate_path"),
]


def tool_with_folder_d(tmp_path: Path, over: str) -> tuple[MemoryTool, Path]:
    """The tool over a plain folder or an fsmem memory, and the folder, which holds d/a.md and d/sub/s.md."""
    if over == "fsmem memory":
        root = Memory.init(tmp_path / "base" / "memories").root
        tool = MemoryTool.over(Memory(root))
    else:
        tool = MemoryTool(tmp_path / "base")
        root = tool.memory_root
    (root / "d" / "sub").mkdir(parents=True)
    (root / "d" / "a.md").write_text("- fact: a\n")
    (root / "d" / "sub" / "s.md").write_text("- fact: s\n")
    return tool, root


@pytest.fixture(params=["dir_fd", "lstat"])
def walk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a change walks below the root: folder descriptors (POSIX), and lstat by path (no dir_fd)."""
    from fsmem.store import beneath

    monkeypatch.setattr(beneath, "AT", request.param == "dir_fd")
    return request.param


@pytest.mark.parametrize("over", ["plain folder", "fsmem memory"])
@pytest.mark.parametrize(("command", "arguments", "hook"), RACES)
def test_a_folder_swapped_for_a_link_after_the_check_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walk: str, over: str, command: str, arguments: tuple, hook: str
) -> None:
    """The check resolves every link, then the command acts: a folder on the way swapped for a link out in
    between (another process, a sync) is met by the change itself, which walks below the real root through no
    link. Nothing outside changes and the model reads why; the swapped-out folder keeps its bytes."""
    tool, root = tool_with_folder_d(tmp_path, over)
    (root / "e").mkdir()
    (root / "e" / "c.md").write_text("- fact: c\n")
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "a.md").write_text("- outside: a\n")
    (outside / "sub" / "s.md").write_text("- outside: s\n")
    before, kept = tree(outside), tree(root / "d")
    checks = 2 if command == "rename" else 1
    calls = []
    original = getattr(MemoryTool, hook)

    def then_swap(self: MemoryTool, *args: object, **kwargs: object) -> object:
        answer = original(self, *args, **kwargs)
        calls.append(hook)
        if len(calls) == checks:
            (root / "d").rename(root / "d-moved")
            (root / "d").symlink_to(outside)
        return answer

    monkeypatch.setattr(MemoryTool, hook, then_swap)
    with pytest.raises(MemoryToolError, match=r" went through a symbolic link that appeared after it was checked; "):
        getattr(tool, command)(*arguments)
    assert len(calls) >= checks  # the swap was made
    assert tree(outside) == before
    assert sorted(os.listdir(outside)) == ["a.md", "sub"]
    assert tree(root / "d-moved") == kept
    assert not (root / "e" / "b.md").exists()


@pytest.mark.parametrize("over", ["plain folder", "fsmem memory"])
def test_a_folder_swapped_for_a_link_while_it_is_listed_lists_nothing_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, over: str
) -> None:
    """`view` of a folder lists the folder it opened, through its descriptor: `d` swapped for a link out just
    before its names are read, and `d/sub` just before it is entered, show none of the names outside (the
    folder opened is listed, under its new name `d-moved`; the subfolder swapped is not entered)."""
    from fsmem.store import beneath

    tool, root = tool_with_folder_d(tmp_path, over)
    outside = tmp_path / "outside"
    (outside / "leak").mkdir(parents=True)
    (outside / "leak.md").write_text("- outside\n")
    (outside / "leak" / "deep.md").write_text("- outside\n")
    swapped: list[str] = []
    names, child = beneath.Folder.names, beneath.Folder.child

    def swap(path: Path) -> None:
        path.rename(path.with_name(path.name + "-moved"))
        path.symlink_to(outside)
        swapped.append(path.relative_to(root).as_posix())

    def names_then(self: beneath.Folder) -> list[str]:
        if not swapped:
            swap(root / "d")
        return names(self)

    def child_then(self: beneath.Folder, name: str) -> beneath.Folder:
        if name == "sub" and swapped == ["d"]:
            swap(root / "d-moved" / "sub")
        return child(self, name)

    monkeypatch.setattr(beneath.Folder, "names", names_then)
    monkeypatch.setattr(beneath.Folder, "child", child_then)
    answer = tool.view("/memories/d")
    assert swapped == ["d", "d-moved/sub"]  # both swaps were made, between the check and the listing
    sub = format_size((root / "d-moved" / "sub-moved").stat().st_size)
    assert answer.splitlines()[2:] == ["10B\t/memories/d/a.md", f"{sub}\t/memories/d/sub/"]
    assert "leak" not in answer and "deep.md" not in answer


def test_validate_path_returns_the_resolved_path(tool: MemoryTool) -> None:
    (tool.memory_root / "real").mkdir()
    os.symlink(tool.memory_root / "real", tool.memory_root / "alias")
    resolved = tool.validate_path("/memories/alias/f.txt")
    assert resolved == Path(os.path.realpath(tool.memory_root)) / "real" / "f.txt"


def test_fsmem_state_folder_and_nul_bytes_are_refused(tool: MemoryTool) -> None:
    with pytest.raises(MemoryToolError, match=r"^Path /memories/.fsmem/x is inside /memories/.fsmem/"):
        tool.create("/memories/.fsmem/x", "x")
    with pytest.raises(MemoryToolError, match="contains a NUL byte"):
        tool.view("/memories/a\x00b")
    assert tree(tool.base_path) == {}


# -- execute: the dispatcher's entry point --------------------------------------------
def test_execute_dispatches_every_command(tool: MemoryTool) -> None:
    calls = [
        (
            {"command": "create", "path": "/memories/n.txt", "file_text": "a\nb"},
            "File created successfully at: /memories/n.txt",
        ),
        (
            {"command": "view", "path": "/memories/n.txt", "view_range": [2, 2]},
            content_of("/memories/n.txt") + "     2\tb",
        ),
        (
            {"command": "str_replace", "path": "/memories/n.txt", "old_str": "b", "new_str": "c"},
            EDITED + "     1\ta\n     2\tc",
        ),
        (
            {"command": "insert", "path": "/memories/n.txt", "insert_line": 0, "insert_text": "z"},
            "The file /memories/n.txt has been edited.",
        ),
        (
            {"command": "rename", "old_path": "/memories/n.txt", "new_path": "/memories/m.txt"},
            "Successfully renamed /memories/n.txt to /memories/m.txt",
        ),
        ({"command": "delete", "path": "/memories/m.txt"}, "Successfully deleted /memories/m.txt"),
    ]
    for arguments, expected in calls:
        assert tool.execute(arguments) == expected


def test_execute_refuses_bad_calls(tool: MemoryTool) -> None:
    with pytest.raises(MemoryToolError, match="^Unknown command: grep. Use one of: view, create"):
        tool.execute({"command": "grep", "path": "/memories"})
    with pytest.raises(MemoryToolError, match="^Missing required parameter `file_text` for command `create`$"):
        tool.execute({"command": "create", "path": "/memories/x"})
    with pytest.raises(MemoryToolError, match="^Invalid `file_text` parameter: it should be a string, got int$"):
        tool.execute({"command": "create", "path": "/memories/x", "file_text": 3})
    with pytest.raises(MemoryToolError, match="^Path must be a string"):
        tool.execute({"command": "view", "path": None})
    assert tree(tool.base_path) == {}


# -- fsmem additions: the token cap ---------------------------------------------------
def test_cap_leaves_normal_files_exactly_as_the_reference(tmp_path: Path) -> None:
    plain, capped = MemoryTool(tmp_path / "a"), MemoryTool(tmp_path / "a", max_tokens=200)
    plain.create("/memories/f.md", "# Title\n\n- fact: one\n- fact: two\n")
    assert capped.view("/memories/f.md") == plain.view("/memories/f.md")
    assert capped.view("/memories") == plain.view("/memories")


def test_cap_cuts_a_huge_file_and_names_the_next_range(tmp_path: Path) -> None:
    tool = MemoryTool(tmp_path / "a", max_tokens=300)
    lines = [f"line {n} of the log, with a few words of text" for n in range(1, 5001)]
    tool.create("/memories/log.txt", "\n".join(lines))
    first = tool.view("/memories/log.txt")
    assert tool.tokens.count(first) <= 300
    body, trailer = first.rsplit("\n", 1)
    shown = body.splitlines()[1:]
    last = len(shown)
    assert shown[0] == "     1\tline 1 of the log, with a few words of text" and shown[-1].startswith(f"{last:>6}\t")
    assert (
        trailer == f"[lines 1-{last} of 5000 shown: this view stops at 300 tokens; next: view_range [{last + 1}, 5000]]"
    )
    second = tool.view("/memories/log.txt", [last + 1, 5000])
    assert second.splitlines()[1] == f"{last + 1:>6}\tline {last + 1} of the log, with a few words of text"
    tail = tool.view("/memories/log.txt", [4999, -1])
    assert tail == content_of("/memories/log.txt") + f"  4999\t{lines[4998]}\n  5000\t{lines[4999]}"


def test_the_next_range_of_a_cut_view_is_refused_once_after_someone_else_changed_the_file(tmp_path: Path) -> None:
    """As `read` refuses a continuation whose `expected_version` the file is no longer at, the view_range a cut
    view named is refused, once, when another hand changed the file since: its lines may have moved, and the
    next page of the new file would read as the rest of the old one. The view has no version argument (the
    schema is Anthropic's), so the tool remembers the version each named range belongs to; the file's own
    edits through the tool, and the range asked again, are shown."""
    tool = MemoryTool(tmp_path / "a", max_tokens=120)
    lines = [f"line {n} of the log, with a few words of text" for n in range(1, 201)]
    tool.create("/memories/log.txt", "\n".join(lines))
    following = [int(n) for n in tool.view("/memories/log.txt").rsplit("view_range [", 1)[1].rstrip("]").split(", ")]
    (tool.memory_root / "log.txt").write_text("\n".join(["# moved", "", *lines]))  # someone else: lines move by two
    with pytest.raises(MemoryToolError, match=r"changed since the view that named view_range \[\d+, 200\]: its lines"):
        tool.view("/memories/log.txt", following)
    again = tool.view("/memories/log.txt", following)  # asked again: no remembered version, shown as it is now
    assert again.splitlines()[1] == f"{following[0]:>6}\t{lines[following[0] - 3]}"
    following = [int(n) for n in again.rsplit("view_range [", 1)[1].rstrip("]").split(", ")]
    tool.str_replace("/memories/log.txt", "# moved", "# moved by the model")  # its own edit: it knows
    assert tool.view("/memories/log.txt", following).splitlines()[1].startswith(f"{following[0]:>6}\t")
    plain = MemoryTool(tmp_path / "a")  # no cap: no range named, none remembered
    plain.view("/memories/log.txt")
    (tool.memory_root / "log.txt").write_text("\n".join(lines))
    assert plain.view("/memories/log.txt", [3, 4]).splitlines()[1] == f"     3\t{lines[2]}"


def test_the_ranges_a_long_lived_tool_remembers_are_bounded_the_oldest_forgotten(tmp_path: Path) -> None:
    """A model that never follows its cut views' ranges must not grow the tool without end: the tool remembers
    the latest NAMED_RANGES, so a range named long ago is shown as the file is now, a recent one still refused."""
    tool = MemoryTool(tmp_path / "a", max_tokens=120)
    lines = [f"line {n} of the log, with a few words of text" for n in range(1, 201)]
    for n in range(NAMED_RANGES + 2):
        tool.create(f"/memories/log{n}.txt", "\n".join(lines))
        tool.view(f"/memories/log{n}.txt")
    assert len(tool._named_ranges) == NAMED_RANGES
    first = tool.view("/memories/log0.txt").rsplit("view_range [", 1)[1].rstrip("]").split(", ")
    following = [int(n) for n in first]
    for n in (0, 1, NAMED_RANGES + 1):
        (tool.memory_root / f"log{n}.txt").write_text("\n".join(["# moved", "", *lines]))
    assert tool.view("/memories/log1.txt", following).splitlines()[1] == f"{following[0]:>6}\t{lines[following[0] - 3]}"
    for n in (0, NAMED_RANGES + 1):  # named again just now, and the latest: refused once
        with pytest.raises(MemoryToolError, match="changed since the view"):
            tool.view(f"/memories/log{n}.txt", following)


def test_cap_lifts_the_line_limit_and_cuts_an_endless_line(tmp_path: Path) -> None:
    tool = MemoryTool(tmp_path / "a", max_tokens=100)
    (tool.memory_root / "huge.txt").write_text("\n".join(["line"] * 1_000_000))
    huge = tool.view("/memories/huge.txt")
    last = int(huge.splitlines()[-2].split("\t")[0])
    assert huge.endswith(
        f"[lines 1-{last} of 1000000 shown: this view stops at 100 tokens; next: view_range [{last + 1}, 1000000]]"
    )
    assert 5 <= last < 100 and tool.tokens.count(huge) <= 100
    (tool.memory_root / "wide.txt").write_text("word " * 5000 + "\nsecond")
    answer = tool.view("/memories/wide.txt")
    assert tool.tokens.count(answer) <= 100
    assert answer.endswith("(line 1 is longer than that and is shown cut); next: view_range [2, 2]]")


def test_cap_cuts_a_huge_directory_listing(tmp_path: Path) -> None:
    tool = MemoryTool(tmp_path / "a", max_tokens=150)
    for n in range(200):
        (tool.memory_root / f"note-{n:03}.txt").write_text("x")
    answer = tool.view("/memories")
    assert tool.tokens.count(answer) <= 150
    assert answer.splitlines()[2] == "1B\t/memories/note-000.txt"
    shown = len(answer.splitlines()) - 3  # the header, the folder and the trailer
    assert answer.splitlines()[-1] == (
        f"[entries 1-{shown} of 200 shown: this view stops at 150 tokens; next: view_range [{shown + 1}, 200]]"
    )
    assert tool.view("/memories", [shown + 1, 200]).splitlines()[2] == f"1B\t/memories/note-{shown:03}.txt"


# -- fsmem additions: logs, locks and nothing else under base_path ---------------------
def test_state_goes_only_to_the_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    tool = MemoryTool(tmp_path / "base", agent="claude", state_dir=state)
    tool.create("/memories/a.txt", "one\ntwo")
    tool.view("/memories/a.txt", [2, 2])
    tool.view("/memories")
    with pytest.raises(MemoryToolError):
        tool.view("/memories/missing.txt")
    tool.str_replace("/memories/a.txt", "two", "three")
    assert tree(tmp_path / "base") == {"memories/a.txt": b"one\nthree"}
    assert (state / "locks" / "write.lock").exists()
    records = [json.loads(line) for line in (state / "logs" / "retrieval.jsonl").read_text().splitlines()]
    assert [r["tool"] for r in records] == [
        "memory.create",
        "memory.view",
        "memory.view",
        "memory.view",
        "memory.str_replace",
    ]
    view = records[1]
    assert {k: view[k] for k in ("agent", "arguments", "paths", "rows", "truncated", "empty", "lines")} == {
        "agent": "claude",
        "arguments": {"path": "/memories/a.txt", "view_range": [2, 2]},
        "paths": ["a.txt"],
        "rows": 1,
        "truncated": False,
        "empty": False,
        "lines": [2, 2],
    }
    assert view["tokens"] == tool.tokens.count(content_of("/memories/a.txt") + "     2\ttwo")
    assert isinstance(view["latency_ms"], float) and "time" in view
    assert records[2]["paths"] == ["a.txt"] and records[2]["rows"] == 1
    assert records[3]["empty"] is True and records[3]["error"].startswith(
        "The path /memories/missing.txt does not exist"
    )


def test_logged_arguments_are_shortened(tmp_path: Path) -> None:
    tool = MemoryTool(tmp_path / "base", state_dir=tmp_path / "state")
    tool.create("/memories/big.txt", "x" * 5000)
    record = json.loads((tmp_path / "state" / "logs" / "retrieval.jsonl").read_text())
    assert record["arguments"]["file_text"] == "x" * 200 + "… (5000 chars)"


# -- fsmem additions: agents and fsmem over the same folder ----------------------------
@pytest.fixture
def fsmem_memory(tmp_path: Path) -> Path:
    Memory.init(tmp_path / "base" / "memories")
    return tmp_path / "base"


def test_read_only_agent_cannot_write(fsmem_memory: Path) -> None:
    before = tree(fsmem_memory)
    tool = MemoryTool(fsmem_memory, agent="reviewer")
    assert tool.budget is not None and tool.budget.read_only and tool.max_tokens == 1000
    with pytest.raises(
        MemoryToolError,
        match=r"^The memory is read-only for agent 'reviewer' \(fsmem.yaml\); create was not performed\.$",
    ):
        tool.create("/memories/x.md", "x")
    with pytest.raises(MemoryToolError, match="read-only"):
        tool.delete("/memories/README.md")
    assert tool.view("/memories/README.md").startswith(content_of("/memories/README.md"))
    assert tree(fsmem_memory) == before


def test_agent_budget_caps_view_and_a_smaller_max_tokens_wins(fsmem_memory: Path) -> None:
    assert MemoryTool(fsmem_memory, agent="researcher").max_tokens == 4000
    assert MemoryTool(fsmem_memory, agent="researcher", max_tokens=500).max_tokens == 500
    assert MemoryTool(fsmem_memory).max_tokens is None  # no agent: the reference's behaviour


def test_fsmem_accessor(tmp_path: Path) -> None:
    tool = MemoryTool(tmp_path / "base")
    tool.create("/memories/topics/billing.md", "---\ntitle: Billing\n---\n- proration: daily\n")
    assert not tool.is_fsmem
    with pytest.raises(RootNotFound, match=r"is not an fsmem memory \(no fsmem.yaml\); call fsmem\(init=True\)"):
        tool.fsmem()
    assert tree(tool.base_path) == {"memories/topics/billing.md": b"---\ntitle: Billing\n---\n- proration: daily\n"}
    memory = tool.fsmem(init=True)
    assert tool.is_fsmem and memory.root == tool.memory_root.resolve()
    assert [m.path for m in memory.grep("proration").matches] == ["topics/billing.md"]
    assert tool.fsmem() is memory


def test_memory_method_maps_memories_onto_the_root(fsmem_memory: Path) -> None:
    memory = Memory(fsmem_memory / "memories", agent="researcher")
    tool = MemoryTool.over(memory)
    assert tool.memory_root == memory.root and tool.max_tokens == 4000
    assert tool.create("/memories/topics/x.md", "- fact: x\n") == "File created successfully at: /memories/topics/x.md"
    assert "/memories/topics/x.md" in tool.view("/memories")
    assert ".fsmem" not in tool.view("/memories")
    with pytest.raises(MemoryToolError, match="is inside /memories/.fsmem/"):
        tool.view("/memories/.fsmem/logs/retrieval.jsonl")
    records = (memory.root / ".fsmem" / "logs" / "retrieval.jsonl").read_text().splitlines()
    assert [json.loads(r)["tool"] for r in records] == ["memory.create", "memory.view", "memory.view", "memory.view"]
    assert {json.loads(r)["agent"] for r in records} == {"researcher"}
    assert MemoryTool.over(memory, max_tokens=50).max_tokens == 50


def test_make_private_dirs_leaves_existing_folders(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    make_private_dirs(tmp_path / "x" / "y")
    assert mode_of(tmp_path) == 0o755 and mode_of(tmp_path / "x") == mode_of(tmp_path / "x" / "y") == 0o700
    shutil.rmtree(tmp_path / "x")


def test_making_the_folder_an_fsmem_memory_applies_the_agent_budget(tmp_path: Path) -> None:
    tool = MemoryTool(tmp_path / "base", agent="reviewer", max_tokens=5000)
    assert tool.budget is None and tool.max_tokens == 5000
    tool.create("/memories/a.txt", "x")
    tool.fsmem(init=True)
    assert tool.max_tokens == 1000
    with pytest.raises(MemoryToolError, match="read-only for agent 'reviewer'"):
        tool.create("/memories/b.txt", "x")
    assert sorted(tree(tool.memory_root)) == ["a.txt", "fsmem.yaml"]


# -- over an fsmem memory: the containment rule ------------------------------------------------
def test_over_a_memory_only_memory_files_are_shown_and_reached(fsmem_memory: Path) -> None:
    root = fsmem_memory / "memories"
    (root / "notes.txt").write_text("private\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("x\n")
    (root / "topics").mkdir()
    (root / "topics" / "a.md").write_text("- fact: a\n")
    os.symlink(root / "notes.txt", root / "topics" / "notes.md")
    tool = MemoryTool.over(Memory(root))
    first = tool.view("/memories")  # it makes fsmem's state folder: the folders' sizes below are those after it
    shown = tool.view("/memories")
    assert [line.split("\t")[-1] for line in first.splitlines()] == [
        line.split("\t")[-1] for line in shown.splitlines()
    ]
    assert shown == "\n".join(
        [
            HEADER_DIR.format("/memories"),
            f"{format_size(root.stat().st_size)}\t/memories",
            f"{format_size((root / 'README.md').stat().st_size)}\t/memories/README.md",
            f"{format_size((root / 'profile').stat().st_size)}\t/memories/profile/",
            f"{format_size((root / 'profile' / 'identity.md').stat().st_size)}\t/memories/profile/identity.md",
            f"{format_size((root / 'topics').stat().st_size)}\t/memories/topics/",
            "10B\t/memories/topics/a.md",
        ]
    )
    for path in ("/memories/notes.txt", "/memories/topics/notes.md", "/memories/fsmem.yaml"):
        with pytest.raises(MemoryToolError, match=r"this memory tool reaches only memory files$"):
            tool.view(path)
    with pytest.raises(MemoryToolError, match="^Cannot delete the /memories directory itself$"):
        tool.delete("/memories")
    (root / "topics" / ".draft.md").write_text("x\n")
    with pytest.raises(MemoryToolError, match=r"holds \.draft\.md, which is not a memory file"):
        tool.delete("/memories/topics")
    assert (root / "topics" / "a.md").exists()


def test_clear_all_over_a_memory_removes_only_memory_files(fsmem_memory: Path) -> None:
    root = fsmem_memory / "memories"
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("x\n")
    (root / "notes.txt").write_text("private\n")
    (root / "topics").mkdir()
    (root / "topics" / "a.md").write_text("- fact: a\n")
    MemoryTool.over(Memory(root)).clear_all_memory()
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if ".fsmem" not in p.parts) == [
        ".git",
        ".git/config",
        "fsmem.yaml",
        "notes.txt",
    ]


def test_clear_all_with_history_commits_the_memory_files_it_removed(tmp_path: Path) -> None:
    """Over a memory with history: one commit removes exactly the memory files (a link in memory to one goes as
    itself), their bytes as they were in the commit before; the rest stays, as do the files and the folders
    that hold something other than memory files."""
    root = Memory.init(tmp_path / "memories", git=True).root
    (root / "topics" / "deep").mkdir(parents=True)
    (root / "topics" / "a.md").write_text("- fact: a\n")
    (root / "topics" / "deep" / "b.md").write_text("- fact: b\n")
    (root / "topics" / "alias.md").symlink_to("a.md")
    (root / "keep").mkdir()
    (root / "keep" / "c.md").write_text("- fact: c\n")
    (root / "keep" / "notes.txt").write_text("private\n")
    memory = Memory(root)
    git = lambda *args: subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True).stdout  # noqa: E731
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "before")
    memory_files = sorted(git("ls-files", "*.md").split())
    assert MemoryTool.over(memory).clear_all_memory() == "All memory cleared"
    assert sorted(git("diff", "--name-only", "HEAD~1", "HEAD").split()) == memory_files
    assert git("show", "HEAD~1:topics/deep/b.md") == "- fact: b\n"
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if not {".git", ".fsmem"} & set(p.parts)) == [
        ".gitattributes",
        ".gitignore",
        "fsmem.yaml",
        "keep",
        "keep/notes.txt",
    ]
    assert git("status", "--porcelain") == ""


def folder_links(root: Path, outside: Path) -> None:
    """A memory's folder `topics/deep` (one memory file); links to it (one named as a memory file), to a folder
    `outside`, back to the root (a cycle) and to each other (a loop); a file that is no memory file."""
    (root / "topics" / "deep").mkdir(parents=True)
    (root / "topics" / "a.md").write_text("- fact: a\n")
    (root / "topics" / "deep" / "b.md").write_text("- fact: b\n")
    (root / "alias").symlink_to("topics/deep")
    (root / "topics" / "deep.md").symlink_to("deep")  # named as a memory file, a folder all the same
    (root / "out").symlink_to(outside)
    (root / "topics" / "up").symlink_to("..")
    (root / "topics" / "spin").symlink_to("spun")
    (root / "topics" / "spun").symlink_to("spin")
    (root / "keep.txt").write_text("private\n")
    outside.mkdir()
    (outside / "o.md").write_text("- fact: outside\n")
    (outside / "inner").mkdir()
    (outside / "inner" / "p.md").write_text("- fact: outside too\n")


LINKS = {"alias", "out", "topics/deep.md", "topics/up", "topics/spin", "topics/spun"}  # what folder_links made


@pytest.mark.parametrize("history", [False, True])
def test_clear_all_removes_links_to_folders_as_links_and_follows_none(tmp_path: Path, history: bool) -> None:
    """Links where folders would be (to one inside, to one outside, a cycle, a loop) go as links, never
    followed; each real file goes once, through its real path; nothing outside the memory is touched."""
    root = Memory.init(tmp_path / "memories", git=history).root
    outside = tmp_path / "outside"
    folder_links(root, outside)
    outside_before = tree(outside)
    tool = MemoryTool.over(Memory(root))
    assert tool.clear_all_memory() == "All memory cleared"
    assert tree(outside) == outside_before
    left = sorted(p.relative_to(root).as_posix() for p in root.iterdir() if p.name not in (".git", ".fsmem"))
    expected = ["fsmem.yaml", "keep.txt"] + ([".gitattributes", ".gitignore"] if history else [])
    assert left == sorted(expected)
    listed = tool.view("/memories")  # a folder's size is its filesystem's (4K on ext4, its entries' on tmpfs)
    assert listed == HEADER_DIR.format("/memories") + f"\n{format_size(root.stat().st_size)}\t/memories"
    if not history:
        return
    git = lambda *args: subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True).stdout  # noqa: E731
    gone = git("show", "--raw", "--format=%s", "HEAD").split("\n")
    assert gone[0] == "memory.clear_all_memory"
    removed = {line.split("\t")[1]: line.split()[0] for line in gone if line.startswith(":")}
    files = {"README.md", "profile/identity.md", "topics/a.md", "topics/deep/b.md"}
    assert set(removed) == LINKS | files  # each file once, by its real path; each link as a link
    assert {path for path, mode in removed.items() if mode == ":120000"} == LINKS
    assert git("show", "HEAD~1:topics/up") == ".." and git("show", "HEAD~1:out") == str(outside)
    assert git("status", "--porcelain") == "?? keep.txt\n"


def test_a_plain_folder_keeps_the_reference_behaviour(tool: MemoryTool) -> None:
    assert (
        tool.create("/memories/.hidden/notes.txt", "a\x00b")
        == "File created successfully at: /memories/.hidden/notes.txt"
    )
    assert tool.create("/memories/fsmem.yml", "x") == "File created successfully at: /memories/fsmem.yml"
    assert (tool.memory_root / ".hidden" / "notes.txt").read_bytes() == b"a\x00b"
    with pytest.raises(MemoryToolError, match="is deeper than 64 folders"):
        tool.create("/memories/" + "/".join(["d"] * 100) + "/x.txt", "x")
    with pytest.raises(MemoryToolError, match="has a name longer than 255 bytes"):
        tool.view("/memories/" + "x" * 300)
    with pytest.raises(MemoryToolError, match="is not valid text"):
        tool.view("/memories/\ud800")


@pytest.mark.parametrize("padded", ["/memories/topics/a.md ", "/memories/ topics/a.md", "/memories/topics/a.md\u00a0"])
def test_over_a_memory_a_path_with_white_space_at_an_end_is_refused_not_trimmed(
    fsmem_memory: Path, padded: str
) -> None:
    """fsmem's path rule trims a name; the tool would write topics/a.md and tell the model it wrote `a.md `."""
    root = fsmem_memory / "memories"
    (root / "topics").mkdir()
    (root / "topics" / "b.md").write_text("- fact: b\n")
    tool = MemoryTool.over(Memory(root))

    def files() -> dict[str, bytes]:
        return {name: data for name, data in tree(root).items() if not name.startswith(".fsmem/")}

    before = files()
    calls = [
        {"command": "create", "path": padded, "file_text": "- fact: a\n"},
        {"command": "view", "path": padded},
        {"command": "rename", "old_path": "/memories/topics/b.md", "new_path": padded},
    ]
    for call in calls:
        with pytest.raises(MemoryToolError, match=r"begins or ends with white space, .*give the path without it$"):
            tool.execute(call)
    assert files() == before

    from anthropic.lib.tools import ToolError
    from anthropic.types.beta import BetaMemoryTool20250818CreateCommand

    from fsmem.integrations.anthropic import FsmemMemoryTool

    with pytest.raises(ToolError, match="begins or ends with white space"):
        FsmemMemoryTool(str(fsmem_memory)).create(
            BetaMemoryTool20250818CreateCommand(command="create", path=padded, file_text="x")
        )
    assert not (root / "topics" / "a.md").exists()

import os
import re

import pytest
from hypothesis import given, strategies as st

from fsmem.errors import ConfigError, InvalidArgument, PathEscape
from fsmem.store.paths import (
    MAX_DEPTH,
    MAX_PATH_BYTES,
    all_memory_paths,
    config_dir,
    is_memory_name,
    is_memory_path,
    name_problem,
    open_regular,
    read_stamped,
    relative,
    resolve,
    text_problem,
)


@pytest.fixture
def root(tmp_path):
    (tmp_path / "root" / "topics").mkdir(parents=True)
    return tmp_path / "root"


@pytest.mark.parametrize(
    "good, expected",
    [
        ("topics/billing.md", "topics/billing.md"),
        ("./topics/../topics/billing.md", "topics/billing.md"),
        ("", "."),
        (".", "."),
        ("topics\\billing.md", "topics/billing.md"),
    ],
)
def test_paths_inside_the_root_resolve(root, good, expected):
    assert relative(root, resolve(root, good)) == expected


@pytest.mark.parametrize("bad", ["/etc/passwd", "../outside.md", "topics/../../x.md", "C:\\x.md", "..", "a/../../b"])
def test_escapes_are_refused(root, bad):
    with pytest.raises(PathEscape):
        resolve(root, bad)


def test_state_folder_is_refused(root):
    with pytest.raises(PathEscape, match=".fsmem"):
        resolve(root, ".fsmem/cache.db")


def test_nul_byte_is_invalid(root):
    with pytest.raises(InvalidArgument):
        resolve(root, "a\x00b.md")


def test_symlink_out_of_the_root_is_refused(root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    os.symlink(outside, root / "link")
    with pytest.raises(PathEscape, match="symbolic link"):
        resolve(root, "link/secret.md")
    with pytest.raises(PathEscape):
        resolve(root, "link/new-file.md")  # even a file that does not exist yet


def test_symlink_file_pointing_outside_is_refused(root, tmp_path):
    (tmp_path / "secret.md").write_text("x")
    os.symlink(tmp_path / "secret.md", root / "topics" / "evil.md")
    with pytest.raises(PathEscape):
        resolve(root, "topics/evil.md")


def test_symlink_inside_the_root_is_allowed(root):
    (root / "topics" / "real.md").write_text("x")
    os.symlink(root / "topics" / "real.md", root / "alias.md")
    assert resolve(root, "alias.md") == root / "alias.md"


def test_symlink_into_the_state_folder_is_refused(root):
    (root / ".fsmem" / "logs").mkdir(parents=True)
    (root / ".fsmem" / "logs" / "retrieval.jsonl").write_text("{}\n")
    os.symlink(root / ".fsmem", root / "topics" / "state")
    os.symlink(root / ".fsmem" / "logs" / "retrieval.jsonl", root / "topics" / "log.md")
    for bad in ("topics/state", "topics/state/x.md", "topics/state/logs/retrieval.jsonl", "topics/log.md"):
        with pytest.raises(PathEscape, match=".fsmem"):
            resolve(root, bad)


# -- the containment rule: memory files only --------------------------------------------------
@pytest.mark.parametrize(
    "bad, error, reason",
    [
        ("fsmem.yaml", PathEscape, "is fsmem's configuration"),
        ("FSMEM.YAML", PathEscape, "is fsmem's configuration"),
        (".git/config", PathEscape, "is hidden (.git starts with '.')"),
        (".GIT/config", PathEscape, "is hidden"),
        ("topics/.secret.md", PathEscape, "is hidden"),
        (".fsmem/cache.md", PathEscape, "is inside .fsmem/"),
        (".FSMEM/x.md", PathEscape, "is inside .fsmem/"),
        ("topics/a\nb.md", InvalidArgument, "holds a control character"),
        ("a\rb.md", InvalidArgument, "holds a control character"),
        ("a\x7fb.md", InvalidArgument, "holds a control character"),
        ("\ud800.md", InvalidArgument, "is not valid text"),
        ("/".join(["d"] * 65) + ".md", InvalidArgument, "is deeper than 64 folders"),
        ("x" * 256 + ".md", InvalidArgument, "has a name longer than 255 bytes"),
        ("é" * 130 + ".md", InvalidArgument, "has a name longer than 255 bytes"),  # 260 bytes in 134 characters
        ("/".join(["p" * 200] * 21), InvalidArgument, "is longer than 4096 bytes"),
    ],
)
def test_lexical_rule(root, bad, error, reason):
    with pytest.raises(error, match=re.escape(reason)):
        resolve(root, bad)


def test_depth_and_length_limits_are_inclusive(root):
    assert resolve(root, "/".join(["d"] * 63) + "/x.md", want="file").name == "x.md"
    assert resolve(root, "x" * 252 + ".md", want="file").name == "x" * 252 + ".md"


def test_a_file_must_be_a_regular_memory_file(root):
    (root / "notes.txt").write_text("x")
    os.mkfifo(root / "topics" / "pipe.md")
    os.symlink("loop.md", root / "loop.md")
    (root / "topics" / "real.md").write_text("x")
    with pytest.raises(InvalidArgument, match="is not a memory file; memory files end in .md"):
        resolve(root, "notes.txt")
    with pytest.raises(InvalidArgument, match="is not a memory file"):
        resolve(root, "topics/new.txt", want="file")
    with pytest.raises(InvalidArgument, match="not a regular file"):
        resolve(root, "topics/pipe.md")
    with pytest.raises(InvalidArgument, match="symbolic link loop"):
        resolve(root, "loop.md")
    with pytest.raises(InvalidArgument, match="is a folder"):
        resolve(root, "topics", want="file")
    with pytest.raises(InvalidArgument, match="goes through a file as if it were a folder"):
        resolve(root, "topics/real.md/x.md")
    assert resolve(root, "topics") == root / "topics"
    assert resolve(root, "topics/new.md", want="file") == root / "topics" / "new.md"


def test_links_must_lead_to_a_memory_file_inside(root):
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("x")
    (root / "fsmem.yaml").write_text("x")
    (root / "notes.txt").write_text("x")
    os.symlink(root / ".git" / "config", root / "git.md")
    os.symlink(root / ".git", root / "gitdir")
    os.symlink(root / "fsmem.yaml", root / "config.md")
    os.symlink(root / "notes.txt", root / "notes.md")
    os.symlink(root / "nowhere.md", root / "dangling.md")
    for bad, reason in [
        ("git.md", "leads to .git/config through a symbolic link"),
        ("gitdir", "leads to .git through a symbolic link"),
        ("gitdir/new.md", "leads to .git/new.md through a symbolic link"),
        ("config.md", "leads to fsmem.yaml through a symbolic link"),
        ("notes.md", "leads to notes.txt through a symbolic link"),
        ("dangling.md", "is a dangling symbolic link"),
    ]:
        with pytest.raises(PathEscape, match=re.escape(reason)):
            resolve(root, bad)


def test_is_memory_path_is_the_lexical_rule():
    for good in ("a.md", "topics/b.MARKDOWN", "entities/people/adam-smith.md", "Topics/X.MD"):
        assert is_memory_path(good), good
    for bad in ("a.txt", ".a.md", "topics/.git/a.md", ".fsmem/a.md", "a\nb.md", "a\x00.md", "\udcff.md", "fsmem.yaml"):
        assert not is_memory_path(bad), bad


# names built from the pieces that matter to the rule: dots, slashes, suffixes, control and non-ASCII characters
_PIECES = st.sampled_from(["a", "Z", ".", "/", ".md", ".MD", ".markdown", "..", "\n", "\x7f", "é", "\udcff", " ", "-"])


@given(st.lists(_PIECES, max_size=12).map("".join))
def test_the_fast_path_of_is_memory_path_agrees_with_the_rule_per_component(rel):
    parts = rel.split("/")
    by_components = (
        len(parts) <= MAX_DEPTH
        and len(rel) <= MAX_PATH_BYTES
        and is_memory_name(parts[-1])
        and all(name_problem(part) is None for part in parts[:-1])
    )
    assert is_memory_path(rel) == by_components


_SPLIT = st.sampled_from(["a", ".", "/", ".md", ".MD", ".markdown", "\\", "\n", "\t", "\x7f", "é", "\u212a", "\udcff"])


@given(st.lists(st.lists(_SPLIT, max_size=8).map("".join), max_size=5))
def test_all_memory_paths_says_yes_only_when_the_rule_holds_for_each(rels):
    if all_memory_paths(rels):
        assert all(is_memory_path(rel) for rel in rels)


def test_all_memory_paths_of_long_and_deep_paths_and_of_common_ones():
    assert all_memory_paths(["a.md", "topics/b.MARKDOWN", "entities/people/adam-smith.md"])
    assert all_memory_paths([])
    assert not all_memory_paths(["a.md", "b\nc.md"])  # one path with a newline is not two paths
    assert not all_memory_paths(["/".join(["d"] * (MAX_DEPTH + 1)) + ".md"])
    assert all_memory_paths(["/".join(["d"] * MAX_DEPTH) + ".md"])
    assert not all_memory_paths(["a" * 300 + ".md"])  # looked at one by one (the rule may still hold)
    for bad in ("a.txt", ".a.md", "topics/.git/a.md", "a\x00.md", "\udcff.md", "a\\b.md", "x.md.txt", "K.md\u212a"):
        assert not all_memory_paths(["a.md", bad]), bad


@pytest.mark.parametrize(
    "value, reason",
    [
        ("../x", "escapes the memory root"),
        ("/srv/archive", "is absolute"),
        (".archive", "is hidden"),
        ("archive/.old", "is hidden"),
        (".fsmem/archive", "is inside .fsmem/"),
        ("", "must be a folder inside the memory"),
        (7, "must be a folder inside the memory"),
    ],
)
def test_configured_folders_stay_inside_and_visible(root, value, reason):
    with pytest.raises(ConfigError, match=re.escape(reason)):
        config_dir(value, "consolidate.archive_dir", root)


def test_configured_folders_are_checked_where_they_really_are(root, tmp_path):
    assert config_dir("archive/sessions/", "consolidate.archive_dir", root) == "archive/sessions"
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", root / "archive")
    assert config_dir("archive/sessions", "consolidate.archive_dir") == "archive/sessions"  # lexical only
    with pytest.raises(ConfigError, match="leads outside the memory root"):
        config_dir("archive/sessions", "consolidate.archive_dir", root)


def test_open_regular_refuses_a_fifo_without_blocking(root):
    os.mkfifo(root / "pipe.md")
    with pytest.raises(InvalidArgument, match="not a regular file"):
        open_regular(root / "pipe.md")
    (root / "a.md").write_bytes(b"abc")
    with open_regular(root / "a.md") as handle:
        assert handle.read() == b"abc"


def test_read_stamped_gives_the_stat_of_the_file_read_and_refuses_a_fifo_without_blocking(root):
    os.mkfifo(root / "pipe.md")
    with pytest.raises(InvalidArgument, match="not a regular file"):
        read_stamped(str(root / "pipe.md"), 100)
    (root / "a.md").write_bytes(b"abc\n" * 1000)
    found, data = read_stamped(str(root / "a.md"), 4000)
    assert data == b"abc\n" * 1000
    assert (found.st_ino, found.st_size, found.st_mtime_ns) == (
        os.stat(root / "a.md").st_ino,
        4000,
        os.stat(root / "a.md").st_mtime_ns,
    )
    found, data = read_stamped(str(root / "a.md"), 3999)  # larger than the limit: not read
    assert (found.st_size, data) == (4000, None)
    (root / "empty.md").write_bytes(b"")
    assert read_stamped(str(root / "empty.md"), 10)[1] == b""


def test_text_problems():
    assert text_problem("plain text, tabs\tand\nnewlines") is None
    assert text_problem("a\x00b") == "contains a NUL byte"
    assert "lone surrogate" in text_problem("a\ud800b")

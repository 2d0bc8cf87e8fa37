import os

import pytest

from fsmem.errors import InvalidArgument, PathEscape
from fsmem.store.paths import relative, resolve


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

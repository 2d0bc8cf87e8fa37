"""Fresh virtual environments that hold fsmem as a user's pip installs it, without installing everything anew.

A test of what `pip install 'fsmem[...]'` gives (tests/test_install.py, tests/test_extras_floor.py) needs an
environment that sees none of the test environment's other packages: an optional package the test environment
happens to hold must not make a core command work. Installing each environment from the index cost a minute
of resolving, downloading and unpacking some fifty packages this environment already holds, at the versions
pip picked for it (`make install`). So the new environment sees, through a `.pth` line, a folder of links to exactly the distributions
that its requirements pull in (their closure, read from the installed metadata, markers and extras applied),
and pip installs the rest: the wheel under test, and whatever the requirements ask at another version than
this environment's (an SDK's floor). pip takes a linked distribution for installed, as it is; one it must
replace lies outside the new environment, so pip leaves it alone and installs the other version in the
environment's own site-packages, which comes first on sys.path.
"""

from __future__ import annotations

import importlib.metadata as metadata
import subprocess
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def closure(requirements: Iterable[str], *, leaving_out: Iterable[str] = ()) -> list[metadata.Distribution]:
    """The distributions of this environment that `requirements` pull in, with their extras, transitively;
    but those named in `leaving_out` (what they pull in is kept)."""
    left_out = {canonicalize_name(name) for name in leaving_out}
    installed = {canonicalize_name(dist.metadata["Name"]): dist for dist in metadata.distributions()}
    found: dict[str, metadata.Distribution] = {}
    todo = [(Requirement(text), {""}) for text in requirements]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        requirement, extras_of_parent = todo.pop()
        if requirement.marker and not any(requirement.marker.evaluate({"extra": e}) for e in extras_of_parent):
            continue
        name = canonicalize_name(requirement.name)
        key = (name, frozenset(requirement.extras))
        if key in seen or name not in installed:  # one this environment lacks: pip installs it
            continue
        seen.add(key)
        dist = installed[name]
        if name not in left_out:
            found[name] = dist
        todo += [(Requirement(text), {"", *requirement.extras}) for text in dist.requires or ()]
    return sorted(found.values(), key=lambda dist: dist.metadata["Name"])


SCRIPTS = Path(sysconfig.get_path("scripts")).resolve()


def _is_a_script(program: Path) -> bool:
    with program.open("rb") as handle:
        return handle.read(2) == b"#!"


def link_site(folder: Path, scripts: Path, distributions: Iterable[metadata.Distribution]) -> Path:
    """`folder` made to hold a link to each top-level file and folder of the distributions (packages, modules,
    extension modules, their .dist-info): a site folder with those distributions and no other. Their programs
    (ripgrep's rg) are linked into `scripts`; their Python scripts are not (they start this environment's
    python, and are made anew for what pip installs)."""
    folder.mkdir(parents=True)
    for dist in distributions:
        for file in dist.files or ():
            if file.parts[0] == "..":
                program = Path(dist.locate_file(file)).resolve()
                if program.parent == SCRIPTS and not _is_a_script(program):
                    (scripts / program.name).symlink_to(program)
            elif file.parts[0] != "__pycache__" and not (folder / file.parts[0]).exists():
                (folder / file.parts[0]).symlink_to(dist.locate_file(file.parts[0]))
    return folder


def new_venv(venv: Path, *requirements: str, sharing: Iterable[str] = (), leaving_out: Iterable[str] = ()) -> Path:
    """A new virtual environment with `requirements` installed; its python. It sees the distributions of this
    environment that `sharing` pulls in (but those named in `leaving_out`), linked, and none of the others.

    This environment's pip installs into it (--python), so the new one needs no pip of its own (ensurepip costs
    seconds), and pip reuses the wheels its cache holds; bytecode is written as modules are first imported
    (these environments import a fraction of what they install), by processes started with child_env (tests/child_env.py)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    shared = link_site(venv.with_name(venv.name + "-shared"), venv / "bin", closure(sharing, leaving_out=leaving_out))
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "shared.pth").write_text(f"{shared}\n", encoding="utf-8")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--disable-pip-version-check"]
    installed = subprocess.run([*pip, "--no-compile", *requirements], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return python

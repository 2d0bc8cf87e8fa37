"""A stand-in for an LLM CLI that `fsmem distill --command` runs in the tests: it reads fsmem's instructions and
an episode on stdin and prints keyed notes, or misbehaves as its first argument says.

    keyed          one subject: a fact naming the lines it was given, an observation per user line
    marker PATH    as keyed, after creating PATH (to prove it ran, or that it never did)
    malformed      prose before the notes
    huge           far more output than fsmem takes
    hang           starts a child that sleeps and sleeps itself (its process group must be killed)
    fail           says why on stderr and exits 7
    secret         a fact whose value is a GitHub token
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path


def keyed(stdin: str) -> str:
    head = re.search(r"^Episode (\S+) .*: lines (\d+)-(\d+) of (\d+)", stdin, re.M)
    assert head, stdin[:400]
    said = stdin.split("```text\n", 1)[1].rsplit("```", 1)[0].splitlines()
    out = ["## topic/Distilled", f"- lines seen: {head.group(2)}-{head.group(3)}"]
    out += [f"- Heard from the user: {line[len('user: ') :]}" for line in said if line.startswith("user: ")]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else "keyed"
    stdin = sys.stdin.read()
    if mode == "marker":
        Path(argv[1]).write_text("ran\n")
        mode = "keyed"
    if mode == "keyed":
        sys.stdout.write(keyed(stdin))
    elif mode == "malformed":
        sys.stdout.write("Here is what I learned:\n\n## people/Ann Lee\n- employer: Globex\n")
    elif mode == "huge":
        sys.stdout.write("## topic/Huge\n" + "- An observation that goes on.\n" * 20000)
    elif mode == "hang":
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        time.sleep(300)
    elif mode == "fail":
        sys.stderr.write("the model is not available\n")
        return 7
    elif mode == "secret":
        sys.stdout.write("## tools/GitHub\n- token: ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

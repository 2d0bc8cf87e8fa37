"""How rg's output is read (`fsmem.store.rg_command.chunks_of`): every byte, in order, in few large chunks."""

import subprocess
import sys

from fsmem.store import rg_command

WRITES = 4_000
LINES = b"3:- x\n" * 30
# as rg prints a name found in many files: one write per file, each a few lines, a file searched between two
WRITER = (
    "import os, time\n"
    f"for i in range({WRITES}):\n"
    f"    os.write(1, b'f%05d.md\\0' % i + {LINES!r} + b'\\n')\n"
    "    time.sleep(0.00001)"
)


def test_an_output_of_many_small_writes_is_read_whole_in_few_chunks():
    """Read as each write came, a name in 60,000 files was 70,000 reads; past the first `NAP_FROM` bytes the
    reader lets the pipe fill between two reads."""
    process = subprocess.Popen([sys.executable, "-c", WRITER], stdout=subprocess.PIPE)
    try:
        chunks = list(rg_command.chunks_of(process, 1 << 20))
    finally:
        process.wait()
    assert b"".join(chunks) == b"".join(b"f%05d.md\0" % i + LINES + b"\n" for i in range(WRITES))
    assert len(chunks) < WRITES // 4


def test_a_small_output_is_read_as_it_comes_and_a_large_one_to_its_end():
    for size in (0, 10, rg_command.NAP_FROM + 1, 3 * rg_command.NAP_FROM):
        writer = f"import sys\nsys.stdout.buffer.write(b'y' * {size})"
        process = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE)
        try:
            assert b"".join(rg_command.chunks_of(process, 4096)) == b"y" * size
        finally:
            process.wait()

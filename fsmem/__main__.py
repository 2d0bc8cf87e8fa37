"""`python -m fsmem`: the same command as `fsmem`, for harnesses that only know the interpreter."""

from fsmem.cli import main

main()

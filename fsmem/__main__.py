"""`python -m fsmem`: the same command as `fsmem`, for harnesses that only know the interpreter."""

from .cli import main

main()

"""The two names a memory root holds besides its files, in a module that imports nothing.

`fsmem.config` gives them to the rest of fsmem; `fsmem.store.rg_command` reads them from here so that a
plain grep can build rg's command line before any other part of fsmem is imported (`fsmem.cli.early`).
"""

CONFIG_FILE = "fsmem.yaml"
STATE_DIR = ".fsmem"  # machine state: caches, logs, locks; never memory

# Two commands set up everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
FSMEM := $(VENV)/bin/fsmem
STAMP := $(VENV)/.fsmem-installed
DEMO := demo-memory

.PHONY: demo test lint docs bench fuzz durations install clean

install: $(STAMP)

# The C extension (fsmem/search/_native.c) is compiled by the install: a change to it installs again.
$(STAMP): pyproject.toml fsmem/search/_native.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing fsmem and its dependencies into $(VENV) (log: $(VENV)/install.log)"
	@$(PY) -m pip install --quiet -e '.[test,watch,mcp,server,anthropic,bench,plot,docs]' > $(VENV)/install.log 2>&1 \
		|| { cat $(VENV)/install.log; exit 1; }
	touch $(STAMP)

demo: $(STAMP)
	@rm -rf $(DEMO)
	@$(PY) examples/build_demo.py $(DEMO)
	@echo; echo '$$ fsmem ls'; $(FSMEM) --root $(DEMO) ls
	@echo; echo '$$ fsmem grep -i billing'; $(FSMEM) --root $(DEMO) grep -i billing
	@echo; echo '$$ fsmem read entities/people/adam-smith.md --max-tokens 300'; $(FSMEM) --root $(DEMO) read entities/people/adam-smith.md --max-tokens 300
	@echo; echo '$$ fsmem consolidate'; FSMEM_NOW=2026-12-01T08:00:00+00:00 $(FSMEM) --root $(DEMO) consolidate
	@echo; echo '$$ fsmem read entities/people/adam-smith.md --include-superseded'; $(FSMEM) --root $(DEMO) read entities/people/adam-smith.md --include-superseded

# The quality gates: lint, format, types.
lint: $(STAMP)
	$(VENV)/bin/ruff check fsmem tests benchmarks examples docs/conf.py docs/_ext docs/check_moved.py
	$(VENV)/bin/ruff format --check fsmem tests benchmarks examples docs/conf.py docs/_ext docs/check_moved.py
	$(VENV)/bin/mypy fsmem

# The documentation site, offline, with every warning an error (a broken link or anchor fails the build).
DOCS_BUILD := $(VENV)/bin/sphinx-build -W --keep-going -q -b html docs build/docs/html
docs: $(STAMP)
	$(DOCS_BUILD)

# The suite on every core (pytest-xdist): most tests wait on git, rg and subprocesses, and the longest run
# side by side; `--dist worksteal` hands a worker's queued tests to one that has finished its own.
# PYTHONDONTWRITEBYTECODE is emptied for the suite (where a machine sets it) so that pytest keeps the test modules
# as it rewrote their asserts, in tests/__pycache__: a second run's workers then collect in half the CPU (9 s of
# 19 s each here); every other module is compiled ahead by tests/conftest.py either way.
# One worker more than the usable cores: a quarter of the suite's time is spent waiting on git, rg and the
# processes it starts, which the extra worker fills (on two cores, 5 min 43 s with three workers, 6 min 43 s with
# two, the same tests); `make test WORKERS=N` sets it.
WORKERS ?= $(shell $(PYTHON) -c 'import os; print(len(os.sched_getaffinity(0)) + 1)' 2>/dev/null || echo auto)
SUITE = PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n $(WORKERS) --dist worksteal

# Lint first (tests/test_docs.py type-checks the docs' snippets with mypy's cache that `make lint` leaves warm),
# then the docs build beside the suite, its output printed whole when it ends: Sphinx's 10-20 s on a clean
# checkout fit in the suite's waits on git, rg and its subprocesses. Either failing fails `make test`.
test: lint
	@( $(DOCS_BUILD) > $(VENV)/docs.log 2>&1; docs=$$?; cat $(VENV)/docs.log; exit $$docs ) & \
	docs_pid=$$!; \
	$(SUITE); suite=$$?; \
	wait $$docs_pid; docs=$$?; \
	[ $$docs -eq 0 ] || echo "make test: the docs build failed (its output is above, and in $(VENV)/docs.log)"; \
	[ $$docs -eq 0 ] && [ $$suite -eq 0 ]

# The suite as `make test` runs it, keeping its long tests' durations in tests/durations.json: how a clean
# checkout (CI, with no pytest cache) deals them out to the workers, longest first.
durations: $(STAMP)
	$(SUITE) --save-durations

# The property and fuzz tests of history, consolidation, replicas, scopes (reads and writes), the command line,
# capture, people's saves, odd files, the watcher's answers, paging by continuations, writes killed or failed
# at a system call, and commands run in drawn environments, with a larger budget: each draws FUZZ_SCALE times the
# examples `make test` runs
# (HYPOTHESIS_PROFILE=explore draws new ones each run).
FUZZ_SCALE ?= 10
fuzz: $(STAMP)
	FSMEM_FUZZ_SCALE=$(FUZZ_SCALE) $(PY) -m pytest -q -p no:xdist \
		tests/test_consolidate_invariant.py::test_batches_growth_and_crashes_give_the_bytes_of_one_run \
		tests/test_consolidate_kept.py \
		tests/test_sync_fuzz.py tests/test_sync_replicas.py tests/test_scope_secrets.py tests/test_scope_writes.py \
		tests/test_cli_fuzz.py::test_no_command_line_or_variable_gets_a_traceback_a_flood_or_a_change_it_should_not \
		tests/test_hostile_capture.py::test_whatever_a_transcript_holds_the_hook_writes_only_its_session_note_once \
		tests/test_hostile_capture.py::test_whatever_an_export_holds_an_import_writes_only_session_notes_once \
		tests/test_human_editor.py::test_no_save_is_lost_whoever_writes_and_whenever \
		tests/test_hostile_sizes.py::test_no_file_of_any_kind_or_size_stops_the_answers_for_the_others \
		tests/test_rendezvous.py::test_random_changes_through_files_and_fsmem_then_every_read_both_ways \
		tests/test_continuation.py::test_following_every_continuation_recovers_each_line_and_row_once_within_the_budget \
		tests/test_continuation.py::test_mcp_over_stdio_gives_the_pages_the_tools_give_and_names_the_same_continuation \
		tests/test_write_faults.py::test_a_write_killed_or_failed_at_any_call_leaves_old_or_new_files_and_the_next_commands_work \
		tests/test_host_environment.py::test_no_environment_changes_an_answer_or_a_byte_written

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(DEMO) .pytest_cache build/docs

"""The word index that lets grep search only the files that can match (fsmem.query.grep_words): the same answer
as rg over every file, byte for byte, whatever the files and the pattern; as fresh as the feed; off without it."""

import itertools
import os
import subprocess
import sys
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import Memory
from fsmem.query import grep_cache, grep_vocabulary, grep_words
from fsmem.query.grep_terms import Need, needs, words_of
from fsmem.store.feed import Delta

KELVIN, LONG_S = "\u212a", "\u017f"
DOC = "---\ntitle: {title}\n---\n- walrus: {text}\n"


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """A Memory on a trusted feed (it answered twice), shared by the tests that rewrite its files."""
    memory = Memory.init(tmp_path_factory.mktemp("words") / "mem")
    memory.ls()
    memory.ls()
    assert memory.catalog._feed is not None and memory.catalog._feed.trusted
    yield memory
    memory.close()
    grep_cache.forget(memory.root)


@contextmanager
def plain():
    """grep as it runs without the index: rg over every file it is given."""
    narrowed = grep_words.narrowed
    grep_words.narrowed = lambda *args, **kwargs: None
    try:
        yield
    finally:
        grep_words.narrowed = narrowed


class Counted:
    """How often the prefilter narrowed the files (so that a property is not met by never applying it)."""

    def __init__(self):
        self.narrowed = self.calls = 0

    def __enter__(self):
        self.original = original = grep_words.narrowed

        def counting(*args, **kwargs):
            found = original(*args, **kwargs)
            self.calls += 1
            self.narrowed += found is not None
            return found

        grep_words.narrowed = counting
        return self

    def __exit__(self, *exc):
        grep_words.narrowed = self.original


def _answer(memory, pattern, **kwargs):
    result = memory.grep(pattern, **kwargs)
    return result.to_dict(), result.to_text()


def _rewrite(memory, files):
    """The memory's files made exactly `files` (path -> bytes), as an editor would leave them."""
    root = memory.root
    for folder, _dirs, names in os.walk(root, topdown=False):
        rel = os.path.relpath(folder, root)
        if rel.split(os.sep)[0] in (".fsmem", ".git"):
            continue
        for name in names:
            path = os.path.join(rel, name) if rel != "." else name
            if path.replace(os.sep, "/") not in files and (name.endswith((".md", ".MD", ".markdown")) or rel != "."):
                os.unlink(os.path.join(folder, name))
    for rel, data in files.items():
        full = root / rel
        full.parent.mkdir(parents=True, exist_ok=True)
        if not full.exists() or full.read_bytes() != data:
            full.write_bytes(data)


# -- what a pattern says ------------------------------------------------------------------------------------
def test_needs_bounds_each_word_by_the_pattern_or_word_regexp():
    assert needs("Ada Lovelace", fixed_strings=True, word=False) == [Need("ada", "suffix"), Need("lovelace", "prefix")]
    assert needs("the Ada Lovelace.", fixed_strings=True, word=False) == [
        Need("the", "suffix"),
        Need("ada", "exact"),
        Need("lovelace", "exact"),
    ]
    assert needs("Lovelace", fixed_strings=True, word=False) == [Need("lovelace", "inner")]
    assert needs("Lovelace", fixed_strings=False, word=True) == [Need("lovelace", "exact")]
    assert needs("-a_b", fixed_strings=True, word=False) == [Need("a", "exact"), Need("b", "prefix")]
    assert needs("--", fixed_strings=True, word=False) == []


@pytest.mark.parametrize(
    "pattern, fixed",
    [("Ada.Lovelace", False), ("a+", False), ("(x)", False), ("caf\u00e9 bar", True), ("a\tb", True), (KELVIN, True)],
)
def test_needs_refuses_what_it_cannot_reason_about(pattern, fixed):
    assert needs(pattern, fixed_strings=fixed, word=False) is None


def test_words_of_reads_the_letters_rg_folds_to_ascii_and_leaves_utf16_to_rg():
    assert sorted(words_of(f"{KELVIN}elvin Mi{LONG_S}{LONG_S} caf\u00e9 x_y2".encode()).split()) == [
        "caf",
        "kelvin",
        "miss",
        "x",
        "y2",
    ]
    assert words_of("\ufeffwalrus".encode("utf-16")) is None


# -- the invariant --------------------------------------------------------------------------------------------
# words made of pieces: ASCII, spelt with the letters rg -i folds to ASCII ones, non-ASCII; and separators
PIECES = ["kelp", "Kelp", KELVIN + "elp", "sea", "SEA", LONG_S + "ea", "ab", "0", "k", "s", KELVIN, LONG_S, "\u00e9"]
SEPARATORS = [" ", " ", "-", ".", "_", "\n"]
NAMES = [
    "a.md",
    "README.md",
    "topics/b.md",
    "topics/C.MD",
    "topics/b.history.md",
    "topics/deep/d.markdown",
    ".hidden.md",
    "topics/.h/e.md",
    "notes.txt",
]
word = st.lists(st.sampled_from(PIECES), min_size=1, max_size=2).map("".join)
text = st.lists(st.tuples(word, st.sampled_from(SEPARATORS)).map("".join), max_size=8).map("".join)


@st.composite
def files(draw):
    chosen = draw(st.lists(st.sampled_from(NAMES), unique=True, min_size=1, max_size=6))
    out = {}
    for name in chosen:
        body = draw(text)
        if draw(st.booleans()):
            title = draw(text).replace("\n", " ").strip() or "x"
            body = f"---\ntitle: '{title}'\n---\n{body}"
        if name.endswith(".history.md"):
            body = f"---\ntype: semantic\n---\n## Superseded\n- {body}\n"
        data = body.encode()
        if draw(st.integers(0, 9)) == 0:
            data = body.encode("utf-16")  # with its byte-order mark: rg reads it transcoded
        out[name] = data
    return out


ASCII_WORDS = st.lists(st.sampled_from(["kelp", "sea", "ab", "0", "k", "s"]), min_size=1, max_size=2).map("".join)


@st.composite
def patterns(draw, contents):
    """A part of a file (matches), words of the files in ASCII (matches under -i), or any text."""
    kind = draw(st.integers(0, 4))
    if kind < 2 and contents:
        source = draw(st.sampled_from(sorted(contents.values()))).decode("utf-8", "replace")
        start = draw(st.integers(0, len(source)))
        pattern = source[start : start + draw(st.integers(1, 14))]
    elif kind < 4:  # ASCII words of the files, in any case
        words = draw(st.lists(ASCII_WORDS, min_size=1, max_size=3))
        pattern = draw(st.sampled_from([" ", "-", "_"])).join(words)
        pattern = draw(st.sampled_from([pattern, pattern.upper(), pattern.title()]))
        if draw(st.booleans()):  # a word cut at either end
            pattern = pattern[draw(st.integers(0, 2)) : len(pattern) - draw(st.integers(0, 2))] or pattern
    else:
        pattern = draw(text)
    return pattern.replace("\n", " ") or "k"


@settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_prefiltered_grep_answers_as_rg_over_every_file(watched, data):
    contents = data.draw(files())
    _rewrite(watched, contents)
    for link, target in [("topics/l.md", "../a.md"), ("linked", "topics")]:
        if os.path.lexists(watched.root / link):
            os.unlink(watched.root / link)
        if data.draw(st.booleans()) and (watched.root / link).parent.is_dir():
            os.symlink(target, watched.root / link)  # rg's walk follows neither; named, rg reads through it
    pattern = data.draw(patterns(contents))
    options = {
        "fixed_strings": data.draw(st.booleans()),
        "word": data.draw(st.booleans()),
        "ignore_case": data.draw(st.booleans()),
        "include_superseded": data.draw(st.booleans()),
        "paths": data.draw(
            st.sampled_from([None, ["topics"], ["a.md"], ["topics/b.md", "README.md"], ["linked"], ["topics/l.md"]])
        ),
        "max_results": data.draw(st.sampled_from([1, 3, 50])),
        "offset": data.draw(st.sampled_from([0, 0, 1, 2])),
        "context_lines": data.draw(st.sampled_from([0, 0, 1])),
        "type": data.draw(st.sampled_from([None, None, "semantic"])),  # the files a front-matter filter keeps
    }
    if options["paths"] and not all((watched.root / p).exists() for p in options["paths"]):
        options["paths"] = None
    try:
        with plain():
            expected = _answer(watched, pattern, **options)
    except Exception as exc:  # an invalid
        with pytest.raises(type(exc)):
            _answer(watched, pattern, **options)
        return
    assert _answer(watched, pattern, **options) == expected


TRICKY = {
    "a.md": f"kelpsea SEA-kelp x{KELVIN}elp0 {LONG_S}ea_ab \u00e9kelp kelp\u00e9 0kelp\n".encode(),
    "topics/b.md": b"---\ntitle: seakelp\n---\nab-sea.kelp\n",
    "topics/b.history.md": b"---\ntype: semantic\n---\n## Superseded\n- kelpsea: old\n",
    "topics/u.md": "kelp abkelp".encode("utf-16"),
}


@pytest.mark.parametrize(
    "pattern",
    ["kelp", "sea", "elp", "kelp0", "sea-kelp", "kelp ", " kelp", "-sea.", "xkelp", "ab-sea", "sea kelp", "Kelp"],
)
@pytest.mark.parametrize("word, ignore_case", [(False, False), (False, True), (True, False), (True, True)])
def test_each_kind_of_word_bound_answers_as_rg(watched, pattern, word, ignore_case):
    """A word the pattern bounds on neither side, one side (a start or an end of a file's word) or both."""
    _rewrite(watched, TRICKY)
    options = {"fixed_strings": True, "word": word, "ignore_case": ignore_case, "include_superseded": True}
    with plain():
        expected = _answer(watched, pattern, **options)
    with Counted() as counted:
        assert _answer(watched, pattern, **options) == expected
    assert counted.narrowed == 1


def test_the_property_exercises_the_prefilter(watched):
    """The cases the property draws do get narrowed (not a property met by rg walking every time)."""
    _rewrite(watched, {"a.md": b"walrus kelp", "topics/b.md": f"wal{KELVIN} {LONG_S}eal".encode()})
    with Counted() as counted:
        assert [m.path for m in watched.grep("walk", ignore_case=True, fixed_strings=True).matches] == ["topics/b.md"]
        assert [m.path for m in watched.grep("seal", ignore_case=True).matches] == ["topics/b.md"]
        assert watched.grep("seal").matches == []
        assert [m.path for m in watched.grep("rus kel", word=False).matches] == ["a.md"]
    assert counted.narrowed == counted.calls == 4


# -- freshness ------------------------------------------------------------------------------------------------
def _paths(memory, pattern):
    with Counted() as counted:
        found = [m.path for m in memory.grep(pattern, fixed_strings=True).matches]
    assert counted.narrowed == 1
    return found


def test_an_editors_write_rename_and_delete_are_seen_by_the_next_grep(watched):
    _rewrite(watched, {"topics/a.md": DOC.format(title="A", text="one").encode()})
    assert _paths(watched, "walrus: one") == ["topics/a.md"]
    with open(watched.root / "topics" / "a.md", "r+") as handle:  # same size, same second: only the event tells
        handle.write(DOC.format(title="A", text="two"))
    assert _paths(watched, "walrus: one") == []
    assert _paths(watched, "walrus: two") == ["topics/a.md"]
    os.rename(watched.root / "topics", watched.root / "places")
    assert _paths(watched, "walrus: two") == ["places/a.md"]
    os.unlink(watched.root / "places" / "a.md")
    assert _paths(watched, "walrus: two") == []
    watched.write("places/b.md", DOC.format(title="B", text="three"))
    assert _paths(watched, "walrus: three") == ["places/b.md"]


def test_a_file_rewritten_while_no_feed_ran_with_its_size_and_mtime_put_back_is_read_again(tmp_path):
    """A stamp is the file's change time too: an edit of the same size whose mtime was put back (`touch -d`,
    `cp -p`, `rsync -t`, a tool restoring times) while no process held the feed moves only that, and the next
    feed's first walk must read the file's words again rather than narrow a grep by the old ones."""
    memory = Memory.init(tmp_path / "mem")
    memory.write("topics/a.md", DOC.format(title="A", text="zephyr"))
    full = memory.root / "topics" / "a.md"
    os.utime(full, (1_577_836_800, 1_577_836_800))  # 2020: settled, never racy
    memory.ls()
    memory.ls()
    assert _paths(memory, "walrus: zephyr") == ["topics/a.md"]
    memory.close()
    grep_words._indexes.clear()  # as a new process finds it
    before = os.stat(full)
    full.write_bytes(DOC.format(title="A", text="quartz").encode())
    os.utime(full, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(full).st_size == before.st_size
    again = Memory(memory.root)
    try:
        again.ls()
        again.ls()
        assert _paths(again, "walrus: quartz") == ["topics/a.md"]
        assert _paths(again, "walrus: zephyr") == []
    finally:
        again.close()


def test_an_untrusted_feed_turns_the_prefilter_off(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    memory.write("topics/a.md", DOC.format(title="A", text="one"))
    memory.ls()
    memory.ls()
    feed = memory.catalog._feed
    assert feed is not None and grep_words.caught_up(memory.root) is not None
    feed._distrust("the test says so")
    try:
        assert grep_words.caught_up(memory.root) is None
        with Counted() as counted:
            assert [m.path for m in memory.grep("walrus: one", fixed_strings=True).matches] == ["topics/a.md"]
        assert counted.calls == 1 and counted.narrowed == 0
    finally:
        memory.close()


def test_a_one_shot_grep_never_loads_the_index(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    memory.write("topics/a.md", DOC.format(title="A", text="one"))
    memory.close()
    code = (
        "import sys; from fsmem import Memory; m = Memory(sys.argv[1]);"
        "print(len(m.grep('walrus: one', fixed_strings=True).matches), 'fsmem.query.grep_words' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(memory.root)], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["1", "False"]


def test_an_index_file_that_is_not_a_database_is_made_again(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    memory.write("topics/a.md", DOC.format(title="A", text="one"))
    (memory.root / ".fsmem" / grep_words.INDEX_FILE).write_bytes(b"not a database\n" * 100)
    memory.ls()
    memory.ls()
    try:
        assert _paths(memory, "walrus: one") == ["topics/a.md"]
    finally:
        memory.close()


def test_pages_freed_past_a_megabyte_are_given_back_to_the_file_system(tmp_path):
    """A long-lived process's index does not keep the pages its FTS5 merges and deleted files freed."""
    root = tmp_path / "mem"
    root.mkdir()
    (root / "fsmem.yaml").write_text("")
    letters = itertools.cycle("abcdefghij")
    for n in range(3000):
        words = ("".join(next(letters) for _ in range(n % 7 + 3)) + str(n * k) for k in range(100))
        (root / f"f{n}.md").write_text(" ".join(words))
    index = grep_words.WordIndex(root)
    try:
        index.apply(Delta(True, "start"))
        for n in range(0, 3000, 2):
            os.unlink(root / f"f{n}.md")
        index.apply(Delta(True, "overflow"))
        free = index.conn.execute("PRAGMA freelist_count").fetchall()[0][0]
        assert free <= grep_words.FREE_PAGES_KEPT
        assert index.paths() == {f"f{n}.md" for n in range(1, 3000, 2)}
    finally:
        index.close()


def test_a_memory_that_only_greps_takes_the_feed_from_its_second_call(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    memory.write("topics/a.md", DOC.format(title="A", text="one"))
    memory.close()
    memory = Memory(tmp_path / "mem")
    try:
        with Counted() as counted:
            for _ in range(2):
                assert [m.path for m in memory.grep("walrus: one", fixed_strings=True).matches] == ["topics/a.md"]
        assert counted.calls == 2 and counted.narrowed == 1
    finally:
        memory.close()


def test_a_file_too_large_to_read_for_its_words_is_searched_for_every_pattern(watched, monkeypatch):
    monkeypatch.setattr(grep_words, "MAX_FILE_BYTES", 64)
    _rewrite(watched, {"a.md": b"kelp " * 20 + b"walrus: big\n", "b.md": b"walrus: small\n"})
    assert _paths(watched, "walrus: big") == ["a.md"]
    assert _paths(watched, "walrus: small") == ["b.md"]


def test_a_word_longer_than_fts5_keeps_makes_its_file_searched_for_every_pattern(watched):
    """FTS5 keeps the first 32,768 bytes of a longer word: the vocabulary would not hold its end."""
    _rewrite(watched, {"a.md": b"x" * 40_000 + b"zephyrine\n", "b.md": b"walrus\n"})
    assert _paths(watched, "ephyrine") == ["a.md"]
    assert sorted(grep_words.caught_up(watched.root).candidates([Need("walrus", "inner")])) == ["a.md", "b.md"]


def test_a_long_fixed_string_looks_up_its_longest_words_only(watched):
    words = [f"w{n:04d}" for n in range(1600)]
    _rewrite(watched, {"a.md": (" ".join(words) + "\n").encode(), "b.md": b"w0001 w0002\n"})
    pattern = " ".join(words[1:-1])
    assert _paths(watched, pattern) == ["a.md"]


def test_more_candidates_than_max_candidates_are_searched_alone_up_to_a_quarter_of_the_memory(watched, monkeypatch):
    """Past `MAX_CANDIDATES`, a word's files are still rg's only files while they are at most a quarter of the
    memory's (at 100k files a word in 4k files cost rg a ninth of the walk); past that, rg walks. Answers as rg over every file,
    through grep's batched passes too (a list longer than one rg call's arguments: `_ARGS_PER_CALL`)."""
    from fsmem.query import grep as grep_module

    monkeypatch.setattr(grep_words, "MAX_CANDIDATES", 2)
    monkeypatch.setattr(grep_module, "_ARGS_PER_CALL", 2)
    files = {f"topics/k{n}.md": DOC.format(title=f"K{n}", text=f"kelp {n}").encode() for n in range(3)}
    files |= {f"topics/o{n}.md": DOC.format(title=f"O{n}", text="other").encode() for n in range(10)}
    _rewrite(watched, files)
    with plain():
        kelp, walrus = _answer(watched, "kelp", fixed_strings=True), _answer(watched, "walrus", fixed_strings=True)
    assert kelp[0]["total"] == 3 and walrus[0]["total"] == 13
    with Counted() as counted:
        assert _answer(watched, "kelp", fixed_strings=True) == kelp  # 3 files of 13: searched alone
    assert counted.narrowed == 1
    with Counted() as counted:
        assert _answer(watched, "walrus", fixed_strings=True) == walrus  # in every file: rg walks
    assert counted.calls == 1 and counted.narrowed == 0


# -- the list of words a long-lived process keeps ---------------------------------------------------------------
OTHER_PROCESS = """
import base64, json, os, sys, time
from fsmem.query.grep_words import WordIndex
from fsmem.store.feed import Delta
root = sys.argv[1]
index = WordIndex(root)
for line in sys.stdin:
    step = json.loads(line)
    full = os.path.join(root, step["path"])
    if step["data"] is None:
        if os.path.exists(full):
            os.unlink(full)
    else:
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as handle:
            handle.write(base64.b64decode(step["data"]))
        if step["past"]:
            past = time.time_ns() - 5_000_000_000  # a stamp this process's feed finds stored already
            os.utime(full, ns=(past, past))
    index.apply(Delta(False, "", {step["path"]}, set()))
    print("done", flush=True)
"""


class OtherProcess:
    """Another long-lived process on the same memory: it writes or removes a file and stores it in the word
    index at once; with `past`, stamped older than the clock's tick, so that this process's feed finds it
    stored already (a fresh stamp is stored as racy, and read again by the next process to see it)."""

    def __init__(self, root):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", OTHER_PROCESS, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def put(self, path, data, *, past=True):
        import base64
        import json

        encoded = None if data is None else base64.b64encode(data).decode()
        self.proc.stdin.write(json.dumps({"path": path, "data": encoded, "past": past}) + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "done\n"

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def other(watched):
    process = OtherProcess(watched.root)
    yield process
    process.close()


def _matched_by_rg(root, held, pattern, options):
    """The files of `held` that rg matches."""
    from fsmem.store.rg_command import build_args, find_rg

    if not held:
        return set()
    args = build_args(pattern, **options)
    done = subprocess.run(
        [find_rg(), *args, "--files-with-matches", "--", *sorted(held)], cwd=root, capture_output=True, text=True
    )
    assert done.returncode in (0, 1), done.stderr
    return set(done.stdout.splitlines())


FLAT_NAMES = ["a.md", "topics/b.md", "topics/C.MD", "topics/deep/d.markdown", "e.md"]
NEW_WORDS = itertools.count()  # a word no file held before, in each file written


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_kept_words_narrow_soundly_through_writes_of_this_process_and_another(watched, other, data):
    """The list of words is read once and then kept: the files this process's feed names add their words to
    it, whoever stored them in the index. After any sequence of writes and removals by this process and
    another, for any pattern, every file rg matches is a candidate (with any `MAX_TERMS`, stale words
    counted), and grep answers as rg over every file."""
    index = grep_words.caught_up(watched.root)
    assert index is not None
    index.load_vocabulary()
    contents = {}
    for _ in range(data.draw(st.integers(1, 4))):
        name = data.draw(st.sampled_from(FLAT_NAMES))
        new_word = f"quoll{next(NEW_WORDS):06d}y"
        body = data.draw(st.one_of(st.none(), text.map(lambda t, w=new_word: f"{w} {t}".encode())))
        if data.draw(st.booleans()):
            full = watched.root / name
            if body is None:
                full.unlink(missing_ok=True)
            else:
                full.parent.mkdir(parents=True, exist_ok=True)
                full.write_bytes(body)
            assert grep_words.caught_up(watched.root) is index  # this process's feed stores it
        else:
            other.put(name, body, past=data.draw(st.booleans()))
        if body is not None:
            contents[name] = body
        pattern = data.draw(patterns(contents))
        if body is not None and data.draw(st.booleans()):  # a part of the word new to the memory: its end or inside
            pattern = new_word[data.draw(st.integers(1, 3)) : len(new_word) - data.draw(st.integers(0, 2))]
            pattern += data.draw(st.sampled_from(["", " "]))
        options = {
            "fixed_strings": data.draw(st.booleans()),
            "word": data.draw(st.booleans()),
            "ignore_case": data.draw(st.booleans()),
        }
        wanted = needs(pattern, fixed_strings=options["fixed_strings"], word=options["word"])
        if wanted:
            assert grep_words.caught_up(watched.root) is index  # as a grep does first
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(grep_vocabulary, "MAX_TERMS", data.draw(st.sampled_from([1, 3, 64])))
                found = index.candidates(wanted)
            if found is not None:
                with index.lock:
                    held = index.paths()
                assert _matched_by_rg(watched.root, held, pattern, options) <= set(found)
    try:
        with plain():
            expected = _answer(watched, pattern, **options)
    except Exception as exc:
        with pytest.raises(type(exc)):
            _answer(watched, pattern, **options)
        return
    assert _answer(watched, pattern, **options) == expected


def _vocabulary_reads(index):
    """A list that grows by one each time `index` reads its whole list of words from the database."""
    reads = []

    def trace(cursor, sql, bindings):
        if "FROM vocabulary" in sql:
            reads.append(sql)
        return True

    index.conn.exec_trace = trace
    return reads


def test_the_words_are_read_once_and_kept_through_writes_of_this_process_and_another(watched, other):
    _rewrite(watched, {"a.md": b"walrus kelp\n"})
    index = grep_words.caught_up(watched.root)
    index.load_vocabulary()
    reads = _vocabulary_reads(index)
    try:
        assert _paths(watched, "alrus") == ["a.md"]
        watched.write("topics/n.md", DOC.format(title="N", text="zephyrine"))  # this process stores it
        (watched.root / "b.md").write_bytes(b"quokka\n")  # an editor's write, which this process's feed reads
        assert _paths(watched, "ephyr") == ["topics/n.md"]
        assert _paths(watched, "uokk") == ["b.md"]
        other.put("c.md", b"axolotl\n")  # stored by the other process: this one reads the file, not the list
        assert _paths(watched, "xolot") == ["c.md"]
        assert reads == []
    finally:
        index.conn.exec_trace = None


def test_a_walk_after_another_process_stored_files_reads_the_words_again(watched, other):
    """A whole walk (the feed's start, an overflow) does not read the files whose stamps the index holds:
    those another process stored may hold words the kept list lacks."""
    _rewrite(watched, {"a.md": b"walrus kelp\n"})
    index = grep_words.caught_up(watched.root)
    index.load_vocabulary()
    other.put("d.md", b"narwhal\n")
    reads = _vocabulary_reads(index)
    try:
        index.apply(Delta(True, "overflow"))
        assert index.candidates([Need("arwha", "inner")]) == ["d.md"]
        assert len(reads) == 1
    finally:
        index.conn.exec_trace = None


def test_a_watchers_start_reads_the_words_before_the_first_grep(tmp_path):
    """`fsmem watch` and `fsmem serve` warm their memory (`Kept.warm`) before answering: the word list too."""
    from fsmem.cli.kept_memories import Kept

    Memory.init(tmp_path / "mem").write("topics/a.md", DOC.format(title="A", text="zephyrine"))
    memory = Memory(tmp_path / "mem")  # the watcher's own, holding the change feed
    memory.catalog.hold_feed()
    assert _paths(memory, "ephyr") == ["topics/a.md"]  # the word index is made
    grep_words._indexes.clear()  # as a new process would find it: made, nothing of it read
    kept, said = Kept(), []
    kept.warm(str(memory.root), said.append)
    try:
        assert said == []
        reads = _vocabulary_reads(grep_words.caught_up(memory.root))
        assert _paths(kept.open(str(memory.root), None), "ephyr") == ["topics/a.md"]
        assert reads == []
    finally:
        kept.close()
        memory.close()


def test_a_list_grown_past_twice_the_words_it_was_read_with_is_read_again(watched, monkeypatch):
    """Words no file holds any more stay in the kept list until it is read again: it is, once it has grown to
    `GROWTH` times its words and `LEARNED_WORDS` more, so notes written and removed for a year do not grow it
    for ever."""
    monkeypatch.setattr(grep_vocabulary, "GROWTH", 1)
    monkeypatch.setattr(grep_vocabulary, "LEARNED_WORDS", 4)
    _rewrite(watched, {"a.md": b"walrus\n"})
    index = grep_words.caught_up(watched.root)
    index.load_vocabulary()
    reads = _vocabulary_reads(index)
    try:
        for n in range(12):
            _rewrite(watched, {"a.md": f"walrus qq{n:02d}a qq{n:02d}b\n".encode()})  # two new words, two gone
            assert _paths(watched, f"q{n:02d}b") == ["a.md"]
        assert 1 <= len(reads) <= 6
    finally:
        index.conn.exec_trace = None

"""fsmem.format.simple_fields reads front matter exactly as PyYAML's loader does, or gives it up to PyYAML."""

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import format as fmt
from fsmem.format import frontmatter
from fsmem.format.simple_fields import simple_fields

# scalars PyYAML reads as something other than their text, or not at all, beside plain ones
TRICKY = [
    *"yes Yes YES no No NO true True false FALSE on On off OFF y n null Null NULL ~ = << - ? : ! & * | > % @ `".split(),
    *"0 -0 +0 +5 -5 012 0o7 0x1F 0b101 1_000 1:30 190:20:30 0.9 -0.0 +1.5 1. 1.0e+5 1e5 .5 -.5 .inf -.Inf .nan".split(),
    *"2025-03-03 2025-13-45 0000-01-01 2025-3-3 2025-03-03T12:52:00 2025-03-03T12:52:00+00:00".split(),
    *"2025-03-03T12:52:00-00:00 2025-03-03T12:52:00+05:75 2025-03-03T12:52:00+25:00 2025-03-03T24:00:00".split(),
    *"2025-02-30T01:02:03-05:30 2025-03-03t12:52:00Z 2025-03-03T12:52:00.5Z 2025-03-03T1:00:00 2025-03-03T12:52:00Z".split(),
    "2025-03-03 12:52:00",
    "2025-03-03T12:52:00 +01:00",
    *["a: b", "a #b", "a#b", "http://x.y/z", "-a", "?x", ":x", "!tag x", "&a x", "*a", "'q'", '"q"', "a b", "a  b"],
    *["x,y", "[a]", "{a: 1}", "a:", "Ünï", "tab\there", "end ", " lead", "a]b", "a,b", "#c", "x: y: z", "50%"],
]
ASCII = "".join(map(chr, range(32, 127)))  # a string alphabet: st.characters builds a table of every code point
PLAIN = st.text(ASCII, max_size=12)
SCALAR = st.one_of(st.sampled_from(TRICKY), PLAIN)
SEPARATOR = st.sampled_from([",", ", ", " , ", ",  "])


@st.composite
def values(draw) -> str:
    if draw(st.booleans()):
        items = draw(st.lists(SCALAR, max_size=4))
        pad = draw(st.sampled_from(["", " "]))
        return "[" + pad + draw(SEPARATOR).join(items) + pad + "]"
    return draw(SCALAR)


KEY = st.one_of(
    st.sampled_from(["title", "tags", "type", "on", "yes", "null", "True", "x-y", "_a", "a b", "1", "Title"]),
    st.builds(lambda first, rest: first + rest, st.sampled_from("abXY_"), st.text("aZ09_-:", max_size=6)),
)


@st.composite
def lines(draw) -> str:
    kind = draw(st.sampled_from(["field", "field", "field", "field", "bare", "blank", "comment", "item"]))
    if kind == "bare":
        return draw(KEY) + ":"
    if kind == "blank":
        return ""
    if kind == "comment":
        return "# " + draw(PLAIN)
    if kind == "item":
        return "  - " + draw(SCALAR)
    return draw(KEY) + ":" + draw(st.sampled_from([" ", "  ", ""])) + draw(values())


def by_yaml(raw: str) -> object:
    """What frontmatter.split made of `raw` before: PyYAML's loader, dates as their ISO text."""
    try:
        loaded = yaml.load(raw, Loader=frontmatter._yaml().loader)
    except yaml.YAMLError:
        return "not YAML"
    if loaded is None:  # split reads empty front matter as no fields
        loaded = {}
    if not isinstance(loaded, dict):
        return "not a mapping"
    return {str(k): frontmatter._plain(v) for k, v in loaded.items()}


def assert_same(raw: str) -> bool:
    """repr: True and 1, 1 and 1.0, 0.0 and -0.0 differ; the keys' order counts."""
    fast = simple_fields(raw)
    if fast is not None:
        assert repr(fast) == repr(by_yaml(raw)), raw
    return fast is not None


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])  # a loaded machine draws slowly
@given(st.lists(lines(), max_size=6), st.booleans())
def test_equal_to_pyyaml_on_generated_front_matter(block, newline_at_end):
    assert_same("\n".join(block) + ("\n" if newline_at_end else ""))


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.builds(lambda key, value: f"{key}: {value}", KEY, values()), min_size=1, max_size=4))
def test_equal_to_pyyaml_on_generated_fields(block):
    assert_same("\n".join(block) + "\n")


def test_equal_to_pyyaml_on_each_tricky_scalar_alone_and_in_a_list():
    for scalar in TRICKY:
        assert_same(f"k: [{scalar}, b]\n")
    taken = [s for s in TRICKY if assert_same(f"k: {s}\n")]
    # the plain text, numbers and stamps PyYAML gives back unchanged are read here; the rest is PyYAML's
    assert taken == [
        *"yes Yes YES no No NO true True false FALSE on On off OFF y n null Null NULL ~ 0 -0 +0 +5 -5 0o7".split(),
        *"0.9 -0.0 +1.5 1e5 2025-03-03 2025-13-45 0000-01-01 2025-3-3 2025-03-03T12:52:00".split(),
        *"2025-03-03T12:52:00+00:00 2025-03-03T12:52:00+25:00 2025-03-03T24:00:00 2025-02-30T01:02:03-05:30".split(),
        *"a#b http://x.y/z".split(),
        *["a b", "a  b"],
        *"x,y [a] a]b a,b 50%".split(),
    ]


def test_the_usual_front_matter_is_read_without_pyyaml():
    raw = (
        "title: Pricing 71\ndescription: What we know about pricing 71\ntype: semantic\ntopic: pricing 71\n"
        "tags: [topic, pricing]\ncreated: 2025-03-03T12:52:00+00:00\nimportance: 0.9\nsources: []\nreviewed:\n"
    )
    assert simple_fields(raw) == {
        "title": "Pricing 71",
        "description": "What we know about pricing 71",
        "type": "semantic",
        "topic": "pricing 71",
        "tags": ["topic", "pricing"],
        "created": "2025-03-03T12:52:00+00:00",
        "importance": 0.9,
        "sources": [],
        "reviewed": None,
    }
    assert_same(raw)
    rendered = fmt.render({"title": "Adam", "tags": ["a", "b"], "updated": "2026-10-01T09:00:00+02:00"}, "")
    assert simple_fields(rendered.split("---\n")[1]) is not None


def test_split_gives_what_pyyaml_gives_where_the_fast_reader_gives_up():
    text = "---\ntitle: 'Quoted: yes'\ncreated: 2025-03-03 12:52:00\n---\nbody\n"
    assert simple_fields("title: 'Quoted: yes'\ncreated: 2025-03-03 12:52:00\n") is None
    assert fmt.split(text).front_matter == {"title": "Quoted: yes", "created": "2025-03-03T12:52:00"}


def test_values_read_before_are_kept_and_a_list_is_each_callers_own():
    """A build reads thousands of files alike: a value's text read before is not resolved again, and the list of
    one file's fields is never the list another file's fields hold."""
    first = simple_fields("tags: [a, b]\nimportance: 0.5\n")
    second = simple_fields("tags: [a, b]\nimportance: 0.5\n")
    assert first == second == {"tags": ["a", "b"], "importance": 0.5}
    assert first is not None and second is not None
    first["tags"].append("c")
    assert second["tags"] == ["a", "b"]
    assert simple_fields("tags: [a, b]\n") == {"tags": ["a", "b"]}

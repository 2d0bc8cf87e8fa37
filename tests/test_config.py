"""fsmem.yaml, typed: one frozen dataclass per section, defaults written once, every problem named with its line.

The template a memory starts from documents every setting at its default; a value of the wrong type, a
name fsmem does not know or a mapping of anything at all is a ConfigError naming the setting and its
line (never another exception); the defaults, and any values that fit, round-trip through the file.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from pathlib import Path
from typing import Any

import cli_runner
import pytest
import yaml
from child_env import without_fsmem
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from fsmem import Memory
from fsmem.config import CONFIG_FILE, SECRET_POLICIES, Config, Section
from fsmem.errors import ConfigError

TEMPLATE = Path(__file__).resolve().parent.parent / "memory_template"


def leaves(cls: type[Section] = Config, keys: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """(key path, field) of every setting, sections walked into; named entries (budgets.agents) left out."""
    found = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if "section" in f.metadata:
            found += leaves(f.metadata["section"], (*keys, f.name))
        elif "rule" in f.metadata:
            found.append(((*keys, f.name), f))
    return found


def sections(cls: type[Section] = Config, keys: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], type]]:
    found = [(keys, cls)]
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if "section" in f.metadata:
            found += sections(f.metadata["section"], (*keys, f.name))
    return found


LEAVES = leaves()
SECTIONS = [path for path, _ in sections() if path]


def value_at(obj: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        obj = obj[key] if isinstance(obj, dict) else getattr(obj, key)
    return obj


def nested(pairs: list[tuple[tuple[str, ...], Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for keys, value in pairs:
        here = data
        for key in keys[:-1]:
            here = here.setdefault(key, {})
        here[keys[-1]] = value
    return data


def line_of_key(text: str, keys: tuple[str, ...]) -> int:
    """Where block-style YAML (as safe_dump writes it) names `keys`: each key at its depth, below its parent."""
    lines = text.splitlines()
    at = 0
    for depth, key in enumerate(keys):
        at = next(i for i in range(at, len(lines)) if lines[i].startswith("  " * depth + key + ":"))
    return at + 1


def dumped(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


# -- the declarations, the template and the defaults agree ---------------------------------------------------
def test_every_setting_has_a_type_a_default_that_fits_its_rule_and_one_line_that_says_what_it_does():
    assert len(LEAVES) >= 40
    for keys, f in LEAVES:
        ok, says, convert = f.metadata["rule"]
        assert f.type and f.metadata["says"].strip() and "\n" not in f.metadata["says"], keys
        assert says and ok(_as_yaml(f.default)) and convert(_as_yaml(f.default)) == f.default, keys
    for keys, cls in sections():
        assert cls.__doc__ and cls.__doc__.strip(), keys
        assert all(f.metadata.get("says") for f in dataclasses.fields(cls)), keys  # type: ignore[arg-type]


def _as_yaml(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def test_the_template_names_every_setting_at_its_default():
    """What `fsmem init` writes documents every setting, with the value a missing one takes."""
    text = (TEMPLATE / CONFIG_FILE).read_text()
    parsed = yaml.safe_load(text)
    defaults = Config()
    for keys, _ in LEAVES:
        here: Any = parsed
        for key in keys:
            assert isinstance(here, dict) and key in here, f"{'.'.join(keys)} is not in the template"
            here = here[key]
        number = line_of_key(text, keys) - 1
        line, above = text.splitlines()[number], text.splitlines()[number - 1]
        assert "#" in line or above.lstrip().startswith("#"), (
            f"{'.'.join(keys)}: the template does not say what it does"
        )
    loaded = Config.from_bytes(text.encode(), CONFIG_FILE)  # not load(): that would leave a .fsmem/ in the template
    assert dataclasses.replace(loaded, budgets=dataclasses.replace(loaded.budgets, agents={})) == dataclasses.replace(
        defaults, budgets=dataclasses.replace(defaults.budgets, agents={})
    )
    # the example agents are the one thing the template adds to the defaults: each a budget merged over the default
    assert dict(loaded.budgets.agents) == {
        "researcher": dataclasses.replace(defaults.budgets.default, max_tokens=4000, max_results=100),
        "reviewer": dataclasses.replace(defaults.budgets.default, max_tokens=1000, max_results=20, read_only=True),
    }


def test_defaults_round_trip_through_the_file(tmp_path):
    (tmp_path / CONFIG_FILE).write_text(dumped(Config().as_mapping()))
    assert Config.load(tmp_path) == Config() == Config.checked(Config().as_mapping(), CONFIG_FILE)
    assert Config.load(tmp_path / "no-such-memory") == Config()


def test_sections_are_frozen_and_compare_by_value():
    config = Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.grep.timeout_seconds = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.grep = config.grep  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.budgets.agents["x"] = config.budgets.default  # type: ignore[index]
    assert (
        dataclasses.is_dataclass(config) and dataclasses.replace(config.grep, timeout_seconds=3.0).timeout_seconds == 3
    )
    assert Config() == Config() and Config().grep != dataclasses.replace(Config().grep, timeout_seconds=3.0)
    assert hash(Config().search) == hash(Config().search)


# -- every problem a ConfigError with the setting and its line ---------------------------------------------------
ANY_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(2**62, 2**1100) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(st.data())
def test_values_of_the_wrong_type_are_a_config_error_naming_the_first_and_its_line(data):
    chosen = data.draw(st.lists(st.sampled_from(LEAVES), min_size=1, max_size=5, unique_by=lambda leaf: leaf[0]))
    pairs = []
    for keys, f in chosen:
        ok = f.metadata["rule"][0]
        pairs.append((keys, data.draw(ANY_VALUE.filter(lambda v, ok=ok: not ok(v)), label=".".join(keys))))
    config = nested(pairs)
    text = dumped(config)
    first = _first_leaf(yaml.safe_load(text))
    says = dict(LEAVES)[first].metadata["rule"][1]
    with pytest.raises(ConfigError) as raised:
        Config.from_bytes(text.encode(), CONFIG_FILE)
    assert str(raised.value).startswith(
        f"{CONFIG_FILE}:{line_of_key(text, first)}: {'.'.join(first)} must be {says}, not "
    )


def _first_leaf(data: dict[str, Any], keys: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The first setting in the file's order: the one a check that reads the file in order names."""
    known = dict(LEAVES)
    for key, value in data.items():
        if (*keys, key) in known:
            return (*keys, key)
        return _first_leaf(value, (*keys, key))
    raise AssertionError("no setting")


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(SECTIONS), ANY_VALUE.filter(lambda v: v is not None and not isinstance(v, dict)))
def test_a_section_that_is_not_a_mapping_is_named(keys, value):
    text = dumped(nested([(keys, value)]))
    with pytest.raises(ConfigError) as raised:
        Config.from_bytes(text.encode(), CONFIG_FILE)
    line = line_of_key(text, keys)
    assert str(raised.value).startswith(f"{CONFIG_FILE}:{line}: {'.'.join(keys)} must be a mapping of settings, not ")


SETTING_NAMES = st.sampled_from(sorted({key for keys, _ in LEAVES for key in keys} | {"agents", "x", "gerp"}))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(SETTING_NAMES | st.text(max_size=8), st.dictionaries(SETTING_NAMES, ANY_VALUE) | ANY_VALUE))
def test_any_mapping_at_all_is_a_config_or_a_config_error(data):
    """Whatever a file holds (a remote's included), checking it raises nothing but ConfigError."""
    text = yaml.safe_dump(data, allow_unicode=True)
    try:
        Config.from_bytes(text.encode(), CONFIG_FILE)
    except ConfigError as exc:
        assert re.match(rf"{CONFIG_FILE}(:\d+)?: \S", str(exc)), str(exc)


@functools.cache  # made once a setting: building the strategy and reading its filter cost more than drawing from it
def _fitting(f: dataclasses.Field) -> st.SearchStrategy:
    ok = f.metadata["rule"][0]
    candidates = st.integers(0, 10**6) | st.floats(0, 1000) | st.booleans() | st.none() | st.text(max_size=10)
    candidates |= st.sampled_from(SECRET_POLICIES) | st.lists(st.text(max_size=5), max_size=3)
    return candidates.filter(ok)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(st.data())
def test_values_that_fit_round_trip_through_the_file(data):
    chosen = data.draw(st.lists(st.sampled_from(LEAVES), min_size=1, max_size=8, unique_by=lambda leaf: leaf[0]))
    pairs = [(keys, data.draw(_fitting(f), label=".".join(keys))) for keys, f in chosen]
    weights = dataclasses.replace(
        Config().search.weights, **{k[-1]: v for k, v in pairs if k[:2] == ("search", "weights")}
    )
    assume(weights.problem() is None)
    loaded = Config.from_bytes(dumped(nested(pairs)).encode(), CONFIG_FILE)
    for (keys, f), (_, value) in zip(chosen, pairs, strict=True):
        assert value_at(loaded, keys) == f.metadata["rule"][2](value), keys
    assert Config.checked(loaded.as_mapping(), CONFIG_FILE) == loaded


@pytest.mark.parametrize(
    "old, new, named, message",
    [
        (
            "  timeout_seconds: 10 ",
            "  timeout_secs: 10 ",
            "  timeout_secs: 10 ",
            "grep.timeout_secs is not a setting of fsmem; did you mean grep.timeout_seconds?",
        ),
        ("grep:", "gerp:", "gerp:", "gerp is not a setting of fsmem; did you mean grep?"),
        (
            "  enabled: true ",
            "  enabled: true\n  zzz: 1 ",
            "  zzz: 1 ",
            "history.zzz is not a setting of fsmem; history holds enabled",
        ),
        (
            "  max_attempts: 20 ",
            "  max_attempts: 20\n  zzz: 1 ",
            "  zzz: 1 ",
            "sync.zzz is not a setting of fsmem; sync holds remote, max_attempts and timeout_seconds",
        ),
        (
            "  agents:\n",
            "  agents:\n    bot:\n      max_tokns: 9\n",
            "      max_tokns: 9",
            "budgets.agents.bot.max_tokns is not a setting of fsmem; did you mean budgets.agents.bot.max_tokens?",
        ),
        (
            "    text: 1.0 ",
            "    txt: 1.0 ",
            "    txt: 1.0 ",
            "search.weights.txt is not a setting of fsmem; did you mean search.weights.text?",
        ),
        (
            "  agents:\n",
            "  agents: 5\n  unused:\n",
            "  agents: 5",
            "budgets.agents must be a mapping of agent names to budgets, not 5",
        ),
        ("    reviewer:\n", "    7:\n", "    7:", "budgets.agents: a name must be text, not 7"),
        (
            "    reviewer:\n",
            "    reviewer: 3\n    was:\n",
            "    reviewer: 3",
            "budgets.agents.reviewer must be a mapping of settings, not 3",
        ),
        (
            "policy: refuse",
            "policy: maybe",
            "  policy: maybe",
            "secrets.policy must be one of refuse, redact, allow, not 'maybe'",
        ),
        (
            "  host_id: null ",
            "  host_id: [a] ",
            "  host_id: [a] ",
            "notes.host_id must be one line of text, or null, not ['a']",
        ),
        (
            "extractors: [rules]",
            "extractors: [rules, 3]",
            "  extractors: [rules, 3]",
            "consolidate.extractors must be an extractor name or a list of them, not ['rules', 3]",
        ),
        (
            "  default_subject: topic/Inbox",
            "  default_subject: ''",
            "  default_subject: ''",
            "consolidate.default_subject must be one line of text, not empty, not ''",
        ),
        (
            "    horizon_days: null",
            "    horizon_days: 0",
            "    horizon_days: 0",
            "search.recall.horizon_days must be a number above 0, or null, not 0",
        ),
        (
            "  fuzzy_cutoff: 85",
            "  fuzzy_cutoff: .nan",
            "  fuzzy_cutoff: .nan",
            "search.fuzzy_cutoff must be a number from 0 to 100, not nan",
        ),
        (
            "  max_line_chars: 2000 ",
            "  max_line_chars: 9223372036854775808 ",
            "  max_line_chars: 9",
            "read.max_line_chars must be a whole number of at least 1, not 9223372036854775808",
        ),
        (
            "  timeout_seconds: 10 ",
            "  timeout_seconds: 1" + "0" * 400 + " ",
            "  timeout_seconds: 1",
            "grep.timeout_seconds must be a number above 0, not a number of 1329 bits",
        ),
        (
            "  max_line_chars: 2000 ",
            "  max_line_chars:\n    - 1\n    - 2\n ",
            "  max_line_chars:",
            "read.max_line_chars must be a whole number of at least 1, not [1, 2]",
        ),
    ],
)
def test_a_problem_in_the_file_names_the_setting_and_its_line(tmp_path, old, new, named, message):
    config = tmp_path / CONFIG_FILE
    text = (TEMPLATE / CONFIG_FILE).read_text()
    assert old in text
    changed = text.replace(old, new, 1)
    config.write_text(changed)
    line = next(i for i, text in enumerate(changed.splitlines(), 1) if text.startswith(named.rstrip()))
    with pytest.raises(ConfigError) as raised:
        Config.load(tmp_path)
    assert str(raised.value) == f"{config}:{line}: {message}"


def test_weights_that_leave_nothing_to_score_are_refused_at_the_weights(tmp_path):
    text = (TEMPLATE / CONFIG_FILE).read_text()
    for name in ("row", "subject", "neighbours", "document"):
        text = re.sub(rf"(\n    {name}: )[0-9.]+", r"\g<1>0", text)
    (tmp_path / CONFIG_FILE).write_text(text)
    line = text.splitlines().index("  weights:") + 1
    with pytest.raises(ConfigError) as raised:
        Config.load(tmp_path)
    assert str(raised.value) == (
        f"{tmp_path / CONFIG_FILE}:{line}: search.weights row, neighbours, document and subject cannot all be 0"
    )


def test_the_old_name_of_settle_seconds_is_still_read(tmp_path):
    (tmp_path / CONFIG_FILE).write_text("watch:\n  quiet_seconds: 2\n")
    assert Config.load(tmp_path).watch.settle_seconds == 2.0
    (tmp_path / CONFIG_FILE).write_text("watch:\n  quiet_seconds: 2\n  settle_seconds: 3\n")
    assert Config.load(tmp_path).watch.settle_seconds == 3.0
    (tmp_path / CONFIG_FILE).write_text("watch:\n  quiet_seconds: soon\n")
    with pytest.raises(ConfigError, match=r":2: watch.quiet_seconds must be a number of at least 0, not 'soon'$"):
        Config.load(tmp_path)


def test_an_agent_entry_is_merged_over_the_default_and_an_unknown_agent_gets_the_default(tmp_path):
    (tmp_path / CONFIG_FILE).write_text(
        "budgets:\n  agents:\n    bot: {max_results: 5}\n    idle:\n  default: {max_tokens: 300, read_only: true}\n"
    )
    config = Config.load(tmp_path)
    assert config.budget_for("bot") == config.budget_for(None).narrowed(max_results=5)
    assert (config.budget_for("bot").max_tokens, config.budget_for("idle")) == (300, config.budget_for())
    assert config.budget_for("newcomer") == config.budget_for(None)


def test_a_closed_list_refuses_an_unknown_agent_and_says_where_to_declare_it(tmp_path):
    (tmp_path / CONFIG_FILE).write_text("budgets:\n  closed: true\n  agents:\n    bot: {max_results: 5}\n    idle:\n")
    config = Config.load(tmp_path)
    assert config.budget_for("bot").max_results == 5
    with pytest.raises(ConfigError) as refused:
        config.budget_for("other")
    assert str(refused.value) == (
        "unknown agent 'other': this memory admits only the agents its fsmem.yaml names "
        "(budgets.closed: true; known agents: bot, idle); declare it with: fsmem agent add other"
    )
    (tmp_path / CONFIG_FILE).write_text("budgets:\n  closed: maybe\n")
    with pytest.raises(ConfigError, match="budgets.closed must be"):
        Config.load(tmp_path)


def test_a_parsed_copy_is_checked_as_the_file_is(tmp_path):
    """The copy in .fsmem/ spares PyYAML's import; what it holds is checked all the same."""
    memory = Memory.init(tmp_path / "m")
    config = memory.root / CONFIG_FILE
    past = config.stat().st_mtime - 10
    os.utime(config, (past, past))
    assert Config.load(memory.root) == Memory(memory.root).config
    copy = memory.root / ".fsmem" / "config.json"
    assert copy.is_file()
    copy.write_text(copy.read_text().replace('"timeout_seconds": 10', '"timeout_seconds": -1'))
    with pytest.raises(
        ConfigError, match=rf"^{re.escape(str(config))}:26: grep.timeout_seconds must be a number above 0, not -1$"
    ):
        Config.load(memory.root)


def test_the_cli_names_a_misspelt_setting_and_exits_2(tmp_path):
    memory = Memory.init(tmp_path / "m")
    config = memory.root / CONFIG_FILE
    config.write_text(config.read_text().replace("  timeout_seconds: 10 ", "  timeout_secnds: 10 ", 1))
    env = without_fsmem()
    cli_runner.same_as_a_process(["--root", str(memory.root), "ls"], env=env)  # the `fsmem` script: the same bytes
    for argv in (["ls"], ["check"]):
        done = cli_runner.run(["--root", str(memory.root), *argv], text=True, env=env)  # run here (cli_runner)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == (
            f"fsmem: error: {config}:26: grep.timeout_secnds is not a setting of fsmem; did you mean grep.timeout_seconds?\n"
        )


@pytest.mark.parametrize(
    "added, reason",
    [
        ("extra: !!int abc\n", "invalid literal for int() with base 10: 'abc'"),
        (
            "extra: " + "9" * 5000 + "\n",
            "Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits",
        ),
    ],
    ids=["int tag on text", "integer of 5,000 digits"],
)
def test_a_value_yaml_cannot_construct_is_refused_naming_the_file(tmp_path, added, reason):
    """Its ValueError left the loader: every command stopped with 'fsmem: error: ValueError', naming no file."""
    memory = Memory.init(tmp_path / "m")
    config = memory.root / CONFIG_FILE
    config.write_text(config.read_text() + added)
    expected = f"{config} holds a value YAML cannot construct: {reason}"
    with pytest.raises(ConfigError) as refused:
        Config.load(memory.root)
    assert str(refused.value) == expected
    done = cli_runner.run(["--root", str(memory.root), "ls"], text=True, env=without_fsmem())
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"fsmem: error: {expected}\n")


@pytest.mark.parametrize(
    "added, key, twice, once",
    [  # the lines counted back from the end of the file: 1 is the last
        (
            "budgets:\n  default:\n    max_results: 7\n",
            "'budgets'",
            3,
            None,
        ),  # a second section: the first is the template's
        ("extra:\n  x: 1\n  x: 2\n", "'x'", 1, 2),
        ("extra: {a: 1, a: 2}\n", "'a'", 1, 1),  # both on one line
    ],
)
def test_a_key_set_twice_is_refused_with_both_lines(tmp_path, added, key, twice, once):
    """YAML keeps the last of two equal keys: a second `budgets:` pasted at the end would drop every agent."""
    memory = Memory.init(tmp_path / "m")
    config = memory.root / CONFIG_FILE
    before = config.read_text()
    config.write_text(before + added)
    total = len(config.read_text().splitlines())
    first = total - once + 1 if once else before.splitlines().index("budgets:") + 1
    expected = (
        f"{config}, line {total - twice + 1}: {key} is set twice in one mapping (first on line {first}); "
        "YAML would keep only the last, so fsmem refuses it"
    )
    with pytest.raises(ConfigError) as refused:
        Config.load(memory.root)
    assert str(refused.value) == expected
    env = without_fsmem()
    done = cli_runner.run(["--root", str(memory.root), "ls"], text=True, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"fsmem: error: {expected}\n")

"""Secrets in text: API keys, tokens, private keys and passwords, found and redacted. Pure, stdlib only.

Why not a library: measured on 46 planted secrets, 36 near-misses (git SHAs,
digests, UUIDs, placeholders) and all 5,882 LoCoMo turns, detect-secrets'
string API flags almost every word, its plugins used one by one miss the key
formats issued since 2024 (`github_pat_`, `sk-proj-`, `sk-ant-`, `AIza`,
`hf_`), its settings are process-global and not thread-safe, and importing it
costs more than a whole CLI call's start-up. These rules found 45/46 (27/33 on a held-out set
written after they were frozen), flagged 1 near-miss and no LoCoMo turn, and
scan a short note in a small fraction of the time its write takes.

Four kinds of rule, each giving the span of the secret itself (what to
redact): self-identifying provider formats, whole private-key blocks,
passwords inside URLs, and `keyword = value` assignments whose value looks
machine-made (or, after a password keyword, is no plain word). Entropy alone
is not used: memory notes are full of hashes. Every quantifier is bounded and
every rule is gated on a literal, so no input makes a scan slow.

An assignment's value must be the secret itself, on the key's line: code and
notes that say where a secret is (`os.environ.get('DB_PASSWORD')`,
`settings.SECRET_KEY`, `${DB_PASSWORD}`, `env://…`, a placeholder, another
key's name) are what a memory should hold instead, and are let through
(`_reference`; measured in docs/safety.md, `benchmarks/bench_secrets.py`).
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from fsmem.errors import SecretFound

_B = r"(?<![A-Za-z0-9_])"  # a token boundary that counts '_' as part of the token
_E = r"(?![A-Za-z0-9_])"

# (kind, pattern whose group 1 is the secret, literals one of which must occur for the rule to run)
_FORMATS: list[tuple[str, str, tuple[str, ...]]] = [
    (
        "AWS access key id",
        _B + r"((?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16})" + _E,
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    ),
    ("GitHub token", _B + r"((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,251})" + _E, ("gh",)),
    ("GitHub token", _B + r"(github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59})" + _E, ("github_pat_",)),
    ("GitLab token", _B + r"(gl(?:pat|dt|ft|soat|rt|cbt|ptt|oas)-[A-Za-z0-9_\-]{20,200})", ("gl",)),
    ("Slack token", _B + r"(xox[abposre]-[0-9]{6,20}-[A-Za-z0-9-]{8,200})", ("xox",)),
    ("Slack token", _B + r"(xapp-[0-9]-[A-Z0-9]{8,40}-[0-9]{8,20}-[a-f0-9]{32,128})", ("xapp-",)),
    (
        "Slack webhook",
        r"(https://hooks\.slack\.com/(?:services|workflows)/T[A-Z0-9]{1,40}/[A-Z0-9]{1,40}/[A-Za-z0-9]{1,80})",
        ("hooks.slack.com",),
    ),
    ("DigitalOcean token", _B + r"(do[opr]_v1_[a-f0-9]{64})" + _E, ("_v1_",)),
    ("Databricks token", _B + r"(dapi[a-f0-9]{32}(?:-[0-9])?)" + _E, ("dapi",)),
    ("Shopify token", _B + r"(shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32})" + _E, ("shp",)),
    ("Mailchimp API key", _B + r"([0-9a-f]{32}-us[0-9]{1,2})" + _E, ("-us",)),
    ("Discord bot token", _B + r"([MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38})" + _E, (".",)),
    ("Stripe key", _B + r"((?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,200})" + _E, ("_live_", "_test_")),
    ("Anthropic API key", _B + r"(sk-ant-(?:api|admin)[0-9]{2}-[A-Za-z0-9_\-]{80,200})", ("sk-ant-",)),
    ("OpenAI API key", _B + r"(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,300})", ("sk-",)),
    ("OpenAI API key", _B + r"(sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})" + _E, ("sk-",)),
    ("OpenAI API key", _B + r"(sk-[A-Za-z0-9]{40,200})" + _E, ("sk-",)),
    ("Google API key", _B + r"(AIza[0-9A-Za-z_\-]{35})" + _E, ("AIza",)),
    ("Hugging Face token", _B + r"(hf_[A-Za-z0-9]{30,100})" + _E, ("hf_",)),
    ("npm token", _B + r"(npm_[A-Za-z0-9]{36})" + _E, ("npm_",)),
    ("PyPI token", _B + r"(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,300})", ("pypi-",)),
    ("SendGrid API key", _B + r"(SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43})" + _E, ("SG.",)),
    ("Twilio API key", _B + r"(SK[0-9a-f]{32})" + _E, ("SK",)),
    ("Telegram bot token", _B + r"([0-9]{8,10}:AA[A-Za-z0-9_\-]{33})" + _E, (":AA",)),
    ("Azure storage key", r"AccountKey=([A-Za-z0-9+/]{86}==)", ("AccountKey=",)),
    (
        "JSON web token",
        _B + r"(eyJ[A-Za-z0-9_\-]{10,2000}\.eyJ[A-Za-z0-9_\-]{10,4000}\.[A-Za-z0-9_\-]{16,1000})",
        ("eyJ",),
    ),
    # scheme://user:password@host: the password is the secret
    (
        "URL password",
        r"\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s:/@\[\]()]{0,200}:([^\s/@\[\]()]{1,200})@[A-Za-z0-9.\-\[]",
        ("://",),
    ),
]
_PRIVATE_KEY = (
    r"-----BEGIN ((?:RSA |DSA |EC |OPENSSH |PGP |ENCRYPTED |SSH2 ENCRYPTED )?PRIVATE KEY(?: BLOCK)?)-----"
    r"[\s\S]*?(?:-----END \1-----|\Z)"
)
_KEYWORD = (
    r"(?:password|passwd|passphrase|pwd|pw|secret|client[_\-]?secret|secret[_\-]?key|api[_\-]?key|apikey|"
    r"access[_\-]?key|private[_\-]?key|auth[_\-]?token|access[_\-]?token|api[_\-]?token|token|credentials?)"
)
# keyword = value, keyword: value (Markdown, YAML, .env, shell): the key is a word around a keyword
_PASSWORD_IS = r"(?i)\b(?:password|passphrase|passcode)\s{1,3}(?:is|was)\s{1,3}(?:now\s{1,3}|still\s{1,3})?[\"'`]?([^\s\"'`]{6,200})"
_LOGIN_SLASH = (
    r"(?i)\b(?:login|credentials?|creds|user(?:name)?/password)\s{0,3}:\s{0,3}[^\s/]{2,40}\s{0,3}/\s{0,3}([^\s]{6,200})"
)
_KEYWORDS = r"pass|pwd|pw|secret|key|token|credential|login|creds"  # where any keyword rule can match
_PASSWORD_KEY = r"(?i)pass|pwd|(?:^|[_\-])pw$"
_SECRET_KEY = r"(?i)pass|pwd|(?:^|[_\-])pw$|secret"
_PLACEHOLDER = (
    r"(?i)^(?:<.*>|\$\{.*\}|\$[A-Z_]+|\{\{.*\}\}|%\(.*\)s|\*+|x{4,}|\.{3,}|…|"
    r"(?:none|null|nil|true|false|todo|tbd|redacted|changeme|example|your[_\-].*|\[redacted.*))$"
)
# What stands where a secret would, but names or points at it (a value of an assignment that is one of these is
# no secret): placeholders, variables and templates of every common language, a URI or a path to a secret store.
_REFERENCE_START = (
    r"(?i)^(?:<|\[|\{|\$(?:\{|\(|env:|[A-Z_][A-Z0-9_]*(?![a-z0-9])|[a-z_][a-z_]*(?![A-Za-z0-9]))|%[A-Z_][A-Z0-9_]*%|"
    r"#\{|@@?[A-Za-z_]|![A-Za-z]+$|![01](?:[,;)}\]]|$)|&[A-Za-z_']|[()]|[?+][A-Za-z]|"
    r"[a-z][a-z0-9+.\-]{1,20}:(?://|[a-z])|~?/|\.{1,2}/|x{3,}$|\*{3,}|(?:change|replace)[_\-]?me|"
    r".*[_\-](?:here|placeholder|password|passwd|secret|token|key)$|placeholder|dummy|(?:enter|insert|put|paste|add)[_\-]?your)"
)
# An identifier, then (optionally) more of them through `.`, `::`, `->` or `?.`, then optionally a call, an index
# or a type's arguments: `settings.SECRET_KEY`, `os.environ.get(`, `ENV[`, `env::var(`, `Option<String>`.
_IDENT = r"[A-Za-z_$][A-Za-z0-9_$]*"
_CODE_REFERENCE = rf"^{_IDENT}(?:(?:(?:\.|::|->|\?\.){_IDENT})*(?:[(\[<{{]|!\().*|(?:(?:\.|::|->|\?\.){_IDENT})+)$"
# a key's name as a value (`password_env: DB_PASSWORD`, `password = db_password`): letters joined by `_`
_KEY_NAME = r"^_?(?:[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[a-z][a-z0-9]*(?:_[a-z][a-z0-9]*)+|[a-z]+(?:[A-Z][a-z]+)+)$"


@functools.cache
def _rules() -> SimpleNamespace:
    """The compiled rules, built on the first scan (a command that writes nothing never pays for them)."""
    return SimpleNamespace(
        formats=[(kind, re.compile(pattern), sniff) for kind, pattern, sniff in _FORMATS],
        private_key=re.compile(_PRIVATE_KEY),
        password_is=re.compile(_PASSWORD_IS),
        login_slash=re.compile(_LOGIN_SLASH),
        password_key=re.compile(_PASSWORD_KEY),
        secret_key=re.compile(_SECRET_KEY),
        placeholder=re.compile(_PLACEHOLDER),
        reference_start=re.compile(_REFERENCE_START),
        code_reference=re.compile(_CODE_REFERENCE),
        key_name=re.compile(_KEY_NAME),
        hex=re.compile(r"[0-9a-fA-F]+"),
        digit=re.compile(r"[0-9]"),
        parts=re.compile(r"[^A-Za-z0-9_]+"),
        token_chars=re.compile(r"[A-Za-z0-9+/_\-.~]+"),
        symbol_or_digit=re.compile(r"[0-9!@#$%^&*()+=\-_.,;?~]"),
        # where rules can match at all: every provider token is a run of 20+ token characters
        long_run=re.compile(r"(?<![A-Za-z0-9_\-.:/+=])[A-Za-z0-9_\-.:/+=]{20,}"),
        url_spans=re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s]{1,400}@[^\s]{1,200}"),
        # ASCII letters only, either case: str.lower() could move offsets, and translating a non-ASCII text
        # to lower its ASCII letters cost more than every rule together
        keyword=re.compile(_KEYWORDS, re.IGNORECASE | re.ASCII),
        # the same in an ASCII text's lower case (same offsets): a case-sensitive search skips to the keywords'
        # first letters, where a case-insensitive one tries every alternative at every character
        keyword_lower=re.compile(_KEYWORDS),
        # `db_password`, `API-KEY`, and camelCase `dbPassword`
        key_shape=re.compile(
            r"(?i)(?:(?:[A-Za-z0-9]{1,24}[_\-]){0,4}|(?-i:[a-z][a-z0-9]{0,23}(?=[A-Z])))"
            + _KEYWORD
            + r"(?:[_\-][A-Za-z0-9]{1,24}){0,4}"
        ),
        # the value stays on the key's line (`password:` ending a line is no assignment of the next line)
        # (`:` and `=` alone: `::` is a path, `==` and `=>` are operators)
        after_key=re.compile(r"[\"'`]?[ \t]{0,3}(?::(?!:)|=(?![=>])|:=)[ \t]{0,3}([\"'`]?)([^\s\"'`]{4,400})"),
    )


@dataclass(frozen=True)
class Secret:
    """One secret found in a text: its 1-based line, its kind, and the span of the secret itself."""

    line: int
    kind: str
    start: int
    end: int

    def describe(self) -> str:
        """What a message may say about it: never the value."""
        return f"line {self.line}: looks like {with_article(self.kind)}"


# Kinds read aloud with a vowel sound although spelled otherwise ("an npm token"); "a URL password" is the converse.
_SPOKEN_VOWEL = ("npm ",)
_SPOKEN_CONSONANT = ("URL ",)


def with_article(kind: str) -> str:
    """`kind` after "a" or "an", as it is said: "an Anthropic API key", "an AWS access key id", "a URL password"."""
    vowel = kind[:1].lower() in "aeiou" and not kind.startswith(_SPOKEN_CONSONANT)
    return f"{'an' if vowel or kind.startswith(_SPOKEN_VOWEL) else 'a'} {kind}"


def _entropy(text: str) -> float:
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in (text.count(ch) for ch in set(text)))


def _looks_random(value: str) -> bool:
    """A token that looks machine-made: long, mixed character classes, high entropy (hex on its own scale)."""
    core = value.rstrip("=")
    if len(core) < 16:
        return False
    rules = _rules()
    if rules.hex.fullmatch(core):
        return len(core) >= 20 and _entropy(core) > 3.0
    classes = sum(bool(re.search(p, core)) for p in ("[a-z]", "[A-Z]", "[0-9]"))
    if not rules.token_chars.fullmatch(core):  # generated with punctuation too (Django's SECRET_KEY): longer, wilder
        return len(core) >= 32 and classes == 3 and _entropy(core) > 4.5
    return classes >= 2 and _entropy(core) > 3.5


def _password_like(value: str) -> bool:
    """A value after a password keyword: anything but a placeholder, a plain word or a reference."""
    rules = _rules()
    if rules.placeholder.match(value):
        return False
    return bool(rules.symbol_or_digit.search(value)) or _looks_random(value)


def _reference(value: str, *, quoted: bool) -> bool:
    """Whether an assigned value names or points at a secret rather than being one.

    Any value: a placeholder (`<your-password>`, `xxx`, `***`, `changeme`, `your_password_here`), a variable or
    template (`${DB_PASSWORD}`, `$DB_PASS`, `%DB_PASSWORD%`, `{{ vault_pw }}`, `#{ENV['X']}`), a YAML tag
    (`!secret`), a URI or a path (`env://POSTGRES_PASSWORD`, `vault:secret/db`, `/run/secrets/db`). Unquoted
    only, as code: a call, an attribute or an index (`os.environ.get(`, `settings.SECRET_KEY`, `ENV[`), or a
    key's name (`DB_PASSWORD`, `db_password`); quoted, such a value is a literal. A value that looks
    machine-made in any part is a literal whatever its shape.
    """
    rules = _rules()
    if rules.reference_start.match(value):
        shaped = True
    elif quoted:
        shaped = bool(rules.key_name.match(value)) and bool(rules.keyword.search(value))
    else:
        shaped = bool(rules.code_reference.match(value) or rules.key_name.match(value))
    # unless a part of it is a generated token (`env://Xk9…`, `key.ab12Cd…`)
    return shaped and not any(_looks_random(part) and rules.digit.search(part) for part in rules.parts.split(value))


def scan(text: str) -> list[Secret]:
    """Every secret in `text`, in order, spans not overlapping (the first rule to claim a span keeps it).

    The rules run only where they can match, found at C speed first: provider
    formats inside runs of 20+ token characters (prose has few), assignments
    where a keyword word is followed by `:` or `=`, URL passwords in `://…@`
    spans. Screening every line is still about a third of a large import's time
    (docs/performance.md, "Importing a large export").
    """
    found: list[tuple[int, int, str]] = []  # (start, end, kind) in the order of their starts, none overlapping
    starts: list[int] = []

    def add(kind: str, start: int, end: int) -> None:
        # only the spans beside it can overlap it: a check of them all took time quadratic in the secrets of a
        # text (8,000 on one line of 88,000 characters took 9 s)
        at = bisect.bisect_right(starts, start)
        beside = found[max(at - 1, 0) : at + 1]
        if all(end <= a or start >= b for a, b, _ in beside):
            starts.insert(at, start)
            found.insert(at, (start, end, kind))

    rules = _rules()
    if "PRIVATE KEY" in text:
        for match in rules.private_key.finditer(text):
            add("private key", match.start(), match.end())
    spans = [(m.start(), m.end()) for m in rules.long_run.finditer(text)]
    if "://" in text:
        spans += [(m.start(), m.end()) for m in rules.url_spans.finditer(text)]
    for start, end in spans:
        piece = text[start:end]
        for kind, pattern, sniff in rules.formats:
            if not any(literal in piece for literal in sniff):
                continue
            for match in pattern.finditer(text, start, end):
                value = match.group(1)
                if kind == "URL password" and (rules.placeholder.match(value) or value.startswith("$")):
                    continue
                if value.endswith("EXAMPLE") or len(set(value[-16:])) <= 3:  # documentation samples, ghp_xxxx…
                    continue
                add(kind, match.start(1), match.end(1))
    seen_lines: set[int] = set()
    line, searched = 0, 0  # the start of the line the last keyword was on; text before `searched` is done
    keywords = rules.keyword_lower.finditer(text.lower()) if text.isascii() else rules.keyword.finditer(text)
    for keyword in keywords:  # spans alone are used: those of the lower case are the text's
        # the word the keyword is part of (`db_password`, `API_KEY`) is the key; what follows `:` or `=` the value
        start, end = _word_around(text, keyword.start(), keyword.end())
        if rules.key_shape.fullmatch(text, start, end):
            after = rules.after_key.match(text, end)
            if after is not None and (start == 0 or not text[start - 1].isalnum()):
                key, value = text[start:end], after.group(2).rstrip(".,;:)]}")
                if not rules.placeholder.match(value) and not _reference(value, quoted=bool(after.group(1))):
                    if rules.secret_key.search(key) and not re.search(r"(?i)key", key):
                        ok = _password_like(value) if rules.password_key.search(key) else _looks_random(value)
                    else:
                        ok = _looks_random(value)
                    if ok:
                        add("secret assignment", after.start(2), after.start(2) + len(value))
        newline = text.rfind("\n", searched, keyword.start())  # keywords come in order: never look back twice
        line, searched = (newline + 1 if newline >= 0 else line), keyword.start()
        if line in seen_lines:
            continue
        seen_lines.add(line)
        line_end = _line_end(text, keyword.end())
        for pattern in (rules.login_slash, rules.password_is):
            for match in pattern.finditer(text, line, line_end):
                value = match.group(1).rstrip(".,;)")
                if _password_like(value):
                    add("password", match.start(1), match.start(1) + len(value))
    secrets, line, counted = [], 1, 0
    for start, end, kind in found:
        line, counted = line + text.count("\n", counted, start), start
        secrets.append(Secret(line, kind, start, end))
    return secrets


_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _word_around(text: str, start: int, end: int) -> tuple[int, int]:
    """The span of the key-like word (letters, digits, `_`, `-`) holding text[start:end], at most 124 wide."""
    low = max(0, start - 124)
    while start > low and text[start - 1] in _WORD_CHARS:
        start -= 1
    high = min(len(text), end + 124)
    while end < high and text[end] in _WORD_CHARS:
        end += 1
    return start, end


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end == -1 else end


def redact(text: str, secrets: list[Secret] | None = None) -> str:
    """`text` with each secret replaced by `[REDACTED:<kind>]` (redacted text scans clean)."""
    secrets = scan(text) if secrets is None else secrets
    for secret in sorted(secrets, key=lambda s: s.start, reverse=True):
        text = text[: secret.start] + f"[REDACTED:{secret.kind}]" + text[secret.end :]
    return text


def screen(text: str, policy: str, what: str) -> str:
    """`text` as it may be stored under `policy`: unchanged, redacted, or refused with the line and kind.

    The refusal names where the secret is and what it looks like, never the
    value: tool answers end up in transcripts and logs. A text of one line is
    named by `what` alone (`its line 2 looks like a GitHub token`), a longer
    one with the line (`the note, line 2: looks like a GitHub token`).
    """
    if policy == "allow" or not text:
        return text
    found = scan(text)
    if not found:
        return text
    if policy == "redact":
        return redact(text, found)
    kinds = sorted({secret.kind for secret in found})
    one_line = "\n" not in text.rstrip("\n")
    where = f"{what} looks like {with_article(found[0].kind)}" if one_line else f"{what}, {found[0].describe()}"
    raise SecretFound(
        where
        + (f" ({len(found)} secrets in all: {', '.join(kinds)})" if len(found) > 1 else "")
        + "; nothing was written (fsmem.yaml secrets.policy: refuse). Store the secret in a secret manager "
        "and write where to find it instead, or set secrets.policy to redact"
    )


def redact_value(value: Any) -> Any:
    """A front-matter or JSON value with every secret in its strings redacted."""
    if isinstance(value, str):
        return redact(value) if scan(value) else value
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, dict):
        return {key: redact_value(item) for key, item in value.items()}
    return value

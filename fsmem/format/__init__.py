"""The file format, pure and without I/O: front matter, Markdown structure, keyed facts and rows.

`from fsmem import format as fmt` gives the names most callers need from
`frontmatter`, `timestamps` and `markdown` in one place; `facts` and `rows` are imported by name.
Each name loads its module on first use, so that a command that only reaches
`fsmem.format.portable` (every path check does) does not pay for the parsers:
a plain `fsmem grep` never parses a file.
"""

from fsmem import _lazy_names

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing here

# name -> the module under fsmem.format that defines it (`fsmem._lazy_names`)
_EXPORTS = {
    "BOM": ".fences",
    "CONSOLIDATED_FIELD": ".frontmatter",
    "FENCE": ".fences",
    "MEMORY_TYPES": ".frontmatter",
    "Document": ".frontmatter",
    "Problem": ".frontmatter",
    "body_digest": ".frontmatter",
    "decode": ".frontmatter",
    "dump_field": ".frontmatter",
    "is_consolidated": ".frontmatter",
    "normalize_tags": ".frontmatter",
    "now_iso": ".timestamps",
    "parse_timestamp": ".timestamps",
    "render": ".frontmatter",
    "set_fields": ".frontmatter",
    "wall_clock": ".timestamps",
    "split": ".frontmatter",
    "validate": ".frontmatter",
    "FENCED_CODE": ".markdown",
    "HEADING": ".markdown",
    "HEADING_REST": ".markdown",
    "MERGE_MARK": ".markdown",
    "SUPERSEDED_HEADING": ".markdown",
    "Heading": ".markdown",
    "headings": ".markdown",
    "in_ranges": ".markdown",
    "merge_marks": ".markdown",
    "section_ends": ".markdown",
    "superseded_ranges": ".markdown",
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:  # what the type checker reads; at run time each name is loaded on first use
    from fsmem.format.fences import BOM as BOM, FENCE as FENCE
    from fsmem.format.frontmatter import (
        CONSOLIDATED_FIELD as CONSOLIDATED_FIELD,
        MEMORY_TYPES as MEMORY_TYPES,
        Document as Document,
        Problem as Problem,
        body_digest as body_digest,
        decode as decode,
        dump_field as dump_field,
        is_consolidated as is_consolidated,
        normalize_tags as normalize_tags,
        render as render,
        set_fields as set_fields,
        split as split,
        validate as validate,
    )
    from fsmem.format.markdown import (
        FENCED_CODE as FENCED_CODE,
        HEADING as HEADING,
        HEADING_REST as HEADING_REST,
        MERGE_MARK as MERGE_MARK,
        SUPERSEDED_HEADING as SUPERSEDED_HEADING,
        Heading as Heading,
        headings as headings,
        in_ranges as in_ranges,
        merge_marks as merge_marks,
        section_ends as section_ends,
        superseded_ranges as superseded_ranges,
    )
    from fsmem.format.timestamps import (
        now_iso as now_iso,
        parse_timestamp as parse_timestamp,
        wall_clock as wall_clock,
    )


__getattr__ = _lazy_names("fsmem.format", _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])

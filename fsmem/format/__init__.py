"""The file format, pure and without I/O: front matter, Markdown structure, keyed facts and rows.

`from fsmem import format as fmt` gives the names most callers need from
`frontmatter` and `markdown` in one place; `facts` and `rows` are imported by name.
"""

from fsmem.format.frontmatter import (
    BOM,
    CONSOLIDATED_FIELD,
    FENCE,
    MEMORY_TYPES,
    Document,
    Problem,
    body_digest,
    decode,
    dump_field,
    is_consolidated,
    normalize_tags,
    now_iso,
    parse_timestamp,
    render,
    set_fields,
    split,
    validate,
)
from fsmem.format.markdown import (
    FENCED_CODE,
    HEADING,
    MERGE_MARK,
    SUPERSEDED_HEADING,
    Heading,
    headings,
    in_ranges,
    merge_marks,
    section_ends,
    superseded_ranges,
)

__all__ = [
    "BOM",
    "CONSOLIDATED_FIELD",
    "FENCE",
    "MEMORY_TYPES",
    "Document",
    "Problem",
    "body_digest",
    "decode",
    "dump_field",
    "is_consolidated",
    "normalize_tags",
    "now_iso",
    "parse_timestamp",
    "render",
    "set_fields",
    "split",
    "validate",
    "FENCED_CODE",
    "HEADING",
    "MERGE_MARK",
    "SUPERSEDED_HEADING",
    "Heading",
    "headings",
    "in_ranges",
    "merge_marks",
    "section_ends",
    "superseded_ranges",
]

"""Sphinx settings for fsmem's documentation: MyST Markdown, the Furo theme, nothing fetched at build time.

`make docs` builds it with warnings as errors (`-W --keep-going`); a broken
link between pages, a missing anchor, a page left out of the table of contents
or a code block Pygments cannot read stops the build.
"""

import sys
from pathlib import Path

from pygments.lexers.special import TextLexer

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS / "_ext"), str(DOCS.parent)]

from fsmem import __version__  # noqa: E402

project = "fsmem"
author = "the fsmem authors"
release = version = __version__
extensions = ["myst_parser", "fsmem_reference", "fsmem_config_reference"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "_ext"]
root_doc = "index"

# Every heading down to ### gets GitHub's anchor, so `page.md#a-heading` links work on GitHub and here alike.
myst_heading_anchors = 3
myst_enable_extensions = ["deflist"]
suppress_warnings: list[str] = []

html_theme = "furo"
html_title = f"fsmem {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
html_copy_source = False


def setup(app):
    # crontab lines have no Pygments lexer; shown as they are
    app.add_lexer("cron", TextLexer)

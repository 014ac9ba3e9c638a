"""Turning a fetched HTML page into what a model reads best: Markdown, or plain text.

CPU-bound and synchronous (a big page takes a while): callers run these in a thread.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # The parsers are imported on the first page converted: start-up should not pay for them.
    from bs4 import BeautifulSoup

# Never content a reader sees: dropped with everything inside them.
_INVISIBLE_TAGS = ("script", "style", "noscript", "template", "iframe", "object", "embed", "meta", "link")
# Elements that start a new line when the page is read as text.
_BLOCK_TAGS = (
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "fieldset",
    "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr",
    "li", "main", "nav", "ol", "p", "pre", "section", "table", "title", "tr", "ul",
)  # fmt: skip
_CELL_TAGS = ("td", "th")
_BLANK_LINES = re.compile(r"\n{3,}")

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


def is_html(mime: str) -> bool:
    return mime in HTML_TYPES


def _visible_soup(html: str) -> BeautifulSoup:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.find_all(_INVISIBLE_TAGS):
        tag.decompose()
    return soup


def html_to_markdown(html: str) -> str:
    from markdownify import ATX, MarkdownConverter

    soup = _visible_soup(html)
    converter = MarkdownConverter(heading_style=ATX, bullets="-", escape_misc=False)
    markdown = converter.convert_soup(soup)
    return _BLANK_LINES.sub("\n\n", markdown).strip()


def html_to_text(html: str) -> str:
    """The page's visible text: one line per block element, whitespace inside a line collapsed."""
    soup = _visible_soup(html)
    for tag in soup.find_all(_BLOCK_TAGS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    for tag in soup.find_all(_CELL_TAGS):
        tag.insert_after(" ")
    lines = (" ".join(line.split()) for line in soup.get_text().splitlines())
    return "\n".join(line for line in lines if line)

"""HTML to readable text with the standard library's parser.

Scripts, styles, navigation and other page chrome are dropped; headings become
Markdown headings, list items bullets, links ``[text](url)``; whitespace collapses.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin

_SKIP = {"script", "style", "nav", "noscript", "svg", "template", "iframe", "head", "footer",
         "form", "button", "select", "aside"}  # fmt: skip
_BLOCK = {"p", "div", "section", "article", "main", "header", "br", "tr", "table", "ul", "ol",
          "blockquote", "pre", "hr", "dl", "dt", "dd", "figure", "figcaption", "li"}  # fmt: skip
_HEADINGS = {"h1": "# ", "h2": "## ", "h3": "### ", "h4": "#### ", "h5": "##### ", "h6": "###### "}
_SPACES = re.compile(r"\s+")
_VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source",
         "track", "wbr"}  # fmt: skip


class _Extractor(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.parts: list[str] = []
        self.title = ""
        self._skip_depth = 0
        self._in_title = False
        self._link: str | None = None
        self._link_text: list[str] = []
        self._pre_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in _SKIP and tag not in _VOID:
            self._skip_depth += 1
            return
        if self._skip_depth:
            return
        if tag == "pre":
            self._pre_depth += 1
        if tag in _HEADINGS:
            self.parts.append("\n\n" + _HEADINGS[tag])
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag in _BLOCK:
            self.parts.append("\n")
        elif tag in ("td", "th"):
            self.parts.append(" | ")
        elif tag == "a":
            href = dict(attrs).get("href") or ""
            absolute = urljoin(self.base_url, href) if href else ""
            self._link = absolute if absolute.startswith(("http://", "https://")) else None
            self._link_text = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in _SKIP and tag not in _VOID:
            self._skip_depth = max(0, self._skip_depth - 1)
            return
        if self._skip_depth:
            return
        if tag == "pre":
            self._pre_depth = max(0, self._pre_depth - 1)
        if tag in _HEADINGS or tag in ("p", "pre", "blockquote", "table"):
            self.parts.append("\n\n")
        elif tag == "a" and self._link is not None:
            text = " ".join("".join(self._link_text).split())
            if text:
                self.parts.append(f"[{text}]({self._link})")
            self._link = None

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if self._skip_depth:
            return
        # Preformatted text keeps its lines (\x00 marks newlines that must survive).
        data = data.replace("\n", "\x00") if self._pre_depth else _SPACES.sub(" ", data)
        if self._link is not None:
            self._link_text.append(data)
        else:
            self.parts.append(data)


def _clean_line(line: str) -> str:
    if "\x00" in line:  # from <pre>: keep its own line breaks and indentation
        return line.replace("\x00", "\n").strip("\n")
    return " ".join(line.split())


def html_to_text(html: str, base_url: str = "") -> str:
    extractor = _Extractor(base_url)
    extractor.feed(html)
    extractor.close()
    text = "".join(extractor.parts)
    lines = [_clean_line(line) for line in text.split("\n")]
    lines = [line for line in lines if line not in ("-", "|")]
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    title = " ".join(extractor.title.split())
    if title and not body.startswith(f"# {title}"):
        return f"Title: {title}\n\n{body}"
    return body

"""A web page's readable text: decoded in its own charset, hidden text dropped, then the
main content (not menus, cookie banners, sidebars or footers) taken by trafilatura.

Hidden text goes first because a page can hide instructions for the LLM where no reader
sees them (off-screen, clipped, white on white…: tools/builtin/hidden_text.py); what a
person does not see, the model does not read either.
"""

from __future__ import annotations

import codecs
import contextlib
import copy
import logging
import re
from configparser import ConfigParser

import lxml.html
import trafilatura
from lxml.etree import ParserError
from trafilatura.settings import use_config

from tools.builtin.hidden_text import drop_hidden

__all__ = ["decode_page", "drop_hidden", "readable_text"]

# <meta charset="x"> and <meta http-equiv="Content-Type" content="text/html; charset=x">
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# What browsers read these labels as (WHATWG Encoding): windows-1252 is a superset.
_BROWSER_ALIASES = {"iso8859-1": "cp1252", "ascii": "cp1252"}


def decode_page(body: bytes, header_charset: str | None) -> str:
    """``body`` as text: a byte-order mark, else the Content-Type charset, else the page's
    ``<meta charset>``, else UTF-8 if it is valid, else windows-1252 (the web's default)."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body.decode(name, errors="replace")
    meta = _META_CHARSET.search(body[:4096])
    for label in (header_charset, meta.group(1).decode("ascii") if meta else None):
        codec = _codec(label)
        if codec is not None:
            return body.decode(codec, errors="replace")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="replace")


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    try:
        name = codecs.lookup(label.strip().lower()).name
    except LookupError:
        return None
    return _BROWSER_ALIASES.get(name, name)


def readable_text(html: str, url: str) -> str:
    """The page's title and main content as Markdown-ish text (headings, lists, tables,
    ``[text](absolute url)`` links)."""
    tree = _parse(html)
    if tree is None:
        return ""
    drop_hidden(tree)
    with contextlib.suppress(ValueError, ParserError):  # a base URL lxml cannot use
        tree.make_links_absolute(url, resolve_base_href=True, handle_failures="discard")
    title = " ".join((tree.findtext(".//title") or "").split())
    # trafilatura's main-content extractor, without its minimum size (250 characters,
    # below which it falls back to all of a page's text, menus included: a short page
    # is still a page); then its full pipeline; then all the visible text.
    text = (
        _extract(tree, url, _NO_MINIMUM)
        or _extract(tree, url, _DEFAULT_CONFIG)
        or trafilatura.html2txt(tree)
    ).strip()
    if title and not text.startswith(f"# {title}"):
        return f"Title: {title}\n\n{text}"
    return text


def _parse(html: str) -> lxml.html.HtmlElement | None:
    # trafilatura's loader copes with encoding declarations and broken markup, but says
    # None for a fragment it does not take for HTML ("<p>a<br>b</p>"); lxml parses those.
    tree = trafilatura.load_html(html)
    if tree is not None:
        return tree
    try:
        return lxml.html.document_fromstring(html)
    except (ValueError, ParserError):
        return None


def _extract(tree: lxml.html.HtmlElement, url: str, config: ConfigParser) -> str | None:
    # trafilatura prunes the tree it is given: each attempt gets a copy.
    return trafilatura.extract(
        copy.deepcopy(tree),
        url=url,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        include_formatting=True,
        include_comments=False,
        favor_recall=True,
        config=config,
    )


def _no_minimum() -> ConfigParser:
    config = use_config()
    config.set("DEFAULT", "MIN_EXTRACTED_SIZE", "1")
    return config


_DEFAULT_CONFIG = use_config()
# trafilatura warns when one of its fallback extractors gives up on a page (a short page,
# odd markup): that is how extraction goes, not a fault of Navi's worth a log line.
logging.getLogger("trafilatura").setLevel(logging.ERROR)
_NO_MINIMUM = _no_minimum()

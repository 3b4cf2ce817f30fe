"""MkDocs hook: our docstrings name other objects with Sphinx roles (:func:`x`, :class:`~a.b.C`), which
Markdown renders as the literal role followed by code. Keep the code, drop the role, and shorten a
``~``-prefixed path to its last part, as Sphinx shows it."""

import re

_ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|exc):<code>(~?)([^<]*)</code>")


def _code(match: re.Match) -> str:
    tilde, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"


def on_page_content(html, **kwargs):
    return _ROLE.sub(_code, html)

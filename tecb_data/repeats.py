"""Options given more than once on the command line: each adds up, or is refused.

argparse keeps the last of a repeated option: ``--metrics level --metrics dbcv`` filled in DBCV
only, and ``--out a --out b`` wrote to ``b``, without a word. Here an option that takes a value
either adds up when repeated (``append`` options such as ``--data``, the seeds, a comma list such
as ``--metrics``: :class:`CommaList`) or is refused when given twice (:class:`StoreOnce`, what
:class:`tecb_data.commandline.CommandParser` uses for argparse's plain ``store``): one line naming
the option and both values, exit code 2.

A custom action that adds up says so with ``accumulates = True``; one that stores a single value
calls :func:`refuse_repeat` first.
"""

from __future__ import annotations

import argparse
import weakref


class _Seen:
    """Which namespaces (one per parse) an action has already stored into, and with what. argparse's
    Namespace defines ``__eq__`` and so cannot be hashed: it is kept by ``id`` with a weak reference
    that tells a namespace from a later one at the same address."""

    def __init__(self):
        self._by_id: dict[int, tuple[weakref.ref, str, object]] = {}

    def first(self, namespace) -> tuple[str, object] | None:
        found = self._by_id.get(id(namespace))
        if found is None or found[0]() is not namespace:
            return None
        return found[1], found[2]

    def add(self, namespace, option_string: str | None, values) -> None:
        self._by_id = {key: entry for key, entry in self._by_id.items() if entry[0]() is not None}
        self._by_id[id(namespace)] = (weakref.ref(namespace), option_string, values)


def _seen(action: argparse.Action) -> _Seen:
    if not isinstance(action.__dict__.get("seen_in"), _Seen):
        action.seen_in = _Seen()
    return action.seen_in


def _shown(values) -> str:
    if isinstance(values, (list, tuple)):
        return " ".join(map(_shown, values))
    return str(values)


def refuse_repeat(action: argparse.Action, namespace, values, option_string: str | None) -> None:
    """Raise argparse's error (one line, exit 2) when ``action`` already stored a value in this parse
    (``namespace``); else remember that it did."""
    seen = _seen(action)
    first = seen.first(namespace)
    if first is not None:
        name = option_string or "/".join(action.option_strings) or action.dest
        earlier = first[0] if first[0] not in (None, option_string) else name
        raise argparse.ArgumentError(
            None, f"{name} given twice ({earlier} {_shown(first[1])}, then {name} {_shown(values)}): it takes one "
                  "value; give it once")
    seen.add(namespace, option_string, values)


class StoreOnce(argparse.Action):
    """argparse's ``store``, refused when the option comes again in the same command line."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string is not None:  # a positional is filled once by argparse itself
            refuse_repeat(self, namespace, values, option_string)
        setattr(namespace, self.dest, values)


class CommaList(argparse.Action):
    """A comma-separated list (``--metrics level,dbcv``) that adds up when repeated:
    ``--metrics level --metrics dbcv`` is ``level,dbcv``. The default (``--listings``' ``hot,top``)
    is replaced by the first one given, not added to."""

    accumulates = True

    def __call__(self, parser, namespace, values, option_string=None):
        seen = _seen(self)
        before = getattr(namespace, self.dest, None) if seen.first(namespace) is not None else None
        setattr(namespace, self.dest, values if before is None else f"{before},{values}")
        seen.add(namespace, option_string, values)

"""Label spellings: one label a reader sees is one label in the data.

Every label is normalised (:func:`normalise`: Unicode NFC, format characters and every other
code point Unicode marks Default_Ignorable dropped, whitespace and blanks collapsed) and each change is
counted. Labels that still differ but fold together (:func:`fold_key`: NFKC, case, the confusables
skeleton of Unicode TS #39) are two spellings of one label as far as a reader can tell: the table
source stops on them unless told to keep them apart or merge them. ``ß`` and ``ss`` are two
spellings of two German words (``Maße``, ``Masse``), never one label's case.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# U+2800 BRAILLE PATTERN BLANK renders as an empty cell but is neither whitespace nor ignorable to
# Unicode; it collapses with the whitespace. (The Hangul fillers, which render as nothing too, are
# Default_Ignorable and dropped with the rest.)
_BLANKS = "\u2800"
_SPACES = re.compile(r"[\s" + _BLANKS + r"]+")
# The comment column of confusables.txt wraps right-to-left characters in LEFT-TO-RIGHT MARKs for
# display; confusable-homoglyphs copies them into its entries, they are no part of the character.
_DISPLAY_MARKS = str.maketrans("", "", "\u200e\u200f")

# What each normalisation step is counted as in the build report.
CHANGES = ("nfc", "format_characters", "invisible_characters", "whitespace")


@lru_cache(maxsize=1)
def _ignorable():
    """Unicode's Default_Ignorable_Code_Point property (DerivedCoreProperties.txt) as the ``regex``
    module derives it from the Unicode version it ships: combining grapheme joiner, Hangul fillers,
    variation selectors (VS16 included), Mongolian free variation selectors, tags, reserved ones."""
    import regex

    return regex.compile(r"\p{Default_Ignorable_Code_Point}")


def normalise(label: str) -> tuple[str, tuple[str, ...]]:
    """``label`` in NFC, without format characters (Unicode category Cf: zero-width space, soft
    hyphen, BOM, word joiner, ...), without any other code point Unicode marks Default_Ignorable
    (invisible characters: combining grapheme joiner, Hangul filler, variation selectors, ...),
    runs of whitespace and blanks as one space and trimmed; and which of :data:`CHANGES` altered it."""
    changes = []
    composed = unicodedata.normalize("NFC", label)
    if composed != label:
        changes.append("nfc")
    visible = "".join(c for c in composed if unicodedata.category(c) != "Cf")
    if visible != composed:
        changes.append("format_characters")
    shown = _ignorable().sub("", visible)
    if shown != visible:
        changes.append("invisible_characters")
    collapsed = _SPACES.sub(" ", shown).strip()
    if collapsed != shown:
        changes.append("whitespace")
    return collapsed, tuple(changes)


@lru_cache(maxsize=1)
def _prototypes() -> tuple[dict[str, str], dict[str, str]]:
    """(one representative per set of confusable characters, a character's multi-character prototype).

    confusable-homoglyphs keeps Unicode's confusables.txt (source -> prototype) as an undirected
    list of look-alikes per character. A source is one code point and a prototype maps to itself,
    so the single-character look-alikes form stars around their prototype: any fixed member of a
    connected set (the smallest) serves as its prototype for telling whether two skeletons are
    equal; a single character listed with a longer string is a source of that string."""
    from confusable_homoglyphs.confusables import confusables_data

    parent: dict[str, str] = {}

    def find(c: str) -> str:
        while parent.get(c, c) != c:
            parent[c] = parent.get(parent[c], parent[c])
            c = parent[c]
        return c

    longer: dict[str, str] = {}
    for key, entries in confusables_data.items():
        key = key.translate(_DISPLAY_MARKS)
        if len(key) != 1:
            continue
        for entry in entries:
            other = entry["c"].translate(_DISPLAY_MARKS)
            if len(other) == 1:
                a, b = find(key), find(other)
                if a != b:
                    parent[max(a, b)] = min(a, b)
            elif other:
                longer[key] = other
    representative = {c: find(c) for c in list(parent)}
    return representative, longer


def skeleton(text: str) -> str:
    """The confusables skeleton of Unicode TS #39 (NFD, each character by its prototype, NFD), up to
    the choice of one prototype per set: equal skeletons mean look-alike strings."""
    representative, longer = _prototypes()
    out = []
    for c in unicodedata.normalize("NFD", text):
        target = longer.get(c, c)
        out.append("".join(representative.get(t, t) for t in target))
    return unicodedata.normalize("NFD", "".join(out))


def fold_case(text: str) -> str:
    """``text`` case-folded, except that ``ß`` and capital ``ẞ`` stay ``ß``: full case folding maps
    them to ``ss``, which joins two German words (``Maße``, ``Masse``) that are no case of each other."""
    return "".join("ß" if c in "ßẞ" else c.casefold() for c in text)


def fold_key(label: str) -> str:
    """What a reader cannot tell apart: NFKC (ligatures, full-width letters), case (:func:`fold_case`),
    then the confusables skeleton (a Cyrillic а, a non-breaking hyphen, a typographic apostrophe)."""
    return skeleton(fold_case(unicodedata.normalize("NFKC", label)))


def how_they_fold(a: str, b: str) -> str:
    """Why ``a`` and ``b`` read as one label, the first fold that makes them one, in words for a message."""
    nfkc = lambda s: unicodedata.normalize("NFKC", s)
    if nfkc(a) == nfkc(b):
        return "they are one under NFKC (a ligature, a full-width or other compatibility character)"
    if fold_case(nfkc(a)) == fold_case(nfkc(b)):
        return "they differ in case only"
    return "their characters look alike (Unicode's confusables, TS #39)"

"""Any labelled table (CSV/TSV, JSON Lines, Parquet, a ``datasets`` ``save_to_disk`` folder) as
normalized records, cleaned with every removal counted by reason.

A record's text per view is its text columns joined by a space, with runs of whitespace as one
space (as the 10kGNAD source does). Its labels are one column (flat: level ``category``), or a
parent and a child (levels ``top`` and ``fine``, from two columns or from one path column). Its id
is the id column, or else a digest of its texts and labels, so that the keyed member hashing of the
recipes stays independent of the row order.

Input a user can get wrong ends in one line naming the file, the row and the column; cleaning never
drops a record without counting it under its reason (``removed_<reason>`` in the build report).
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import json
import math
import re
import shlex
import sys
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from tecb_data import inputs
from tecb_data import labels as spellings
from tecb_data.errors import UserError
from tecb_data.recipes import Item
from tecb_data.sources import InputFile, SourceResult, collapse_spaces, csv_reader

FORMATS = ("csv", "tsv", "jsonl", "parquet", "datasets")
EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
              ".parquet": "parquet", ".pq": "parquet"}
DELIMITERS = (",", ";", "\t", "|")
QUOTECHARS = ('"', "'")
PARQUET_MAGIC = b"PAR1"
SNIFF_CHARS = 1 << 16
# Every reason a record can be removed for; each is reported, zero or not, so that a card shows
# what was checked and not only what happened to occur.
REASONS = ("empty_text", "too_short", "other_language", "exact_duplicate", "conflicting_duplicate", "rare_label")
EXAMPLES_PER_REASON = 10
# What to do with labels that differ but look the same to a reader (``--similar-labels``): stop the
# build naming both spellings, keep them as two labels, or merge them into the most frequent one.
SIMILAR_LABELS = ("stop", "keep", "merge")


@dataclass(frozen=True)
class TableSource:
    """What to read from the table and how to clean it, normalized from :class:`TableSettings`."""

    label: str
    text: tuple[str, ...] = ()  # S2S view: these columns joined
    text_p2p: tuple[str, ...] = ()  # P2P view: these columns joined
    label_parent: str | None = None  # with ``label``: the parent of the child label ``label``
    label_path: str | None = None  # instead: one column "parent > child" (or a list)
    path_sep: str = ">"
    id: str | None = None
    columns: tuple[str, ...] | None = None  # names of a CSV's columns when it has no header row
    delimiter: str | None = None  # CSV/TSV: sniffed when None
    quotechar: str | None = None
    format: str | None = None  # from the extension when None
    split: str | None = None  # of a datasets DatasetDict folder
    min_chars: int = 1
    min_per_label: int = 1
    language: str = "de"
    language_filter: bool = False  # drop records langdetect does not find in ``language``
    similar_labels: str = "stop"  # one of SIMILAR_LABELS

    @property
    def hierarchical(self) -> bool:
        return self.label_parent is not None or self.label_path is not None

    @property
    def labelled(self) -> bool:
        """False for a corpus without labels: no label column named at all."""
        return bool(self.label or self.label_path or self.label_parent)

    @property
    def views(self) -> tuple[str, ...]:
        return tuple(view for view, columns in (("s2s", self.text), ("p2p", self.text_p2p)) if columns)

    def needed_columns(self) -> list[str]:
        wanted = [*self.text, *self.text_p2p] + ([self.label_path or self.label] if self.labelled else [])
        if self.label_path is None and self.label_parent is not None:
            wanted.append(self.label_parent)
        if self.id is not None:
            wanted.append(self.id)
        return list(dict.fromkeys(wanted))

    def check(self) -> None:
        """Option combinations that cannot work, before any file is read."""
        if not self.views:
            raise UserError("--source table needs --text COL[,COL...] (S2S view) and/or --text-p2p COL[,COL...] (P2P view)")
        if self.label_parent is not None and self.label_path is not None:
            raise UserError("pass --label-parent COL or --label-path COL, not both")
        if self.label_path is None and not self.label and self.label_parent is not None:
            raise UserError("--label-parent COL needs --label COL, the child label column beside it")
        if self.label_path is not None and self.label and self.label != self.label_path:
            raise UserError("--label-path names the label column; leave --label out (or give it the same column)")
        if self.label_path is not None and not self.path_sep:
            raise UserError("--path-sep must not be empty")
        if self.format is not None and self.format not in FORMATS:
            raise UserError(f"--format {self.format!r}: choose one of {', '.join(FORMATS)}")
        for name, value in (("--delimiter", self.delimiter), ("--quotechar", self.quotechar)):
            if value is not None and len(value) != 1:
                raise UserError(f"{name} must be one character, got {value!r} (a tab: $'\\t')")
        if not self.labelled and (self.similar_labels != "stop" or self.min_per_label != 1):
            option = "--similar-labels" if self.similar_labels != "stop" else "--min-per-label"
            raise UserError(f"{option} applies to a label column; without --label the table is read without labels")
        if self.min_chars < 1 or self.min_per_label < 1:
            raise UserError("--min-chars and --min-per-label must be 1 or more")
        if not re.fullmatch(r"[a-z]{2,3}", self.language or ""):
            raise UserError(f"--language {self.language!r}: give an ISO 639-1 code such as de")
        if self.columns is not None and len(set(self.columns)) != len(self.columns):
            raise UserError(f"--columns {','.join(self.columns)}: a name repeats")
        if self.similar_labels not in SIMILAR_LABELS:
            raise UserError(f"--similar-labels {self.similar_labels!r}: choose one of {', '.join(SIMILAR_LABELS)}")
        for option, names in (("--text", self.text), ("--text-p2p", self.text_p2p), ("--label", (self.label,)),
                              ("--label-parent", (self.label_parent,)), ("--label-path", (self.label_path,)),
                              ("--id", (self.id,)), ("--columns", self.columns or ())):
            for name in names:
                check_no_control(option, name, "a column name")
        # A tab may separate the levels of a path; a line break or other control character would end
        # the card's line that names the separator.
        if self.label_path is not None and self.path_sep != "\t":
            check_no_control("--path-sep", self.path_sep, "a separator")


def column_names(value) -> tuple[str, ...]:
    """Column names as a tuple: a string is split at its commas (``"title,body"``), a list kept."""
    if isinstance(value, str):
        return tuple(c.strip() for c in value.split(",") if c.strip())
    return tuple(value or ())


@dataclass(frozen=True, kw_only=True)
class TableSettings:
    """Everything a table build is told, as `tecb-data build --source table` takes it: each field is
    the option of that name, dashes for underscores (but ``input_format`` is ``--format`` and
    ``split`` ``--input-split``), with the command's default. :func:`tecb_data.build.build_table` takes one::

        TableSettings(name="german-news", text="title", text_p2p="title,body", label="label")

    A build needs ``name`` and a text column (``text`` and/or ``text_p2p``); the labels (``label``,
    ``label`` with ``label_parent``, or ``label_path``) are optional: without them the dataset is a
    corpus without labels, one split of every text (or a seeded ``sample`` of them), scored by
    label-free criteria only. The rest is optional.
    """

    # The datasets are NAME-s2s and/or NAME-p2p: lower-case letters, digits, "-", "_" or ".", e.g.
    # german-news-clustering.
    name: str | None = None
    # The label column: flat labels (the TenKGnad-style recipe), or the child label with label_parent.
    label: str | None = None
    text: str | Sequence[str] = ()  # S2S view: its text columns (a list, or one string "a,b"), joined by a space
    text_p2p: str | Sequence[str] = ()  # P2P view: its text columns, as text
    label_parent: str | None = None  # the parent label column beside label: Blurbs-style splits
    label_path: str | None = None  # instead of label: one column "parent > child" (or a list), Blurbs-style splits
    path_sep: str = ">"  # the separator of label_path's levels
    id: str | None = None  # the record id column; without one, a digest of a record's texts and labels
    columns: str | Sequence[str] | None = None  # a CSV/TSV without a header row: its column names, as text
    delimiter: str | None = None  # the CSV delimiter, one character; sniffed among , ; tab | when None
    quotechar: str | None = None  # the CSV quote character; sniffed among " and ' when None
    # One of FORMATS; from the extension when None (a folder is a datasets save_to_disk folder).
    input_format: str | None = None
    split: str | None = None  # the split to read of a datasets DatasetDict folder
    language: str = "de"  # the ISO 639-1 language of the texts, for the card, the manifest and MTEB's task
    licence: str | None = None  # the data's Hub licence id, e.g. cc-by-4.0: needed to push, not to build
    citation: Path | None = None  # a file with the source's BibTeX entry: needed to push, not to build
    description: str | None = None  # one sentence for the card; made from the columns when None
    pretty_name: str | None = None  # the card's title without the view; made from name when None
    source_url: str | None = None  # where the table comes from, for the card
    splits: int | None = None  # sampled splits per level; the paper's 10 when None
    min_fraction: float | None = None  # the smallest sampled split, a fraction of the records; the paper's 0.1 when None
    max_fraction: float = 1.0  # the largest sampled split, a fraction of the records
    min_chars: int = 1  # texts shorter than this are removed (1: only empty ones)
    min_per_label: int = 1  # rows of labels with fewer texts are removed (1: none)
    language_filter: bool = False  # remove the rows langdetect does not find in language (counted as other_language)
    # Labels that read as one (case, ligatures, look-alike letters): "stop" the build naming both,
    # "keep" them apart, or "merge" them into their most frequent spelling (one of SIMILAR_LABELS).
    similar_labels: str = "stop"
    # Without a label column: the one split holds a seeded sample of this many texts (None: every text).
    sample: int | None = None

    def table_source(self) -> TableSource:
        """What to read from the table and how to clean it, column lists as tuples."""
        return TableSource(
            label=self.label or self.label_path or "", text=column_names(self.text),
            text_p2p=column_names(self.text_p2p), label_parent=self.label_parent, label_path=self.label_path,
            path_sep=self.path_sep, id=self.id,
            columns=column_names(self.columns) if self.columns is not None else None, delimiter=self.delimiter,
            quotechar=self.quotechar, format=self.input_format, split=self.split, min_chars=self.min_chars,
            min_per_label=self.min_per_label, language=self.language, language_filter=self.language_filter,
            similar_labels=self.similar_labels,
        )


def check_no_control(option: str, value: str | None, what: str) -> None:
    """A name a user gives (a column, a dataset name) that holds a control character (a line break, a
    tab, Unicode category Cc) is refused where it is given: it would end a line of the card, of a
    Markdown table or of the command a reader pastes."""
    if value is None:
        return
    bad = next((c for c in value if unicodedata.category(c) == "Cc" or c in "\u2028\u2029"), None)
    if bad is not None:
        said = {"\n": " (a line break)", "\r": " (a carriage return)", "\t": " (a tab)"}.get(bad, "")
        raise UserError(f"{option} {value[:40]!r}: {what} with the control character U+{ord(bad):04X}{said}; "
                        "give it without one (rename the column in the table if it is spelled so there)")


@dataclass
class _Record:
    id: str | None  # None until the labels are settled, where it is a digest of texts and labels
    texts: dict[str, str]
    labels: dict[str, str | None]
    path: tuple[str, ...]
    where: str  # "row 5 (line 6)": for messages and report examples
    deeper: tuple[str, ...] = ()  # --label-path levels below the child: kept in the path for provenance


@dataclass
class _Removals:
    counts: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=lambda: defaultdict(list))

    def add(self, reason: str, record: _Record, detail: str | None = None) -> None:
        self.counts[reason] += 1
        if len(self.examples[reason]) < EXAMPLES_PER_REASON:
            example = {"where": record.where, "id": record.id, "labels": {k: v for k, v in record.labels.items() if v},
                       "text": next(iter(record.texts.values()), "")[:200]}
            if detail:
                example["why"] = detail
            self.examples[reason].append(example)


# -- reading the file ------------------------------------------------------------------------------
def input_format(path: Path, given: str | None) -> str:
    if given is not None:
        return given
    if path.is_dir():
        return "datasets"
    fmt = EXTENSIONS.get(path.suffix.lower())
    if fmt is None:
        raise UserError(f"{path}: unknown table format {path.suffix or '(no extension)'!r}; name it "
                        f"{', '.join(sorted(EXTENSIONS))} or pass --format {{{','.join(FORMATS)}}}")
    return fmt


def _what_it_is(raw: bytes) -> str:
    if raw.startswith(PARQUET_MAGIC):
        return "a Parquet file: name it .parquet or pass --format parquet"
    if raw.startswith(b"\x1f\x8b"):
        return "a gzip file: decompress it first"
    if raw.startswith(b"PK\x03\x04"):
        return "a zip file: extract the table first"
    return "binary data"


def _utf16_or_32(raw: bytes) -> str | None:
    """The encoding of a UTF-16 or UTF-32 text (by its byte-order mark, or, without one, by the zero
    bytes every ASCII character brings), or None. A spreadsheet's "Unicode text" export is UTF-16."""
    for bom, name in ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
                      (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16")):
        if raw.startswith(bom):
            return name
    head = raw[:SNIFF_CHARS - SNIFF_CHARS % 4]
    if len(head) >= 4 and len(head) % 2 == 0:
        even, odd = head[0::2], head[1::2]
        # Latin text in UTF-16: one of each byte pair is zero (nearly) everywhere, the other nearly never.
        for zeros, letters in ((odd, even), (even, odd)):
            if zeros.count(0) >= 0.9 * len(zeros) and letters.count(0) <= 0.1 * len(letters):
                return "UTF-16"
    return None


def _text_of(path: Path, raw: bytes, fmt: str) -> str:
    """The file as text; a binary file or one that is not UTF-8 is named with its line and position."""
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    wide = _utf16_or_32(raw)
    if wide is not None:
        raise UserError(f"{path}: {wide} text, not UTF-8; re-save it as UTF-8 (a spreadsheet: \"CSV UTF-8\"; "
                        f"or `iconv -f {wide.lower()} -t utf-8 {shlex.quote(path.name)} > {shlex.quote('utf8-' + path.name)}`)")
    if b"\x00" in raw[:SNIFF_CHARS] or raw.startswith(PARQUET_MAGIC):
        raise UserError(f"{path}: not a {fmt.upper()} text file, it is {_what_it_is(raw)}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise UserError(
            f"{path}: line {line}, byte {column} of the line: not UTF-8 text (byte 0x{raw[exc.start]:02x}); "
            "convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8`"
        ) from None


def _sniff_scores(sample: str, delimiters, quotechars) -> list[tuple[tuple, tuple[str, str]]]:
    """Each (delimiter, quote character) with how well it splits the sample: into rows of two or
    more fields, how consistently, and how many fields it leaves wrapped in an unconsumed quote."""
    scored = []
    for rank, (delimiter, quotechar) in enumerate((d, q) for d in delimiters for q in quotechars):
        try:
            rows = [r for r in csv.reader(io.StringIO(sample), delimiter=delimiter, quotechar=quotechar) if r]
        except csv.Error:
            continue
        if len(sample) >= SNIFF_CHARS and len(rows) > 1:
            rows = rows[:-1]  # the sample may end inside the last record
        if not rows:
            continue
        width, count = Counter(len(r) for r in rows).most_common(1)[0]
        stray = sum(1 for r in rows for f in r if len(f) >= 2 and f[0] == f[-1] and f[0] in QUOTECHARS)
        scored.append(((width >= 2, count / len(rows), -stray, -rank), (delimiter, quotechar)))
    return sorted(scored, reverse=True)


def sniff_dialect(sample: str, delimiters=DELIMITERS, quotechars=QUOTECHARS) -> tuple[str, str]:
    """(delimiter, quote character) that split the sample into the most consistent rows of two or
    more fields. csv.Sniffer takes 10kGNAD's ``label;'text'`` for space-delimited; counting how
    consistently each candidate splits whole records, and how many fields it leaves wrapped in an
    unconsumed quote, tells them apart."""
    scored = _sniff_scores(sample, delimiters, quotechars)
    return scored[0][1] if scored else (delimiters[0], quotechars[0])


def parses_cleanly(text: str, delimiter: str, quotechar: str, width: int | None = None) -> bool:
    """Whether the whole text reads under this dialect, quotes doubled inside quoted fields (RFC 4180's
    rule), with no error and every record as wide as the first (or as ``width``)."""
    try:
        for row in csv_reader(text, delimiter=delimiter, quotechar=quotechar, strict=True):
            if not row:
                continue
            if width is None:
                width = len(row)
            elif len(row) != width:
                return False
    except csv.Error:
        return False
    return True


def choose_dialect(text: str, delimiters=DELIMITERS, quotechars=QUOTECHARS,
                   width: int | None = None) -> tuple[str, str]:
    """The (delimiter, quote character) to read a whole CSV text with. Only readings under which the
    whole file parses are candidates: the sniffer, which sees a sample, decides between those (a
    one-column file written by pandas or the csv module, whose texts hold apostrophes and semicolons,
    splits into more fields under ``;`` and ``'`` in its sample, yet only its RFC 4180 reading parses).
    When no reading parses, the sniffer's best, so the reader names the record that breaks it."""
    scored = _sniff_scores(text[:SNIFF_CHARS], delimiters, quotechars)
    for _, (delimiter, quotechar) in scored:
        if parses_cleanly(text, delimiter, quotechar, width):
            return delimiter, quotechar
    return scored[0][1] if scored else (delimiters[0], quotechars[0])


def delimiter_of(fmt: str, source: TableSource) -> str | None:
    """The delimiter the user chose, or the one a TSV file has; None: sniffed."""
    return source.delimiter or ("\t" if fmt == "tsv" else None)


def _csv_rows(path: Path, source: TableSource, fmt: str) -> tuple[list[str], Iterator[tuple[str, dict]]]:
    text = _text_of(path, inputs.read_bytes(path, what=str(path), limit=None), fmt)
    if "\r" in text and "\n" not in text:
        # Line ends of a bare CR (old Excel's "CSV (Macintosh)"): the lines a reader would find.
        text = text.replace("\r", "\n")
    delimiters = (source.delimiter,) if source.delimiter else (("\t",) if fmt == "tsv" else DELIMITERS)
    quotechars = (source.quotechar,) if source.quotechar else QUOTECHARS
    if delimiter_of(fmt, source) == "\t" and source.quotechar is None:
        # In a tab-separated file a quote is a character (as in a spreadsheet's TSV export, which
        # quotes nothing): a stray " in one text must not swallow the rows after it.
        delimiter, quotechar, quoting = "\t", None, csv.QUOTE_NONE
        dialect = "delimiter '\\t', no quote character (pass --quotechar '\"' if fields are quoted)"
    else:
        width = len(source.columns) if source.columns is not None else None
        delimiter, quotechar = choose_dialect(text, delimiters, quotechars, width)
        quoting = csv.QUOTE_MINIMAL
        dialect = f"delimiter {delimiter!r}, quote {quotechar!r}"
    # strict: a quote never closed (a file cut mid-record) is an error, not a shorter last record
    reader = csv_reader(text, delimiter=delimiter, quotechar=quotechar, quoting=quoting, strict=True)
    spanning: list[int] = []  # the first lines of records that span several lines (quoted line breaks)

    def records() -> Iterator[tuple[int, list[str]]]:
        while True:
            line = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                if spanning:
                    # A reader's record count that differs from the file's line count is said, with
                    # the line: a stray quote that joined rows shows here, not as silently fewer rows.
                    print(f"note: {path}: {len(spanning):,} record(s) span several lines (a quoted field holds "
                          f"a line break), the first at line {spanning[0]}; {reader.line_num:,} lines were read as "
                          f"fewer records: if that is wrong, a stray quote joined them (pass --quotechar)",
                          file=sys.stderr)
                return
            except csv.Error as exc:
                if "unexpected end of data" in str(exc):
                    raise UserError(f"{path}: line {line}: the file ends inside this record's quoted text; "
                                    "it is truncated, or pass --quotechar") from None
                raise UserError(f"{path}: line {reader.line_num}: not a CSV record ({exc}; read with {dialect}); "
                                "pass --delimiter / --quotechar") from None
            if reader.line_num > line and len(spanning) < 1_000_000:
                spanning.append(line)
            if row:
                yield line, row

    rows = records()
    if source.columns is not None:
        header = list(source.columns)
    else:
        first = next(rows, None)
        if first is None:
            raise UserError(f"{path}: empty file; no header row and no records")
        header = [name.strip() for name in first[1]]
        repeated = [name for name, n in Counter(header).items() if n > 1]
        if repeated:
            raise UserError(f"{path}: line 1 (header): column {repeated[0]!r} appears twice; rename one")

    def values() -> Iterator[tuple[str, dict]]:
        for number, (line, row) in enumerate(rows, start=1):
            where = f"row {number} (line {line})"
            if len(row) != len(header):
                raise UserError(f"{path}: {where}: {len(row)} fields, the header has {len(header)} "
                                f"({dialect}); pass --delimiter / --quotechar, or --columns for a file without header")
            yield where, dict(zip(header, row))

    return header, values()


def _jsonl_rows(path: Path, source: TableSource) -> tuple[list[str] | None, Iterator[tuple[str, dict]]]:
    text = _text_of(path, inputs.read_bytes(path, what=str(path), limit=None), "jsonl")

    def values() -> Iterator[tuple[str, dict]]:
        # Lines end at \n (a \r before it is JSON whitespace): str.splitlines would also cut at
        # U+2028 and the other Unicode line separators, which valid JSON holds inside its strings.
        for line, content in enumerate(text.split("\n"), start=1):
            if not content.strip():
                continue
            where = f"line {line}"
            try:
                row = json.loads(content)
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}: {where}, character {exc.colno}: not JSON ({exc.msg}); "
                                "is this a JSON Lines file (one object per line)?") from None
            if not isinstance(row, dict):
                raise UserError(f"{path}: {where}: a JSON {type(row).__name__}, not an object with columns")
            _check_characters(path, where, row)
            yield where, row

    return None, values()


def _check_characters(path: Path, where: str, row: dict) -> None:
    """JSON can spell a lone surrogate (``"\\ud800"``), half of a UTF-16 pair and no character:
    it can be neither written as UTF-8 nor shown, so the row is refused, naming its column."""
    def bad(value) -> bool:
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return True
            return False
        if isinstance(value, list):
            return any(bad(v) for v in value)
        if isinstance(value, dict):
            return any(bad(k) or bad(v) for k, v in value.items())
        return False

    for column, value in row.items():
        if bad(column) or bad(value):
            raise UserError(f"{path}: {where}: column {column.encode('utf-8', 'backslashreplace').decode()!r} holds "
                            "a lone surrogate escape (\\ud800 to \\udfff without its pair), which is no "
                            "character; correct that escape in the file")


def _parquet_rows(path: Path, source: TableSource) -> tuple[list[str], Iterator[tuple[str, dict]]]:
    import pyarrow
    import pyarrow.parquet as pq

    with inputs.open_regular(path, what=str(path)) as fh:
        head = fh.read(4)
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - 4))
        tail = fh.read(4)
    if head == PARQUET_MAGIC and tail != PARQUET_MAGIC:
        raise UserError(f"{path}: a Parquet file cut short (it starts with the PAR1 marker but does not end with "
                        f"it; {size:,} bytes): it is truncated, copy or download it again")
    if head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
        with inputs.open_regular(path, what=str(path)) as fh:
            raw = fh.read(SNIFF_CHARS)
        looks = "text (a CSV or JSON Lines file?)" if b"\x00" not in raw else _what_it_is(raw)
        raise UserError(f"{path}: not a Parquet file (no PAR1 marker at its {'start' if head != PARQUET_MAGIC else 'end'}); "
                        f"it looks like {looks}")
    try:
        parquet = pq.ParquetFile(path)
    except (pyarrow.ArrowException, OSError) as exc:
        raise UserError(f"{path}: a damaged Parquet file ({exc}); copy or download it again") from None
    header = list(parquet.schema_arrow.names)
    wanted = [c for c in source.needed_columns() if c in header]

    def values() -> Iterator[tuple[str, dict]]:
        number = 0
        for batch in parquet.iter_batches(columns=wanted, batch_size=4096):
            for row in batch.to_pylist():
                number += 1
                yield f"row {number}", row

    return header, values()


def _datasets_rows(path: Path, source: TableSource) -> tuple[list[str], Iterator[tuple[str, dict]]]:
    import datasets

    if not any((path / name).is_file() for name in ("dataset_info.json", "state.json", "dataset_dict.json")):
        raise UserError(f"{path}: a folder, but not one written by datasets' save_to_disk "
                        "(no dataset_info.json or dataset_dict.json); pass a table file or such a folder")
    try:
        loaded = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise UserError(f"{path}: cannot read this datasets folder ({' '.join(str(exc).split())})") from None
    if isinstance(loaded, datasets.DatasetDict):
        names = sorted(loaded)
        split = source.split or (names[0] if len(names) == 1 else None)
        if split not in loaded:
            raise UserError(f"{path}: holds the splits {', '.join(names)}; pick one with --input-split NAME")
        loaded = loaded[split]
    elif source.split is not None:
        raise UserError(f"{path}: a single dataset without splits; leave --input-split out")
    header = list(loaded.column_names)
    wanted = [c for c in source.needed_columns() if c in header]

    def values() -> Iterator[tuple[str, dict]]:
        number = 0
        for batch in loaded.select_columns(wanted).iter(batch_size=4096):
            for i in range(len(batch[wanted[0]]) if wanted else 0):
                number += 1
                yield f"row {number}", {c: batch[c][i] for c in wanted}

    return header, values()


def _inputs(path: Path) -> list[InputFile]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and ".cache" not in p.relative_to(path).parts)
        return [InputFile.of(p, f"{path.name}/{p.relative_to(path).as_posix()}") for p in files]
    return [InputFile.of(path)]


def read_rows(path: Path, source: TableSource) -> tuple[list[str] | None, Iterator[tuple[str, dict]]]:
    """(column names, or None where each row brings its own; (where, row) per record)."""
    fmt = input_format(path, source.format)
    if fmt == "datasets":
        if not path.is_dir():
            raise UserError(f"{path}: --format datasets needs the folder datasets' save_to_disk wrote")
        return _datasets_rows(path, source)
    if path.is_dir():
        raise UserError(f"{path}: a folder; pass the table file, or a datasets save_to_disk folder")
    if source.split is not None:
        raise UserError(f"--input-split {source.split}: picks a split of a datasets save_to_disk folder; {path.name} "
                        f"is a {fmt} file, whose rows are all read: leave --input-split out")
    if source.columns is not None and fmt not in ("csv", "tsv"):
        raise UserError("--columns names the columns of a CSV/TSV file without a header row; "
                        f"{path.name} is {fmt}, whose columns have names")
    if fmt in ("csv", "tsv"):
        return _csv_rows(path, source, fmt)
    if fmt == "jsonl":
        return _jsonl_rows(path, source)
    return _parquet_rows(path, source)


# -- rows to records -------------------------------------------------------------------------------
def _cell(path: Path, where: str, column: str, row: dict, *, allow_list: bool = False):
    if column not in row:
        raise UserError(f"{path}: {where}: no column {column!r} (this row has: {', '.join(map(str, row)) or 'nothing'})")
    value = row[column]
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        # 1.0 is the number 1: a reader (JSON, Parquet's float column) that spells it 1.0 must not
        # make it a label apart from 1 and "1".
        return str(int(value))
    if isinstance(value, (int, float)):  # bool is an int: True/False labels are fine as text
        return str(value)
    if allow_list and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise UserError(f"{path}: {where}, column {column!r}: a {type(value).__name__}, expected text")


def _joined(path: Path, where: str, columns: tuple[str, ...], row: dict) -> str:
    return " ".join(part for part in (collapse_spaces(_cell(path, where, c, row)) for c in columns) if part)


def _respelled(value: str, changes: Counter) -> str:
    """A label as :func:`tecb_data.labels.normalise` spells it, its changes counted."""
    value, changed = spellings.normalise(value)
    changes.update(changed)
    return value


def _label(path: Path, where: str, column: str, row: dict, what: str = "label", changes: Counter | None = None) -> str:
    value = _respelled(_cell(path, where, column, row), changes if changes is not None else Counter())
    if not value:
        raise UserError(f"{path}: {where}, column {column!r}: empty {what}; fill it in or remove the row")
    return value


def _labels(path: Path, where: str, source: TableSource, row: dict,
            changes: Counter) -> tuple[dict, tuple[str, ...], tuple[str, ...]]:
    """(labels by level, the record's label path, the path's levels below the child)."""
    if not source.labelled:
        return {}, (), ()
    if source.label_path is not None:
        column = source.label_path
        value = _cell(path, where, column, row, allow_list=True)
        parts = value if isinstance(value, list) else value.split(source.path_sep)
        parts = [_respelled(p, changes) for p in parts]
        if not any(parts):
            raise UserError(f"{path}: {where}, column {column!r}: empty label path; fill it in or remove the row")
        if not all(parts):
            raise UserError(f"{path}: {where}, column {column!r}: the path {value!r} has an empty level "
                            f"(separator {source.path_sep!r}; pass --path-sep)")
        # The recipe has two levels: the first element is the parent, the second the child; deeper
        # levels stay in the record's path for provenance.
        labels = {"top": parts[0], "fine": parts[1] if len(parts) > 1 else None}
        return labels, _path_of(labels, tuple(parts[2:])), tuple(parts[2:])
    if source.label_parent is not None:
        top = _label(path, where, source.label_parent, row, "parent label", changes)
        fine = _label(path, where, source.label, row, "child label", changes)
        return {"top": top, "fine": fine}, _path_of({"top": top, "fine": fine}), ()
    category = _label(path, where, source.label, row, changes=changes)
    return {"category": category}, (category,), ()


def _path_of(labels: dict, deeper: tuple[str, ...] = ()) -> tuple[str, ...]:
    if "category" in labels:
        return (labels["category"],)
    return (" > ".join(p for p in (labels["top"], labels["fine"], *deeper) if p),)


def _settle_similar_labels(path: Path, source: TableSource, records: list[_Record]) -> dict:
    """Labels of one level that differ but fold together (:func:`tecb_data.labels.fold_key`) stop
    the build naming both spellings and where each first occurs; ``--similar-labels merge`` makes
    them the most frequent spelling (then the first in code point order), ``keep`` leaves them apart.
    Returns the counts for the build report."""
    merged = kept_apart = 0
    columns = {"category": source.label, "top": source.label_path or source.label_parent,
               "fine": source.label_path or source.label}
    for level in (("top", "fine") if source.hierarchical else ("category",)):
        first_at: dict[str, str] = {}
        frequency: Counter = Counter()
        for record in records:
            value = record.labels.get(level)
            if value:
                first_at.setdefault(value, record.where)
                frequency[value] += 1
        groups: dict[str, list[str]] = defaultdict(list)
        for value in sorted(first_at):
            groups[spellings.fold_key(value)].append(value)
        similar = [group for _, group in sorted(groups.items()) if len(group) > 1]
        if not similar:
            continue
        if source.similar_labels == "stop":
            a, b = sorted(similar[0], key=lambda v: (-frequency[v], v))[:2]
            what = {"top": "parent labels", "fine": "child labels"}.get(level, "labels")
            more = f" (and {len(similar) - 1} more such group(s))" if len(similar) > 1 else ""
            raise UserError(
                f"{path}: column {columns[level]!r}: the {what} {a!r} ({first_at[a]}) and {b!r} ({first_at[b]}) read "
                f"as one label: {spellings.how_they_fold(a, b)}{more}; correct the table, or pass --similar-labels "
                "merge (one label, the most frequent spelling) or --similar-labels keep (separate labels)")
        if source.similar_labels == "keep":
            kept_apart += sum(len(group) for group in similar)
            continue
        spelling = {value: sorted(group, key=lambda v: (-frequency[v], v))[0] for group in similar for value in group}
        for record in records:
            value = record.labels.get(level)
            if value in spelling and spelling[value] != value:
                record.labels[level] = spelling[value]
                merged += 1
    if merged:
        for record in records:
            record.path = _path_of(record.labels, record.deeper)
    return {"labels_merged": merged, "labels_kept_apart": kept_apart}


def record_id(texts: dict[str, str], labels: dict[str, str | None]) -> str:
    """A record's id without an id column: a digest of what it is, never of where it stands."""
    payload = json.dumps([sorted(texts.items()), sorted(labels.items(), key=lambda kv: kv[0])],
                         ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=8).hexdigest()


def _records(path: Path, source: TableSource, progress=None) -> tuple[list[_Record], list[str] | None, dict]:
    """The rows as records with settled labels, the column names, and the label counts for the report."""
    header, rows = read_rows(path, source)
    if header is not None:
        missing = [c for c in source.needed_columns() if c not in header]
        if missing:
            hint = "" if source.columns is not None else "; a file without a header row needs --columns NAME,NAME,..."
            shown = ", ".join(repr(h[:40]) for h in header[:12]) + (", ..." if len(header) > 12 else "")
            where = "line 1 (header)" if input_format(path, source.format) in ("csv", "tsv") and source.columns is None else "columns"
            raise UserError(f"{path}: {where}: no column {missing[0]!r}; the table has {shown}{hint}")
    records = []
    changes: Counter = Counter()
    for where, row in rows:
        texts = {}
        if source.text:
            texts["s2s"] = _joined(path, where, source.text, row)
        if source.text_p2p:
            texts["p2p"] = _joined(path, where, source.text_p2p, row)
        labels, label_path, deeper = _labels(path, where, source, row, changes)
        identifier = None
        if source.id is not None:
            identifier = collapse_spaces(_cell(path, where, source.id, row))
            if not identifier:
                raise UserError(f"{path}: {where}, column {source.id!r}: empty id; every row needs one")
        records.append(_Record(identifier, texts, labels, label_path, where, deeper))
        if progress is not None:
            progress.update(1)
    if not records:
        raise UserError(f"{path}: no records (only a header row, or an empty file)")
    counts = {f"labels_respelled_{change}": changes[change] for change in spellings.CHANGES}
    counts.update(_settle_similar_labels(path, source, records))
    # Ids from the labels as they are published: a label written two ways is one record's label.
    for record in records:
        if record.id is None:
            record.id = record_id(record.texts, record.labels)
    return records, header, counts


def _check_label_column(path: Path, source: TableSource, records: list[_Record]) -> None:
    if not source.labelled:
        return
    level = "top" if source.hierarchical else "category"
    values = {r.labels[level] for r in records}
    if len(values) < 2:
        column = source.label_path or source.label_parent or source.label
        raise UserError(f"{path}: column {column!r}: every one of the {len(records):,} rows has the label "
                        f"{next(iter(values))!r}; clustering needs two or more labels (is it the right column?)")


def _unique_ids(path: Path, source: TableSource, records: list[_Record], removals: _Removals) -> list[_Record]:
    by_id: dict[str, _Record] = {}
    for record in records:
        first = by_id.get(record.id)
        if first is None:
            by_id[record.id] = record
        elif (first.texts, first.labels) == (record.texts, record.labels):
            unusable = _unusable(record, source)
            if unusable is not None:
                # No copy of it is kept: each is removed for what it is, not as a duplicate of a kept one.
                removals.add(*unusable)
            else:
                removals.add("exact_duplicate", record, f"same id, text and label as {first.where}")
        else:
            raise UserError(f"{path}: {record.where}, column {source.id!r}: id {record.id!r} is also the id of "
                            f"{first.where}, with another text or label; ids must be unique")
    return [by_id[i] for i in sorted(by_id)]


def _duplicate_key(record: _Record) -> tuple:
    # Folded as labels are: a composed and a decomposed umlaut, or a text with a zero-width space
    # or a soft hyphen in it, are the same text to a reader.
    return tuple(spellings.normalise(record.texts[view])[0] for view in sorted(record.texts))


def _unusable(record: _Record, source: TableSource) -> tuple | None:
    """(reason, record[, detail]) for :class:`_Removals` where ``record``'s text cannot be a sample, else None."""
    if any(not text for text in record.texts.values()):
        return ("empty_text", record)
    if any(len(text) < source.min_chars for text in record.texts.values()):
        return ("too_short", record, f"fewer than {source.min_chars} characters")
    return None


def clean(records: list[_Record], source: TableSource, removals: _Removals, progress=None) -> list[_Record]:
    """Remove what cannot be a clustering sample, counting each record under its reason. ``records``
    are sorted by id and unique by id; the result is too, whatever the input order."""
    kept = []
    for record in records:
        unusable = _unusable(record, source)
        if unusable is not None:
            removals.add(*unusable)
        else:
            kept.append(record)
    if source.language_filter:
        from tecb_data.sources.reddit_collect import MIN_PROBABILITY, language_probability

        # The longest text decides: langdetect misjudges short titles, as the Reddit collection found.
        survivors = []
        for record in kept:
            text = max(record.texts.values(), key=len)
            probability = language_probability(text, source.language)
            if probability >= MIN_PROBABILITY:
                survivors.append(record)
            else:
                removals.add("other_language", record, f"P({source.language}) = {probability:.2f}")
        kept = survivors
    groups: dict[tuple, list[_Record]] = defaultdict(list)
    for record in kept:
        groups[_duplicate_key(record)].append(record)
    deduplicated = []
    for group in groups.values():
        if len(group) == 1:
            deduplicated.append(group[0])
        elif len({tuple(sorted(r.labels.items(), key=lambda kv: kv[0])) for r in group}) == 1:
            deduplicated.append(group[0])  # the smallest id: the group is in id order
            for record in group[1:]:
                removals.add("exact_duplicate", record, f"same text and label as {group[0].where}")
        else:
            # Which label is right cannot be told: none of them is kept.
            labels = sorted({"/".join(v for v in r.labels.values() if v) for r in group})
            for record in group:
                removals.add("conflicting_duplicate", record, f"same text labelled {', '.join(labels)}")
    kept = sorted(deduplicated, key=lambda r: r.id)
    if source.min_per_label > 1:
        # Removing a rare child can make its parent rare: repeat until nothing changes.
        while True:
            counts = Counter((level, value) for r in kept for level, value in r.labels.items() if value)
            rare = [r for r in kept if any(value and counts[level, value] < source.min_per_label
                                           for level, value in r.labels.items())]
            if not rare:
                break
            for record in rare:
                removals.add("rare_label", record, f"a label with fewer than {source.min_per_label} texts")
            dropped = {id(r) for r in rare}
            kept = [r for r in kept if id(r) not in dropped]
    return kept


def read_table(path: Path, source: TableSource, progress=None) -> tuple[SourceResult, dict]:
    """The cleaned records of the table, and the removed ones' examples by reason (for ``--report``)."""
    path = Path(path)
    source.check()
    if not path.exists():
        raise UserError(f"{path}: no such file or folder")
    if not path.is_dir():
        inputs.check_regular(path, what=str(path))
    records, _, label_counts = _records(path, source, progress)
    _check_label_column(path, source, records)
    removals = _Removals()
    records = _unique_ids(path, source, records, removals)
    kept = clean(records, source, removals)
    # Every row read is kept or removed under one reason: the report adds up.
    removed = {f"removed_{reason}": removals.counts[reason] for reason in REASONS}
    report = {"rows_read": len(kept) + sum(removed.values()), "kept": len(kept), **removed, **label_counts}
    if source.hierarchical:
        parents = defaultdict(set)
        for record in kept:
            if record.labels["fine"]:
                parents[record.labels["fine"]].add(record.labels["top"])
        shared = sum(1 for tops in parents.values() if len(tops) > 1)
        if shared:
            # The fine splits cluster on the child's name alone, as the Blurbs recipe does.
            report["warning_child_labels_under_several_parents"] = shared
    items = [Item(id=r.id, views=dict(r.texts), labels=dict(r.labels), path=r.path) for r in kept]
    examples = {reason: removals.examples[reason] for reason in REASONS if removals.examples[reason]}
    return SourceResult(items=items, inputs=_inputs(path), views=source.views, report=report), examples


# -- the datasets a table build publishes -------------------------------------------------------------
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,79}")


def mteb_base(name: str) -> str:
    """``german-news`` -> ``GermanNewsClustering``: MTEB's way of naming a clustering task."""
    base = "".join(part[:1].upper() + part[1:] for part in re.split(r"[-_.]+", name) if part)
    return base if base.endswith("Clustering") else base + "Clustering"


def check_name(name: str, views) -> None:
    from tecb_data.recipes import DATASETS

    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise UserError(f"--name {name!r}: use lower-case letters, digits, '-', '_' or '.' (at most 80), "
                        "e.g. german-news-clustering")
    for view in views:
        dataset, mteb_name = f"{name}-{view}", mteb_base(name) + view.upper()
        # A registry name would make verify, load and the MTEB tasks take this table for that dataset.
        for spec in DATASETS.values():
            if dataset == spec.name or mteb_name == spec.mteb_name:
                raise UserError(f"--name {name}: {dataset} ({mteb_name}) is the name of the registry's {spec.name}; "
                                "choose another --name")


def check_language(language: str) -> None:
    """``--language`` must be a code MTEB knows: its own conversion (the one the evaluation applies to
    the manifest's language) decides, so a code it cannot read fails at build time, not after a grid."""
    from mteb.languages.iso_mappings import _hf_lang_to_iso_lang_script

    if _hf_lang_to_iso_lang_script(language) is None:
        raise UserError(f"--language {language!r}: not an ISO 639 language code MTEB knows; give one such as de, "
                        "en or fra")


def check_one_line(option: str, value: str | None) -> None:
    """Text a user supplies for the card (a title, a description, a link) is one line of printable
    text: a line break or control character would change the card's Markdown around it."""
    if value is None:
        return
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") and c != "\u200d"), None)
    if bad is not None:
        raise UserError(f"{option} {value[:40]!r}: holds the control character U+{ord(bad):04X} (a line break?); "
                        "give one line of text")


def check_licence(licence: str | None) -> str:
    from tecb_data.card import HUB_LICENSES

    licence = (licence or "unknown").strip().lower()
    if licence not in HUB_LICENSES:
        raise UserError(f"--licence {licence!r}: not a licence id the Hub accepts; choose one of "
                        f"{', '.join(sorted(HUB_LICENSES))}")
    if licence == "other":
        raise UserError("--licence other needs a licence name and link on the card, which the table source does "
                        "not write yet; choose a listed licence id")
    return licence


# A BibTeX entry is a few hundred bytes; a megabyte is a wrong file.
CITATION_BYTES = 2**20


def read_citation(path: str | Path | None) -> str | None:
    if path is None:
        return None
    path = Path(path)
    try:
        text = inputs.read_text(path, what=f"--citation {path}", limit=CITATION_BYTES).strip()
    except FileNotFoundError:
        raise UserError(f"--citation {path}: no such file; pass a file holding the source's BibTeX entry") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"--citation {path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise UserError(f"--citation {path}: cannot read it ({exc.strerror})") from None
    if not text.startswith("@") or "{" not in text:
        raise UserError(f"--citation {path}: not a BibTeX entry (it should start with @article{{... or @inproceedings{{...)")
    return text


def dataset_specs(name: str, views, source: TableSource, *, input_name: str, recipe_name: str, licence: str,
                  citation: str | None, description: str | None = None, pretty_name: str | None = None,
                  source_url: str | None = None) -> list:
    """One :class:`DatasetSpec` per view, declared as the registry's are, but not in the registry:
    a table dataset is the user's, its manifest says what it is."""
    from tecb_data.recipes import DatasetSpec

    labels = ("no labels" if not source.labelled else f"{source.label_path} (parent > child)" if source.label_path else
              f"{source.label_parent} > {source.label}" if source.label_parent else source.label)
    specs = []
    for view in views:
        columns = ", ".join(source.text if view == "s2s" else source.text_p2p)
        specs.append(DatasetSpec(
            name=f"{name}-{view}",
            source="table",
            view=view,
            recipe=recipe_name,
            pretty_name=f"{pretty_name or ' '.join(p.capitalize() for p in re.split(r'[-_.]+', name) if p)} {view.upper()}",
            mteb_name=mteb_base(name) + view.upper(),
            description=description or (f"Clustering of texts ({columns}) from {input_name} by {labels}."
                                        if source.labelled else f"Texts ({columns}) from {input_name}, without labels."),
            license=licence,
            license_note=("The builder of this dataset declared its licence as "
                          f"`{licence}`." if licence != "unknown" else
                          "No licence was declared when this dataset was built; it must not be published as it is."),
            source_citations=(citation,) if citation else (),
            source_url=source_url or "",
            card_template="table.md.j2",
            publishable=True,
        ))
    return specs

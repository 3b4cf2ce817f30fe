"""Leak-free protocols: which texts a fold trains on, which split chooses its checkpoint, which
published splits it scores. Training never sees a text (or a book) that is validated or scored.

- ``leave-one-genre-out`` (Blurbs): fold G holds out top-level genre G. Its scored split is the
  published ``within-G`` split, unchanged. Its validation genre V is the next genre after G in
  name order; V's ``within-V`` split chooses the checkpoint and is neither trained on nor scored.
  Training draws from the books of the other genres (their ``within-*`` splits, labelled by
  second-level genre), minus every book and every text that appears in a scored or validation split.
- ``transfer``: train on all Blurbs genres but the validation genre (the first in name order),
  score the other datasets' published splits unchanged.

The genre of a book is the first level of its genre path in the dataset's ``data/samples.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from tecb_data.errors import UserError

PROTOCOLS = ("leave-one-genre-out", "transfer")
WITHIN = "within-"
SAMPLES = "data/samples.jsonl"


@dataclass(frozen=True)
class Pool:
    """Labelled training candidates: one entry per book, in id order."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    labels: tuple[str, ...]  # second-level genre
    genres: tuple[str, ...]  # top-level genre


@dataclass(frozen=True)
class ScoredSplit:
    dataset: str  # the benchmark's name
    mteb_name: str
    split: object  # tecb_data's BenchmarkSplit, unchanged
    # The benchmark it comes from: its MTEB task chooses a prompted model's prompt, as in the grid.
    bench: object = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Fold:
    name: str  # "within-<genre>" or "transfer"
    held_out: str | None  # the held-out genre (leave-one-genre-out)
    validation_genre: str
    train: Pool
    validation: object  # the BenchmarkSplit that chooses the checkpoint
    scored: tuple[ScoredSplit, ...]
    excluded_digest: str  # sha256 over the sorted ids kept out of training
    source: object = field(default=None, repr=False, compare=False)  # the benchmark trained on and validated on

    def manifest(self) -> dict:
        return {"fold": self.name, "held_out_genre": self.held_out, "validation_genre": self.validation_genre,
                "validation_split": self.validation.name, "train_texts": len(self.train.texts),
                "train_labels": len(set(self.train.labels)),
                "scored": [f"{s.dataset}/{s.split.name}" for s in self.scored],
                "excluded_ids_sha256": self.excluded_digest}


def _samples_path(bench) -> Path:
    # A dataset loaded from the Hub has its files in the cache's snapshot (its location is repo@commit).
    return Path(getattr(bench, "folder", None) or bench.location) / SAMPLES


def genre_of_books(bench) -> dict[str, str]:
    """id -> genre path (``top > child``), from the dataset's samples table; one line naming the file
    and row when the dataset has none (it is not a Blurbs build). The top-level genre is not cut out
    of the path at " > ": a genre's own name may hold that text (see :func:`_in_genre`)."""
    path = _samples_path(bench)
    if not path.is_file():
        raise UserError(f"{bench.name}: no {SAMPLES} in {path.parents[1]}; leave-one-genre-out needs a Blurbs dataset "
                        "folder built by tecb-data (with genre paths), or use --protocol transfer")
    genres: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            row = json.loads(line)
            paths = row.get("path") or []
            if not paths or not str(paths[0]).strip():
                raise UserError(f"{path}, line {number} (id {row.get('id')}): no genre path; leave-one-genre-out needs "
                                "a dataset whose samples carry genre paths (Blurbs), or use --protocol transfer")
            genres[str(row["id"])] = str(paths[0]).strip()
    return genres


def _in_genre(path: str | None, genre: str) -> bool:
    """Whether a genre path belongs to ``genre`` (the name of a within-genre split): it is the genre,
    or starts with it and the separator. Matching the whole name keeps "Kinder > Jugend" one genre."""
    return path is not None and (path == genre or path.startswith(genre + " > "))


def _books(bench) -> tuple[dict[str, tuple[str, str, str]], dict[str, object]]:
    """(id -> (text, second-level label, genre), genre -> its within split) from the within-* splits."""
    genre_of = genre_of_books(bench)
    within = {s.name[len(WITHIN):]: s for s in bench.splits if s.name.startswith(WITHIN)}
    if len(within) < 3:
        raise UserError(f"{bench.name}: {len(within)} within-genre split(s); leave-one-genre-out needs at least 3 "
                        "genres (one held out, one to validate, one to train on)")
    ids_of = _ids_by_split(bench)
    books: dict[str, tuple[str, str, str]] = {}
    for genre, split in within.items():
        for book, text, label in zip(ids_of[split.name], split.texts, split.labels):
            if not _in_genre(genre_of.get(book), genre):
                raise UserError(f"{_samples_path(bench)}: book {book} is in split {split.name} but its genre path "
                                f"is {genre_of.get(book)!r}, which does not start with {genre!r}; the samples table "
                                "and the splits disagree: rebuild the dataset with tecb-data")
            books[book] = (text, label, genre)
    return books, within


def _ids_by_split(bench) -> dict[str, list[str]]:
    ids: dict[str, list[str]] = {}
    with open(_samples_path(bench), encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            ids.setdefault(row["split"], []).append(str(row["id"]))
    for split in bench.splits:
        if len(ids.get(split.name, ())) != len(split.texts):
            raise UserError(f"{_samples_path(bench)}: split {split.name} has {len(ids.get(split.name, ()))} rows there "
                            f"but {len(split.texts)} in the dataset; rebuild the dataset")
    return ids


def _digest(ids) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode("utf-8")).hexdigest()


def _pool(books: dict, keep) -> Pool:
    chosen = sorted(i for i, (text, label, genre) in books.items() if keep(i, text, genre))
    return Pool(tuple(chosen), tuple(books[i][0] for i in chosen), tuple(books[i][1] for i in chosen),
                tuple(books[i][2] for i in chosen))


def _fold(name, held_out, validation_genre, books, within, scored: tuple[ScoredSplit, ...], ids_of, bench) -> Fold:
    source = bench.name
    validation = within[validation_genre]
    kept_out_texts = {t for s in scored for t in s.split.texts} | set(validation.texts)
    # Ids name books only within the training dataset; other datasets' texts are kept out by text.
    kept_out_ids = set(ids_of[validation.name]) | {i for s in scored if s.dataset == source
                                                    for i in ids_of[s.split.name]}
    excluded_genres = {validation_genre} | ({held_out} if held_out else set())
    train = _pool(books, lambda i, text, genre: genre not in excluded_genres and i not in kept_out_ids
                  and text not in kept_out_texts)
    excluded = sorted(set(books) - set(train.ids))
    return Fold(name, held_out, validation_genre, train, validation, scored, _digest(excluded), bench)


def leave_one_genre_out(bench) -> list[Fold]:
    """One fold per top-level genre, in name order."""
    books, within = _books(bench)
    ids_of = _ids_by_split(bench)
    genres = sorted(within)
    folds = []
    for index, genre in enumerate(genres):
        validation = genres[(index + 1) % len(genres)]
        scored = (ScoredSplit(bench.name, bench.mteb_name, within[genre], bench),)
        folds.append(_fold(within[genre].name, genre, validation, books, within, scored, ids_of, bench))
    return folds


def transfer(blurbs, targets) -> list[Fold]:
    """One fold: train on Blurbs (all genres but the validation genre), score every split of ``targets``."""
    if not targets:
        raise UserError("--protocol transfer needs datasets to score besides Blurbs (e.g. TenKGnad); give them with --data")
    books, within = _books(blurbs)
    ids_of = _ids_by_split(blurbs)
    scored = tuple(ScoredSplit(b.name, b.mteb_name, s, b) for b in targets for s in b.splits)
    return [_fold("transfer", None, sorted(within)[0], books, within, scored, ids_of, blurbs)]


def leaks(fold: Fold) -> list[str]:
    """Training texts that appear in a scored or the validation split (empty: no leak)."""
    training = set(fold.train.texts)
    found = []
    for s in fold.scored:
        found += [f"{s.dataset}/{s.split.name}: {t!r}" for t in sorted(training & set(s.split.texts))]
    found += [f"validation {fold.validation.name}: {t!r}" for t in sorted(training & set(fold.validation.texts))]
    return found


def check_no_leak(fold: Fold) -> None:
    found = leaks(fold)
    if found:  # a bug, not a user error: the folds are built to exclude these
        raise AssertionError(f"fold {fold.name}: {len(found)} training text(s) in evaluated splits, e.g. {found[0]}")

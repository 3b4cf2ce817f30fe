"""The results store: one JSON line per finished grid cell, appended and fsynced.

A cell is (protocol, profile, seed set, seed, model name and identity, dataset fingerprint,
reduction, algorithm, split). The seed set (``seeds``, e.g. ``"1,2,42"``) is the run's: a run with
several seeds is one version of its results, apart from a one-seed run that shares a seed. A
line is written with one ``write`` on a file opened for appending and fsynced before the next cell
starts, so a killed run loses at most the cell it was working on; a torn last line (the process
died inside the write) is ignored on reading and overwritten by the rerun's cell.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd

from tecb_data.errors import UserError

KEY_FIELDS = ("protocol", "profile", "seeds", "seed", "model", "model_identity", "dataset_fingerprint",
               "reduction", "algorithm", "split")
# Stores written before profiles existed hold rows of today's libraries; before seed sets, of a
# run with one seed.
FIELD_DEFAULTS = {"profile": lambda row: "current", "seeds": lambda row: seed_set_name([row["seed"]])}


def seed_set_name(seeds) -> str:
    """The canonical name of a run's seed set: sorted, comma-separated (order of asking is not a version)."""
    return ",".join(str(s) for s in sorted({int(s) for s in seeds}))


def with_defaults(row: dict) -> dict:
    for name, default in FIELD_DEFAULTS.items():
        if name not in row:
            row[name] = default(row)
    return row


def cell_key(row: dict) -> tuple:
    return tuple(row[f] if f in row or f not in FIELD_DEFAULTS else FIELD_DEFAULTS[f](row) for f in KEY_FIELDS)


class ResultsStore:
    def __init__(self, path: Path | None):
        self.path = None if path is None else Path(path)
        self.rows: list[dict] = []
        self._keys: dict[tuple, int] = {}
        if self.path is not None and self.path.exists():
            self._read()

    def _read(self) -> None:
        try:
            lines = self.path.read_bytes().split(b"\n")
        except OSError as exc:
            raise UserError(f"{self.path}: cannot read the results store ({exc.strerror})") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                key = cell_key(row)
            except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
                if number >= len(lines) - 1:  # the torn last line of an interrupted write
                    print(f"note: {self.path}:{number}: ignoring an incomplete last line (interrupted run)", file=sys.stderr)
                    self._truncate_tail(len(b"\n".join(lines[:number - 1])) + (1 if number > 1 else 0))
                    return
                raise UserError(f"{self.path}:{number}: not a results line; is this a tecb-eval results file?") from None
            self._remember(with_defaults(row), key)

    def _truncate_tail(self, size: int) -> None:
        # Later appends must start on a fresh line, not glue onto the torn one.
        with open(self.path, "r+b") as fh:
            fh.truncate(size)

    def _remember(self, row: dict, key: tuple) -> None:
        if key in self._keys:
            self.rows[self._keys[key]] = row
        else:
            self._keys[key] = len(self.rows)
            self.rows.append(row)

    def __contains__(self, key: tuple) -> bool:
        return key in self._keys

    def get(self, key: tuple) -> dict | None:
        return self.rows[self._keys[key]] if key in self._keys else None

    def append(self, row: dict) -> None:
        key = cell_key(row)
        if self.path is not None:
            line = (json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
        self._remember(row, key)

    def frame(self) -> pd.DataFrame:
        return rows_frame(self.rows)


def rows_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    order = ["model", "dataset", "reduction", "algorithm", "split", "protocol", "seed"]
    return frame.sort_values([c for c in order if c in frame.columns], kind="stable").reset_index(drop=True)


def read_results(path: Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such results file; run `tecb-eval run ... --results {path}` first")
    frame = ResultsStore(path).frame()
    if frame.empty:
        raise UserError(f"{path}: holds no results yet")
    return frame

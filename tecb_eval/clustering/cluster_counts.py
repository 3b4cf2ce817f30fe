"""The number of clusters as a range: ``--k`` for the algorithms that take k, ``--min-cluster-size``
for HDBSCAN, each run at every point on the same cached embeddings and reductions.

A range is written ``A:B`` (every value from A to B in steps of :data:`DEFAULT_STEP`, B included
when the step reaches it: ``5:60`` is 5, 10, ..., 60), ``A:B:STEP`` (``2:10:2`` is 2, 4, 6, 8, 10),
a list ``5,10,20``, or one value ``10``. A row of a point of a range names it in its ``setting``
(``"k=10"``, ``"min_cluster_size=15"``); a row at the algorithm's own setting (k = the number of
labels, HDBSCAN's defaults) has none, so every store written before ranges reads the same.
"""

from __future__ import annotations

from typing import NamedTuple

from tecb_data.errors import UserError

DEFAULT_STEP = 5
MAX_POINTS = 200  # more points than this is a typo (5:5000), not a curve anyone reads


def parse_range(text, option: str) -> tuple[int, ...]:
    """``"5:60"``, ``"2:10:2"``, ``"5,10,20"``, ``"10"`` or a sequence of ints -> the sorted values,
    checked; one line otherwise. A range's points are counted from its bounds before any is made:
    ``2:300000000:1`` is refused as too many points, not built."""
    if isinstance(text, range):
        text = f"{text.start}:{text.stop - 1}:{text.step}" if text.step > 0 else ",".join(map(str, text))
    elif not isinstance(text, str):
        text = ",".join(str(int(v)) for v in text)
    text = text.strip()
    how = f"{option} {text!r}: give A:B (every {DEFAULT_STEP}th value from A to B), A:B:STEP, a list 5,10,20 or one number"
    try:
        if ":" in text:
            parts = [int(p) for p in text.split(":")]
            if len(parts) not in (2, 3):
                raise ValueError
            start, stop = parts[0], parts[1]
            step = parts[2] if len(parts) == 3 else DEFAULT_STEP
            if step < 1:
                raise UserError(f"{option} {text!r}: the step must be 1 or more")
            values = range(start, stop + 1, step)  # lazy: its length and ends come from the bounds
        else:
            values = sorted({int(p) for p in text.split(",") if p.strip()})
    except ValueError:
        raise UserError(how) from None
    if not values:
        raise UserError(f"{option} {text!r}: an empty range (its start lies above its end); give A:B with A <= B")
    if values[0] < 2:
        raise UserError(f"{option} {text!r}: {values[0]} is too small; a clustering needs 2 or more "
                        f"({'clusters' if option == '--k' else 'texts per cluster'})")
    if len(values) > MAX_POINTS:
        raise UserError(f"{option} {text!r}: {len(values):,} points; give at most {MAX_POINTS} (a larger step)")
    return tuple(values)


class Setting(NamedTuple):
    """A point of a range of cluster counts, as the grid carries it: the parameter the algorithm's
    range sets (``"k"``, ``"min_cluster_size"``) and its value. None is the algorithm's own setting."""

    parameter: str
    value: int

    @property
    def name(self) -> str:
        """What a row's ``setting`` says (``"k=10"``); read back by :func:`tecb_eval.grid.store.read_setting`."""
        return f"{self.parameter}={int(self.value)}"


def setting_name(setting: Setting | None) -> str:
    """A row's ``setting`` of ``setting``: ``"k=10"``, or ``""`` for the algorithm's own."""
    return "" if setting is None else setting.name

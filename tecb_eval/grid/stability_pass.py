"""Stability where it tells: on a corpus without labels, the default reruns the clusterings of the
pipelines a ranking picks from the finished grid (``tecb-eval run`` gives ``recommend``'s), not of
every cell."""

from __future__ import annotations

import pandas as pd

from tecb_eval.clustering.stability import UNLABELLED_RUNS


def stability_pass(grid, executor, frame: pd.DataFrame, ranking, say) -> pd.DataFrame:
    """The default's stability on a corpus without labels (``--stability N`` reruns every cell in the
    grid's own pass; no ``ranking``: none): the cells of the pipelines ``ranking``
    picks from the finished grid (None: every cell) run again from the caches with
    :data:`~tecb_eval.clustering.stability.UNLABELLED_RUNS` reruns each, their rows replaced.
    Stability checks a pipeline one has chosen; it does not choose one (its calibration against
    V-measure is negative), so reruns of every cell of a large grid buy nothing for their cost."""
    unlabelled = [b for b in grid.plan.benchmarks if not getattr(b, "labelled", True)]
    if grid.plan.stability is not None or ranking is None or not unlabelled or frame.empty:
        return frame
    chosen = ranking(frame)
    if chosen is None:
        fingerprints = {b.fingerprint for b in unlabelled}
        chosen = {(r["dataset_fingerprint"], r["model"], r["reduction"], r["algorithm"], r.get("setting") or "")
                  for r in frame.to_dict("records") if r.get("dataset_fingerprint") in fingerprints}
    grid.plan.stability_on = frozenset(chosen)
    # The second pass finds the first's rows, texts and reductions done: what it spent is counted once.
    before = {name: dict(spent) for name, spent in grid.ledger.spent.items()}
    grid.rows.clear()
    say(f"stability: {UNLABELLED_RUNS} reruns of the {len(chosen)} pipelines recommend lists first (every cell: "
        "--stability N)")
    first = len(grid.ledger.new_rows)
    frame = grid.run(executor)
    for name, spent in before.items():
        grid.ledger.of(name).update(spent)
    # A cell run again for its stability was computed once already: said apart, not counted twice.
    for row in grid.ledger.new_rows[first:]:
        spent = grid.ledger.of(row["dataset"])
        spent["stability_reruns"] = spent.get("stability_reruns", 0) + 1
    del grid.ledger.new_rows[first:]
    return frame

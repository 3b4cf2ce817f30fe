"""Which version of each result a table shows: a store may hold many, a table never mixes them.

A *version* of a (model, dataset) result is its (dataset fingerprint, protocol, profile, model
identity, seed set). A results store keeps every version it was given (another build of a dataset,
another seed set, the fast protocol beside the legacy one...); averaging rows of two versions
gives a figure no run produced (36.38, the mean of 38.68 and 34.09, while MTEB's JSON of the
same export said 0.3409). :func:`select` therefore keeps one version per table:

- one protocol and one profile for the whole table (its rows are compared and averaged together);
- per dataset one build (fingerprint) and one seed set, so that every model in a column (and
  Table 3's average over models) is on the same data and seeds, and paired comparisons pair;
- per (model, dataset) one model identity.

Each choice is the one asked for (``protocol=``, ``profile=``, ``seeds=``, ``fingerprints=``,
``identities=``), else the newest: the version of the row written last to the store
(``store_order``, from :func:`read_store`; a grid's own frame holds one version per cell). What is
left out is said in one line (:func:`select` returns it), and :func:`versions` lists them all.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tecb_data.errors import UserError
from tecb_eval.files import one_line
from tecb_eval.grid.store import ResultsStore, no_results_file, rows_frame, seed_set_name
from tecb_eval.reports import working

ORDER = "store_order"  # position of a row's cell in the store: later lines are newer
CHOICES = "--protocol/--profile/--seeds/--fingerprint/--model-identity"


def read_store(path: Path) -> pd.DataFrame:
    """The results store as a frame, each row with its ``store_order`` (0 = written first)."""
    working.step(f"reading the results store {path}")
    path = Path(path)
    if not path.is_file():
        raise no_results_file(path)
    store = ResultsStore(path)  # rows unlike the grid's are skipped there, with a warning naming their lines
    rows = [{**row, ORDER: i} for i, row in enumerate(store.rows)]
    if not rows and store.skipped:
        raise UserError(f"{path}: holds no usable results: each of its {len(store.skipped)} rows is unlike any the "
                        "grid writes (see the warning); fix or delete those lines, or rerun the grid")
    if not rows:
        raise UserError(f"{path}: holds no results yet")
    return rows_frame(rows)


def with_version_fields(frame: pd.DataFrame) -> pd.DataFrame:
    """The version fields on every row (frames built by hand or from old stores may lack some)."""
    frame = frame.copy()
    if "profile" not in frame.columns:
        frame["profile"] = "current"
    if "seeds" not in frame.columns:
        frame["seeds"] = [seed_set_name([s]) for s in frame["seed"]]
    for name in ("protocol", "dataset_fingerprint", "model_identity"):
        if name not in frame.columns:
            frame[name] = ""
    if ORDER not in frame.columns:
        frame[ORDER] = 0
    return frame


def _newest(rows: pd.DataFrame, fields: list[str]) -> tuple:
    """The values of ``fields`` on the newest row; ties (a frame without store order) go to the
    largest value tuple, so the choice never depends on the frame's row order."""
    newest = rows[rows[ORDER] == rows[ORDER].max()]
    return max((tuple(values) for values in newest[fields].itertuples(index=False, name=None)),
               key=lambda values: tuple(map(str, values)))


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in the store frame's order (:func:`tecb_eval.grid.store.rows_frame`), whatever order they came in."""
    order = [c for c in ("model", "dataset", "reduction", "algorithm", "split", "protocol", "seed") if c in frame.columns]
    return frame.sort_values(order, kind="stable").reset_index(drop=True)


def _short(fingerprint) -> str:
    return str(fingerprint)[:8]


def _asked(rows: pd.DataFrame, field: str, wanted, what: str) -> pd.DataFrame:
    if wanted is None:
        return rows
    kept = rows[rows[field] == wanted]
    if kept.empty:
        have = ", ".join(sorted({str(v) for v in rows[field]}))
        raise UserError(f"no results with {what} {wanted}; the store has {have}")
    return kept


def _prefixed(rows: pd.DataFrame, field: str, prefixes, by: str, what: str) -> pd.DataFrame:
    """Rows of the groups (``by``: a dataset or a model) where one of ``prefixes`` matches, only
    those matching; groups no prefix matches are left as they are."""
    if not prefixes:
        return rows
    hits = {p: rows[rows[field].astype(str).str.startswith(p)] for p in prefixes}
    for prefix, found in hits.items():
        if found.empty:
            raise UserError(f"no results with {what} starting {prefix!r}; list them with `tecb-eval table RESULTS --versions`")
    chosen = pd.concat(hits.values())
    touched = set(chosen[by])
    return pd.concat([rows[~rows[by].isin(touched)], chosen[~chosen.index.duplicated()]]).sort_index()


def unlabelled_rows(frame: pd.DataFrame) -> pd.Series:
    """Which rows are of a corpus without labels (``labelled`` false): no V-measure applies to them."""
    if "labelled" not in frame.columns:
        return pd.Series(False, index=frame.index)
    return frame["labelled"].map(lambda value: value is False)


def range_rows(frame: pd.DataFrame) -> pd.Series:
    """Which rows are points of a range of cluster counts (a ``setting`` such as ``"k=10"``)."""
    if "setting" not in frame.columns:
        return pd.Series(False, index=frame.index)
    return frame["setting"].map(lambda value: isinstance(value, str) and value != "")


def label_table_rows(frame: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The rows a table of V-measure (Table 2, Table 3, a paired comparison) can hold, and a line
    for what it leaves out: datasets without labels (the scores do not apply; never a 0 in their
    place) and the points of k ranges (a curve, not one figure per configuration)."""
    if frame.empty:
        return frame, None
    unlabelled, ranged = unlabelled_rows(frame), range_rows(frame)
    lines = []
    if unlabelled.any():
        names = sorted(frame.loc[unlabelled, "mteb_name" if "mteb_name" in frame.columns else "dataset"].unique())
        lines.append(f"{', '.join(names)}: without labels, so V-measure, Table 2 and paired comparisons do not apply "
                     "(see its label-free scores: `tecb-eval recommend RESULTS`)")
    if (ranged & ~unlabelled).any():
        lines.append(f"{int((ranged & ~unlabelled).sum())} rows of k / min_cluster_size ranges are points of a curve, "
                     "not table cells (see `tecb-eval calibrate RESULTS`)")
    return frame[~unlabelled & ~ranged], ("Left out: " + "; ".join(lines) + ".") if lines else None


def select(frame: pd.DataFrame, *, protocol: str | None = None, profile: str | None = None,
           seeds=None, fingerprints=(), identities=(), like_with_like: bool = True,
           points: bool = False) -> tuple[pd.DataFrame, str | None]:
    """(rows of one version per table as described in the module, what was left out or None: a
    line each for other versions, for cells not every model has (:func:`common_cells`, unless
    ``like_with_like`` is False) and for datasets the results do not cover in full).
    ``seeds``: a seed set (``"42,1,2"`` or ints) — the run's set, not one seed of it;
    ``fingerprints`` / ``identities``: prefixes of dataset fingerprints / model identities, each
    choosing for the datasets / models it matches. ``points``: keep the rows of datasets without
    labels and of k ranges (the label-free readers); else they are left out, said in a line."""
    if frame.empty:
        return frame, None
    working.step("choosing one version per table")
    said_first = None
    if not points:
        frame, said_first = label_table_rows(frame)
        if frame.empty:
            raise UserError(said_first)
    rows = with_version_fields(frame)
    if seeds is not None:
        items = seeds.split(",") if isinstance(seeds, str) else list(seeds)
        try:
            seeds = seed_set_name(items)
        except ValueError:
            raise UserError(f"seed set {seeds!r}: give non-negative integers separated by commas, e.g. 42,1,2") from None
    rows = _asked(rows, "protocol", protocol, "protocol")
    rows = _asked(rows, "profile", profile, "profile")
    rows = _asked(rows, "seeds", seeds, "seed set")
    rows = _prefixed(rows, "dataset_fingerprint", fingerprints, "mteb_name", "dataset fingerprint")
    rows = _prefixed(rows, "model_identity", identities, "model", "model identity")
    asked = rows

    left: list[str] = []
    wanted_protocol, wanted_profile = _newest(rows, ["protocol", "profile"])
    keep = (rows.protocol == wanted_protocol) & (rows.profile == wanted_profile)
    for (proto, prof), dropped in rows[~keep].groupby(["protocol", "profile"], sort=True):
        left.append(f"protocol {proto} / profile {prof} ({len(dropped)} rows)")
    rows = rows[keep]
    parts = []
    for dataset in sorted(rows.mteb_name.unique()):
        of = rows[rows.mteb_name == dataset]
        fingerprint, seed_set = _newest(of, ["dataset_fingerprint", "seeds"])
        kept = of[(of.dataset_fingerprint == fingerprint) & (of.seeds == seed_set)]
        others = of.drop(kept.index)
        for (fp, ss), dropped in others.groupby(["dataset_fingerprint", "seeds"], sort=True):
            left.append(f"{dataset} build {_short(fp)} seeds {ss} ({len(dropped)} rows; shown: build "
                        f"{_short(fingerprint)} seeds {seed_set})")
        # Each model's newest identity (as _newest chooses it: on its newest rows, the largest as
        # text) for every model at once, not one filter or group per model: thousands of models.
        newest = kept[kept[ORDER] == kept.groupby("model")[ORDER].transform("max")]
        identity_of = (newest.assign(_text=newest.model_identity.astype(str)).sort_values(["model", "_text"], kind="stable")
                       .groupby("model", sort=False).model_identity.last())
        mine = kept.model_identity == kept.model.map(identity_of)
        for (model, other), dropped in kept[~mine].groupby(["model", "model_identity"], sort=True):
            left.append(f"{model} on {dataset} as {other} ({len(dropped)} rows)")
        parts.append(kept[mine])
    chosen = _sorted(pd.concat(parts)) if parts else rows.iloc[0:0]
    if frame.columns.difference(chosen.columns).empty:
        chosen = chosen[[c for c in frame.columns]]
    lines = [said_first] if said_first else []
    if left:
        lines.append(one_line(f"Left out {len(asked) - len(chosen)} rows of other versions (the newest of each is "
                              "shown): " + "; ".join(left)
                              + f". List them with `tecb-eval table RESULTS --versions`; choose with {CHOICES}."))
    if like_with_like:
        chosen, uncommon = common_cells(chosen)
        lines += [line for line in (uncommon, incomplete_note(chosen)) if line]
    return chosen, "\n".join(lines) or None


CELL = ("split", "seed")  # what a model's figure on a dataset and configuration is a mean over


def common_cells(frame: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """Only the cells every model has, per dataset and configuration, and one line saying what was
    left out (or None): a mean over 2 splits beside a mean over 28 compares nothing (a model run
    with ``--limit-splits``, or one whose units a memory limit skipped, would be ranked on other
    splits than the rest)."""
    if frame.empty or frame.model.nunique() < 2:
        return frame, None
    keep = pd.Series(True, index=frame.index)
    left = []
    for (dataset, algorithm, reduction), group in frame.groupby(["mteb_name", "algorithm", "reduction"], sort=True):
        # One pass over the rows (not a group per model): a store of thousands of models.
        found: dict = {}
        for model, *cell in group[["model", *CELL]].itertuples(index=False, name=None):
            found.setdefault(model, set()).add(tuple(cell))
        cells = {model: found[model] for model in sorted(found)}
        if len(cells) < 2:
            continue
        shared = set.intersection(*cells.values())
        if all(len(have) == len(shared) for have in cells.values()):
            continue
        outside = ~pd.Series([cell in shared for cell in group[list(CELL)].itertuples(index=False, name=None)],
                             index=group.index)
        keep[group.index[outside]] = False
        fewest = min(cells, key=lambda m: (len(cells[m]), m))
        extra = ", ".join(f"{m} {len(have) - len(shared)}" for m, have in cells.items() if len(have) > len(shared))
        left.append(f"{dataset} {algorithm}:{reduction} over the {len(shared)} split x seed cells all "
                    f"{len(cells)} models have ({fewest} has only these; left out: {extra})")
    if not left:
        return frame, None
    return frame[keep], one_line("Compared like with like, over the cells every model has: " + "; ".join(left)
                                 + ". Run the missing cells (the same command without --limit-splits, or with a "
                                   "higher --memory-limit) to compare over all of them.")


def coverage(frame: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Per dataset, (splits the results cover, splits the dataset has): the fewest any model and
    configuration covers, against the dataset's own count (rows name it in ``dataset_splits``;
    older rows do not, and then the most splits any row of the dataset names is all that is known)."""
    out = {}
    for dataset, rows in frame.groupby("mteb_name", sort=True):
        covered = rows.groupby(["model", "algorithm", "reduction"]).split.nunique().min()
        total = rows.split.nunique()
        if "dataset_splits" in rows.columns and rows.dataset_splits.notna().any():
            total = max(total, int(rows.dataset_splits.max()))
        out[dataset] = (int(covered), int(total))
    return out


def incomplete(frame: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """The datasets whose results cover fewer splits than the dataset has: ``{dataset: (covered, total)}``."""
    return {d: (c, n) for d, (c, n) in coverage(frame).items() if c < n}


def incomplete_note(frame: pd.DataFrame) -> str | None:
    partial = incomplete(frame)
    if not partial:
        return None
    listed = ", ".join(f"{d} {c} of {n}" for d, (c, n) in partial.items())
    return one_line(f"Incomplete: {listed} splits (a run limited with --limit-splits, or units skipped); these "
                    "figures are not comparable with a full run's or MTEB's, and the MTEB results export leaves them "
                    "out.")


def versions(frame: pd.DataFrame) -> pd.DataFrame:
    """Every version in ``frame``: one row per (model, dataset, protocol, profile, seed set,
    dataset build, model identity) with its row and split counts and whether :func:`select` shows
    it by default (``shown``)."""
    rows = with_version_fields(frame)
    chosen, _ = select(frame)
    shown_keys = set(map(tuple, with_version_fields(chosen)[list(VERSION_KEY)].astype(str).to_numpy()))
    out = []
    for key, group in rows.groupby(list(VERSION_KEY), sort=True):
        out.append({**dict(zip(VERSION_KEY, key)), "rows": len(group), "splits": group.split.nunique(),
                    "shown": "yes" if tuple(map(str, key)) in shown_keys else "no"})
    table = pd.DataFrame(out)
    return table.set_index(["model", "mteb_name"]).rename_axis(["model", "dataset"])


VERSION_KEY = ("model", "mteb_name", "protocol", "profile", "seeds", "dataset_fingerprint", "model_identity")

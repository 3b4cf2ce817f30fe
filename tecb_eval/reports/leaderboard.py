"""What the HTML report shows, as data: a leaderboard per dataset and view, a drill-down per model,
and the provenance of the rows (:mod:`tecb_eval.reports.html` renders it).

Every figure comes from the functions ``tecb-eval table`` and ``compare`` use, never a second
computation: a leaderboard's means, SDs and markers are :func:`tecb_eval.reports.tables.table2`'s
cells, its intervals :func:`tecb_eval.reports.compare.mean_interval`'s, a drill-down's cells
:func:`tecb_eval.reports.tables.split_means`'. Values (V-measure, AMI, ARI) stay on the 0..1 scale
here; the templates show them x100 with two decimals through :func:`shown` (the tables' own
formatting), and every header says "x100".

The ranking criterion is one: the mean V-measure of k-means on the embeddings (the paper's Table 2
configuration) over the cells the ranked models share; each row says its margin to the next model,
and its best pipeline how much that gains over the ranked figure. Which rows are ranked is
:func:`tecb_eval.reports.ranking.shared_selection`'s choice (``recommend`` makes the same): every
model of the store appears, ranked on the (split, seed) cells the models share, or apart with its
reason (other splits, no common seed, no Table 2 cell); rows of another build or protocol are
named beside the leaderboard. A score that is 0 for a reason (every text noise, one cluster)
carries that reason (:func:`tecb_eval.reports.scores.zero_reason`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tecb_eval.clustering.registry import NOISE_ALGORITHMS, TABLE2_CONFIGURATION, table2_rows
from tecb_eval.files import SLUG_CHARS, file_slug, short_hash
from tecb_eval.reports import compare, ranking, tables, versions, working
from tecb_eval.reports import scores as scores_module

SYNTHETIC = "synthetic, not comparable"


def shown(value) -> str:
    """A 0..1 score as the text tables print it (x100, two decimals); "–" for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return tables.NO_SPREAD
    return tables.shown(value)


@dataclass
class Entry:
    """One model's row on a dataset's leaderboard (0..1)."""

    model: str
    mean: float
    sd_splits: float
    sd_seeds: float
    low: float
    high: float
    covered: int
    total: int
    marker: str = ""
    best_config: tuple[str, str] | None = None
    best_mean: float = math.nan
    apart: str | None = None  # why this row is not ranked with the others
    margin: float = math.nan  # ahead of the next model (0..1); none for the last
    zero: str | None = None  # why the ranked figure is 0 (all noise, one cluster)
    best_zero: str | None = None
    rank: str = ""  # "1", or "1=" where the figures print alike (tables.shared_ranks)
    tied_next: bool = False  # the next model shares this one's rank: no margin to show
    usage: tables.ApiUsage | None = None  # an API model's tokens and cost on the ranked splits; None: runs here

    @property
    def coverage(self) -> str:
        return f"{self.covered} of {self.total} splits"

    @property
    def gain(self) -> float:
        """What the best pipeline adds to the ranked figure (0..1)."""
        return self.best_mean - self.mean if finite(self.best_mean) and finite(self.mean) else math.nan

    @property
    def standing(self) -> str:
        """Against the best model, in plain words (the marker of ``tecb-eval table``)."""
        if self.rank == "1=" and self.marker != "*":
            return "tied with the best (the same figure as printed)"
        return {"*": "best", "=": "behind, but the gap could be chance", "?": "no cell shared with the best",
                }.get(self.marker, "behind: the gap holds")


@dataclass
class Board:
    dataset: str
    synthetic: bool
    ranked: list[Entry]
    apart: list[Entry]
    independent: bool  # False: fast-protocol draws, no interval or ranking test
    cells: int  # (split, seed) cells the ranked models share
    shared: str = ""  # those cells, protocol, profile and build in words
    others: list[str] = field(default_factory=list)  # rows of other builds or protocols, not ranked

    @property
    def columns(self) -> dict[str, bool]:
        """Which optional columns have a value in some row (a column of "–" alone is not drawn)."""
        rows = self.ranked
        return {"sd_splits": any(finite(e.sd_splits) for e in rows), "sd_seeds": any(finite(e.sd_seeds) for e in rows),
                "interval": any(finite(e.low) for e in rows), "margin": any(finite(e.margin) for e in rows),
                "standing": len(rows) > 1, "cost": any(e.usage is not None for e in [*rows, *self.apart])}


@dataclass
class Average:
    """A model's mean over the datasets where it is ranked, as the paper's tables average (0..1)."""

    model: str
    mean: float
    datasets: int
    total: int

    @property
    def coverage(self) -> str:
        return f"{self.datasets} of {self.total} datasets"


@dataclass
class ConfigRow:
    algorithm: str
    reduction: str
    v_measure: float
    sd: float
    ami: float
    ari: float
    noise: float
    splits: int
    paper: float = math.nan
    zero: str | None = None  # why the V-measure is 0 (all noise, one cluster)


@dataclass
class ModelDataset:
    dataset: str
    synthetic: bool
    configs: list[ConfigRow]
    algorithms: list[str]
    reductions: list[str]
    split_rows: dict[str, list[dict]]  # "algorithm / reduction" -> per (split, seed) scores
    identity: str = ""  # the model's identity on this dataset (tfidf-lsa's names the corpus it was fitted on)
    usage: tables.ApiUsage | None = None  # an API model's tokens and cost over the splits it ran; None: runs here

    # A column whose every cell would be "–" is not drawn.
    @property
    def has_paper(self) -> bool:
        return any(finite(c.paper) for c in self.configs)

    @property
    def has_noise(self) -> bool:
        return any(finite(c.noise) for c in self.configs)


@dataclass
class ModelPage:
    model: str
    slug: str
    datasets: list[ModelDataset] = field(default_factory=list)


def combined(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Several stores as one frame: a later store's rows count as newer (``store_order``), as a later
    line of one store does, so the newest version is chosen across them. A cell in two stores (a
    copy of a store, a store that grew from another) is one cell: the later store's row."""
    from tecb_eval.grid.store import KEY_FIELDS

    if len(frames) == 1:
        return frames[0]
    parts, offset = [], 0
    for frame in frames:
        part = frame.copy()
        part[versions.ORDER] = part[versions.ORDER] + offset
        offset = int(part[versions.ORDER].max()) + 1
        parts.append(part)
    joined = pd.concat(parts, ignore_index=True)
    keys = [k for k in KEY_FIELDS if k in joined.columns]
    return joined.drop_duplicates(subset=keys, keep="last").reset_index(drop=True)


def _coverage(rows: pd.DataFrame, dataset: str) -> tuple[int, int]:
    return versions.coverage(rows)[dataset]


def best_config(means: dict[tuple[str, str], float]) -> tuple[tuple[str, str] | None, float]:
    """The (algorithm, reduction) with the highest mean V-measure of ``means`` (one model on one
    dataset), and that mean; ties go to the paper's configuration order."""
    if not means:
        return None, math.nan
    config = min(tables.order_configurations(list(means)), key=lambda c: -means[c])  # min keeps the first of ties
    return config, float(means[config])


def main_cells(cells: dict) -> tuple[frozenset, list]:
    """Of ``cells`` (a key, e.g. a model, -> the (split, seed) cells it was measured on), the cell
    set most keys share (ties: the larger set, then a stable order) and the keys that have it:
    what is compared like with like; the other keys stand apart."""
    groups: dict[frozenset, list] = {}
    for key in sorted(cells):
        groups.setdefault(cells[key], []).append(key)
    main = min(groups, key=lambda c: (-len(groups[c]), -len(c), sorted(map(str, c))))
    return main, groups[main]


def _entries(kmeans: pd.DataFrame, means: pd.DataFrame, dataset: str, markers: bool, independent: bool,
             every: pd.DataFrame | None = None) -> list[Entry]:
    """Entries of the models in ``kmeans`` (their Table 2 rows), figures from ``tables.table2``;
    ``means``: the dataset's :func:`tables.split_means`, for the best pipeline; ``every``: the rows
    the means come from, for the note on a 0."""
    t2 = tables.table2(kmeans, stats=True, markers=markers)
    out = []
    # Each model's rows cut out in one pass, not one filter per model: a store of thousands of models.
    algorithm, reduction = TABLE2_CONFIGURATION
    of_dataset = kmeans[kmeans.mteb_name == dataset]
    table2_of = dict(tuple(of_dataset.groupby("model", sort=False)))
    config_of = dict(tuple(of_dataset[(of_dataset.algorithm == algorithm) & (of_dataset.reduction == reduction)]
                           .groupby("model", sort=False)))
    means_of = dict(tuple(means.groupby("model", sort=False)))
    every_of = dict(tuple(every.groupby(["model", "algorithm", "reduction"], sort=False))) if every is not None else {}
    none = kmeans.iloc[0:0]
    for model in working.per_model(list(t2.index), f"intervals per model on {dataset}"):
        cell = t2.loc[model, dataset]
        scores = config_of.get(model, none).set_index(["split", "seed"])["v_measure"].sort_index()
        low = high = math.nan
        if independent and scores.index.get_level_values("split").nunique() > 1:
            # Named as the Table 2 figure names it: the same generator, so the same interval.
            _, low, high = compare.mean_interval(scores, name=f"{dataset}\x1f{model}")
        covered, total = _coverage(table2_of.get(model, none), dataset)
        mine = means_of.get(model, means.iloc[0:0])
        config, best = best_config(dict(zip(zip(mine.algorithm, mine.reduction), mine["mean"])))
        entry = Entry(model=model, mean=float(cell["mean"]), sd_splits=float(cell["sd_splits"]),
                      sd_seeds=float(cell["sd_seeds"]), low=low, high=high, covered=covered, total=total,
                      marker=str(cell.get("marker", "") or "") if markers else "",
                      best_config=config, best_mean=best,
                      zero=scores_module.zero_reason(table2_of.get(model, none)))
        if config is not None and every is not None:
            entry.best_zero = scores_module.zero_reason(every_of.get((model, *config), every.iloc[0:0]))
        out.append(entry)
    out = sorted(out, key=lambda e: (-e.mean, e.model))
    usage = tables.api_usage(kmeans)
    for entry, rank in zip(out, tables.shared_ranks([e.mean for e in out])):
        entry.rank, entry.usage = rank, usage.get((entry.model, dataset))
    for ahead, behind in zip(out, out[1:]):
        ahead.margin = ahead.mean - behind.mean
        ahead.tied_next = ahead.rank == behind.rank
    return out


def _apart_entry(rows: pd.DataFrame, dataset: str, model: str, why: str, independent: bool) -> Entry:
    """A model not ranked: its own Table 2 figure where it has one, else only its best pipeline."""
    means = tables.split_means(rows)
    kmeans = table2_rows(rows)
    if not kmeans.empty:
        (entry,) = _entries(kmeans, means, dataset, markers=False, independent=independent, every=rows)
    else:
        config, best = best_config(dict(zip(zip(means.algorithm, means.reduction), means["mean"])))
        covered, total = _coverage(rows, dataset)
        entry = Entry(model=model, mean=math.nan, sd_splits=math.nan, sd_seeds=math.nan, low=math.nan,
                      high=math.nan, covered=covered, total=total, best_config=config, best_mean=best,
                      usage=tables.api_usage(rows).get((model, dataset)))
        if config is not None:
            entry.best_zero = scores_module.zero_reason(rows[(rows.algorithm == config[0])
                                                             & (rows.reduction == config[1])])
    entry.apart = why
    return entry


def boards(chosen, synthetic: set[str]) -> list[Board]:
    """A leaderboard per dataset: ``chosen`` is :func:`tecb_eval.reports.ranking.shared_selection`'s
    answer, or a frame it is computed from (see the module)."""
    selection = chosen if isinstance(chosen, ranking.Selection) else ranking.shared_selection(chosen)
    every = selection.every if selection.every is not None else selection.rows
    out = []
    for dataset in tables.dataset_columns(list(selection.datasets)):
        shared = selection.datasets[dataset]
        rows = selection.rows[selection.rows.mteb_name == dataset]
        kmeans = table2_rows(rows)
        mine = every[every.mteb_name == dataset]
        independent = compare.independent_splits(mine)
        ranked = (_entries(kmeans, tables.split_means(rows), dataset, markers=True, independent=independent,
                           every=rows) if not kmeans.empty else [])
        apart = [_apart_entry(mine[mine.model == model], dataset, model, why, independent)
                 for model, why in shared.apart.items()]
        out.append(Board(dataset=dataset, synthetic=dataset in synthetic, ranked=ranked, apart=apart,
                         independent=independent, cells=shared.cells,
                         shared=shared.describe() if shared.ranked else "", others=list(shared.others)))
    return out


def averages(boards_: list[Board]) -> list[Average]:
    """Each ranked model's mean over the datasets it is ranked on, with that coverage; models on
    every dataset first (only theirs compare), then by the mean."""
    total = sum(1 for b in boards_ if b.ranked)
    found: dict[str, list[float]] = {}
    for board in boards_:
        for entry in board.ranked:
            found.setdefault(entry.model, []).append(entry.mean)
    out = [Average(model, sum(v) / len(v), len(v), total) for model, v in found.items()]
    return sorted(out, key=lambda a: (-a.datasets, -a.mean, a.model))


def _per_split(rows: pd.DataFrame) -> list[dict]:
    # Only a density algorithm leaves texts unassigned: elsewhere the noise column would be all 0.
    noise = ["noise_fraction"] if set(rows.algorithm) & set(NOISE_ALGORITHMS) else []
    columns = ["split", "seed", "v_measure", "ami", "ari", *noise, "n_clusters_found"]
    present = [c for c in columns if c in rows.columns]
    return rows.sort_values(["split", "seed"], kind="stable")[present].to_dict("records")


def model_pages(frame: pd.DataFrame, synthetic: set[str], reference: pd.DataFrame | None = None) -> list[ModelPage]:
    """A drill-down per model: per dataset the algorithm x reduction grid, every configuration's
    V-measure, AMI, ARI and noise fraction, per-split scores of the Table 2 configuration and the
    model's best, and the paper's figure beside ours where the paper ran the same model,
    configuration and dataset (never beside synthetic data)."""
    pages = []
    slugs: set[str] = set()
    keys = ["model", "mteb_name", "algorithm", "reduction"]
    # One computation per metric over every model, not one per model and dataset; looked up in dicts.
    every = {}
    for metric in ("v_measure", "ami", "ari", "noise_fraction"):
        if metric in frame.columns:
            means = tables.split_means(frame, metric)
            every[metric] = {tuple(key): (mean, sd, splits) for *key, mean, sd, splits
                             in means[[*keys, "mean", "sd", "splits"]].itertuples(index=False, name=None)}
    ran_by: dict[tuple, set] = {}
    for m, d, a, r in every.get("v_measure", {}):
        ran_by.setdefault((m, d), set()).add((a, r))
    grouped = frame.groupby("model", sort=True)
    for model, mine in working.per_model(grouped, "model pages"):
        name = slug(model)
        # Two names that slug alike still get a page each, its name as bounded as the slug's.
        count = 1
        while name.lower() in slugs:
            name = f"{slug(model)[:SLUG_CHARS - 21]}-{short_hash(model)[:12]}" + (f"-{count}" if count > 1 else "")
            count += 1
        slugs.add(name.lower())
        page = ModelPage(model=model, slug=name)
        theirs = None
        if reference is not None:
            paper_name = tables.paper_model(model, reference.model.unique())
            theirs = reference[reference.model == paper_name] if paper_name else None
        for dataset in tables.dataset_columns(mine.mteb_name.unique()):
            rows = mine[mine.mteb_name == dataset]
            ran = sorted(ran_by.get((model, dataset), ()))
            configs = []
            for algorithm, reduction in tables.order_configurations(ran):
                key = (model, dataset, algorithm, reduction)

                def get(metric, stat=0):
                    return float(every[metric][key][stat]) if metric in every else math.nan

                paper = math.nan
                if theirs is not None and dataset not in synthetic:
                    hit = theirs[(theirs.algorithm == algorithm) & (theirs.reduction == reduction)
                                 & (theirs.mteb_name == dataset)]
                    if not hit.empty:
                        paper = float(hit.v_measure.iloc[0])
                configs.append(ConfigRow(algorithm, reduction, get("v_measure"), get("v_measure", 1), get("ami"),
                                         get("ari"), get("noise_fraction") if algorithm in NOISE_ALGORITHMS
                                         else math.nan, int(get("v_measure", 2)), paper,
                                         scores_module.zero_reason(rows[(rows.algorithm == algorithm)
                                                                        & (rows.reduction == reduction)])))
            split_rows = {}
            best, _ = best_config({(c.algorithm, c.reduction): c.v_measure for c in configs})
            for config in dict.fromkeys([TABLE2_CONFIGURATION, best]):
                if config is None:
                    continue
                of = rows[(rows.algorithm == config[0]) & (rows.reduction == config[1])]
                if not of.empty:
                    split_rows[f"{config[0]} / {config[1]}"] = _per_split(of)
            page.datasets.append(ModelDataset(
                dataset=dataset, synthetic=dataset in synthetic, configs=configs,
                algorithms=[a for a in dict.fromkeys(c.algorithm for c in configs)],
                reductions=[r for r in dict.fromkeys(c.reduction for c in configs)], split_rows=split_rows,
                identity=", ".join(sorted(set(rows.model_identity.astype(str)))),
                usage=tables.api_usage(rows).get((model, dataset))))
        pages.append(page)
    return pages


def provenance(frame: pd.DataFrame, stores: list[Path], synthetic: set[str]) -> dict:
    """Where the rows come from: per dataset its build (fingerprint), where it was read (a folder,
    or a Hub repo id at its revision), its splits, protocol, profile and seed set; the model
    identities; the stores with their last-written date (rows carry no date of their own)."""
    import datetime
    import hashlib
    from tecb_data.version import __version__

    datasets = []
    for dataset, rows in frame.groupby("mteb_name", sort=True):
        location = sorted(set(rows.dataset_location.astype(str))) if "dataset_location" in rows.columns else []
        datasets.append({
            "dataset": dataset, "fingerprint": ", ".join(sorted(set(rows.dataset_fingerprint.astype(str)))),
            "short_fingerprint": ", ".join(sorted({f[:12] for f in rows.dataset_fingerprint.astype(str)})),
            "location": ", ".join(location), "splits": "{} of {}".format(*versions.coverage(rows)[dataset]),
            "protocol": ", ".join(sorted(set(rows.protocol.astype(str)))),
            "profile": ", ".join(sorted(set(rows.profile.astype(str)))),
            "seeds": ", ".join(sorted(set(rows.seeds.astype(str)))), "synthetic": dataset in synthetic})
    models = [{"model": m, "identity": ", ".join(sorted(set(r.model_identity.astype(str))))}
              for m, r in frame.groupby("model", sort=True)]
    store_rows = []
    for path in stores:
        stat = Path(path).stat()
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        written = datetime.datetime.fromtimestamp(stat.st_mtime, datetime.timezone.utc)
        store_rows.append({"name": Path(path).name, "sha256": digest[:16],
                           "written": written.strftime("%Y-%m-%d %H:%M UTC")})
    package = __version__
    return {"datasets": datasets, "models": models, "stores": store_rows, "package": package,
            "libraries": _libraries(frame)}


def _libraries(frame: pd.DataFrame) -> str:
    """The library versions the model identities name (``sklearn==1.9.1``), deduplicated."""
    found = set()
    for identity in set(frame.model_identity.astype(str)):
        for part in identity.replace(":", "|").split("|"):
            if "==" in part:
                found.add(part)
    return ", ".join(sorted(found))


def params(rows: pd.DataFrame, column: str) -> dict:
    """The estimator parameters the rows were run with (``algorithm_params``, ``reduction_params``):
    the first row's, as the grid wrote them (every row of one configuration has the same, but for
    ``n_clusters``, which follows each split's labels)."""
    if column not in rows.columns or rows.empty:
        return {}
    text = rows.sort_values(["split", "seed"], kind="stable")[column].iloc[0]
    try:
        value = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def finite(value) -> bool:
    return value is not None and not (isinstance(value, float) and (math.isnan(value) or math.isinf(value)))


def heat_colour(value: float, low: float, high: float) -> str:
    """A background for a heat cell: white to a light blue, light enough that black text keeps a
    contrast above 7:1 (WCAG AAA) at the darkest end."""
    if not finite(value):
        return "#ffffff"
    share = 0.0 if high <= low else (value - low) / (high - low)
    # #ffffff -> #9ec5e8 (relative luminance 0.53: contrast with black 11.6:1)
    r, g, b = (int(round(255 + share * (end - 255))) for end in (0x9E, 0xC5, 0xE8))
    return f"#{r:02x}{g:02x}{b:02x}"


def slug(name: str) -> str:
    """A file name for a model's page (the export's spelling of model names in file names,
    :func:`tecb_eval.files.file_slug`: bounded in length however long the name)."""
    return file_slug(name)

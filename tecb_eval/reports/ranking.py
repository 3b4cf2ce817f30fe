"""Which rows a leaderboard ranks: the same selection for the HTML report and ``recommend``.

A store often holds models run at different times: one over seeds 42 and 1, another over seed 42
only. :func:`tecb_eval.reports.versions.select` keeps one seed set per dataset, so the newest run
would hide every model of the other set. Here the choice is made per dataset in two steps:

1. one protocol and profile for everything, and one dataset build per dataset (the newest, or the
   one asked for), as :func:`~tecb_eval.reports.versions.select` chooses them; rows of another
   build, protocol or profile are not ranked and are named per dataset (:attr:`Shared.others`);
2. per model its own newest seed set and identity; then the models are ranked on the (split, seed)
   cells of the Table 2 configuration (k-means on the embeddings) they all share: the splits most
   models cover, and the seeds every one of those has. A model on other splits, with no seed in
   common, or without a Table 2 cell at all stands apart with its reason (:attr:`Shared.apart`).

The rows kept are every configuration's rows of the ranked models on those cells, with their
``seeds`` field set to the shared seed set, so every table read from them holds one version.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from tecb_eval.files import one_line
from tecb_eval.clustering.registry import TABLE2_CONFIGURATION
from tecb_eval.grid.store import seed_set_name
from tecb_eval.reports import versions

# The fields that name one row of a store (a cell of one version), to tell which rows were kept.
ROW_KEY = ("model", "mteb_name", "algorithm", "reduction", "split", "seed", "protocol", "profile",
           "dataset_fingerprint", "model_identity", "seeds")


@dataclass
class Shared:
    """What one dataset's leaderboard ranks."""

    dataset: str
    protocol: str
    profile: str
    fingerprint: str
    splits: list[str]  # the splits the ranked models share
    seeds: list[int]  # the seeds they share
    ranked: list[str]  # models, by name
    apart: dict[str, str] = field(default_factory=dict)  # model -> why it is not ranked
    others: list[str] = field(default_factory=list)  # rows of other builds / protocols / profiles, in words

    @property
    def cells(self) -> int:
        return len(self.splits) * len(self.seeds)

    def describe(self) -> str:
        """The shared cells in words, for the page and ``recommend``."""
        seeds = ", ".join(map(str, self.seeds))
        return (f"{len(self.splits)} split{'s' if len(self.splits) != 1 else ''} x seed{'s' if len(self.seeds) != 1 else ''} "
                f"{seeds} ({self.cells} cells), protocol {self.protocol}, profile {self.profile}, "
                f"build {str(self.fingerprint)[:8]}")


@dataclass
class Selection:
    rows: pd.DataFrame  # the ranked models' rows on the shared cells, every configuration
    datasets: dict[str, Shared]
    left_out: str | None  # one line: other versions not shown at all
    every: pd.DataFrame | None = None  # every model's rows at its own version (the ranked and those apart)

    def notes(self) -> list[str]:
        """Per dataset, the models not ranked and the rows of other versions, one line each."""
        out = []
        for dataset, shared in self.datasets.items():
            out += [one_line(f"{dataset}: {model} not ranked: {why}") for model, why in shared.apart.items()]
            out += [one_line(f"{dataset}: not ranked: {line}") for line in shared.others]
        return out


def _newest_per_model(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (model, dataset) the rows of its newest seed set and identity: those of its row written
    last (``store_order``); without one, the largest (seed set, identity), so never the frame's order."""
    fields = ["model", "mteb_name", "seeds", "model_identity"]
    ordered = rows.assign(_order=rows[versions.ORDER] if versions.ORDER in rows.columns else 0,
                          _seeds=rows.seeds.astype(str), _identity=rows.model_identity.astype(str))
    newest = ordered.sort_values(["_order", "_seeds", "_identity"], kind="stable").groupby(
        ["model", "mteb_name"], sort=False).tail(1)
    wanted = set(newest[fields].itertuples(index=False, name=None))
    keep = [key in wanted for key in rows[fields].itertuples(index=False, name=None)]
    return rows[keep]


def _keys(rows: pd.DataFrame) -> set:
    return set(rows[list(ROW_KEY)].astype(str).itertuples(index=False, name=None))


def _others(rows: pd.DataFrame, kept: set, protocol: str, profile: str, fingerprint: str) -> list[str]:
    """The rows of ``rows`` (one dataset) not kept, by what sets them apart, in words."""
    gone = rows[[key not in kept for key in rows[list(ROW_KEY)].astype(str).itertuples(index=False, name=None)]]
    out = []
    for (proto, prof, fp), group in gone.groupby(["protocol", "profile", "dataset_fingerprint"], sort=True):
        what = []
        if (proto, prof) != (protocol, profile):
            what.append(f"protocol {proto} / profile {prof}")
        if fp != fingerprint:
            what.append(f"build {str(fp)[:8]}")
        if not what:
            what.append("other seed sets or model identities")
        models = ", ".join(sorted(group.model.astype(str).unique()))
        out.append(f"{len(group)} rows of {' and '.join(what)} ({models})")
    return out


def _seeds_of(cells: set, splits: set) -> set:
    """The seeds present on every split of ``splits`` in ``cells``."""
    per_split = [{seed for s, seed in cells if s == split} for split in splits]
    return set.intersection(*per_split) if per_split else set()


def _rank_cells(cells: dict[str, set]) -> tuple[set, set, list[str], dict[str, str]]:
    """(splits, seeds, ranked models, {model: why apart}) for per-model (split, seed) cells."""
    splits_of = {m: frozenset(s for s, _ in c) for m, c in cells.items()}
    groups: dict[frozenset, list[str]] = {}
    for model in sorted(splits_of):
        groups.setdefault(splits_of[model], []).append(model)
    # The split set most models cover (ties: more splits, then a stable order).
    splits = min(groups, key=lambda s: (-len(groups[s]), -len(s), sorted(s)))
    ranked = list(groups[splits])
    apart = {m: (f"measured on other splits ({len(splits_of[m])} splits; the ranked models share {len(splits)})")
             for m in sorted(set(cells) - set(ranked))}
    seeds = set.intersection(*(_seeds_of(cells[m], splits) for m in ranked))
    while not seeds and len(ranked) > 1:
        # The model whose seeds overlap the others' least leaves first.
        own = {m: _seeds_of(cells[m], splits) for m in ranked}
        worst = min(ranked, key=lambda m: (sum(len(own[m] & own[o]) for o in ranked if o != m), len(own[m]), m))
        ranked.remove(worst)
        apart[worst] = f"no seed in common with the ranked models (its seeds: {', '.join(map(str, sorted(own[worst])))})"
        seeds = set.intersection(*(own[m] for m in ranked))
    return set(splits), seeds, ranked, apart


def shared_selection(frame: pd.DataFrame, *, protocol: str | None = None, profile: str | None = None, seeds=None,
                     fingerprints=(), identities=()) -> Selection:
    """The rows a leaderboard ranks (see the module); the options as :func:`tecb_eval.reports.versions.select`'s.
    ``seeds`` asked for: that one seed set, as ``select`` takes it."""
    if frame.empty:
        return Selection(frame, {}, None, frame)
    asked = dict(protocol=protocol, profile=profile, seeds=seeds, fingerprints=fingerprints, identities=identities)
    chosen, left_out = versions.select(frame, **asked, like_with_like=False)
    if chosen.empty:
        return Selection(chosen, {}, left_out, chosen)
    version = versions.with_version_fields(chosen)
    wanted_protocol, wanted_profile = version.protocol.iloc[0], version.profile.iloc[0]
    builds = dict(version.groupby("mteb_name").dataset_fingerprint.first())
    whole = versions.with_version_fields(frame)
    same = whole[(whole.protocol == wanted_protocol) & (whole.profile == wanted_profile)
                 & (whole.dataset_fingerprint == whole.mteb_name.map(builds))]
    if seeds is None:
        if identities:  # the identities asked for, as select chose them
            asked_identity = set(zip(version.model, version.mteb_name, version.model_identity))
            same = same[[key in asked_identity for key in zip(same.model, same.mteb_name, same.model_identity)]]
        version = _newest_per_model(same)
    out, datasets = [], {}
    algorithm, reduction = TABLE2_CONFIGURATION
    for dataset in sorted(version.mteb_name.unique()):
        rows = version[version.mteb_name == dataset]
        table2 = rows[(rows.algorithm == algorithm) & (rows.reduction == reduction)]
        cells = {m: set(g[list(versions.CELL)].itertuples(index=False, name=None))
                 for m, g in table2.groupby("model", sort=True)}
        info = Shared(dataset=dataset, protocol=str(wanted_protocol), profile=str(wanted_profile),
                      fingerprint=str(builds.get(dataset, "")), splits=[], seeds=[], ranked=[])
        configurations_of = {m: set(zip(g.algorithm, g.reduction)) for m, g in rows.groupby("model", sort=False)}
        for model in sorted(set(rows.model) - set(cells)):
            ran = ", ".join(f"{a}:{r}" for a, r in sorted(configurations_of[model]))
            info.apart[model] = (f"no {algorithm}:{reduction} cell, the configuration the ranking uses "
                                 f"(it ran {ran})")
        if cells:
            splits, shared_seeds, ranked, apart = _rank_cells(cells)
            info.splits, info.seeds, info.ranked = sorted(splits), sorted(shared_seeds), ranked
            info.apart.update(apart)
            keep = rows[rows.model.isin(ranked) & rows.split.isin(splits) & rows.seed.isin(shared_seeds)].copy()
            keep["seeds"] = seed_set_name(sorted(shared_seeds))
            out.append(keep)
        info.apart = dict(sorted(info.apart.items()))
        info.others = _others(whole[whole.mteb_name == dataset], _keys(version),
                              str(wanted_protocol), str(wanted_profile), info.fingerprint)
        datasets[dataset] = info
    kept = pd.concat(out, ignore_index=True) if out else version.iloc[0:0]
    return Selection(kept, datasets, left_out if seeds is not None else _left_out(whole, version), version)


def _left_out(whole: pd.DataFrame, kept: pd.DataFrame) -> str | None:
    gone = len(whole) - len(kept)
    if gone <= 0:
        return None
    return (f"Left out {gone} rows of other versions (another build, protocol, profile, or an older seed set or "
            "identity of a model); list them with `tecb-eval table RESULTS --versions`; choose with "
            f"{versions.CHOICES}.")

"""MTEB's results layout (``results/<model>/<revision>/<Task>.json`` + ``model_meta.json``) written
with MTEB's own ``TaskResult``, so ``mteb.ResultCache(OUT).load_results(include_remote=False)`` reads it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tecb_data.errors import UserError
from tecb_data.outputs import NAME_BYTES, inside, name_problem
from tecb_eval.clustering.ranges import SCORE_RANGES, in_range
from tecb_eval.clustering.registry import table2_rows
from tecb_eval.mteb.encoders import revision_of
from tecb_eval.mteb.tasks import SPLIT, language_of, task_for


def _scores(group, version: str) -> dict:
    """MTEB's ScoresDict for one (model, task): what its legacy / v2 clustering tasks return.

    With several seeds (one run's seed set) ``v_measure`` is the mean over seeds of the split
    means, as our Table 2; ``v_measure_std`` the SD over splits averaged over seeds; ``v_measures``
    per split the mean over seeds (legacy: the same splits) or every seed's bootstrap draws one
    after another (v2: each seed draws its own); ours (``tecb_*``) add each seed's figures."""
    by_seed = {int(seed): g.sort_values("split") for seed, g in group.groupby("seed", sort=True)}
    seeds = list(by_seed)
    per_seed = {s: g.v_measure.to_numpy(dtype=float) for s, g in by_seed.items()}
    means = np.array([v.mean() for v in per_seed.values()])
    result = {"v_measure": float(means.mean()), "v_measure_std": float(np.mean([v.std() for v in per_seed.values()]))}
    if version == "v2":
        result["v_measures"] = {"Level 0": [float(x) for s in seeds for x in per_seed[s]]}
        ami = {s: g.ami.to_numpy(dtype=float) for s, g in by_seed.items()}
        result.update(ami=float(np.mean([a.mean() for a in ami.values()])),
                      ami_std=float(np.mean([a.std() for a in ami.values()])),
                      ami_scores={"Level 0": [float(x) for s in seeds for x in ami[s]]})
    elif len(seeds) == 1:
        result["v_measures"] = per_seed[seeds[0]].tolist()
    else:
        splits = sorted(set.intersection(*(set(g.split) for g in by_seed.values())))
        result["v_measures"] = [float(np.mean([g.set_index("split").at[name, "v_measure"] for g in by_seed.values()]))
                                for name in splits]
    if len(seeds) > 1:
        result["tecb_v_measure_sd_seeds"] = float(means.std(ddof=1))
        result["tecb_v_measure_per_seed"] = {str(s): float(m) for s, m in zip(seeds, means)}
    result["main_score"] = result["v_measure"]
    return result


def _first(group, field: str):
    """The group's value of ``field`` (the same on every row of one identity), or None."""
    if field not in group.columns:
        return None
    value = group[field].iloc[0]
    return None if value is None or (isinstance(value, float) and value != value) else value


# What the export reads from the rows, and what each must be: a store read through
# tecb_eval.grid.store has been checked already; a frame from anywhere else is checked here, so an
# edited value never reaches MTEB's JSON as another type, or names a folder outside the layout.
_TEXT = ("model", "model_identity", "mteb_name", "dataset_fingerprint", "protocol", "profile", "seeds", "split")
_OPTIONAL_TEXT = ("dataset_location", "prompt", "backend", "dtype", "language", "mteb_model")
_SHARES = {name: SCORE_RANGES[name] for name in ("v_measure", "ami")}
_SECONDS = ("encode_s", "reduce_s", "cluster_s")


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)) \
        and bool(np.isfinite(value))


def check_rows(rows) -> None:
    """A :class:`UserError` naming the first value of ``rows`` (the k-means rows the export reads)
    that is not of its type or range: text fields text, scores numbers in their range, timings
    seconds, a model name that can be one folder of the layout."""
    for row in rows.to_dict("records"):
        where = f"{row.get('model')!r} on {row.get('mteb_name')!r}, split {row.get('split')!r}"

        def bad(field, what):
            return UserError(f"{where}: {field} {row.get(field)!r} is not {what}; MTEB's results layout is written "
                             "only from values of their type: check the results store's line for this cell")

        for field in _TEXT:
            if field in row and not isinstance(row[field], str):
                raise bad(field, "text")
        for field in _OPTIONAL_TEXT:
            if field in row and not _missing(row[field]) and not isinstance(row[field], str):
                raise bad(field, "text")
        for field, (low, high) in _SHARES.items():
            if field in row and not in_range(field, row[field]):
                raise bad(field, f"a number from {low:g} to {high:g}")
        for field in _SECONDS:
            if field in row and not (_is_number(row[field]) and row[field] >= 0):
                raise bad(field, "a number of seconds")
        # The task's file is named by the dataset's MTEB name: a plain name, or a path of its own.
        problem = name_problem(row["mteb_name"])
        if problem is not None:
            raise bad("mteb_name", f"a plain name (it {problem})")
        model_folder(row["model"])


def model_folder(model: str) -> str:
    """The folder MTEB's layout files a model under (``/`` as ``__``, as MTEB writes it); a name that
    cannot be one folder there (empty, ``.``, ``..``, a control character, longer than a file name
    may be) is a one-line error."""
    folder = model.replace("/", "__")
    if (folder in ("", ".", "..") or any(ord(c) < 32 or ord(c) == 127 for c in folder)
            or len(folder.encode("utf-8")) > NAME_BYTES):
        shown = repr(model) if len(model) <= 60 else repr(model[:57]) + "..."
        raise UserError(f"model name {shown}: cannot name a folder of MTEB's results layout; run it under a plain "
                        f"name of at most {NAME_BYTES} bytes (--model SPEC,name=NAME)")
    return folder


def registry_meta(name: str):
    from tecb_eval.models.kinds.mteb_models import registry_meta as lookup

    return lookup(name)


def task_results(frame) -> list[tuple[str, str, object, dict]]:
    """[(model folder name, revision, TaskResult, extra)] for k-means on the embeddings (MTEB's
    clustering) in ``frame``; one per (model, identity, dataset fingerprint, protocol, profile)."""
    from mteb.results import TaskResult

    kmeans = table2_rows(frame)
    check_rows(kmeans)
    if "profile" not in kmeans.columns:
        kmeans = kmeans.assign(profile="current")
    out = []
    if "seeds" not in kmeans.columns:
        kmeans = kmeans.assign(seeds=kmeans.seed.astype(str))
    # One result per version (a run's seed set is one: its seeds are summarised together).
    keys = ["model", "model_identity", "mteb_name", "dataset_fingerprint", "dataset_location", "protocol", "profile", "seeds"]
    for key, group in kmeans.groupby(keys, sort=True):
        model, identity, mteb_name, fingerprint, location, protocol, profile, seeds = key
        version = "v2" if protocol == "fast" else "legacy"
        # Split names sort in published order (coarse-00 ..., sample-00 ..., bootstrap-00 ...).
        group = group.sort_values(["split", "seed"])
        seed = int(group.seed.min())
        # Rows name their dataset's language since table datasets came (older rows: German).
        code = group["language"].iloc[0] if "language" in group.columns else None
        task = task_for(mteb_name, version, {"path": str(location), "revision": str(fingerprint)}, seed,
                        language_of(code, mteb_name))
        seconds = float(group[["encode_s", "reduce_s", "cluster_s"]].to_numpy().sum())
        result = TaskResult.from_task_results(task, {SPLIT: {"default": _scores(group, version)}}, seconds)
        extra = {"tecb_protocol": protocol, "tecb_profile": profile, "tecb_seeds": str(seeds),
                 "tecb_model_identity": identity, "tecb_model": model}
        if group.seed.nunique() == 1:
            extra["tecb_seed"] = seed
        # How the vectors were made (rows since prompts came): the prompt MTEB's wrapper chose for
        # this task, sentence-transformers' backend, the weights' dtype.
        for field in ("prompt", "backend", "dtype"):
            value = _first(group, field)
            if value is not None:
                extra[f"tecb_{field}"] = value
        folder, revision = model, revision_of(identity)
        mteb_model = _first(group, "mteb_model")
        if mteb_model is not None and registry_meta(mteb_model) is not None:
            # A model MTEB knows, run as MTEB runs it: filed under MTEB's own name and revision, so
            # mteb.ResultCache reads ours beside the leaderboard's results of the same model.
            meta = registry_meta(mteb_model)
            folder, revision = meta.name, meta.revision or revision
        out.append((folder, revision, result, extra))
    return out


def write_results(frame, out: Path) -> list[Path]:
    """MTEB's results layout under ``out``: ``results/<model>/<revision>/<Task>.json`` and a
    ``model_meta.json`` per revision, as ``mteb.ResultCache(out)`` reads it."""
    from mteb.models.model_meta import ModelMeta

    from tecb_eval.files import write_text

    written = []
    seen = set()
    prompts: dict[Path, dict] = {}
    # Two model names MTEB's layout files under one folder ("org/m" and "org__m") would share files.
    folders: dict[str, set] = {}
    for name in sorted({str(m) for m in frame.model}) if "model" in frame.columns else ():
        folders.setdefault(model_folder(name), set()).add(name)
    for folder_name, names in sorted(folders.items()):
        if len(names) > 1:
            shown = " and ".join(repr(n) for n in sorted(names))
            raise UserError(f"models {shown}: MTEB's results layout files both under the folder {folder_name!r} "
                            "('/' is written as '__'), so one would overwrite the other; run one of them under "
                            "another name (--model SPEC,name=NAME)")
    for model, revision, result, extra in task_results(frame):
        # Every part is checked where it is made; the join checks again that no value, however it
        # came into the frame, takes the file out of the layout.
        folder = inside(out, "results", model_folder(model), revision, what="a results row's model name")
        if (folder, result.task_name) in seen:
            # Two versions (builds, seed sets, protocols...) would write one file: the last would win.
            raise UserError(f"{model} on {result.task_name}: the results hold several versions; take one first "
                            "(tecb_eval.reports.versions.select, as the export does)")
        seen.add((folder, result.task_name))
        data = result.model_dump(mode="json")
        data["date"] = None  # MTEB writes a timestamp; ours stay byte-identical across runs
        for score in data["scores"][SPLIT]:
            score.update(extra)  # MTEB keeps unknown score keys: which protocol and profile made it
        task_file = inside(folder, f"{result.task_name}.json", what="a results row's mteb_name")
        written.append(write_text(task_file, json.dumps(data, indent=2, sort_keys=True) + "\n"))
        known = registry_meta(model)
        if known is not None and known.revision == revision:
            meta = known.to_dict()  # MTEB's own metadata: languages, revision, loader, instructions...
            if isinstance(meta.get("training_datasets"), list):
                # MTEB keeps them as a set: listed in hash order, which varies with PYTHONHASHSEED.
                meta["training_datasets"] = sorted(meta["training_datasets"])
        else:
            meta = ModelMeta.create_empty(overwrites={"name": model, "revision": revision}).to_dict()
        if "tecb_prompt" in extra:
            prompts.setdefault(folder, {})[result.task_name] = extra["tecb_prompt"]
        # The prompts used, per task (MTEB keeps them in the model's code, not in its metadata).
        meta["tecb_prompts"] = dict(sorted(prompts.get(folder, {}).items())) or None
        written.append(write_text(folder / "model_meta.json", json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n"))
    return sorted(set(written))

"""Our datasets as MTEB tasks, MTEB's v2 sampling for the fast protocol, and MTEB's results layout.

MTEB is the referee for what a legacy or v2 clustering score is, so this module calls MTEB's own
code wherever it can instead of keeping a copy in step by hand:

- :func:`mteb_tasks` returns MTEB's own task objects (``BlurbsClusteringS2S``,
  ``BlurbsClusteringS2S.v2``, ``TenKGnadClusteringP2P.v2``, ...) whose dataset is one of our
  folders or ``repo_id@revision``, so ``mteb.evaluate(model, tasks=tecb_eval.mteb_tasks([...]))``
  runs any MTEB model on rebuilt data.
- :func:`fast_units` gives the grid's ``fast`` protocol the texts and bootstrap samples MTEB v2
  clusters: each task's own ``dataset_transform`` (Blurbs v2: all rows flattened without
  de-duplication, labels seen once dropped, a stratified subsample of 2048; TenKGnad v2: MTEB's
  generic pooling), then the downsampling and the bootstrap draws from the task's own
  ``rng_state``, with the task's own sizes. The order of those draws is the one thing kept here in
  step with ``AbsTaskClustering._evaluate_subset``; ``tests/test_mteb_referee.py`` runs MTEB on the
  same folders and asserts equal scores per bootstrap.
- :class:`MtebEncoder` lets MTEB call any tecb encoder; :func:`write_results` writes MTEB's results
  layout (``results/<model>/<revision>/<Task>.json`` + ``model_meta.json``) with MTEB's own
  ``TaskResult``, so ``mteb.ResultCache(OUT).load_results(include_remote=False)`` reads it.

Datasets MTEB has no task for (the German Reddit sets) get a task of the same kind built from our
own metadata: legacy as MTEB v1 clusters, v2 through MTEB's generic ``_convert_to_fast`` pooling
with every text embedded (as the TenKGnad v2 tasks do).

``mteb`` is imported on first use: it takes seconds to import.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tecb_data.errors import UserError

VERSIONS = ("legacy", "v2")
SPLIT = "test"


def _mteb():
    import mteb

    return mteb


# -- task classes -------------------------------------------------------------------------------
_GENERIC: dict[str, type] = {}


def _generic_class(name: str, version: str) -> type:
    """A clustering task of MTEB's kind named ``name``, for a dataset MTEB has no task for (made once
    per name, on first use; the name lives on the class, where MTEB's evaluation looks for it)."""
    if name in _GENERIC:
        return _GENERIC[name]
    mteb = _mteb()
    from mteb.abstasks.clustering import AbsTaskClustering, _convert_to_fast
    from mteb.abstasks.clustering_legacy import AbsTaskClusteringLegacy

    template = mteb.get_task("TenKGnadClusteringS2S" + (".v2" if version == "v2" else "")).metadata
    metadata = template.model_copy(update={
        "name": name,
        "description": f"{name}: a tecb clustering dataset that MTEB has no task for.",
        "reference": None, "bibtex_citation": "", "superseded_by": None, "adapted_from": None,
        "domains": ["Written"],
    })
    if version == "legacy":
        cls = type("Tecb" + name.replace(".", "_"), (AbsTaskClusteringLegacy,), {"metadata": metadata})
    else:
        def dataset_transform(self, num_proc=None, **kwargs):
            self.dataset = _convert_to_fast(self.dataset, self.input_column_name, self.label_column_name, self.seed)

        cls = type("Tecb" + name.replace(".", "_"), (AbsTaskClustering,), {
            "metadata": metadata, "dataset_transform": dataset_transform,
            # Every pooled text embedded, as MTEB's TenKGnad v2 tasks do.
            "max_document_to_embed": None, "max_fraction_of_documents_to_embed": None,
        })
    _GENERIC[name] = cls
    return cls


def _check_version(version: str) -> str:
    if version not in VERSIONS:
        raise UserError(f"unknown MTEB task version {version!r}; choose from {', '.join(VERSIONS)}")
    return version


def task_name(mteb_name: str, version: str) -> str:
    return f"{mteb_name}.v2" if _check_version(version) == "v2" else mteb_name


def _task_for(mteb_name: str, version: str, dataset: dict, seed: int):
    """MTEB's own task object for ``mteb_name`` (or a generic one), reading ``dataset``."""
    mteb = _mteb()
    name = task_name(mteb_name, version)
    try:
        cls = type(mteb.get_task(name))
    except KeyError:
        cls = _generic_class(name, version)
    task = cls(seed=seed)
    # The instance's metadata shadows the class's: the task reads our data under its own name,
    # and MTEB's registry of task classes is left as it was.
    task.metadata = cls.metadata.model_copy(update={"dataset": dataset})
    return task


def _dataset_reference(bench) -> dict:
    """``datasets.load_dataset`` arguments for a benchmark: its folder, or its Hub repo at the commit."""
    location = str(bench.location)
    if Path(location).is_dir():
        # datasets caches a local folder's arrow files under the folder's name and card metadata
        # alone, not its data: a rebuilt folder of the same name (another seed, another source)
        # would be read from the old build's cache. Regenerating it from the folder is cheap.
        return {"path": location, "revision": bench.fingerprint, "download_mode": "force_redownload"}
    repo_id, _, revision = location.partition("@")
    return {"path": repo_id, "revision": revision or None}


def mteb_tasks(datasets, version: str = "legacy", *, seed: int = 42) -> list:
    """MTEB task objects bound to our datasets: folders, ``repo_id@revision`` strings or loaded
    benchmarks. ``version="legacy"`` gives MTEB v1's per-split tasks (``BlurbsClusteringS2S``),
    ``"v2"`` the fast ones (``BlurbsClusteringS2S.v2``). A folder's revision is its fingerprint, a
    Hub repo's the commit it was loaded at.

    >>> import mteb, tecb_eval
    >>> tasks = tecb_eval.mteb_tasks(["out/blurbs-clustering-s2s"], version="v2")
    >>> mteb.evaluate(model, tasks=tasks)
    """
    from tecb_eval.grid import load_dataset

    _check_version(version)
    if isinstance(datasets, (str, Path)) or hasattr(datasets, "splits"):
        datasets = [datasets]
    tasks = []
    for item in datasets:
        bench = load_dataset(item)
        tasks.append(_task_for(bench.mteb_name, version, _dataset_reference(bench), seed))
    return tasks


# -- the fast protocol's samples ----------------------------------------------------------------
@dataclass(frozen=True)
class FastSample:
    """What MTEB v2 clusters for one dataset: the embedded texts and the bootstrap row indices."""

    texts: tuple[str, ...]
    labels: tuple[str, ...]
    bootstraps: tuple[np.ndarray, ...]


def _in_memory(bench):
    """The benchmark as the DatasetDict ``datasets.load_dataset`` gives for its folder's test.jsonl."""
    from datasets import Dataset, DatasetDict

    return DatasetDict({SPLIT: Dataset.from_dict({
        "sentences": [list(s.texts) for s in bench.splits],
        "labels": [list(s.labels) for s in bench.splits],
    })})


@contextlib.contextmanager
def _quiet_datasets():
    """No "Casting the dataset" bars from inside the grid's own progress bar."""
    from datasets.utils import logging as ds_logging

    shown = ds_logging.is_progress_bar_enabled()
    ds_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            ds_logging.enable_progress_bar()


def fast_sample(bench, seed: int) -> FastSample:
    """MTEB v2's sample of ``bench``: the task's own transform, downsampling and bootstrap draws."""
    task = _task_for(bench.mteb_name, "v2", _dataset_reference(bench), seed)
    # The rows are already loaded and verified; the transform is MTEB's (tested equal to MTEB
    # loading the folder itself).
    task.dataset = _in_memory(bench)
    with _quiet_datasets():
        task.dataset_transform()
    task.data_loaded = True
    data = task.dataset[SPLIT]
    texts = data[task.input_column_name]
    feature = data.features[task.label_column_name]
    labels = [feature.int2str(v) if hasattr(feature, "int2str") else str(v) for v in data[task.label_column_name]]
    # AbsTaskClustering._evaluate_subset: the downsampling draw is made whenever a cap is set (it
    # reorders the texts and advances rng_state even when nothing is dropped) ...
    n = len(texts)
    cap = task.max_document_to_embed
    if task.max_fraction_of_documents_to_embed is not None:
        cap = int(task.max_fraction_of_documents_to_embed * n)
    if cap is not None:
        chosen = task.rng_state.sample(range(n), k=min(n, cap))
        texts, labels = [texts[i] for i in chosen], [labels[i] for i in chosen]
    # ... then _evaluate_clustering_bootstrapped draws n_clusters samples with replacement.
    bootstraps = tuple(
        np.array(task.rng_state.choices(range(len(texts)), k=task.max_documents_per_cluster), dtype=np.int64)
        for _ in range(task.n_clusters)
    )
    return FastSample(tuple(texts), tuple(labels), bootstraps)


# -- MTEB calling our encoders ------------------------------------------------------------------
class MtebEncoder:
    """Any tecb encoder (``encode(list[str]) -> array``) as an MTEB encoder.

    >>> mteb.evaluate(MtebEncoder(tecb_eval.get_encoder("minilm-l6")), tasks=tecb_eval.mteb_tasks([...]))
    """

    def __init__(self, encoder, name: str | None = None, revision: str | None = None):
        self.encoder = encoder
        identity = getattr(encoder, "identity", None) or type(encoder).__name__
        self.name = name or _model_name(identity)
        self.revision = revision or _revision(identity)

    @property
    def mteb_model_meta(self):
        from mteb.models.model_meta import ModelMeta

        return ModelMeta.create_empty(overwrites={"name": self.name, "revision": self.revision})

    def encode(self, inputs, *, task_metadata=None, hf_split=None, hf_subset=None, prompt_type=None, **kwargs):
        texts = [text for batch in inputs for text in batch["text"]]
        return np.asarray(self.encoder.encode(texts))

    def similarity(self, embeddings1, embeddings2):
        a = np.asarray(embeddings1, dtype=float)
        b = np.asarray(embeddings2, dtype=float)
        a = a / np.clip(np.linalg.norm(a, axis=1, keepdims=True), 1e-12, None)
        b = b / np.clip(np.linalg.norm(b, axis=1, keepdims=True), 1e-12, None)
        return a @ b.T

    def similarity_pairwise(self, embeddings1, embeddings2):
        return np.diag(self.similarity(embeddings1, embeddings2))


class HashingEncoder:
    """Signed character-trigram hashing into ``dims`` dimensions, L2-normalised.

    Each text's vector depends on that text alone, so it is the same whatever batch MTEB or our
    grid put it in: the encoder for checking that two evaluations agree exactly (a neural
    encoder's CPU float sums move by ~1e-7 with batch composition, which k-means can amplify).
    """

    def __init__(self, dims: int = 64):
        self.dims = dims
        self.identity = f"tecb:char-trigram-hash-{dims}"
        self.calls = 0

    def encode(self, texts) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for i, text in enumerate(texts):
            b = np.frombuffer(f"  {text.lower()} ".encode("utf-8"), dtype=np.uint8).astype(np.uint64)
            if len(b) < 3:
                continue
            # A trigram's hash in integer arithmetic (the same on every machine), then mixed.
            h = (b[:-2] << np.uint64(16)) | (b[1:-1] << np.uint64(8)) | b[2:]
            h = (h * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)
            signs = np.where(h & np.uint64(1 << 20), 1.0, -1.0).astype(np.float32)
            np.add.at(out[i], (h % np.uint64(self.dims)).astype(np.int64), signs)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def _model_name(identity: str) -> str:
    # MTEB names models "org/name"; its results folder replaces "/" by "__".
    return identity.split("|", 1)[0].removeprefix("st:").removeprefix("hf:") or "model"


def _revision(identity: str) -> str:
    from tecb_eval.cache import short_hash

    # A per-dataset fitted encoder (tfidf-lsa) is one model: its revision leaves the corpus out.
    return short_hash(re.sub(r"\|corpus=[^|]*", "", identity))[:16]


# -- MTEB's results layout ----------------------------------------------------------------------
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


def task_results(frame) -> list[tuple[str, str, object, dict]]:
    """[(model folder name, revision, TaskResult, extra)] for k-means on the embeddings (MTEB's
    clustering) in ``frame``; one per (model, identity, dataset fingerprint, protocol, profile)."""
    from mteb.results import TaskResult

    kmeans = frame[(frame.algorithm == "minibatch_kmeans") & (frame.reduction == "none")]
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
        task = _task_for(mteb_name, version, {"path": str(location), "revision": str(fingerprint)}, seed)
        seconds = float(group[["encode_s", "reduce_s", "cluster_s"]].to_numpy().sum())
        result = TaskResult.from_task_results(task, {SPLIT: {"default": _scores(group, version)}}, seconds)
        extra = {"tecb_protocol": protocol, "tecb_profile": profile, "tecb_seeds": str(seeds),
                 "tecb_model_identity": identity, "tecb_model": model}
        if group.seed.nunique() == 1:
            extra["tecb_seed"] = seed
        out.append((model, _revision(identity), result, extra))
    return out


def write_results(frame, out: Path) -> list[Path]:
    """MTEB's results layout under ``out``: ``results/<model>/<revision>/<Task>.json`` and a
    ``model_meta.json`` per revision, as ``mteb.ResultCache(out)`` reads it."""
    from mteb.models.model_meta import ModelMeta

    from tecb_eval.report import write_text

    written = []
    seen = set()
    for model, revision, result, extra in task_results(frame):
        folder = Path(out) / "results" / model.replace("/", "__") / revision
        if (folder, result.task_name) in seen:
            # Two versions (builds, seed sets, protocols...) would write one file: the last would win.
            raise UserError(f"{model} on {result.task_name}: the results hold several versions; take one first "
                            "(tecb_eval.versions.select, as the export does)")
        seen.add((folder, result.task_name))
        data = result.model_dump(mode="json")
        data["date"] = None  # MTEB writes a timestamp; ours stay byte-identical across runs
        for score in data["scores"][SPLIT]:
            score.update(extra)  # MTEB keeps unknown score keys: which protocol and profile made it
        written.append(write_text(folder / f"{result.task_name}.json", json.dumps(data, indent=2, sort_keys=True) + "\n"))
        meta = ModelMeta.create_empty(overwrites={"name": model, "revision": revision}).to_dict()
        written.append(write_text(folder / "model_meta.json", json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n"))
    return sorted(set(written))

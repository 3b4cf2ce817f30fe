"""Our datasets as MTEB's own task objects: :func:`mteb_tasks` binds MTEB's task classes
(``BlurbsClusteringS2S``, ``TenKGnadClusteringP2P.v2``, ...) to one of our folders or
``repo_id@revision``; a dataset MTEB has no task for gets one of the same kind built from our metadata.
"""

from __future__ import annotations

from pathlib import Path

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


def task_for(mteb_name: str, version: str, dataset: dict, seed: int):
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


def dataset_reference(bench) -> dict:
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
    from tecb_eval.benchmark import load_dataset

    _check_version(version)
    if isinstance(datasets, (str, Path)) or hasattr(datasets, "splits"):
        datasets = [datasets]
    tasks = []
    for item in datasets:
        bench = load_dataset(item)
        tasks.append(task_for(bench.mteb_name, version, dataset_reference(bench), seed))
    return tasks

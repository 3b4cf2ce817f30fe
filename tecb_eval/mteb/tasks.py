"""Our datasets as MTEB's own task objects: :func:`mteb_tasks` binds MTEB's task classes
(``BlurbsClusteringS2S``, ``TenKGnadClusteringP2P.v2``, ...) to one of our folders or
``repo_id@revision``; any other dataset gets a task of the same kind built from our own metadata.

MTEB's class is taken only when MTEB's task of that name is the German dataset of our registry
(its only language ``deu-Latn``, its dataset named as ours); a user's table dataset always gets
ours. A name MTEB uses for something else, such as ``RedditClusteringP2P`` (MTEB's English Reddit set, whose v2 embeds 4 % of the texts), would put
English metadata and MTEB's sampling on German data: such a dataset gets our own task, named with
MTEB's suffix for a language variant of one of its tasks (``RedditClusteringP2P-DE``, as MTEB's
``RedditClusteringP2P-VN``), and so does its sibling view (``RedditClusteringS2S-DE``), so that no
result file claims to be MTEB's English task. The results store and the tables keep the registry's
name (``RedditClusteringP2P``); only what MTEB reads (task objects, the MTEB results export) carries
the task's name.
"""

from __future__ import annotations

import functools
from pathlib import Path

from tecb_data.errors import UserError
from tecb_data.seeding import DEFAULT_SEED

VERSIONS = ("legacy", "v2")
SPLIT = "test"
LANGUAGE = "deu-Latn"  # the benchmark's datasets are German; a table dataset names its own
VARIANT_SUFFIX = "-DE"


def _mteb():
    import mteb

    return mteb


def _registered(name: str):
    """MTEB's task object registered as ``name``, or None."""
    try:
        return _mteb().get_task(name)
    except KeyError:
        return None


def _datasets():
    from tecb_data.recipes import DATASETS

    return DATASETS.values()


def _spec(mteb_name: str):
    """Our registry's entry for the dataset published as ``mteb_name``, or None."""
    return next((spec for spec in _datasets() if spec.mteb_name == mteb_name), None)


def _languages(metadata) -> set[str]:
    langs = metadata.eval_langs
    return set(langs) if isinstance(langs, list) else {lang for group in langs.values() for lang in group}


def _is_ours(metadata, mteb_name: str) -> bool:
    """Whether MTEB's task ``metadata`` describes the German dataset we publish as ``mteb_name``."""
    if _languages(metadata) != {LANGUAGE}:
        return False
    spec = _spec(mteb_name)
    # MTEB names its datasets as we do (slvnwhrl/blurbs-clustering-s2s). A name outside our registry
    # (a user's table dataset) is never MTEB's dataset, whatever MTEB calls by that name.
    return spec is not None and str(metadata.dataset.get("path", "")).rsplit("/", 1)[-1] == spec.name


@functools.lru_cache(maxsize=None)
def _mtebs_class(mteb_name: str, version: str) -> type | None:
    task = _registered(task_name(mteb_name, version))
    if task is None or not _is_ours(task.metadata, mteb_name):
        return None
    return type(task)


@functools.lru_cache(maxsize=None)
def _taken(mteb_name: str) -> str | None:
    """The MTEB task that uses ``mteb_name``'s name, or a sibling view's, for another dataset; None if none does."""
    spec = _spec(mteb_name)
    siblings = [s.mteb_name for s in _datasets() if s.source == spec.source] if spec is not None else [mteb_name]
    for name in siblings:
        for version in VERSIONS:
            task = _registered(task_name(name, version))
            if task is not None and not _is_ours(task.metadata, name):
                return task.metadata.name
    return None


def own_name(mteb_name: str) -> str:
    """The name of our own task for ``mteb_name``: ``mteb_name`` itself, unless MTEB uses it (or its
    v2) for another dataset, which a result file of that name would be taken for. The views of one
    source are named alike (``RedditClusteringS2S-DE`` beside ``RedditClusteringP2P-DE``), so that
    the suffix reads as "the German variant" and not as a difference between the views."""
    return mteb_name + VARIANT_SUFFIX if _taken(mteb_name) else mteb_name


# -- task classes -------------------------------------------------------------------------------
_OWN: dict[tuple[str, str], type] = {}
_DOMAINS = {"reddit": ["Social", "Web", "Written"]}  # MTEB's own Reddit tasks' domains


def mteb_language(bench) -> str:
    """The dataset's language as MTEB writes it (``deu-Latn``), from its manifest's ``language``
    (a table dataset's ``--language``, an ISO 639 code); German where the manifest names none."""
    return language_of((getattr(bench, "manifest", None) or {}).get("language"), bench.name)


def language_of(code, where: str = "dataset") -> str:
    """An ISO 639 code (``de``, ``fra``) as MTEB writes languages (``deu-Latn``); None: German. MTEB's
    own conversion (the one it applies to Hub cards) decides, so our task reads as MTEB's would."""
    if code is None or (isinstance(code, float) and code != code) or str(code) in ("", "de", "deu"):
        return LANGUAGE
    from mteb.languages.iso_mappings import _hf_lang_to_iso_lang_script

    converted = _hf_lang_to_iso_lang_script(str(code))
    if converted is None:
        raise UserError(f"{where}: language {code!r} is not one MTEB knows; rebuild it with an ISO 639 code "
                        "(--language de)")
    return converted


def _own_metadata(name: str, version: str, mteb_name: str, language: str = LANGUAGE):
    from mteb.abstasks.task_metadata import TaskMetadata
    from pydantic import ValidationError

    spec = _spec(mteb_name)
    if spec is not None:
        description = f"{spec.description} Built by tecb ({spec.name}); not an MTEB task."
    else:
        description = f"{mteb_name}: a tecb clustering dataset ({language}); not an MTEB task."
    taken = _taken(mteb_name)
    if taken:
        other = _registered(taken).metadata
        description += (f" Named with {VARIANT_SUFFIX}: MTEB's {taken} is another dataset "
                        f"({', '.join(sorted(_languages(other)))}, {other.dataset['path']}).")
    if version == "v2":
        description += " v2: MTEB's fast clustering evaluation, every pooled text embedded."
    fields = dict(
        name=name,
        description=description,
        reference=spec.source_url if spec is not None else None,
        # Each task object reads one of our folders or Hub revisions instead (task_for).
        dataset={"path": spec.name if spec is not None else mteb_name, "revision": "unbound"},
        type="Clustering",
        category="t2c",
        modalities=["text"],
        eval_splits=[SPLIT],
        eval_langs=[language],
        main_score="v_measure",
        date=None,
        domains=_DOMAINS.get(spec.source if spec is not None else "", ["Written"]),
        task_subtypes=["Thematic clustering"],
        annotations_creators="derived",
        dialect=[],
        sample_creation="found",
        bibtex_citation="",
        adapted_from=[task_name(own_name(mteb_name), "legacy")] if version == "v2" else None,
    )
    try:
        return TaskMetadata(**fields, license=spec.license if spec is not None else "not specified")
    except ValidationError:
        # MTEB knows a fixed list of licences; ours ("other": Reddit's Data API Terms) may not be one.
        return TaskMetadata(**fields, license="not specified")


def _own_class(mteb_name: str, version: str, language: str = LANGUAGE) -> type:
    """A clustering task of MTEB's kind for ``mteb_name`` from our own metadata (made once per name
    and language, on first use; the name lives on the class, where MTEB's evaluation looks for it)."""
    name = task_name(own_name(mteb_name), version)
    if (name, language) in _OWN:
        return _OWN[(name, language)]
    from mteb.abstasks.clustering import AbsTaskClustering, _convert_to_fast
    from mteb.abstasks.clustering_legacy import AbsTaskClusteringLegacy

    metadata = _own_metadata(name, version, mteb_name, language)
    class_name = "Tecb" + name.replace(".", "_").replace("-", "_")
    if version == "legacy":
        cls = type(class_name, (AbsTaskClusteringLegacy,), {"metadata": metadata})
    else:
        def dataset_transform(self, num_proc=None, **kwargs):
            self.dataset = _convert_to_fast(self.dataset, self.input_column_name, self.label_column_name, self.seed)

        cls = type(class_name, (AbsTaskClustering,), {
            "metadata": metadata, "dataset_transform": dataset_transform,
            # Every pooled text embedded, as MTEB's TenKGnad v2 tasks do.
            "max_document_to_embed": None, "max_fraction_of_documents_to_embed": None,
        })
    _OWN[(name, language)] = cls
    return cls


def _check_version(version: str) -> str:
    if version not in VERSIONS:
        raise UserError(f"unknown MTEB task version {version!r}; choose from {', '.join(VERSIONS)}")
    return version


def task_name(mteb_name: str, version: str) -> str:
    return f"{mteb_name}.v2" if _check_version(version) == "v2" else mteb_name


def task_class(mteb_name: str, version: str, language: str = LANGUAGE) -> type:
    """MTEB's own task class when it is our German dataset, else ours (see the module)."""
    mtebs = _mtebs_class(mteb_name, version) if language == LANGUAGE else None
    return mtebs or _own_class(mteb_name, version, language)


def task_for(mteb_name: str, version: str, dataset: dict, seed: int, language: str = LANGUAGE):
    """The task object for ``mteb_name`` (:func:`task_class`) in ``language`` reading ``dataset``."""
    cls = task_class(mteb_name, version, language)
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


def mteb_tasks(datasets, version: str = "legacy", *, seed: int = DEFAULT_SEED) -> list:
    """MTEB task objects bound to our datasets: folders, ``repo_id@revision`` strings or loaded
    benchmarks. ``version="legacy"`` gives MTEB v1's per-split tasks (``BlurbsClusteringS2S``),
    ``"v2"`` the fast ones (``BlurbsClusteringS2S.v2``); a dataset MTEB has no German task for gets
    our own (``RedditClusteringP2P-DE``, ``RedditClusteringS2S-DE.v2``; see the module). A folder's
    revision is its fingerprint, a Hub repo's the commit it was loaded at.

    >>> import mteb, tecb_eval
    >>> tasks = tecb_eval.mteb_tasks(["out/blurbs-clustering-s2s"], version="v2")
    >>> mteb.evaluate(model, tasks=tasks)

    Args:
        datasets (Sequence[str | Path | Benchmark]): Dataset folders, ``repo_id@revision`` strings
            or loaded benchmarks.
        version (str): ``"legacy"`` (MTEB v1's per-split tasks) or ``"v2"`` (the fast ones).
        seed (int): The tasks' seed (MTEB's downsampling and bootstrap draws of v2).

    Returns:
        list: One MTEB task object per dataset, bound to its data.

    Raises:
        UserError: An unknown version or a dataset that fails verification.
    """
    from tecb_eval.benchmark import load_dataset

    _check_version(version)
    if isinstance(datasets, (str, Path)) or hasattr(datasets, "splits"):
        datasets = [datasets]
    tasks = []
    for item in datasets:
        bench = load_dataset(item)
        tasks.append(task_for(bench.mteb_name, version, dataset_reference(bench), seed, mteb_language(bench)))
    return tasks

"""A published dataset (local folder or Hub repo id) -> the benchmark in memory (the one loader tecb_eval uses)."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

from tecb_data import layout
from tecb_data.errors import UserError

# The one published Reddit dataset holds submission ids only; its texts are fetched by each user.
REDDIT_IDS_DATASET = "reddit-clustering-ids"
VIEWS = ("s2s", "p2p")


@dataclass(frozen=True)
class BenchmarkSplit:
    name: str  # the split's name in the manifest, e.g. "coarse-00"
    texts: tuple[str, ...]  # the split's texts, in the published order
    # Each text's gold label, aligned with texts; None for a corpus without labels
    # (``Benchmark.labelled`` False): nothing that needs labels applies.
    labels: tuple[str, ...] | None
    # Every text's label path (top level first) where the dataset has a hierarchy (Blurbs recipe
    # version 3 on), else None: per-level scores are then not measured.
    label_paths: tuple[tuple[str, ...], ...] | None = None


@dataclass(frozen=True)
class Benchmark:
    name: str  # dataset name, e.g. "blurbs-clustering-s2s"
    splits: tuple[BenchmarkSplit, ...]  # the dataset's splits, in the published order
    fingerprint: str  # SHA-256 over the manifest's files: what this build is, named in every results row
    manifest: dict  # the folder's manifest.json: recipe, seed, inputs and outputs with their SHA-256
    location: str  # folder or repo id@revision it came from
    # The folder its files are in: the one given, or the Hub snapshot in the local cache (where
    # data/samples.jsonl, the provenance file, is read from).
    folder: Path | None = field(default=None, compare=False)

    @property
    def mteb_name(self) -> str:
        return self.manifest.get("mteb_name", self.name)

    @property
    def labelled(self) -> bool:
        """False for a corpus built without labels: V-measure and every score that needs labels do
        not apply to it; the label-free criteria do."""
        return self.manifest.get("labelled", True) is not False


def load_folder(folder: Path, *, verify: bool = True, location: str | None = None) -> Benchmark:
    folder = Path(folder)
    manifest = layout.verify(folder) if verify else layout.read_manifest(folder)
    rows = layout.read_split_rows(folder)
    names = [s["name"] for s in manifest.get("splits", [])]
    if len(names) != len(rows):
        raise UserError(f"{folder}: {layout.DATA_FILE} has {len(rows)} rows but the manifest lists {len(names)} splits")
    paths = layout.read_label_paths(folder)
    if (manifest.get("labelled", True) is False) != any(labels is None for _, labels in rows):
        raise UserError(f"{folder}: the manifest says the dataset {'has no' if manifest.get('labelled', True) is False else 'has'}"
                        f" labels, but {layout.DATA_FILE} {'holds' if manifest.get('labelled', True) is False else 'lacks'}"
                        " them; rebuild the dataset")
    splits = tuple(
        BenchmarkSplit(name, tuple(texts), None if labels is None else tuple(labels), None if p is None else tuple(p))
        for name, (texts, labels), p in zip(names, rows, paths)
    )
    return Benchmark(manifest["dataset"], splits, manifest["fingerprint"], manifest, location or str(folder), folder)


def load(
    folder_or_repo_id: str | Path,
    revision: str | None = None,
    *,
    view: str | None = None,
    cache_dir: str | Path | None = None,
    praw_site: str | None = None,
    reddit_cache: str | Path | None = None,
    refresh: bool = False,
    progress: bool = False,
) -> Benchmark:
    """Load a benchmark dataset, verified against its manifest.

    ``folder_or_repo_id`` is a folder written by ``tecb-data build`` or a Hub dataset repo id
    (``ORG/NAME``), fetched with ``huggingface_hub`` into its cache (``cache_dir``, default the HF
    cache) and pinned to the commit ``revision`` resolves to (default: the head of ``main``).

    The ids-only ``reddit-clustering-ids`` dataset is rehydrated through praw (``praw_site`` names
    the praw.ini site, ``reddit_cache`` the rehydration cache, ``refresh`` re-checks every id) into
    the text ``view`` asked for ("s2s" or "p2p"); the rebuilt folders live next to the download.

    Args:
        folder_or_repo_id (str | Path): A folder written by ``tecb-data build``, or a Hub dataset repo
            id ``ORG/NAME``.
        revision (str | None): Branch, tag or commit of a Hub repo; None: the head of ``main``.
        view (str | None): For ``reddit-clustering-ids`` only: the text view to rehydrate, ``"s2s"``
            or ``"p2p"``.
        cache_dir (str | Path | None): huggingface_hub's cache for a repo id; None: the HF cache.
        praw_site (str | None): The praw.ini site for rehydrating Reddit ids.
        reddit_cache (str | Path | None): Folder of the rehydration cache; None: ``~/.cache/tecb/reddit``.
        refresh (bool): Ask Reddit about every id again when rehydrating.
        progress (bool): Show a progress bar on a terminal.

    Returns:
        Benchmark: The dataset, its splits and its manifest, verified against the manifest's SHA-256s.

    Raises:
        UserError: A missing folder, a file that does not match its manifest, an unknown repo or
            revision, or a Hub that cannot be reached (network calls time out).
    """
    path = Path(folder_or_repo_id).expanduser()
    if path.is_dir():
        if revision is not None:
            raise UserError(f"{path}: a local folder has no revisions; drop revision={revision!r}")
        folder, location, verified = path, str(path), False
    elif isinstance(folder_or_repo_id, Path) or looks_like_path(str(folder_or_repo_id)):
        raise missing_folder(str(folder_or_repo_id))  # never the Hub: a mistyped folder is not a repository
    elif _looks_like_repo_id(str(folder_or_repo_id)):
        from tecb_data.hub import download

        repo_id = str(folder_or_repo_id)
        folder, _, commit = download(repo_id, revision, cache_dir=Path(cache_dir) if cache_dir else None)
        location, verified = f"{repo_id}@{commit}", True
    else:
        raise UserError(f"{folder_or_repo_id}: no such dataset folder, and not a Hub repo id (ORG/NAME)")

    manifest = layout.read_manifest(folder)
    if manifest.get("dataset") == REDDIT_IDS_DATASET:
        if not verified:
            layout.verify(folder)
        return _rehydrate(
            folder,
            manifest,
            location,
            view=view,
            cache_dir=cache_dir,
            praw_site=praw_site,
            reddit_cache=reddit_cache,
            refresh=refresh,
            progress=progress,
        )
    if view is not None and view != manifest.get("view"):
        raise UserError(f"{location}: holds the {str(manifest.get('view')).upper()} view, not {view!r}; drop view=")
    # A Hub snapshot was verified file by file in download(); a folder is verified here.
    return load_folder(folder, verify=not verified, location=location)


def looks_like_path(text: str) -> bool:
    """A name the user meant as a folder, though it may also parse as ``org/name``: it starts with
    ``.``, ``/`` or ``~``, has more than one separator (or a Windows one), or the part before its
    slash is a folder here (``out/blurbs-clustering-s2`` beside ``out/``)."""
    if text.startswith((".", "/", "~")):
        return True
    if text.count("/") > 1 or "\\" in text or (os.altsep and os.altsep in text and os.altsep != "/"):
        return True
    parent = text.split("@", 1)[0].rpartition("/")[0]
    return bool(parent) and Path(parent).expanduser().is_dir()


def missing_folder(text: str) -> UserError:
    """One line for a dataset folder that is not there, with the dataset folders beside it that
    come closest (a typo's likely target)."""
    path = Path(text).expanduser()
    if path.exists():
        return UserError(f"{text}: is a file, not a dataset folder; give the folder `tecb-data build` wrote")
    parent = path.parent if str(path.parent) else Path(".")
    near = []
    if parent.is_dir():
        names = sorted(p.name for p in parent.iterdir() if (p / "manifest.json").is_file())
        near = difflib.get_close_matches(path.name, names, n=3, cutoff=0.6)
    hint = (f"did you mean {' or '.join(str(parent / n) for n in near)}?" if near
            else "give a folder written by `tecb-data build` (or a folder of them)")
    where = f"{path.name} is not in {parent}/" if parent.is_dir() else f"{parent}/ does not exist"
    return UserError(f"{text}: no such dataset folder ({where}); {hint}")


def _looks_like_repo_id(text: str) -> bool:
    from huggingface_hub.utils import validate_repo_id
    from huggingface_hub.errors import HFValidationError

    if text.count("/") != 1 or text.startswith((".", "/", "~")):
        return False
    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return True


def rehydration_dir(cache_dir: str | Path | None = None) -> Path:
    """Where rebuilt Reddit datasets live: beside the downloads (``cache_dir``) or in HF_HOME."""
    if cache_dir is not None:
        return Path(cache_dir) / "tecb-rehydrated"
    from huggingface_hub import constants

    return Path(constants.HF_HOME) / "tecb" / "rehydrated"


def _view_hint(folder: Path) -> str:
    """What to give the command line instead of the ids folder: the rehydrated views beside it,
    where a Reddit build wrote them, else how to make them."""
    beside = [folder.parent / f"reddit-clustering-{view}" for view in VIEWS]
    beside = [p for p in beside if (p / layout.MANIFEST).is_file()]
    if beside:
        return f"give a rehydrated view instead ({' or '.join(str(p) for p in beside)}) as --data"
    return (f"rehydrate it with `tecb-data build --source reddit --ids {folder} --out DIR` and give "
            "DIR/reddit-clustering-s2s or DIR/reddit-clustering-p2p as --data")


def _rehydrate(folder: Path, manifest: dict, location: str, *, view, cache_dir, praw_site, reddit_cache, refresh, progress) -> Benchmark:
    if view not in VIEWS:
        raise UserError(f"{location}: {REDDIT_IDS_DATASET} holds Reddit ids only, no texts; {_view_hint(folder)}, "
                        "or in Python pass view='s2s' or view='p2p' to rehydrate its texts")
    # Imported here: praw is needed only by users who load the Reddit datasets (and numpy, which the
    # seeding module brings, only by those who rehydrate: loading a folder stays light).
    from tecb_data.seeding import DEFAULT_SEED
    from tecb_data.sources import reddit

    seed = manifest.get("seed", DEFAULT_SEED)
    # One folder per ids dataset and seed: a second load reuses it instead of asking Reddit again.
    out = rehydration_dir(cache_dir) / f"{manifest['fingerprint'][:16]}-seed{seed}"
    built = {}
    if not refresh:
        built = {p.name: p for p in out.glob(f"reddit-clustering-{view}") if (p / layout.MANIFEST).is_file()}
    if not built:
        results = reddit.build_from_ids(
            folder, out, cache=reddit_cache, seed=seed, praw_site=praw_site, refresh=refresh, progress=progress
        )
        built = {Path(p).name: Path(p) for p, _ in results}
    wanted = [p for name, p in sorted(built.items()) if name.endswith(f"-{view}")]
    if len(wanted) != 1:
        raise UserError(f"{location}: rehydration made no {view.upper()} dataset (made: {', '.join(sorted(built)) or 'none'})")
    return load_folder(wanted[0], location=f"{location} rehydrated {view}")

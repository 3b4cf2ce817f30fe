"""The fast protocol's samples, drawn once per dataset build, seed and MTEB version.

MTEB draws them (:func:`tecb_eval.mteb.sampling.fast_sample`: its task's own transform,
downsampling and bootstrap draws); drawing costs an import of MTEB and a pass of ``datasets``
over every row (seconds each), and gives the same rows for every model and configuration. So the
grid keeps what MTEB chose under the cache folder, as row numbers into the dataset's rows pooled in
split order, and later runs (other models, other configurations, resumed grids) read them back
without importing MTEB. The key holds the dataset's fingerprint, the seed and the versions of
``mteb`` and ``datasets`` (read from their installed metadata, not by importing them): another
version of either draws again. A file that cannot be read is removed and drawn again, as the
other caches do. Every file records the key it was drawn for, and is used only under that key: a
file copied over another one's name (another dataset's sample, another seed's) is discarded with a
warning and drawn again, never clustered as if it were this dataset's sample.

A dataset built with genre paths (``label_paths``) also gets MTEB's per-level draws
(:func:`tecb_eval.mteb.levels.fast_levels`; drawn with the flat sample from one run of MTEB's
transform, :func:`tecb_eval.mteb.levels.fast_draws`). They are kept beside
the flat sample under the same key (``<key>.levels.npz``) as the rows of the flat sample that each
level's draws cluster; each level's labels and k follow from the texts' genre paths
(:func:`tecb_eval.mteb.levels.first_paths`), so they are rebuilt without MTEB.

Draws not stored yet can start ahead (:meth:`SampleCache.draw_ahead`), in a child process, while
this one loads the model: importing MTEB and its transform take one core for about 6 s, loading
transformers and the weights take the other. The child imports MTEB and draws, nothing more; what it
drew is checked and stored here, as a draw made here is, and only this process writes the cache.
"""

from __future__ import annotations

from concurrent.futures.process import BrokenProcessPool
from importlib import metadata
from pathlib import Path

import numpy as np

from tecb_eval.files import atomic_save, short_hash
from tecb_eval.grid.children import quiet_child
from tecb_eval.grid.cache import CACHE_OPTION, discard_damaged, load_or_discard
from tecb_eval.mteb.levels import first_paths
from tecb_eval.mteb.sampling import FastSample

# Raised when what this module stores changes meaning; old files are then simply not found.
# 2: every file records its key.
SAMPLE_FORMAT = "2"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def sample_key(bench, seed: int) -> str:
    """Names one draw: the dataset build, the seed and the code that draws (MTEB, and ``datasets``
    whose stratified split MTEB's transform calls)."""
    return short_hash("fast-sample", SAMPLE_FORMAT, bench.fingerprint, str(int(seed)),
                      f"mteb=={_version('mteb')}", f"datasets=={_version('datasets')}")


def pooled_rows(bench) -> list[tuple[str, str]]:
    """Every (text, label) of ``bench``, split after split: what the stored row numbers index."""
    return [(text, label) for split in bench.splits for text, label in zip(split.texts, split.labels)]


def to_rows(bench, sample: FastSample) -> np.ndarray:
    """Where each of the sample's texts is in :func:`pooled_rows` (the first row with that text and
    label: a repeated row is the same text and label, so any of them gives the same sample)."""
    first: dict[tuple[str, str], int] = {}
    for i, pair in enumerate(pooled_rows(bench)):
        first.setdefault(pair, i)
    try:
        return np.array([first[pair] for pair in zip(sample.texts, sample.labels)], dtype=np.int64)
    except KeyError as exc:  # a bug (the transform invented a row), not a user's error
        raise RuntimeError(f"{bench.location}: MTEB's sample holds a row the dataset lacks: {exc}") from None


def from_rows(bench, chosen: np.ndarray, bootstraps: np.ndarray) -> FastSample:
    pooled = pooled_rows(bench)
    return FastSample(tuple(pooled[i][0] for i in chosen), tuple(pooled[i][1] for i in chosen),
                      tuple(np.array(row, dtype=np.int64) for row in bootstraps))


def same_sample(a: FastSample, b: FastSample) -> bool:
    """The same texts, labels and bootstrap rows, in the same order."""
    return (a.texts == b.texts and a.labels == b.labels and len(a.bootstraps) == len(b.bootstraps)
            and all(np.array_equal(x, y) for x, y in zip(a.bootstraps, b.bootstraps)))


def levels_to_rows(levels: tuple[tuple, ...]) -> np.ndarray:
    """MTEB's per-level draws as one array [level, draw, document] of rows of the flat sample."""
    depth = len(levels[0]) if levels else 0
    if any(len(draw) != depth or [lv.level for lv in draw] != list(range(depth)) for draw in levels):
        raise RuntimeError("the per-level draws do not cover the same levels in every draw")
    if depth == 0:
        return np.zeros((0, len(levels), 0), dtype=np.int64)
    return np.array([[lv.rows for lv in (draw[level] for draw in levels)] for level in range(depth)], dtype=np.int64)


def levels_from_rows(paths_of: dict, base_texts, rows: np.ndarray) -> tuple[tuple, ...]:
    """The :class:`~tecb_eval.clustering.levels.Level` draws that ``rows`` (from :func:`levels_to_rows`)
    stand for: a row's label at a level is its text's genre path at that level (``paths_of``, from
    :func:`~tecb_eval.mteb.levels.first_paths`), and k is the number of labels at that level among the
    flat sample's texts that carry it (what MTEB asks k-means for)."""
    from tecb_eval.clustering.levels import Level

    paths = [paths_of[t] for t in base_texts]
    ks = [len({p[level] for p in paths if len(p) > level}) for level in range(rows.shape[0])]
    return tuple(
        tuple(Level(level, rows[level, b].astype(np.int64), tuple(paths[i][level] for i in rows[level, b]), ks[level])
              for level in range(rows.shape[0]))
        for b in range(rows.shape[1]))


def same_levels(a: tuple[tuple, ...], b: tuple[tuple, ...]) -> bool:
    """The same levels, rows, labels and k in every draw, in the same order."""
    return len(a) == len(b) and all(
        len(x) == len(y) and all(p.level == q.level and p.k == q.k and p.labels == q.labels
                                 and np.array_equal(p.rows, q.rows) for p, q in zip(x, y))
        for x, y in zip(a, b))


class SampleCache:
    """The fast protocol's samples under ``root/samples`` (``root=None``: drawn in every run)."""

    def __init__(self, root: Path | None):
        self.folder = None if root is None else Path(root) / "samples"
        self.drawn = 0  # how many samples this process had MTEB draw (tests and benches read it)
        self.levels_drawn = 0  # how many per-level draws likewise
        # (fingerprint, seed) -> (texts, per-level draws) that get() drew beside a flat sample, for
        # levels() to take rather than run MTEB's transform again.
        self._levels_beside: dict[tuple[str, int], tuple] = {}
        self._ahead: dict[tuple[str, int], object] = {}  # (fingerprint, seed) -> the child's future
        self._pool = None

    # -- drawing ahead ------------------------------------------------------------------------
    def draw_ahead(self, benches, seeds) -> int:
        """Start MTEB's draws (:func:`~tecb_eval.mteb.levels.fast_draws`) of every (``benches`` x
        ``seeds``) whose flat sample is not stored, one after the other in one child process;
        :meth:`get` takes them from there. Returns how many it started; :meth:`close` stops the child."""
        for bench in benches:
            for seed in seeds:
                key = (bench.fingerprint, int(seed))
                # A stored file is not drawn ahead (get() reads and checks it, once): one that is
                # damaged is drawn here then, as without a head start.
                path = self._path(sample_key(bench, seed))
                if key in self._ahead or (path is not None and path.is_file()):
                    continue
                if self._pool is None:
                    # loky's pool, as the grid's workers: fork+exec (this process's threads do not get
                    # into the child), and a child that dies is reported, not waited for.
                    from loky import ProcessPoolExecutor

                    self._pool = ProcessPoolExecutor(max_workers=1, initializer=quiet_child)
                from tecb_eval.mteb.levels import fast_draws

                self._ahead[key] = self._pool.submit(fast_draws, bench, int(seed))
        return len(self._ahead)

    def close(self) -> None:
        """Stop the child process, whether or not its draws were taken (Ctrl-C, an error)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, kill_workers=True)
            self._pool = None
        self._ahead.clear()

    def __enter__(self) -> SampleCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the draws ----------------------------------------------------------------------------
    def get(self, bench, seed: int) -> FastSample:
        stored = self.lookup(bench, seed)
        if stored is not None:
            return stored
        ahead, drawn = self._ahead.pop((bench.fingerprint, int(seed)), None), None
        if ahead is not None:
            try:
                drawn = ahead.result()
            except BrokenProcessPool:  # the child died (killed, out of memory): drawn here instead
                drawn = None
        if drawn is None:
            from tecb_eval.mteb.levels import fast_draws

            drawn = fast_draws(bench, seed)
        sample, levels = drawn
        if levels is not None:
            self._levels_beside[(bench.fingerprint, int(seed))] = (sample.texts, levels)
        self.drawn += 1
        if self.folder is not None:
            chosen = to_rows(bench, sample)
            bootstraps = np.stack(sample.bootstraps) if sample.bootstraps else np.zeros((0, 0), dtype=np.int64)
            # What is read back is what MTEB drew, or nothing is stored.
            if not same_sample(from_rows(bench, chosen, bootstraps), sample):
                raise RuntimeError(f"{bench.location}: the fast sample does not survive its row numbers")
            self._save(sample_key(bench, seed), chosen, bootstraps)
        return sample

    def _path(self, key: str, suffix: str = "") -> Path | None:
        return None if self.folder is None else self.folder / f"{key}{suffix}.npz"

    def levels(self, bench, seed: int, base_texts) -> tuple[tuple, ...] | None:
        """MTEB's per-level draws over the flat sample ``base_texts`` (as
        :func:`~tecb_eval.mteb.levels.fast_levels` gives them), read back when stored; None for a
        dataset without genre paths (then nothing is drawn nor imported)."""
        paths_of = first_paths(bench)  # once: a pass over every row of the dataset
        if paths_of is None:
            return None
        stored = self.lookup_levels(bench, seed, base_texts, paths_of)
        beside = self._levels_beside.pop((bench.fingerprint, int(seed)), None)
        if stored is not None:
            return stored
        if beside is not None and beside[0] == tuple(base_texts):
            levels = beside[1]
        else:
            from tecb_eval.mteb.levels import fast_levels

            levels = fast_levels(bench, seed, base_texts)
        self.levels_drawn += 1
        if self.folder is not None:
            rows = levels_to_rows(levels)
            # What is read back is what MTEB drew, or nothing is stored.
            if not same_levels(levels_from_rows(paths_of, base_texts, rows), levels):
                raise RuntimeError(f"{bench.location}: the per-level draws do not survive their row numbers")
            key = sample_key(bench, seed)
            atomic_save(self._path(key, ".levels"),
                        lambda fh: np.savez_compressed(fh, rows=rows.astype(np.int32), key=np.array(key)), ".npz",
                        option=CACHE_OPTION)
        return levels

    def lookup_levels(self, bench, seed: int, base_texts, paths_of: dict) -> tuple[tuple, ...] | None:
        key = sample_key(bench, seed)
        path = self._path(key, ".levels")
        if path is None or not path.is_file():
            return None
        loaded = load_or_discard(path, "rows", "key")
        if loaded is None or not _drawn_for(path, loaded[-1], key, bench, seed):
            return None
        rows = loaded[0]
        depths = [len(paths_of.get(t, ())) for t in base_texts]
        # Every row must be a text of the flat sample that carries the level it is drawn at.
        if (rows.ndim != 3 or not np.issubdtype(rows.dtype, np.integer) or rows.shape[0] > max(depths, default=0)
                or (rows.size and (rows.min() < 0 or rows.max() >= len(base_texts)))
                or any(depths[i] <= level for level in range(rows.shape[0]) for i in np.unique(rows[level]))):
            discard_damaged(path, f"levels {rows.shape} {rows.dtype}")
            return None
        return levels_from_rows(paths_of, base_texts, rows)

    def lookup(self, bench, seed: int) -> FastSample | None:
        key = sample_key(bench, seed)
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        loaded = load_or_discard(path, "chosen", "bootstraps", "key")
        if loaded is None or not _drawn_for(path, loaded[-1], key, bench, seed):
            return None
        chosen, bootstraps, _ = loaded
        rows = sum(len(split.texts) for split in bench.splits)
        if (chosen.ndim != 1 or bootstraps.ndim != 2 or not np.issubdtype(chosen.dtype, np.integer)
                or not np.issubdtype(bootstraps.dtype, np.integer)
                or (chosen.size and (chosen.min() < 0 or chosen.max() >= rows))
                or (bootstraps.size and (bootstraps.min() < 0 or bootstraps.max() >= len(chosen)))):
            discard_damaged(path, f"rows {chosen.shape} {chosen.dtype}, bootstraps {bootstraps.shape} {bootstraps.dtype}")
            return None
        return from_rows(bench, chosen, bootstraps)

    def _save(self, key: str, chosen: np.ndarray, bootstraps: np.ndarray) -> None:
        # int32 halves the file; read back as int64, the dtype MTEB's draws come in.
        atomic_save(self._path(key), lambda fh: np.savez_compressed(
            fh, chosen=chosen.astype(np.int32), bootstraps=bootstraps.astype(np.int32), key=np.array(key)), ".npz",
            option=CACHE_OPTION)


def _drawn_for(path: Path, recorded: np.ndarray, key: str, bench, seed: int) -> bool:
    """Whether the file at ``path`` records ``key`` as the one it was drawn for; if not (a file copied
    over this name, another dataset's or seed's draw), it is warned about and removed: row numbers
    of another draw index this dataset's rows as well, and would score a sample MTEB never drew."""
    found = str(recorded) if recorded.ndim == 0 and recorded.dtype.kind == "U" else None
    if found == key:
        return True
    discard_damaged(path, f"drawn for key {found if found is not None else 'unknown'}, not for this one ({key}: "
                          f"{bench.name} at seed {int(seed)}); a copy of another dataset's or seed's sample")
    return False

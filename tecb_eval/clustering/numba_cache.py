"""UMAP's compiled numba code kept on disk, so a process after the first loads it instead of
compiling it again (what that saves a fresh process: docs/benchmarks.md, "UMAP's compiled code on
disk"). Every UMAP we run goes through here: grid units and their worker processes
(``tecb_eval.grid.work``) and the UMAP reducer of ``tecb_eval.clustering.algorithms``."""

from __future__ import annotations

import functools
import os
from pathlib import Path

# UMAP's and pynndescent's numba functions that the grid runs; the modules holding them.
_NUMBA_MODULES = ("umap.umap_", "umap.layouts", "umap.utils", "umap.distances", "umap.spectral",
                  "pynndescent.pynndescent_", "pynndescent.utils", "pynndescent.distances", "pynndescent.rp_trees",
                  "tecb_eval.clustering.umap_neighbours")


def numba_cache_dir() -> Path:
    """Where compiled UMAP code is kept: numba's own ``NUMBA_CACHE_DIR`` when set, else a folder of
    ours in the user's cache (``$XDG_CACHE_HOME/tecb/numba``, as huggingface_hub keeps its models)."""
    own = os.environ.get("NUMBA_CACHE_DIR", "").strip()
    if own:
        return Path(own)
    return Path(os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache") / "tecb" / "numba"


@functools.cache
def keep_compiled_umap() -> None:
    """Keep UMAP's compiled numba code on disk, so a process after the first loads it instead of
    compiling it again.

    Every worker process compiles UMAP's and pynndescent's numba functions on its first UMAP, seconds
    of every worker's time on each run (docs/benchmarks.md, "UMAP's compiled code on disk").
    pynndescent asks numba to cache most of its functions; umap-learn asks for one. Numba's own
    switch for the rest is its ``enable_caching`` on each function, before the first call; the code
    compiled and then cached is the code that would run, so the bits do not change. A few functions cannot be cached (numba
    says why: "dynamic globals") and still compile in every process.
    """
    import importlib
    import warnings

    import numba
    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher
    from numba.core.errors import NumbaWarning

    if not numba.config.CACHE_DIR:
        numba.config.CACHE_DIR = str(numba_cache_dir())
    warnings.filterwarnings("ignore", message="Cannot cache compiled function", category=NumbaWarning)
    for name in _NUMBA_MODULES:
        for value in vars(importlib.import_module(name)).values():
            if isinstance(value, Dispatcher) and isinstance(value._cache, NullCache) and not value.signatures:
                try:
                    value.enable_caching()
                except (OSError, RuntimeError):  # no writable cache folder: numba compiles in memory
                    return


_warmed = False


def _source(module: str) -> Path:
    """A module's source file, found without importing it (importing UMAP compiles some of its code)."""
    from importlib.util import find_spec

    top, *rest = module.split(".")
    folder = Path(find_spec(top).submodule_search_locations[0])
    return folder.joinpath(*rest[:-1], rest[-1] + ".py") if rest else folder / "__init__.py"


def _code_key() -> str:
    """What numba's cached UMAP code depends on: the versions and the compiled sources' paths and
    times (numba keys its cache by a source file's folder and checks its time and size)."""
    import hashlib
    import platform
    import sys
    from importlib.metadata import version

    parts = [sys.version, platform.machine(), version("numba")]
    for source in map(_source, _NUMBA_MODULES):
        stat = source.stat()
        parts.append(f"{source}|{stat.st_mtime_ns}|{stat.st_size}")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=10).hexdigest()


def compile_umap_once(fit) -> None:
    """:func:`keep_compiled_umap`, and where numba's cache does not hold UMAP's code yet, one
    process on this machine compiles it (its import and ``fit()``, a small UMAP fit: half a minute
    of a quiet core) while the others that reach this meanwhile wait, then load the code from disk.

    Without this, every worker of a grid and every ``tecb-eval`` run that starts before the cache is
    written compiles the same code at once, on the same cores (docs/benchmarks.md, "UMAP's code
    compiled once"). A marker file named by :func:`_code_key` says the code is on disk; an exclusive
    ``flock`` on a file beside it lets one process compile. Where the cache folder cannot be
    written, each process compiles in memory, as numba does by default."""
    global _warmed
    if _warmed:
        return
    _warmed = True  # set first: ``fit`` comes back here
    import fcntl

    folder = numba_cache_dir()
    marker = folder / f"tecb-umap-compiled-{_code_key()}"
    if marker.exists():
        keep_compiled_umap()
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = open(folder / "tecb-umap-compile.lock", "a")
    except OSError:
        keep_compiled_umap()
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        keep_compiled_umap()
        if marker.exists():
            return
        fit()
        try:
            marker.touch()
        except OSError:
            pass

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

"""A Dask worker's heap as a grid needs it.

Dask's nanny starts every worker with ``MALLOC_TRIM_THRESHOLD_=65536``
(``distributed.nanny.pre-spawn-environ``), so that a long-lived worker hands freed memory back to
the OS. Setting it also turns off glibc's adaptive mmap threshold: every numpy temporary above
128 KiB becomes a fresh ``mmap`` and its pages fault in again. A MiniBatchKMeans fit on 16,384 ×
384 floats took 1.18 s in a worker against 0.49 s in a plain process, the same on a worker after
:func:`reuse_freed_memory` (0.45 s); a grid's units on Dask ran 1.6 to 2.4× slower than the same
units here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's own ceiling for the adaptive threshold on 64-bit
TRIM_THRESHOLD = 4 * MMAP_THRESHOLD  # what glibc's adaptive rule would keep for that threshold


def reuse_freed_memory() -> bool:
    """Let this process's heap keep and reuse what it frees, as glibc's default does, where Dask's
    nanny set ``MALLOC_TRIM_THRESHOLD_``; True if it was changed (glibc only: elsewhere a no-op)."""
    if "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (macOS, musl without mallopt): nothing to undo
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))

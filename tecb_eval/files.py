"""Writing our output files and naming things by digest: the bottom of ``tecb_eval``, imported by
every room (caches, tables, MTEB results, layer sweeps) and importing none of them."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Callable

from tecb_data.errors import UserError


def short_hash(*parts: str) -> str:
    digest = hashlib.blake2b(digest_size=12)
    for part in parts:
        digest.update(part.encode("utf-8") + b"\0")
    return digest.hexdigest()


def atomic_save(path: Path, write: Callable[[object], None], suffix: str) -> None:
    """Write through ``write(fileobj)`` into a temporary sibling, fsync, then rename into place."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=path.parent)
    except OSError as exc:
        raise UserError(f"{path.parent}: cannot write to the cache ({exc.strerror}); choose a writable --cache-dir") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UserError(f"{path}: writing the cache file failed ({exc.strerror}); free space or choose another "
                        "--cache-dir") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> Path:
    atomic_save(Path(path), lambda fh: fh.write(text.encode("utf-8")), Path(path).suffix)
    return Path(path)

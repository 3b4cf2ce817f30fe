"""The small embedded demo sample (written for this project by tools/make_demo_data.py)."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources
from pathlib import Path

from tecb_data.errors import UserError

_INPUTS = {"blurbs": "blurbs", "tenkgnad": "ompc/corpus.sqlite3"}


def demo_input(source: str) -> Path:
    if source not in _INPUTS:
        raise UserError(f"there is no embedded demo sample for source {source!r}; pass --input")
    return Path(str(resources.files("tecb_data.demo").joinpath(_INPUTS[source])))


@lru_cache(maxsize=1)
def _demo_hashes() -> frozenset[str]:
    root = Path(str(resources.files("tecb_data.demo")))
    return frozenset(hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
                     if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts)


def is_demo_manifest(manifest: dict) -> bool:
    """Whether a dataset was built from the embedded demo sample: its manifest says so (``synthetic``,
    written by the build), or every input's SHA-256 (recorded in its manifest) is one of the sample's
    files (a folder built before the flag). Its scores are synthetic, never the paper's."""
    if not isinstance(manifest, dict):
        return False
    if manifest.get("synthetic") is True:
        return True
    inputs = manifest.get("inputs")
    hashes = [i.get("sha256") for i in inputs or [] if isinstance(i, dict)]
    return bool(hashes) and all(h in _demo_hashes() for h in hashes)


def _record_key(item) -> tuple:
    return item.id, tuple(sorted(item.views.items()))


@lru_cache(maxsize=None)
def _demo_records(source: str) -> frozenset:
    from tecb_data.sources import blurbs, tenkgnad  # here: the sources import nothing of the demo

    reader = {"blurbs": blurbs.read, "tenkgnad": tenkgnad.read}[source]
    return frozenset(_record_key(item) for item in reader(demo_input(source)).items)


def is_demo_records(source: str, items, inputs=()) -> bool:
    """Whether a build's records all come from the embedded demo sample: its very files (``inputs``'
    hashes), or the same records copied, reordered or cut down (a byte-identical build of them
    must say the same thing)."""
    items = list(items)
    if source not in _INPUTS or not items:
        return False
    hashes = [getattr(i, "sha256", None) for i in inputs]
    if hashes and all(h in _demo_hashes() for h in hashes):
        return True
    demo = _demo_records(source)
    return len(items) <= len(demo) and all(_record_key(item) in demo for item in items)

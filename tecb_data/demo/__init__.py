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
    """Whether a dataset was built from the embedded demo sample: every input's SHA-256 (recorded in
    its manifest) is one of the sample's files. Its scores are synthetic, never the paper's."""
    inputs = manifest.get("inputs") if isinstance(manifest, dict) else None
    hashes = [i.get("sha256") for i in inputs or [] if isinstance(i, dict)]
    return bool(hashes) and all(h in _demo_hashes() for h in hashes)

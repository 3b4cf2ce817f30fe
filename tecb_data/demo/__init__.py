"""The small embedded demo sample (written for this project by tools/make_demo_data.py)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from tecb_data.errors import UserError

_INPUTS = {"blurbs": "blurbs", "tenkgnad": "ompc/corpus.sqlite3"}


def demo_input(source: str) -> Path:
    if source not in _INPUTS:
        raise UserError(f"there is no embedded demo sample for source {source!r}; pass --input")
    return Path(str(resources.files("tecb_data.demo").joinpath(_INPUTS[source])))

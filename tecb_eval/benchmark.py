"""The one way into the published layout: a Benchmark, a dataset folder or ``repo_id[@revision]`` on
the Hub, through :func:`tecb_data.load`. The grid, the MTEB bridge, exports, layer sweeps and
pre-training all load their data here, below all of them."""

from __future__ import annotations

from pathlib import Path

import tecb_data


def load_dataset(item):
    """A Benchmark, a folder, or ``repo_id[@revision]``: anything tecb_data.load accepts."""
    if isinstance(item, tecb_data.Benchmark):
        return item
    text = str(item)
    if not Path(text).exists() and "@" in text:
        repo_id, _, revision = text.partition("@")
        return tecb_data.load(repo_id, revision=revision)
    return tecb_data.load(text)

"""The one way into the published layout: a Benchmark, a dataset folder or ``repo_id[@revision]`` on
the Hub, through :func:`tecb_data.load`. The grid, the MTEB bridge, exports, layer sweeps and
pre-training all load their data here, below all of them."""

from __future__ import annotations

from pathlib import Path

import tecb_data
from tecb_data.errors import UserError
from tecb_data.load import looks_like_path, missing_folder


def load_dataset(item):
    """A Benchmark, a folder, or ``repo_id[@revision]``: anything tecb_data.load accepts."""
    if isinstance(item, tecb_data.Benchmark):
        return item
    text = str(item)
    if Path(text).expanduser().exists():
        return tecb_data.load(Path(text).expanduser())
    if looks_like_path(text):
        raise missing_folder(text)  # never the Hub: a mistyped folder is not a repository
    repo_id, _, revision = text.partition("@")
    if "/" not in repo_id:
        raise UserError(f"{text}: no such dataset folder here, and not a Hub repo id (ORG/NAME[@REVISION]); "
                        "give a folder written by `tecb-data build` or a published repository")
    try:
        return tecb_data.load(repo_id, revision=revision or None)
    except UserError as exc:
        if exc.exit_code != UserError.exit_code:  # a verification error is about the repository found
            raise
        # Either of two things was meant; say both, so a folder that is not here is not taken
        # for a Hub problem alone.
        said = str(exc)
        if said.startswith(repo_id):  # "ORG/NAME@main: downloading: ..." -> what the Hub said
            said = said.split(": ", 1)[-1].removeprefix("downloading: ")
        raise UserError(f"{text}: no dataset folder of that name here, and as a Hub repo id: {said}") from None

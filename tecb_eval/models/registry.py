"""The one registry of model kinds: what a spec names and what follows from it.

A spec is a built-in name (``minilm-l6``), a prefixed name (``mteb:NAME``), a folder or Hub id,
or an encoder object. Each kind is one entry: how a spec of it is recognised, the options its
encoder takes, how it loads, what is checked before a grid encodes anything, how a run finds its
weights, whether a Dask worker opens it, the name tables show, the identities it gives (which
``recommend`` reads back from a results row) and the lines of its BERTopic snippet, where an
offline copy of its weights lives, and what training starts from. ``get_encoder``, the grid's
preflight and its cluster encoder, ``find_model``, ``recommend``, the layer sweep and training
all read it, so a new kind is one entry here and, where it carries code, one module in
:mod:`tecb_eval.models.kinds`.

This module imports nothing heavy: a kind's module imports torch, transformers or MTEB when its
encoder is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

from tecb_data.errors import UserError
from tecb_eval.models.kinds import (
    common, mean_pooling, minilm, mteb_models, objects, openai_api, pretrained, sentence_transformer, tfidf_lsa, use_multilingual,
)
from tecb_eval.models.kinds.common import EmbeddingSnippet, Load, Option

_POSITIVE = Option(int, least=1)
# What a sentence-transformers model or a plain transformers checkpoint takes (a layer counts back
# from the last when negative; a device is checked against torch's view of the machine).
TRANSFORMER_OPTIONS = {
    "layer": Option(int), "max_length": _POSITIVE, "batch_size": _POSITIVE, "device": Option(str),
    "prompt": Option(str), "prompt_name": Option(str), "backend": Option(str, choices=sentence_transformer.BACKENDS),
    "dtype": Option(str, choices=sentence_transformer.DTYPES),
}


@dataclass(frozen=True)
class ModelKind:
    name: str
    description: str  # one line for pages: what a spec of this kind is
    example: object  # a spec of this kind
    # What its encoder takes besides ``seed`` (the grid passes every model one), by name, and of what
    # type (:class:`~tecb_eval.models.kinds.common.Option`); others are refused.
    options: dict[str, Option]
    load: Callable[[Load], object]  # the encoder, loaded where the call runs
    encoder_classes: tuple  # the encoders it makes: get_encoder passes one of them through as it is
    identity_prefixes: tuple  # how the identities it gives begin: recommend tells a results row's kind by them
    # Recognition: a built-in is its whole spec, a prefixed kind starts so (the rest names the
    # model), any other kind says which specs it takes; the registry asks in order, first match wins.
    spec_name: str = ""
    spec_prefix: str = ""
    accepts: Callable[[object], bool] | None = None
    # (spec, given options, here): one line before a grid encodes anything, nothing loaded.
    check: Callable[[object, dict, bool], None] = common.nothing_to_check
    # Makes sure a spec named by text is there to load (downloads it), loads nothing.
    find: Callable[[object], None] = common.nothing_to_find
    # (spec, options): whether a Dask worker opens it and the coordinator only describes it.
    opens_on_a_worker: Callable[[object, dict], bool] = common.opens_here
    display: Callable[[object], str] = common.path_or_hub_name  # the name tables and pages show by default
    # The lines of recommend's BERTopic snippet that build its embeddings (identity, the folder the
    # grid read or None) -> EmbeddingSnippet; a ValueError for an identity it cannot have given.
    # None: none of its own; the snippet loads the model as SentenceTransformer does, by its identity.
    # A row's ``api_key_env`` (the variable an API model's key was read from) is passed as
    # ``key_variable`` where the row has one.
    snippet: Callable[..., EmbeddingSnippet] | None = None
    offline_folder: Callable[[], Path] | None = None  # where a packaged copy of its weights lives
    checkpoint: Callable[[object], tuple[Path, str]] | None = None  # training: its transformers folder and id
    # (spec, options): the identity loading would give, told from its files without loading them (a
    # rerun whose cells are all stored loads nothing); None from it: only loading tells.
    identity_from_files: Callable[[object, dict], str | None] = common.only_loading_tells

    def matches(self, spec) -> bool:
        if self.spec_name:
            return common.is_text(spec) and str(spec) == self.spec_name
        if self.spec_prefix:
            return common.is_text(spec) and str(spec).startswith(self.spec_prefix)
        return self.accepts(spec)


_TRANSFORMER_CLASSES = (sentence_transformer.SentenceTransformerEncoder, mean_pooling.MeanPoolingEncoder)

_BUILT_IN = (
    ModelKind(
        "minilm-l6", "sentence-transformers' all-MiniLM-L6-v2, from an offline package", example="minilm-l6",
        options=TRANSFORMER_OPTIONS, load=minilm.load, encoder_classes=_TRANSFORMER_CLASSES,
        identity_prefixes=(f"st:{minilm.HUB_ID}#",), spec_name="minilm-l6", check=minilm.check, find=minilm.find,
        opens_on_a_worker=minilm.opens_on_a_worker, snippet=minilm.snippet, offline_folder=minilm.minilm_folder,
        checkpoint=minilm.checkpoint, identity_from_files=minilm.identity),
    ModelKind(
        "use-multilingual", "Google's multilingual Universal Sentence Encoder v3 (numpy, offline)",
        example="use-multilingual", options={"batch_size": _POSITIVE, "threads": _POSITIVE}, load=use_multilingual.load,
        encoder_classes=(use_multilingual.UniversalSentenceEncoder,), identity_prefixes=("use-multilingual:",),
        spec_name="use-multilingual", snippet=use_multilingual.snippet),
    ModelKind(
        "tfidf-lsa", "TF-IDF and LSA (scikit-learn), fitted per dataset", example="tfidf-lsa",
        options={"n_components": _POSITIVE, "max_features": _POSITIVE}, load=tfidf_lsa.load,
        encoder_classes=(tfidf_lsa.TfidfLsaEncoder,), identity_prefixes=("tfidf-lsa:",), spec_name="tfidf-lsa",
        snippet=tfidf_lsa.snippet),
)
BUILTIN_NAMES = tuple(kind.spec_name for kind in _BUILT_IN)

MODEL_KINDS: tuple[ModelKind, ...] = (
    *_BUILT_IN,
    ModelKind(
        "mteb", "a model as MTEB runs it: a name MTEB's registry knows, or a sentence-transformers folder",
        example="mteb:intfloat/multilingual-e5-small",
        # MTEB's wrapper decides prompts, precision and backend.
        options={"batch_size": _POSITIVE, "device": Option(str)},
        load=mteb_models.load, encoder_classes=(mteb_models.MtebModelEncoder,),
        identity_prefixes=(mteb_models.PREFIX,), spec_prefix=mteb_models.PREFIX, check=mteb_models.check,
        display=mteb_models.display),
    # An endpoint is I/O, not CPU: encoded in the calling process with `concurrency` requests in
    # flight, also on a --scheduler run (a Dask worker would hold a slot idle waiting on the network).
    ModelKind(
        "openai", "a model behind an OpenAI-compatible embeddings API (OpenAI, vLLM, text-embeddings-inference, "
        "Ollama), its key from the environment", example="openai:text-embedding-3-small",
        options=openai_api.OPTIONS, load=openai_api.load, encoder_classes=(openai_api.OpenAIEncoder,),
        identity_prefixes=(openai_api.PREFIX,), spec_prefix=openai_api.PREFIX, check=openai_api.check,
        opens_on_a_worker=common.opens_here, display=openai_api.display, snippet=openai_api.snippet),
    ModelKind(
        "object", "an encoder object: anything with encode(list[str]), or an MTEB model object",
        example=objects.Example(), options={"identity": Option(str), "batch_size": _POSITIVE}, load=objects.load,
        encoder_classes=(objects.ObjectEncoder,), identity_prefixes=("object:",), accepts=common.is_object,
        display=objects.display),
    # Last: any other text is a folder or a Hub id.
    ModelKind(
        "pretrained", "a sentence-transformers model or a transformers checkpoint, by folder or Hub id",
        example="deepset/gbert-base", options=TRANSFORMER_OPTIONS,
        load=partial(pretrained.load, builtins=BUILTIN_NAMES), encoder_classes=_TRANSFORMER_CLASSES,
        identity_prefixes=("st:", "hf:"), accepts=common.is_text, check=pretrained.check,
        find=partial(pretrained.find, builtins=BUILTIN_NAMES),
        opens_on_a_worker=partial(pretrained.opens_on_a_worker, builtins=BUILTIN_NAMES), snippet=pretrained.snippet,
        checkpoint=partial(pretrained.checkpoint, builtins=BUILTIN_NAMES),
        identity_from_files=partial(pretrained.identity, builtins=BUILTIN_NAMES)),
)
KINDS = {kind.name: kind for kind in MODEL_KINDS}
SPEC_PREFIXES = tuple(kind.spec_prefix for kind in MODEL_KINDS if kind.spec_prefix)
ENCODER_CLASSES = tuple(dict.fromkeys(cls for kind in MODEL_KINDS for cls in kind.encoder_classes))
# Every string that names a kind: its built-in name, its spec prefix, how its identities begin.
KIND_WORDS = tuple(dict.fromkeys([*BUILTIN_NAMES, *SPEC_PREFIXES,
                                  *(p for kind in MODEL_KINDS for p in kind.identity_prefixes)]))


def identity_from_files(spec, options: dict) -> str | None:
    """The identity loading ``spec`` with ``options`` would give, from its files alone; None where
    only loading tells (its kind, or options whose effect only loading shows)."""
    return kind_of(spec).identity_from_files(spec, options)


def kind_of(spec) -> ModelKind:
    """The kind of ``spec``: a built-in name, a prefixed name, an encoder object, else a folder or Hub id."""
    return next(kind for kind in MODEL_KINDS if kind.matches(spec))


def kind_of_identity(identity: str) -> ModelKind | None:
    """The kind whose identities begin as ``identity`` does (a results row's ``model_identity``), or
    None for an identity no kind gives (an encoder object's own)."""
    return next((kind for kind in MODEL_KINDS if str(identity).startswith(kind.identity_prefixes)), None)


def embedding_snippet(identity: str, location: str | None, key_variable: str | None = None) -> EmbeddingSnippet:
    """The lines of recommend's BERTopic snippet that build a results row's embeddings. A kind with
    none of its own (an MTEB model, an encoder object), and an identity no kind gives, get the
    sentence-transformers lines that load a model by its identity's name. ``key_variable``: the
    environment variable an API model's key was read from (the row's ``api_key_env``)."""
    kind = kind_of_identity(identity)
    snippet = kind.snippet if kind is not None and kind.snippet is not None else KINDS["pretrained"].snippet
    return snippet(identity, location, **({"key_variable": key_variable} if key_variable else {}))


def checkpoint(spec) -> tuple[Path, str]:
    """The transformers folder a training run starts from and the id its records name, or one line
    for a kind with nothing to train."""
    kind = kind_of(spec)
    if kind.checkpoint is None:
        trainable = [k.spec_name for k in MODEL_KINDS if k.spec_name and k.checkpoint is not None]
        raise UserError(f"{spec}: {kind.description}, has no transformers checkpoint to train; training starts "
                        f"from a checkpoint folder, a sentence-transformers folder, a Hub id or {', '.join(trainable)}")
    return kind.checkpoint(spec)

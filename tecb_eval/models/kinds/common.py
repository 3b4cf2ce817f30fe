"""What the kinds of model share: the encoder protocol, what loading is told (:class:`Load`), the
lines a kind gives ``recommend``'s snippet (:class:`EmbeddingSnippet`), defaults, and the content
hash that names a model folder's files in an identity."""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np
from tecb_data.seeding import DEFAULT_SEED

DEFAULT_BATCH_SIZE = 32
# The authors encoded with the models' own limits; 512 is BERT's, and what the paper's mean pooling saw.
DEFAULT_MAX_LENGTH = 512
# Files whose content decides what a checkpoint computes; hashed into its identity (the ONNX and
# OpenVINO exports are what a model loaded with that backend computes).
_IDENTITY_SUFFIXES = (".json", ".safetensors", ".bin", ".txt", ".model", ".pt", ".onnx", ".onnx_data", ".xml")


@runtime_checkable
class TextEncoder(Protocol):
    identity: str

    def encode(self, texts: list[str]) -> np.ndarray: ...


class Encoder:
    """What every encoder ``get_encoder`` returns has: an ``identity``, ``encode``, and each optional
    feature declared here with its default, so that the grid, MTEB's tasks, training and the layer
    sweep read a feature as an attribute and never ask an encoder whether it has one. A kind sets
    what differs from the default, on its class or its instances."""

    identity: str = ""
    # Its vectors may be kept on disk under its identity; False: nothing says when they change
    # (an encoder object without an identity of its own), so they are kept in memory only.
    persistent: bool = True
    # Encodes with the prompt MTEB gives each task: ``for_task(metadata)`` binds it to one.
    per_task: bool = False
    # Learns from the texts it encodes: ``fit_corpus(texts)`` fits one per dataset (tfidf-lsa).
    per_dataset: bool = False
    # Answers batch by batch (an endpoint): ``encode_batches(texts, save)`` hands each batch to
    # ``save`` as it comes, so that the store keeps what was paid for before more is sent.
    in_batches: bool = False
    # Encodes ``batch_size`` texts at a time in ``SentenceTransformer.encode``'s order (longest
    # first): a Dask cluster cuts its shards on those batches, so a worker's vectors are this process's.
    length_sorted_batches: bool = False
    # Pools one hidden layer of a transformer: ``at_layer`` and ``encode_layers`` (the layer sweep).
    sweeps_layers: bool = False
    # The Dask scheduler whose workers hold the model and encode its texts; "": encoded where it is called.
    scheduler: str = ""
    # Texts and tokens its maximum length cut, counted as it encodes (``{"texts", "tokens"}``);
    # None: it counts none.
    truncated: dict | None = None
    # What a results row says of how the vectors were made (None: does not apply).
    prompt: str | None = None
    backend: str | None = None
    dtype: str | None = None
    location: str | None = None  # the model folder the user named, resolved: recommend's snippet loads it
    mteb_model: str | None = None  # MTEB's name and revision of a model run as MTEB runs it
    mteb_revision: str | None = None

    def encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def for_task(self, task_metadata) -> "Encoder":
        return self

    def fit_corpus(self, texts) -> "Encoder":
        return self

    def encode_batches(self, texts: list[str], save) -> None:
        self_name = type(self).__name__
        raise NotImplementedError(f"{self_name} encodes in one call (in_batches is False)")

    def note_cache_hits(self, count: int) -> None:
        """``count`` texts came from the embedding store: a paid endpoint counts what it was spared."""

    def usage_fields(self, tokens: float | None) -> dict:
        """What a results row says of a paid endpoint's encoding; nothing for a model that runs here."""
        return {}

    def check_cache(self, text: str, cached: np.ndarray) -> None:
        """Before its cached vectors are used: a model that may change under its name (an endpoint)
        encodes ``text`` again and stops the run where it no longer gives ``cached``. A model that
        runs here is what its identity names: nothing to check."""


@dataclass(frozen=True)
class Option:
    """One option a kind's encoder takes, declared once in the kind's registry entry as scikit-learn's
    ``_parameter_constraints`` declare an estimator's parameters: its type, its bounds, the values
    it takes. ``get_encoder`` checks a value against it, the command line reads a ``--model``
    option's text as its type, and the pages list it."""

    type: type = str  # int, float or str
    least: float | None = None  # the smallest value it takes
    above: float | None = None  # a value it must exceed
    choices: tuple = ()  # the values it takes; (): any of its type

    def problem(self, value) -> str | None:
        """What is wrong with ``value`` in words (``must be a positive integer``), or None."""
        if self.type is int:
            if isinstance(value, bool) or not isinstance(value, int):
                return "is not an integer" if self.least is None else self._integers()
            return self._integers() if self.least is not None and value < self.least else None
        if self.type is float:
            number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            if not number or (self.least is not None and value < self.least) or \
                    (self.above is not None and value <= self.above):
                return f"must be a {'positive' if self.above == 0 else 'non-negative'} number"
            return None
        if not isinstance(value, str):
            return "must be text"
        if self.choices and value not in self.choices:
            return f"is not one of {', '.join(self.choices)}"
        return None

    def _integers(self) -> str:
        return "must be a positive integer" if self.least == 1 else f"must be an integer of at least {self.least:g}"

    def read(self, text: str):
        """A command line's text as this option's type; ValueError for text that is none."""
        return self.type(text) if self.type in (int, float) else text


@dataclass(frozen=True)
class Load:
    """What a kind's loader is told: the spec, the seed the grid passes every model, the options
    every kind names alike (None: not given), and the kind's own (``prompt``, ``n_components``,
    ``identity``, ...), checked already against what the kind takes."""

    spec: object
    seed: int = DEFAULT_SEED
    layer: int | None = None
    max_length: int | None = None
    batch_size: int | None = None
    device: str | None = None
    options: dict = field(default_factory=dict)


class EmbeddingSnippet(NamedTuple):
    """How ``recommend``'s BERTopic snippet builds a model's embeddings."""

    imports: list[str]  # import lines
    lines: list[str]  # the lines that set ``embedding_model`` (and ``embeddings``, if precomputed)
    precomputed: bool  # whether the vectors are handed to BERTopic rather than computed by it
    dims: str  # the line that sets ``dims``, the embeddings' length, for a reduction that clips to it


def package_version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"


def folder_digest(folder: Path) -> str:
    """A short content hash of a model folder (weights, configs, vocabularies), sorted by path.

    It covers every file a load can open: symlinked files and symlinked subfolders are followed
    (a sentence-transformers module or a transformer folder linked in from elsewhere is read by
    the load like any other), each file named by its path inside ``folder`` and hashed by the
    content it resolves to. A link back to a folder above it is skipped: the load never needs it
    and following it would never end."""
    digest = hashlib.blake2b(digest_size=10)
    for relative, path in _identity_files(Path(folder)):
        digest.update("/".join(relative).encode("utf-8") + b"\0")
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


def _identity_files(folder: Path) -> list[tuple[tuple[str, ...], str]]:
    """(path inside ``folder`` as parts, path to open) of each identity file, sorted by parts."""
    found = []
    # A folder's resolved path is compared with its ancestors' only: two links to one folder are
    # two modules the load reads twice, while a link to an ancestor is a cycle.
    pending = [((), str(folder), frozenset({os.path.realpath(folder)}))]
    while pending:
        relative, where, ancestors = pending.pop()
        with os.scandir(where) as entries:
            for entry in entries:
                parts = (*relative, entry.name)
                if entry.name == ".cache":  # huggingface_hub's download bookkeeping, not the model
                    continue
                if entry.is_dir(follow_symlinks=True):
                    real = os.path.realpath(entry.path)
                    if real not in ancestors:
                        pending.append((parts, entry.path, ancestors | {real}))
                elif entry.is_file(follow_symlinks=True) and Path(entry.name).suffix in _IDENTITY_SUFFIXES:
                    found.append((parts, entry.path))
    return sorted(found)


def identity_parts(identity: str) -> dict:
    """An identity's ``key=value`` parts (``max_length=128``); a package pin (``sklearn==1.5``) is none."""
    return dict(p.split("=", 1) for p in identity.split("|") if "=" in p and "==" not in p)


def is_text(spec) -> bool:
    """A spec named by text (a name, a folder, a Hub id), not an encoder object."""
    return isinstance(spec, (str, Path))


def is_object(spec) -> bool:
    return not is_text(spec)


def path_or_hub_name(spec) -> str:
    """A short name for tables: a folder's own name, a Hub id's name without its owner and
    revision, a built-in's name as it is."""
    text = str(spec).rstrip("/")
    return text.split("@")[0].rsplit("/", 1)[-1] if not Path(text).is_dir() else Path(text).resolve().name


def nothing_to_check(spec, given: dict, here: bool) -> None:
    """A kind whose options are all there is to check before loading."""


def nothing_to_find(spec) -> None:
    """A kind with nothing to download before its turn: it is in a package, or found when opened."""


def only_loading_tells(spec, options: dict) -> None:
    """A kind whose identity is known once it is loaded (or fitted per dataset), not before."""
    return None


def opens_here(spec, options: dict) -> bool:
    """A kind that a Dask worker never opens for the coordinator: it encodes where the grid runs."""
    return False

"""Embedding and reduction caches on disk.

Embeddings: one folder per encoder identity, holding shards (``.npz``: 16-byte BLAKE2b text keys
and their vectors). A text is looked up by its hash, so it is encoded once per identity, whatever
split, dataset, configuration or run asks for it. Encoding writes a shard per chunk, so an
interrupted run keeps what it finished. Each shard is written to a temporary file and renamed,
with the mode the umask gives (a cache shared by a group stays readable to it).

Reductions: one ``.npy`` per (embeddings of a split, reduction, seed), shared by the algorithms
and by later runs.

A cache file that cannot be read (damaged on disk, cut short by a full disk, edited) is never
fatal: a warning names it, it is removed, and what it held is computed again. A cache folder that
cannot be written is one line naming it.
"""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from tecb_eval.files import atomic_save, short_hash  # noqa: F401 (the caches' own names)
from tecb_eval.clustering.registry import reduction as reduction_entry

KEY_BYTES = 16
CACHE_OPTION = "--cache-dir"  # what `run`, `demo` and `layers` call the cache folder, named in its errors
ENCODE_CHUNK = 4096


def check_cache_folder(cache_dir, inputs: list) -> None:
    """Before any work: a cache inside a dataset folder (``inputs``: the datasets and model folders
    a run reads) breaks the dataset; inside an export it is deleted with it; one that cannot be
    written is one line."""
    from tecb_data.outputs import refuse_nested, writable_folder

    refuse_nested(cache_dir, option="cache folder", itself=True, inputs=inputs)
    writable_folder(cache_dir, option="cache folder")


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=KEY_BYTES).digest()


# What numpy raises on a damaged .npy / .npz (cut short, not a zip, a member missing or garbled).
_UNREADABLE = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile)


def discard_damaged(path: Path, problem: str) -> None:
    """Warn about a cache file that cannot be used and remove it: it is ours, and it is recomputed."""
    print(f"warning: {path}: damaged cache file ({problem}); removed, what it held is computed again",
          file=sys.stderr)
    try:
        path.unlink()
    except OSError:
        pass  # a read-only cache: the file is skipped again next time


def load_or_discard(path: Path, *members: str):
    """The array in ``path`` (a .npy), or the tuple of its ``members`` (a .npz), as numpy reads
    them; None, with the file warned about and removed, where numpy cannot read it."""
    try:
        if not members:
            return np.load(path, allow_pickle=False)
        with np.load(path, allow_pickle=False) as data:
            return tuple(data[name] for name in members)
    except _UNREADABLE as exc:
        discard_damaged(path, _unreadable_why(exc))
        return None


def _unreadable_why(exc: Exception) -> str:
    """What numpy found, in the cache's words: its advice to pass allow_pickle=True is the one thing
    never to do with a file that may have been put there (unpickling runs code)."""
    if isinstance(exc, ValueError) and "allow_pickle" in str(exc):
        return "it holds Python objects, not numbers; never unpickled, since that could run code"
    return type(exc).__name__ if not str(exc) else str(exc).splitlines()[0]


class Embeddings:
    """Vectors for a set of texts: ``rows(texts)`` gives their matrix in the order asked."""

    def __init__(self, keys: list[bytes], matrix: np.ndarray, identity: str, tokens: dict | None = None):
        self.index = {key: i for i, key in enumerate(keys)}
        self.matrix = matrix
        self.identity = identity
        self.tokens = tokens or {}  # text key -> the tokens a provider reported for it (an API model's)

    def rows(self, texts: Sequence[str]) -> np.ndarray:
        return self.matrix[[self.index[text_key(t)] for t in texts]]

    def tokens_of(self, texts: Iterable[str]) -> float | None:
        """The tokens the provider reported for the distinct ``texts`` (whichever run paid for them),
        or None where a text has no count (a model that reports none, a shard written without)."""
        if not self.tokens:
            return None
        counts = [self.tokens.get(key) for key in {text_key(t) for t in texts}]
        return None if any(c is None for c in counts) else float(sum(counts))

    def fingerprint(self, texts: Sequence[str]) -> str:
        """Names the embeddings of ``texts`` in this order: the reduction cache's key."""
        digest = hashlib.blake2b(self.identity.encode("utf-8") + b"\0", digest_size=12)
        for text in texts:
            digest.update(text_key(text))
        return digest.hexdigest()


class EmbeddingStore:
    """The vectors of one encoder identity: on disk under ``root`` or, with ``root=None``, only
    in memory (for encoder objects that carry no identity to key a disk cache on)."""

    def __init__(self, root: Path | None, identity: str):
        self.identity = identity
        self.folder = None if root is None else Path(root) / "embeddings" / short_hash(identity)
        self._keys: list[bytes] = []
        self._blocks: list[np.ndarray] = []
        self._index: dict[bytes, int] = {}
        self._tokens: dict[bytes, float] = {}
        self.encoded_texts = 0  # how many texts this store sent to the encoder (for reports)
        if self.folder is not None:
            self._load()

    def _load(self) -> None:
        if not self.folder.is_dir():
            return
        for shard in sorted(self.folder.glob("shard-*.npz")):
            loaded = self._read_shard(shard)
            if loaded is not None:
                self._add(*loaded)

    def _read_shard(self, shard: Path) -> tuple[list[bytes], np.ndarray, np.ndarray | None] | None:
        """A shard's keys, vectors and token counts (where it has them), or None (with a warning, the shard removed) if it is damaged."""
        loaded = load_or_discard(shard, "keys", "vectors")
        if loaded is None:
            return None
        keys, vectors = loaded
        tokens = self._read_tokens(shard, len(keys))
        width = self._blocks[0].shape[1] if self._blocks else None
        if (keys.dtype != np.uint8 or keys.ndim != 2 or keys.shape[1] != KEY_BYTES or vectors.ndim != 2
                or len(vectors) != len(keys) or (width is not None and vectors.shape[1] != width)
                or not np.issubdtype(vectors.dtype, np.number)):
            discard_damaged(shard, f"keys {keys.shape} {keys.dtype}, vectors {vectors.shape} {vectors.dtype}")
            return None
        return [bytes(k) for k in keys], vectors, tokens

    @staticmethod
    def _read_tokens(shard: Path, count: int) -> np.ndarray | None:
        """A shard's per-text token counts, where an API model's encoding wrote them (else None)."""
        try:
            with np.load(shard, allow_pickle=False) as data:
                tokens = data["tokens"] if "tokens" in data.files else None
        except _UNREADABLE:
            return None
        if tokens is None or tokens.shape != (count,) or not np.issubdtype(tokens.dtype, np.floating):
            return None
        return tokens

    def _add(self, keys: list[bytes], vectors: np.ndarray, tokens: np.ndarray | None = None) -> None:
        if tokens is not None:
            for key, count in zip(keys, tokens):
                if np.isfinite(count) and key not in self._tokens:
                    self._tokens[key] = float(count)
        fresh = [i for i, k in enumerate(keys) if k not in self._index]
        offset = len(self._keys)
        for j, i in enumerate(fresh):
            self._index[keys[i]] = offset + j
            self._keys.append(keys[i])
        if fresh:
            self._blocks.append(np.asarray(vectors)[fresh])

    def missing(self, texts: Iterable[str]) -> list[str]:
        """The distinct texts without a vector, sorted (a deterministic encoding order)."""
        return sorted({t for t in texts if text_key(t) not in self._index})

    def encode_missing(self, texts: Iterable[str], encode: Callable[[list[str]], np.ndarray],
                       progress=None, chunk: int = ENCODE_CHUNK) -> int:
        """Encode every text not yet stored, each exactly once, in chunks saved as they finish."""
        todo = self.missing(texts)
        # Similar lengths together: the encoder pads less (sentence-transformers sorts within a call).
        todo.sort(key=len)
        for start in range(0, len(todo), chunk):
            batch = todo[start:start + chunk]
            vectors = np.asarray(encode(batch))
            if vectors.ndim != 2 or len(vectors) != len(batch):
                raise ValueError(f"encoder returned shape {vectors.shape} for {len(batch)} texts")
            keys = [text_key(t) for t in batch]
            self._save_shard(keys, vectors)
            self._add(keys, vectors)
            self.encoded_texts += len(batch)
            if progress is not None:
                progress(len(batch))
        return len(todo)

    def save_batches(self, texts: Iterable[str], encode_batches: Callable, progress=None) -> int:
        """Encode every text not yet stored with an encoder that answers in batches of its own
        (``encode_batches(todo, save)``, an API model): each batch it hands to ``save(texts, vectors,
        tokens)`` is checked and written as one atomic shard at once, so an interrupted run keeps
        every batch it was sent. ``tokens``: per text, what the provider reported (or None)."""
        todo = self.missing(texts)
        todo.sort(key=len)  # similar lengths together, as encode_missing sends them
        wanted = set(todo)

        def save(batch: list[str], vectors, tokens=None) -> None:
            vectors = np.asarray(vectors)
            if vectors.ndim != 2 or len(vectors) != len(batch) or not set(batch) <= wanted:
                raise ValueError(f"encoder returned shape {vectors.shape} for {len(batch)} texts")
            keys = [text_key(t) for t in batch]
            tokens = None if tokens is None else np.asarray(tokens, dtype=np.float64)
            self._save_shard(keys, vectors, tokens)
            self._add(keys, vectors, tokens)
            self.encoded_texts += len(batch)
            if progress is not None:
                progress(len(batch))

        if todo:
            encode_batches(todo, save)
        return len(todo)

    def _save_shard(self, keys: list[bytes], vectors: np.ndarray, tokens: np.ndarray | None = None) -> None:
        if self.folder is None:
            return
        if not (self.folder / "identity.txt").is_file():
            atomic_save(self.folder / "identity.txt", lambda fh: fh.write(self.identity.encode("utf-8") + b"\n"), ".txt",
                        option=CACHE_OPTION)
        name = hashlib.blake2b(b"".join(keys), digest_size=12).hexdigest()
        key_array = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), KEY_BYTES)
        extra = {} if tokens is None else {"tokens": tokens}
        atomic_save(self.folder / f"shard-{name}.npz",
                    lambda fh: np.savez(fh, keys=key_array, vectors=vectors, **extra), ".npz", option=CACHE_OPTION)

    def embeddings(self) -> Embeddings:
        matrix = np.concatenate(self._blocks) if self._blocks else np.zeros((0, 0), dtype=np.float32)
        self._blocks = [matrix] if self._blocks else []
        return Embeddings(list(self._keys), matrix, self.identity, dict(self._tokens))


class ReductionCache:
    """Reduced split embeddings keyed by (embeddings fingerprint, reduction, seed)."""

    def __init__(self, root: Path | None):
        self.folder = None if root is None else Path(root) / "reductions"
        self._memory: dict[str, np.ndarray] = {}
        self.computed = 0

    def get(self, fingerprint: str, reduction: str, seed: int, compute: Callable[[], np.ndarray]) -> np.ndarray:
        value = self.lookup(fingerprint, reduction, seed)
        if value is None:
            value = compute()
            self.put(fingerprint, reduction, seed, value)
        return value

    def _path(self, key: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{key}.npy"

    def lookup(self, fingerprint: str, reduction: str, seed: int) -> np.ndarray | None:
        """The cached reduction, or None (a grid worker then computes it and the grid puts it)."""
        key = short_hash(fingerprint, reduction, str(seed))
        if key in self._memory:
            return self._memory[key]
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        value = load_or_discard(path)
        if value is None:
            return None
        if value.ndim != 2 or not np.issubdtype(value.dtype, np.number):
            discard_damaged(path, f"array {value.shape} {value.dtype}")
            return None
        self._remember(key, reduction, value)
        return value

    def put(self, fingerprint: str, reduction: str, seed: int, value: np.ndarray) -> None:
        key = short_hash(fingerprint, reduction, str(seed))
        self.computed += 1
        path = self._path(key)
        if path is not None:
            atomic_save(path, lambda fh: np.save(fh, value), ".npy", option=CACHE_OPTION)
        self._remember(key, reduction, value)

    def _remember(self, key: str, reduction: str, value: np.ndarray) -> None:
        # Only the reduced (small, 2-D) matrices are kept; "none" is the embeddings themselves.
        if reduction_entry(reduction).reduces:
            self._memory[key] = value

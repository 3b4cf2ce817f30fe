"""Helpers for the tests of models behind an API (``openai:NAME``): the test key and its variable,
a model spec for a server of ``tests/openai_server.py``, a grid run in this process and its one
error line, the cache's shards, cheap stand-in vectors, and a small full file system."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import subprocess
from pathlib import Path

import numpy as np

import helpers

KEY = "sk-tecbTestKey-7f3a9c1e5b2d4f60"  # unique: looked for in every file and output
KEY_VARIABLE = "TECB_TEST_OPENAI_KEY"
DATASET = "tenkgnad-clustering-s2s"


def api_model(server, **options) -> str:
    """The ``--model`` value for ``server``: the test key's variable, batches of 8, 2 at a time."""
    options = {"base_url": server.url, "api_key_env": KEY_VARIABLE, "batch_size": 8, "concurrency": 2, **options}
    return "openai:minilm," + ",".join(f"{k}={v}" for k, v in options.items())


def run_argv(data: Path, model: str, folder: Path, *extra: str, cache: Path | None = None, splits: int = 2) -> list[str]:
    """`tecb-eval run` of ``model`` on ``data``: ``splits`` splits, k-means, results and cache in ``folder``."""
    return ["run", "--data", str(data), "--model", model, "--config", "minibatch_kmeans:none", "--results",
            str(folder / "results.jsonl"), "--cache-dir", str(cache or folder / "cache"), "--quiet",
            "--limit-splits", str(splits), *extra]


def run(argv: list[str]) -> tuple[int, str]:
    """`tecb-eval argv` in this process: its exit code and everything it printed."""
    from tecb_eval.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(argv)
    return code, out.getvalue()


def eval_error(capsys, argv: list[str]) -> str:
    """`tecb-eval argv` fails as a user error: exit 2, one error line, and besides it only the
    endpoint's notes (the texts leaving the machine, a wait)."""
    return helpers.eval_error(capsys, argv, notes=True)


def shards(cache: Path) -> list[Path]:
    return sorted(cache.glob("embeddings/*/shard-*.npz"))


def hashed_vectors(texts: list[str], width: int = 16) -> np.ndarray:
    """A stand-in model, cheap and deterministic: each text's BLAKE2b digest as a unit vector."""
    rows = [np.frombuffer(hashlib.blake2b(t.encode("utf-8"), digest_size=width).digest(), dtype=np.uint8)
            for t in texts]
    vectors = np.asarray(rows, dtype=np.float32) - 127.5
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@contextlib.contextmanager
def full_disk(where: Path, size: str = "64k"):
    """A tmpfs of ``size`` mounted at ``where`` and filled to the last byte (needs root: the
    caller skips on ``PermissionError``), unmounted afterwards."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise PermissionError(done.stderr.strip() or f"mount exited {done.returncode}")
    try:
        fd = os.open(where / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)

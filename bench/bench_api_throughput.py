"""Requests per second of an ``openai:`` model against a local OpenAI-compatible server with a
fixed latency per request (printed, not a test).

The server is tests/openai_server.py's stand-in (real HTTP on 127.0.0.1, a thread per connection);
it answers every request after ``--latency`` seconds with vectors computed from a hash of each
text (no model: the figure is the client's, not an encoder's). The client is the real encoder,
the official ``openai`` client underneath, sending ``--texts`` texts in batches of
``--batch-size`` at each concurrency.

    python bench/bench_api_throughput.py [--latency 0.05] [--texts 2560] [--batch-size 16]
        [--concurrency 1 4 16]

With a latency L per request, c requests in flight reach at most c / L requests per second.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from openai_server import EmbeddingServer  # noqa: E402
from tecb_eval.models.encoders import get_encoder  # noqa: E402

DIM = 384


def hashed(texts: list[str]) -> np.ndarray:
    """A unit vector per text from its hash: cheap, so that the server's time is its latency."""
    seeds = [int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little") for t in texts]
    vectors = np.stack([np.random.default_rng(s).standard_normal(DIM) for s in seeds]).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per request (default 0.05)")
    parser.add_argument("--texts", type=int, default=2560, help="texts per measurement (default 2560)")
    parser.add_argument("--batch-size", type=int, default=16, help="texts per request (default 16)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16], help="default 1 4 16")
    args = parser.parse_args(argv)
    os.environ.setdefault("TECB_BENCH_KEY", "bench")
    print(f"{args.texts} texts, {args.batch_size} per request ({-(-args.texts // args.batch_size)} requests), "
          f"{args.latency * 1000:.0f} ms per request on the server")
    print(f"{'concurrency':>11} {'seconds':>8} {'requests/s':>11} {'texts/s':>9} {'ceiling req/s':>14}")
    import openai  # noqa: F401 -- imported before the clock starts: the first figure is no import's

    with EmbeddingServer(hashed, latency=args.latency) as server:
        for concurrency in args.concurrency:
            # Other texts each time: nothing is cached between the measurements.
            texts = [f"c{concurrency} Text {i} " + "Wort " * (i % 23) for i in range(args.texts)]
            encoder = get_encoder("openai:bench", base_url=server.url, api_key_env="TECB_BENCH_KEY",
                                  batch_size=args.batch_size, concurrency=concurrency)
            encoder.log = lambda message: None
            before = server.answered
            started = time.perf_counter()
            vectors = encoder.encode(texts)
            seconds = time.perf_counter() - started
            requests = server.answered - before
            assert vectors.shape == (len(texts), DIM) and requests == -(-len(texts) // args.batch_size)
            print(f"{concurrency:11d} {seconds:8.2f} {requests / seconds:11.1f} {len(texts) / seconds:9.0f} "
                  f"{concurrency / args.latency:14.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

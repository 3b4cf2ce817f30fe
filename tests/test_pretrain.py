"""Adaptive pre-training on the tiny BERT of tests/conftest.py (its own WordPiece vocabulary, 2 layers of 32,
BERT's dropout) and the demo Blurbs S2S (conftest's ``blurbs`` and ``blurbs_small``)."""

from __future__ import annotations

import csv
import json
import dataclasses
import math
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import torch  # noqa: E402
import transformers  # noqa: E402

import tecb_data  # noqa: E402
from tecb_data.errors import UserError  # noqa: E402
from tecb_eval.clustering.evaluation import unique_texts  # noqa: E402
from tecb_eval.pretraining import pretrain, settings_for  # noqa: E402
from tecb_eval.pretraining.tsdae import delete_words  # noqa: E402
from helpers import REPO  # noqa: E402

S2S = "blurbs-clustering-s2s"


def _losses(folder: Path) -> list[float]:
    with open(folder / "losses.csv", newline="") as fh:
        return [float(r["loss"]) for r in csv.DictReader(fh)]


WWM_FAST = dict(batch_size=16, grad_accumulation=1, learning_rate=5e-3, eval_every=6, warmup_ratio=0.1)


@pytest.mark.slow
def test_wwm_trains_evaluates_and_keeps_the_best_checkpoint(tiny_bert_with_dropout, blurbs_small, tmp_path):
    from tecb_eval.models.encoders import get_encoder

    top = tmp_path / "wwm"
    result = pretrain(tiny_bert_with_dropout, [blurbs_small], method="wwm", epochs=2, seeds=(42,), output_dir=top,
                      progress=False, **WWM_FAST)
    out = top / S2S  # one dataset, one run in its own folder
    assert result[S2S].output_dir == out and list(result.runs) == [S2S]
    steps_per_epoch = math.ceil(len(unique_texts([blurbs_small])) / WWM_FAST["batch_size"])
    losses = _losses(out)
    assert len(losses) == 2 * steps_per_epoch
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5
    rows = result.evaluations
    evaluated = sorted({r["step"] for r in rows})
    assert evaluated == sorted({0, *range(6, 2 * steps_per_epoch + 1, 6), 2 * steps_per_epoch})
    assert {r["dataset"] for r in rows} == {"blurbs-clustering-s2s"}
    assert all(0 <= r["v_measure"] <= 1 for r in rows)
    with open(out / "evaluations_splits.csv", newline="") as fh:
        split_rows = list(csv.DictReader(fh))
    assert len(split_rows) == len(evaluated) * len(blurbs_small.splits)
    at_step_6 = [float(r["v_measure"]) for r in split_rows if r["step"] == "6"]
    assert np.mean(at_step_6) == pytest.approx(next(r["v_measure"] for r in rows if r["step"] == 6))

    best = result[S2S].best[42]
    assert result.best == {S2S: result[S2S].best}
    assert best["v_measure"] == max(np.mean([r["v_measure"] for r in rows if r["step"] == s]) for s in evaluated)
    encoder = get_encoder(best["path"])
    vectors = encoder.encode(["Ein Buch über Katzen", "Die Geschichte Berlins"])
    assert vectors.shape == (2, 32) and np.isfinite(vectors).all()
    # Reloaded from disk, the best checkpoint scores what it scored in memory.
    from tecb_eval.clustering.evaluation import evaluate_kmeans

    reloaded = np.mean([r["v_measure"] for r in evaluate_kmeans([blurbs_small], encoder.encode, seed=42)])
    assert reloaded == pytest.approx(best["v_measure"], abs=1e-6)

    for name in ("figure.png", "summary.csv", "summary.md", "run.json", "timings.json"):
        assert (out / name).is_file(), name
    # timings.json says what was timed: each epoch's training, and every evaluation (one encoding
    # pass over the unique texts, then k-means), the ones during training at the evaluated steps.
    timings = json.loads((out / "timings.json").read_text())
    assert list(timings["train_seconds_per_epoch"]) == ["42"]
    assert len(timings["train_seconds_per_epoch"]["42"]) == 2 and min(timings["train_seconds_per_epoch"]["42"]) > 0
    during = sorted(t["step"] for t in timings["evaluations"] if t["seed"] == 42 and "what" not in t)
    assert during == [s for s in evaluated if s > 0]
    for timing in timings["evaluations"]:
        assert timing["encoded_texts"] == len(unique_texts([blurbs_small])) and timing["encode_s"] > 0
        assert timing["total_s"] == pytest.approx(timing["encode_s"] + timing["kmeans_s"])
    for name in ("figure.png", "summary.csv", "summary.md", "run.json", "evaluations.csv"):
        assert (top / name).is_file(), name
    assert (out / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not top.with_name("wwm.partial").exists()
    summary = (top / "summary.md").read_text()
    assert "WWM" in summary and S2S in summary and "Profile `current`" in summary


def test_tsdae_trains_with_a_tied_decoder(tiny_bert_with_dropout, blurbs_small, tmp_path):
    result = pretrain(tiny_bert_with_dropout, blurbs_small, method="tsdae", epochs=1, seeds=(1,),
                      output_dir=tmp_path / "tsdae", progress=False, batch_size=16, learning_rate=3e-3, eval_every=4)
    out = tmp_path / "tsdae" / S2S
    steps = math.ceil(len(unique_texts([blurbs_small])) / 16)
    losses = _losses(out)
    assert len(losses) == steps
    assert np.mean(losses[-3:]) < np.mean(losses[:3]) - 0.3
    assert sorted({r["step"] for r in result.evaluations}) == sorted({0, *range(4, steps + 1, 4), steps})
    checkpoint = result[S2S].best[1]["path"]
    model = transformers.AutoModel.from_pretrained(checkpoint)
    assert model.config.hidden_size == 32

    from tecb_eval.pretraining.tsdae import Tsdae

    objective = Tsdae(tiny_bert_with_dropout, settings_for("tsdae", max_length=64), seed=1, device="cpu", profile=None)
    decoder = objective.module.decoder.base_model
    assert decoder.embeddings.word_embeddings.weight is objective.encoder.embeddings.word_embeddings.weight
    assert decoder.encoder.layer[1].attention.self.query.weight is objective.encoder.encoder.layer[1].attention.self.query.weight


PRETRAIN_AGAIN = """
import pickle, sys
import torch
from tecb_eval.pretraining import pretrain
model, benchmark, out, settings, threads = pickle.loads(open(sys.argv[1], "rb").read())
torch.set_num_threads(threads)
pretrain(model, benchmark, output_dir=out, **settings)
"""


@pytest.mark.slow
def test_same_seed_same_numbers(tiny_bert_with_dropout, blurbs_small, tmp_path):
    settings = dict(method="wwm", epochs=1, seeds=(2,), progress=False, max_steps=4, **{**WWM_FAST, "eval_every": 2})
    first = pretrain(tiny_bert_with_dropout, blurbs_small, output_dir=tmp_path / "a", **settings)
    # The second run in another process with another hash seed (and this process's torch threads,
    # which decide how sums are split): nothing may depend on set order or on what ran before.
    arguments = tmp_path / "arguments.pickle"
    arguments.write_bytes(pickle.dumps((tiny_bert_with_dropout, blurbs_small, tmp_path / "b", settings,
                                        torch.get_num_threads())))
    other_process = subprocess.run([sys.executable, "-c", PRETRAIN_AGAIN, str(arguments)], capture_output=True,
                                   text=True, env={**os.environ, "PYTHONHASHSEED": "4242"}, timeout=900)
    assert other_process.returncode == 0, other_process.stderr
    for name in ("evaluations.csv", "evaluations_splits.csv", "losses.csv", "summary.csv"):
        assert (tmp_path / "a" / S2S / name).read_bytes() == (tmp_path / "b" / S2S / name).read_bytes(), name
    for name in ("evaluations.csv", "summary.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    other = pretrain(tiny_bert_with_dropout, blurbs_small, output_dir=tmp_path / "c", **{**settings, "seeds": (3,)})
    assert _losses(tmp_path / "c" / S2S) != _losses(tmp_path / "a" / S2S)
    # The model without pre-training does not depend on the seed.
    assert other.baseline == first.baseline


def test_bf16_autocast_on_cpu(tiny_bert_with_dropout, blurbs_small, tmp_path):
    result = pretrain(tiny_bert_with_dropout, blurbs_small, method="wwm", seeds=(42,), output_dir=tmp_path / "bf16",
                      progress=False, precision="bf16", device="cpu", max_steps=2, eval_every=2, batch_size=16,
                      grad_accumulation=1, save_best=False)
    assert result.settings.precision == "bf16"
    assert all(np.isfinite(_losses(tmp_path / "bf16" / S2S)))
    assert sorted({r["step"] for r in result.evaluations}) == [0, 2]
    assert result[S2S].best[42]["path"] is None and not (tmp_path / "bf16" / S2S / "seed-42").exists()


def test_deletion_noise_is_seeded_and_keeps_a_word():
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    text = "Die Geschichte der Stadt Berlin, von den Anfängen bis heute."
    assert delete_words(text, 0.6, rng_a) == delete_words(text, 0.6, rng_b)
    assert delete_words("Wort", 0.99, np.random.default_rng(0)) == "Wort"
    assert delete_words("...", 0.6, np.random.default_rng(0)) == "..."


def test_settings_defaults_and_user_errors(tiny_bert_with_dropout, blurbs, tmp_path):
    wwm = settings_for("wwm")
    assert (wwm.learning_rate, wwm.weight_decay, wwm.batch_size, wwm.grad_accumulation) == (1e-4, 0.01, 32, 8)
    assert (wwm.warmup_ratio, wwm.mlm_probability, wwm.max_length, wwm.epochs) == (0.06, 0.15, 512, 30)
    tsdae = settings_for("tsdae")
    assert (tsdae.learning_rate, tsdae.weight_decay, tsdae.batch_size, tsdae.warmup_ratio) == (3e-5, 0.0, 8, 0.0)
    with pytest.raises(UserError, match="unknown pre-training method"):
        settings_for("simcse")
    with pytest.raises(TypeError, match="lr"):
        settings_for("wwm", lr=1e-3)
    with pytest.raises(UserError, match="fp16 needs a CUDA GPU"):
        pretrain(tiny_bert_with_dropout, blurbs, output_dir=tmp_path / "x", precision="fp16", device="cpu",
                 progress=False)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    with pytest.raises(UserError, match="already exists"):
        pretrain(tiny_bert_with_dropout, blurbs, output_dir=tmp_path / "taken", progress=False)
    with pytest.raises(UserError, match="no such dataset folder"):
        pretrain(tiny_bert_with_dropout, [tmp_path / "nowhere"], output_dir=tmp_path / "y", progress=False)


def test_cli_pretrain_prints_the_summary_and_the_best_checkpoints(tiny_bert_with_dropout, blurbs, tmp_path, capsys):
    from tecb_eval.cli import main

    out = tmp_path / "cli"
    code = main(["pretrain", "--model", str(tiny_bert_with_dropout), "--data", blurbs.location, "--method", "tsdae",
                 "--out", str(out), "--seeds", "7", "--max-steps", "2", "--eval-every", "2", "--batch-size", "8",
                 "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "TSDAE" in printed and f"{S2S} seed 7: best at step" in printed and str(out / S2S / "seed-7" / "best") in printed
    assert "profile current, one model per dataset" in printed
    with open(out / "evaluations.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["step"] for r in rows] == ["0", "2"] and {r["method"] for r in rows} == {"tsdae"}

    code = main(["pretrain", "--model", str(tiny_bert_with_dropout), "--data", blurbs.location, "--out", str(out),
                 "--quiet"])
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and "already exists" in error and "--overwrite" in error


def _two_datasets(blurbs):
    """Two small datasets with overlapping texts (three splits each), so pooling changes what is trained on."""
    return [dataclasses.replace(blurbs, name="blurbs-a", splits=blurbs.splits[:3]),
            dataclasses.replace(blurbs, name="blurbs-b", splits=blurbs.splits[3:6])]


TWO_FAST = dict(method="wwm", seeds=(42,), progress=False, max_steps=2, eval_every=1, batch_size=16,
                grad_accumulation=1, learning_rate=5e-3)


def _read(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_one_model_per_dataset_by_default(tiny_bert_with_dropout, blurbs, tmp_path):
    a, b = _two_datasets(blurbs)
    result = pretrain(tiny_bert_with_dropout, [b, a], output_dir=tmp_path / "each", **TWO_FAST)
    assert list(result.runs) == ["blurbs-a", "blurbs-b"] and not result.pool
    for dataset in (a, b):
        run = result[dataset.name]
        assert run.output_dir == tmp_path / "each" / dataset.name and run.datasets == (dataset.name,)
        # Trained on its own unique texts only, evaluated on itself only.
        assert run.n_texts == len(unique_texts([dataset]))
        assert {r["dataset"] for r in run.evaluations} == {dataset.name}
        assert [r["step"] for r in _read(run.output_dir / "losses.csv")] == ["1", "2"]
        assert (run.output_dir / "seed-42" / "best" / "pretraining.json").is_file()
        assert run.best[42]["path"] == run.output_dir / "seed-42" / "best"
        for name in ("evaluations_splits.csv", "figure.png", "summary.md", "summary.csv", "run.json", "timings.json"):
            assert (run.output_dir / name).is_file(), name
        # Each dataset's timings are its own run's: its texts only, one training time per epoch.
        timings = json.loads((run.output_dir / "timings.json").read_text())
        assert {t["encoded_texts"] for t in timings["evaluations"]} == {run.n_texts}
        assert [len(v) for v in timings["train_seconds_per_epoch"].values()] == [1] * len(timings["train_seconds_per_epoch"])
    top = tmp_path / "each"
    summary = _read(top / "summary.csv")
    assert [(r["checkpoint"], r["dataset"], r["trained_on"]) for r in summary] == [
        (c, d, t) for c in ("last", "best")
        for d, t in (("blurbs-a", "blurbs-a"), ("blurbs-b", "blurbs-b"), ("avg", "per-dataset"))]
    assert {r["profile"] for r in summary} == {"current"}
    best_a = next(r for r in summary if r["checkpoint"] == "best" and r["dataset"] == "blurbs-a")
    assert float(best_a["mean"]) == result["blurbs-a"].best[42]["v_measure"]
    markdown = (top / "summary.md").read_text()
    assert "blurbs-a | blurbs-b | avg" in markdown and "One model per dataset" in markdown
    # OUT/evaluations.csv holds the runs' evaluations, one after the other.
    assert _read(top / "evaluations.csv") == _read(top / "blurbs-a" / "evaluations.csv") + _read(top / "blurbs-b" / "evaluations.csv")
    run_json = json.loads((top / "run.json").read_text())
    assert run_json["pool"] is False and run_json["profile"]["name"] == "current"
    assert run_json["runs"]["blurbs-b"]["best"]["42"]["path"] == "blurbs-b/seed-42/best"

    # A dataset's run does not depend on the datasets given with it.
    alone = pretrain(tiny_bert_with_dropout, [a], output_dir=tmp_path / "alone", **TWO_FAST)
    for name in ("evaluations.csv", "evaluations_splits.csv", "losses.csv", "summary.csv"):
        assert (tmp_path / "alone" / "blurbs-a" / name).read_bytes() == (top / "blurbs-a" / name).read_bytes(), name
    assert alone.baseline == {"blurbs-a": result.baseline["blurbs-a"]}


def test_pool_trains_one_model_on_the_union(tiny_bert_with_dropout, blurbs, tmp_path):
    a, b = _two_datasets(blurbs)
    out = tmp_path / "pooled"
    result = pretrain(tiny_bert_with_dropout, [a, b], pool=True, output_dir=out, **TWO_FAST)
    assert list(result.runs) == ["pooled"] and result.pool
    run = result["pooled"]
    assert run.output_dir == out and run.datasets == ("blurbs-a", "blurbs-b")
    assert run.n_texts == len(unique_texts([a, b])) > max(len(unique_texts([a])), len(unique_texts([b])))
    # One model evaluated on both datasets at every step; its files are OUT's own.
    steps = [0, 1, 2]
    assert sorted((r["step"], r["dataset"]) for r in run.evaluations) == [(s, d) for s in steps for d in ("blurbs-a", "blurbs-b")]
    assert (out / "seed-42" / "best").is_dir() and (out / "losses.csv").is_file()
    assert not (out / "blurbs-a").exists()
    summary = _read(out / "summary.csv")
    assert {r["trained_on"] for r in summary} == {"pooled"} and {r["dataset"] for r in summary} == {"blurbs-a", "blurbs-b", "avg"}
    assert "union of the 2 datasets" in (out / "summary.md").read_text()
    assert json.loads((out / "run.json").read_text())["pool"] is True


@pytest.mark.slow
def test_cli_folder_of_datasets_one_run_each_or_pooled(tiny_bert_with_dropout, demo_datasets, tmp_path, capsys):
    import shutil

    from tecb_eval.cli import main

    data = tmp_path / "data"
    # S2S and P2P side by side: the demo TenKGnad pair (10 splits each; what is tested is the folder).
    for name in ("tenkgnad-clustering-s2s", "tenkgnad-clustering-p2p"):
        shutil.copytree(demo_datasets / name, data / name)
    common = ["pretrain", "--model", str(tiny_bert_with_dropout), "--data", str(data), "--max-steps", "1",
              "--eval-every", "1", "--batch-size", "64", "--grad-accumulation", "1", "--seeds", "5", "--quiet"]
    assert main([*common, "--out", str(tmp_path / "each")]) == 0
    printed = capsys.readouterr().out
    for name in ("tenkgnad-clustering-p2p", "tenkgnad-clustering-s2s"):
        assert f"{name} seed 5: best at step" in printed and str(tmp_path / "each" / name / "seed-5" / "best") in printed
    assert "profile current, one model per dataset and seed" in printed and "Profile `current`" in printed

    assert main([*common, "--pool", "--out", str(tmp_path / "pooled")]) == 0
    printed = capsys.readouterr().out
    assert "pooled seed 5: best at step" in printed and "profile current, pooled" in printed
    assert (tmp_path / "pooled" / "seed-5" / "best").is_dir()


def _one_line_error(capsys, argv: list[str]) -> str:
    """Run `tecb-eval ARGV`; it must fail with exit 2 and exactly one line on stderr, which is returned."""
    from tecb_eval.cli import main

    code = main(argv)
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and error.startswith("tecb-eval: error: "), error
    return error


def _files(folder: Path) -> dict:
    """Every file under ``folder`` with its bytes: what must not change."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def test_overwrite_replaces_only_an_earlier_pretrain_output(tiny_bert_with_dropout, blurbs, tmp_path, capsys):
    from tecb_data.outputs import MARKER
    from tecb_eval.cli import main

    data = Path(blurbs.location)
    datasets_before, model_before = _files(data.parent), _files(tiny_bert_with_dropout)
    base = ["pretrain", "--model", str(tiny_bert_with_dropout), "--data", str(data), "--method", "tsdae", "--seeds",
            "7", "--max-steps", "1", "--eval-every", "1", "--batch-size", "8", "--quiet", "--overwrite"]
    # An output that is, holds or lies inside an input (a dataset folder, the folder of datasets, the
    # model folder) is refused before anything is written, --overwrite or not.
    for out, says in [(data, "holds the input"), (data.parent, "holds the input"),
                      (data / "pre", "lies inside the dataset folder"),
                      (tiny_bert_with_dropout, "holds the input"),
                      (tiny_bert_with_dropout / "pre", "lies inside the input")]:
        assert says in _one_line_error(capsys, base + ["--out", str(out)])
    assert _files(data.parent) == datasets_before and _files(tiny_bert_with_dropout) == model_before
    tecb_data.load(data)  # still verifies against its manifest

    # A folder no pretrain wrote is never replaced, nor a .partial folder it did not leave.
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    assert "not written by `tecb-eval pretrain`" in _one_line_error(capsys, base + ["--out", str(foreign)])
    out = tmp_path / "run"
    (tmp_path / "run.partial").mkdir()
    (tmp_path / "run.partial" / "notes.txt").write_text("keep")
    assert "run.partial" in _one_line_error(capsys, base + ["--out", str(out)])
    assert (foreign / "notes.txt").read_text() == "keep" and (tmp_path / "run.partial" / "notes.txt").read_text() == "keep"
    (tmp_path / "run.partial" / "notes.txt").unlink()  # an empty folder is in nobody's way
    assert not out.exists()

    # An earlier pretrain output is what --overwrite replaces: its marker names the command and lists
    # every file that run wrote (what a later --overwrite may remove; a file it does not list makes
    # --overwrite refuse, tests/test_outputs_owned.py).
    assert main(base + ["--out", str(out)]) == 0
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != MARKER)
    assert json.loads((out / MARKER).read_text()) == {"written_by": "tecb-eval pretrain", "files": written}
    assert any(f.startswith(f"{S2S}/seed-7/best/") for f in written)
    listed = out / written[0]
    listed.write_text("changed since")
    assert main(base + ["--out", str(out)]) == 0
    assert listed.read_text() != "changed since" and (out / S2S / "seed-7" / "best").is_dir()
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "run"]  # no .partial or replaced folder left
    assert _files(data.parent) == datasets_before and _files(tiny_bert_with_dropout) == model_before


def test_pretrain_bad_inputs_are_one_line(tiny_bert_with_dropout, blurbs, tmp_path, capsys):
    import shutil

    base = ["pretrain", "--data", blurbs.location, "--quiet", "--max-steps", "1"]
    out = ["--out", str(tmp_path / "out")]
    model = ["--model", str(tiny_bert_with_dropout)]
    assert "tpu9" in _one_line_error(capsys, base + model + out + ["--device", "tpu9"])
    assert "4294967295" in _one_line_error(capsys, base + model + out + ["--seeds", str(2**32)])
    assert "4294967295" in _one_line_error(capsys, base + model + out + ["--kmeans-seed", str(2**32)])
    broken = tmp_path / "broken-bert"
    shutil.copytree(tiny_bert_with_dropout, broken)
    (broken / "config.json").write_text('{"model_type": "bert", "hidden_size": ')
    error = _one_line_error(capsys, base + ["--model", str(broken)] + out)
    assert str(broken / "config.json") in error
    (tmp_path / "a-file").write_text("x")
    assert "is a file" in _one_line_error(capsys, base + model + ["--out", str(tmp_path / "a-file")])
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()


def _holds_flock(pid: int, path: Path) -> bool:
    """Whether process ``pid`` holds a flock on ``path``, seen in Linux's /proc/locks without taking
    the lock (a probe that took it could make the run it watches fail); elsewhere: ``path`` exists."""
    locks = Path("/proc/locks")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    if not locks.exists():
        return True
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    return any(fields[1:2] == ["FLOCK"] and fields[4:6] == [str(pid), inode]
               for fields in (line.split() for line in locks.read_text().splitlines()))


@pytest.mark.slow
def test_a_second_pretrain_into_the_same_out_leaves_the_running_ones_work_alone(tiny_bert_with_dropout, demo_datasets,
                                                                                tmp_path, capsys):
    import os
    import signal
    import subprocess
    import sys
    import time

    from tecb_data.outputs import MARKER

    out = tmp_path / "out"
    # The demo TenKGnad S2S (10 splits, not Blurbs' 28): the run the second one must leave alone evaluates them thrice.
    dataset = "tenkgnad-clustering-s2s"
    args = ["pretrain", "--model", str(tiny_bert_with_dropout), "--data", str(demo_datasets / dataset), "--method",
            "tsdae", "--seeds", "7", "--max-steps", "2", "--eval-every", "1", "--batch-size", "8", "--quiet", "--out",
            str(out)]
    first = subprocess.Popen([sys.executable, "-m", "tecb_eval.cli", *args], cwd=REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    marker = tmp_path / "out.partial" / MARKER
    # Until the first run holds its work folder (its flock on the marker, as the kernel lists it), not
    # merely until the marker file appears: between the two the folder is an unclaimed one, which a
    # second run may rightly remove.
    deadline = time.monotonic() + 240
    while not _holds_flock(first.pid, marker) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(first.pid, signal.SIGSTOP)  # mid-run, its work folder in place and held
    try:
        assert marker.is_file(), first.stderr.read() if first.poll() is not None else "no work folder"
        error = _one_line_error(capsys, args + ["--overwrite"])
        assert "another `tecb-eval pretrain` is writing it now" in error and marker.is_file()
    finally:
        os.kill(first.pid, signal.SIGCONT)
    _, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr.decode()
    assert (out / dataset / "seed-7" / "best").is_dir() and not (tmp_path / "out.partial").exists()

"""COB fine-tuning: the blackbox autograd function, instances, the leak-free folds, one training
step, determinism, the checkpoint as an ordinary model folder, and bad input (one line, nothing
written). On the tiny BERT of tests/conftest.py (its own WordPiece vocabulary, 2 layers of 32, dropout
off) and the demo Blurbs S2S."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

import torch  # noqa: E402
import transformers  # noqa: E402

import tecb_data  # noqa: E402
from tecb_data.errors import UserError  # noqa: E402
from tecb_eval.finetuning import blackbox, protocols  # noqa: E402
from tecb_eval.finetuning.instances import Instance, check_pool, epoch_instances  # noqa: E402
from tecb_eval.finetuning.objectives import Objective, embed  # noqa: E402
from tecb_eval.finetuning.settings import settings_for  # noqa: E402
from tecb_eval.training.model import load_sentence_model as load_model  # noqa: E402

from helpers import eval_error, finetune_args, one_line_error, run_cli_here  # noqa: E402
from tablefiles import WORDS  # noqa: E402

FAST = dict(max_steps=2, eval_every=1, instance_size=20, triples_per_instance=16, learning_rate=1e-3)


@pytest.fixture(scope="module")
def tenkgnad_folder(demo_datasets):
    return demo_datasets / "tenkgnad-clustering-s2s"


# --- the blackbox function, against the paper's definition -------------------------------------

POINTS = [[0.0], [1.0], [10.0], [11.0], [20.0], [21.0]]
GOLD = ["a", "a", "b", "b", "b", "c"]  # HAC (k = 3) puts 20 with 21, not with 10 and 11


def _scipy_adjacency(distances: np.ndarray, k: int) -> np.ndarray:
    """An independent HAC (scipy's average linkage), the referee of scikit-learn's inside the function."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    labels = fcluster(linkage(squareform(distances, checks=False), method="average"), k, criterion="maxclust")
    return (labels[:, None] == labels[None, :]).astype(float)


def test_blackbox_gradient_pushes_exactly_the_misclustered_pairs():
    x = torch.tensor(POINTS, dtype=torch.float64, requires_grad=True)
    distances = blackbox.pairwise_distances(x)
    distances.retain_grad()
    gold = torch.tensor(blackbox.gold_adjacency(GOLD))
    lam = 90.0
    adjacency = blackbox.hac_blackbox(distances, 3, lam)
    d = distances.detach().numpy()
    assert np.array_equal(adjacency.detach().numpy(), _scipy_adjacency(d, 3))
    error = (adjacency * (1 - gold) + (1 - adjacency) * gold).sum()
    assert float(error.detach()) == 6  # (10,20), (11,20) split apart, (20,21) merged; each pair counted both ways
    error.backward()
    # The paper's definition: D' = max(0, D + lambda * dL/dA), dL/dA = 1 - 2T; grad = -(A - HAC(D')) / lambda.
    moved = np.maximum(d + lam * (1 - 2 * gold.numpy()), 0)
    expected = -(adjacency.detach().numpy() - _scipy_adjacency(moved, 3)) / lam
    grad = distances.grad.numpy()
    assert np.allclose(grad, expected)
    support = {(i, j) for i, j in zip(*np.nonzero(grad)) if i < j}
    assert support == {(2, 4), (3, 4), (4, 5)}
    # Gradient descent lowers D where the gold pairs were split (pull together), raises it where
    # different labels were merged (push apart).
    assert grad[2, 4] > 0 and grad[3, 4] > 0 and grad[4, 5] < 0
    # The embedding gradient moves 20 towards 10/11 and away from 21.
    assert x.grad[4, 0] > 0 and x.grad[5, 0] < 0


def test_correct_clustering_gets_no_gradient_and_the_regulariser_has_its_sign():
    x = torch.tensor(POINTS, dtype=torch.float64, requires_grad=True)
    loss, errors = blackbox.cob_loss(x, ["a", "a", "b", "b", "c", "c"], lambda_=90.0, reg=0.0)
    assert errors == 0
    loss.backward()
    assert torch.count_nonzero(x.grad) == 0
    gold = torch.tensor(blackbox.gold_adjacency(GOLD))
    value = blackbox.regulariser(blackbox.pairwise_distances(x.detach()), gold)
    assert float(value) < 0  # same-label pairs are closer on average than different-label pairs


def test_lambda_and_single_label_instances_are_refused():
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(UserError, match="lambda must be"):
            settings_for(lambda_=bad)
    with pytest.raises(UserError, match="at least two labels"):
        Instance(("a", "b", "c"), ("x", "x", "x"))
    x = torch.zeros(3, 2, requires_grad=True)
    with pytest.raises(UserError, match="at least two labels"):
        blackbox.cob_loss(x, ["x", "x", "x"], lambda_=1.0, reg=1.0)


# --- instances and folds ------------------------------------------------------------------------

def test_instances_are_seeded_and_have_two_labels(blurbs):
    fold = protocols.leave_one_genre_out(blurbs)[0]
    first, dropped = epoch_instances(fold.train, 20, 42, 0, fold.name)
    again, _ = epoch_instances(fold.train, 20, 42, 0, fold.name)
    other, _ = epoch_instances(fold.train, 20, 1, 0, fold.name)
    assert first == again and first != other
    assert all(len(set(i.labels)) >= 2 for i in first)
    assert sum(len(i.texts) for i in first) + 20 * dropped >= len(fold.train.texts) - 20
    one_label = dataclasses.replace(fold.train, labels=tuple("x" for _ in fold.train.labels))
    with pytest.raises(UserError, match="1 label"):
        check_pool(one_label, fold.name, 20)


def test_leak_check_for_every_fold(blurbs):
    folds = protocols.leave_one_genre_out(blurbs)
    within = sorted(s.name for s in blurbs.splits if s.name.startswith("within-"))
    assert [f.name for f in folds] == within and len(folds) == 8
    for fold in folds:
        assert protocols.leaks(fold) == []
        protocols.check_no_leak(fold)
        scored = {t for s in fold.scored for t in s.split.texts}
        assert not set(fold.train.texts) & (scored | set(fold.validation.texts))
        assert fold.held_out not in fold.train.genres and fold.validation_genre not in fold.train.genres
        assert fold.validation_genre != fold.held_out
        assert fold.scored[0].split is next(s for s in blurbs.splits if s.name == fold.name)  # published, unchanged
        assert len(set(fold.train.genres)) == 6
    # The check can fail: a scored text slipped into training is found.
    leaked = dataclasses.replace(folds[0], train=dataclasses.replace(
        folds[0].train, texts=folds[0].train.texts + (folds[0].scored[0].split.texts[0],)))
    assert len(protocols.leaks(leaked)) == 1
    with pytest.raises(AssertionError, match="training text"):
        protocols.check_no_leak(leaked)


def test_transfer_trains_on_blurbs_and_scores_the_other_dataset_unchanged(blurbs, tenkgnad_folder):
    tenkgnad = tecb_data.load(tenkgnad_folder)
    (fold,) = protocols.transfer(blurbs, [tenkgnad])
    assert [s.split for s in fold.scored] == list(tenkgnad.splits)
    assert protocols.leaks(fold) == [] and fold.validation_genre not in fold.train.genres
    assert len(set(fold.train.genres)) == 7


# --- training -----------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["cob", "triplet", "contrastive", "reg-only"])
def test_one_training_step_lowers_the_loss(tiny_bert, blurbs, method):
    fold = protocols.leave_one_genre_out(blurbs)[0]
    instance = epoch_instances(fold.train, 30, 42, 0, fold.name)[0][0]
    s = settings_for(reg=1.0, lambda_=10.0)
    torch.manual_seed(0)
    model = load_model(tiny_bert, device="cpu")
    model.train()
    objective = Objective(model, method, s, "cpu")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    def loss_now() -> float:
        with torch.no_grad():
            return float(objective.loss(instance, np.random.default_rng(0))[0])

    before = loss_now()
    loss, _ = objective.loss(instance, np.random.default_rng(0))
    loss.backward()
    optimizer.step()
    assert loss_now() < before


def test_the_blackbox_term_alone_lowers_the_error_count(tiny_bert, blurbs):
    """r = 0: only the blackbox gradient trains; a few steps on one instance cluster it better."""
    fold = protocols.leave_one_genre_out(blurbs)[0]
    instance = epoch_instances(fold.train, 30, 42, 0, fold.name)[0][0]
    torch.manual_seed(0)
    model = load_model(tiny_bert, device="cpu")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    errors = []
    for _ in range(8):
        loss, count = blackbox.cob_loss(embed(model, instance.texts, "cpu"), instance.labels, lambda_=10.0, reg=0.0)
        errors.append(count)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert min(errors[1:]) < errors[0]


def _run(tiny_bert, blurbs_folder, out, **extra):
    from tecb_eval.finetuning import finetune

    settings = dict(method=("cob", "triplet"), folds=2, seeds=(42,), score_seeds=(42, 1), output_dir=out,
                    progress=False, resamples=99, **FAST)
    settings.update(extra)
    return finetune(str(tiny_bert), blurbs_folder, **settings)


@pytest.fixture(scope="module")
def finished(tiny_bert, blurbs_folder, tmp_path_factory):
    return _run(tiny_bert, blurbs_folder, tmp_path_factory.mktemp("runs") / "a")


@pytest.mark.slow
def test_finetune_writes_scores_summary_figure_and_checkpoints(finished):
    out = finished.output_dir
    for name in ("summary.md", "summary.csv", "comparisons.csv", "scores.csv", "evaluations.csv", "figure.png",
                 "run.json"):
        assert (out / name).is_file(), name
    assert not out.with_name(out.name + ".partial").exists()
    scores = finished.scores
    assert set(scores.model) == {"none", "cob", "triplet"}
    assert set(scores.algorithm) == {"minibatch_kmeans", "hac_average_true_k"}
    assert set(scores.split) == {f["fold"] for f in finished.folds}
    hac = scores[scores.algorithm == "hac_average_true_k"]
    assert hac[["ari", "nmi", "ri"]].notna().all().all() and (hac.ri <= 1).all()
    run = json.loads((out / "run.json").read_text())
    assert [f["held_out_genre"] for f in run["folds"]] == ["Architektur & Garten", "Ganzheitliches Bewusstsein"]
    assert all(len(f["excluded_ids_sha256"]) == 64 for f in run["folds"])
    compared = {(c["model_a"], c["model_b"], c["metric"]) for c in finished.comparisons}
    assert ("cob", "none", "ARI (HAC)") in compared and ("cob", "triplet", "V-measure (k-means)") in compared
    summary = (out / "summary.md").read_text()
    assert "| cob |" in summary and "| none |" in summary and "cob - triplet" in summary
    for key, best in finished.best.items():
        assert (best["path"] / "modules.json").is_file(), key
        info = json.loads((best["path"] / "finetuning.json").read_text())
        assert info["method"] == key[0] and info["fold"]["id"] == key[1]
    evaluations = (out / "evaluations.csv").read_text().splitlines()
    assert len(evaluations) == 1 + 2 * 2 * 3  # methods x folds x (before, step 1, step 2)


def _grid_v_measures(model, blurbs_folder, split: str, seeds, prompt: str | None = None) -> dict:
    """The grid's k-means V-measure of ``model`` on one split of the Blurbs folder, per (split, seed,
    prompt the grid encoded with): the grid clusters each split on its own, so the one split a fold
    scores is all it needs to run."""
    from tecb_eval.grid.run import run_grid

    benchmark = tecb_data.load(blurbs_folder)
    one = dataclasses.replace(benchmark, splits=tuple(s for s in benchmark.splits if s.name == split))
    assert len(one.splits) == 1, split
    spec = str(model) if prompt is None else {"spec": str(model), "prompt": prompt}
    rows = run_grid([one], [spec], configurations=[("minibatch_kmeans", "none")], seeds=seeds, progress=False,
                    jobs=1, log=lambda message: None)
    return {(r.split, r.seed, r.prompt if isinstance(r.prompt, str) else None): r.v_measure for r in rows.itertuples()}


@pytest.mark.slow
def test_a_checkpoint_is_an_ordinary_model_folder_for_the_grid(finished, blurbs_folder, tmp_path):
    best = finished.best[("cob", "fold-01", 42)]["path"]
    ours = finished.scores
    ours = ours[(ours.model == "cob") & (ours.fold == "fold-01") & (ours.algorithm == "minibatch_kmeans")]
    assert len(ours) == 2
    grid = _grid_v_measures(best, blurbs_folder, ours.split.iloc[0], (42, 1))
    for row in ours.itertuples():
        assert grid[(row.split, row.seed, None)] == pytest.approx(row.v_measure, abs=1e-12)


@pytest.mark.slow
def test_a_model_with_prompts_is_scored_with_its_task_s_prompt_as_the_grid_scores_it(tiny_bert, blurbs_folder, tmp_path):
    # A sentence-transformers model with a prompt for MTEB's clustering tasks: fine-tuning's scores
    # (and its tracking) encode each split with the prompt the grid gives its task, so the grid
    # scores the untrained model and the checkpoint what scores.csv says.
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    prompted = tmp_path / "prompted"
    SentenceTransformer(modules=[Transformer(str(tiny_bert), max_seq_length=48), Pooling(32, "mean")], device="cpu",
                        prompts={"Clustering": "Thema: "}).save(str(prompted), create_model_card=False)
    done = _run(prompted, blurbs_folder, tmp_path / "run", method=("cob",), folds=1, score_seeds=(42,))
    scores = done.scores[done.scores.algorithm == "minibatch_kmeans"]
    best = done.best[("cob", "fold-01", 42)]["path"]
    for model, folder in [("none", prompted), ("cob", best)]:
        ours = scores[scores.model == model].iloc[0]
        grid = _grid_v_measures(folder, blurbs_folder, ours.split, (42,))
        assert grid[(ours.split, 42, "Thema: ")] == pytest.approx(ours.v_measure, abs=1e-12)
        if model == "none":  # without the prompt: another score
            unprompted = _grid_v_measures(folder, blurbs_folder, ours.split, (42,), prompt="")
            assert unprompted[(ours.split, 42, "")] != pytest.approx(ours.v_measure, abs=1e-12)


@pytest.mark.slow
def test_same_seed_same_checkpoint_and_scores(finished, tiny_bert, blurbs_folder, tmp_path):
    again = _run(tiny_bert, blurbs_folder, tmp_path / "b")
    assert (again.output_dir / "scores.csv").read_bytes() == (finished.output_dir / "scores.csv").read_bytes()
    assert (again.output_dir / "summary.md").read_bytes() == (finished.output_dir / "summary.md").read_bytes()
    for key, best in finished.best.items():
        assert (again.best[key]["path"] / "model.safetensors").read_bytes() == (best["path"] / "model.safetensors").read_bytes()


@pytest.mark.slow
def test_an_interrupted_run_resumes_its_finished_units(tiny_bert, blurbs_folder, tmp_path, finished, monkeypatch):
    from tecb_eval.finetuning import run as run_module

    real, calls = run_module.train_unit, []

    def stopped_at_the_third_unit(*args, **kwargs):  # a Ctrl-C while the third unit trains
        calls.append(args[1:5:3])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(run_module, "train_unit", stopped_at_the_third_unit)
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        _run(tiny_bert, blurbs_folder, out)
    partial = out.with_name(out.name + ".partial")
    assert (partial / "cob" / "fold-02" / "seed-42" / "unit.json").is_file() and not out.exists()
    calls.clear()
    monkeypatch.setattr(run_module, "train_unit", real)
    counted = []
    monkeypatch.setattr(run_module, "train_unit", lambda *a, **k: counted.append(1) or real(*a, **k))
    resumed = _run(tiny_bert, blurbs_folder, out)
    assert len(counted) == 2  # only triplet's two folds were trained again
    assert (resumed.output_dir / "scores.csv").read_bytes() == (finished.output_dir / "scores.csv").read_bytes()
    assert json.loads((out / "run.json").read_text())["resumed"] is True


def test_cli_finetune_prints_the_table(capsys, tiny_bert, blurbs_folder, tmp_path):
    from tecb_eval.cli import main

    out = tmp_path / "cli"
    assert main(["finetune", "--model", str(tiny_bert), "--data", str(blurbs_folder), "--method", "cob", "--folds", "1",
                 "--max-steps", "1", "--instance-size", "20", "--score-seeds", "42", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    # "| cob |", or "| cob (step 0: untrained) |" where no evaluation after the one step beat step 0.
    assert "| cob " in printed and "cob - none" in printed and f"wrote {out}/" in printed
    assert (out / "cob" / "fold-01" / "seed-42" / "best" / "modules.json").is_file()


# --- bad input: one line, nothing written -------------------------------------------------------

def test_bad_input_is_one_line_and_writes_nothing(capsys, tiny_bert, blurbs_folder, tenkgnad_folder, tmp_path):
    out = tmp_path / "out"
    base = ["finetune", "--model", str(tiny_bert), "--out", str(out), "--quiet"]
    error = one_line_error(capsys, base + ["--data", str(tenkgnad_folder)])
    assert "genre path" in error or "within-genre" in error
    error = one_line_error(capsys, base + ["--data", str(blurbs_folder), "--lambda", "0"])
    assert "lambda must be" in error
    error = one_line_error(capsys, base + ["--data", str(blurbs_folder), "--lambda", "-3"])
    assert "lambda must be" in error
    error = one_line_error(capsys, base + ["--data", str(blurbs_folder), "--instance-size", "2"])
    assert "instance" in error
    error = one_line_error(capsys, base + ["--data", str(blurbs_folder), "--protocol", "transfer"])
    assert "transfer" in error
    assert not out.exists() and not out.with_name("out.partial").exists()


def test_the_figure_s_band_is_the_95_percent_interval_of_the_mean_over_folds(tmp_path):
    from scipy import stats

    from tecb_eval.finetuning import report

    frame = pd.DataFrame({"method": ["cob"] * 5 + ["triplet"] * 3, "step": [0, 0, 0, 2, 2, 0, 0, 2],
                          "validation_ari": [0.1, 0.2, 0.4, 0.3, 0.5, 0.0, 0.1, 0.2],
                          "scored_v_measure": [0.20, 0.22, 0.27, 0.25, 0.26, 0.21, 0.23, 0.24]})
    means, low, high = report._mean_and_interval(frame[frame.method == "cob"].groupby("step")["validation_ari"])
    values = [0.1, 0.2, 0.4]
    expected = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert (low[0], high[0]) == pytest.approx(expected, abs=1e-12) and means[0] == pytest.approx(np.mean(values))
    single = report._mean_and_interval(frame[frame.method == "triplet"].groupby("step")["validation_ari"])
    assert single[1][2] == single[2][2] == single[0][2] == pytest.approx(0.2)  # one value: no band
    report.plot(frame, "fine-tuning test", tmp_path / "figure.png")
    assert (tmp_path / "figure.png").stat().st_size > 10_000


# --- more bad input: a k-means seed out of range, instances without triples, a genre with " > " -----

def test_a_kmeans_seed_out_of_range_is_one_line(tiny_bert, blurbs_folder, tmp_path, capsys):
    for bad in ("-1", str(2**32)):
        error = eval_error(capsys, finetune_args(tiny_bert, blurbs_folder, tmp_path / "out", "--kmeans-seed", bad))
        assert "--kmeans-seed" in error and bad in error
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()


@pytest.mark.slow
def test_steps_without_triples_are_not_trained_steps(tiny_bert, blurbs_folder, tmp_path):
    import warnings

    from tecb_data.errors import UserError
    from tecb_eval.finetuning import finetune

    common = dict(method="triplet", folds=1, seeds=(42,), score_seeds=(42,), progress=False, resamples=99,
                  eval_every=2, learning_rate=1e-3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Five texts of some fifteen labels: an instance where no label comes twice has no triple.
        done = finetune(str(tiny_bert), blurbs_folder, output_dir=tmp_path / "some", instance_size=5,
                        triples_per_instance=4, **common)
    assert not [w for w in caught if "lr_scheduler" in str(w.message)]
    unit = tmp_path / "some" / "triplet" / "fold-01" / "seed-42"
    losses = __import__("pandas").read_csv(unit / "losses.csv")
    assert len(losses) > 0 and losses.loss.notna().all()
    assert json.loads((unit / "unit.json").read_text())["dropped_instances"] > 0 and done.best
    # With no instance that gives a triple, nothing is trained: one line, not steps of nan.
    with pytest.raises(UserError, match="triple"):
        finetune(str(tiny_bert), blurbs_folder, output_dir=tmp_path / "none", instance_size=4, max_steps=4, **common)


@pytest.mark.slow
def test_a_genre_whose_name_holds_the_path_separator_is_one_genre(tmp_path):
    import tecb_data
    from tecb_eval.finetuning import protocols

    rows = []
    for genre in ("Kinder > Jugend", "Krimi", "Sachbuch"):
        for child in range(3):
            for i in range(12):
                rows.append({"text": f"{genre} Buch {child} Nummer {i} " + " ".join(WORDS["Kultur"].split()[: child + 1]),
                             "parent": genre, "label": f"{genre[:4]}-{child}"})
    path = tmp_path / "books.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    done = run_cli_here("build", "--source", "table", "--input", str(path), "--name", "books", "--text", "text",
                   "--label", "label", "--label-parent", "parent", "--out", str(tmp_path / "out"), "--quiet")
    assert done.returncode == 0, done.stderr
    folds = protocols.leave_one_genre_out(tecb_data.load(tmp_path / "out" / "books-s2s"))
    assert sorted(f.held_out for f in folds) == ["Kinder > Jugend", "Krimi", "Sachbuch"]

"""One model, one encoding: pre-training scores the model without pre-training (and every checkpoint
it keeps) exactly as `tecb-eval run` scores that model, and a run whose numbers stop being finite
ends in one line that says so, keeping the best checkpoint it had."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

import torch  # noqa: E402
import transformers  # noqa: E402


from tecb_data.errors import UserError  # noqa: E402
from tecb_eval.grid.run import run_grid  # noqa: E402
from tecb_eval.models.encoders import get_encoder  # noqa: E402
from tecb_eval.models.kinds.mean_pooling import MeanPoolingEncoder  # noqa: E402
from tecb_eval.models.kinds.sentence_transformer import SentenceTransformerEncoder  # noqa: E402
from tecb_eval.pretraining import pretrain  # noqa: E402
from tecb_eval.pretraining.loop import TrainingDiverged  # noqa: E402

S2S = "blurbs-clustering-s2s"

# Settings under which the tiny models improve within a few steps, so the best checkpoint is a trained one.
FAST = dict(seeds=(42,), progress=False, max_steps=6, eval_every=2, batch_size=16, grad_accumulation=1,
            learning_rate=5e-3, warmup_ratio=0.0)


def grid_score(model, datasets) -> float:
    """`tecb-eval run`'s V-measure for ``model``: k-means on the embeddings, seed 42, mean over splits."""
    rows = run_grid(datasets, [str(model)], configurations=[("minibatch_kmeans", "none")], seed=42, progress=False,
                    jobs=1, log=lambda message: None)
    return float(rows.v_measure.mean())


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory, tiny_bert_with_dropout):
    """A sentence-transformers model around the tiny BERT: CLS pooling, then Normalize, at most 48 tokens
    (as BGE-style models): it differs in both from the mean of the last layer, how a plain checkpoint
    is pooled."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    folder = tmp_path_factory.mktemp("tiny-st")
    transformer = Transformer(str(tiny_bert_with_dropout), max_seq_length=48)
    model = SentenceTransformer(modules=[transformer, Pooling(32, "cls"), Normalize()], device="cpu")
    model.save(str(folder), create_model_card=False)
    return folder


def _modules(folder) -> list[str]:
    return [m["type"].rsplit(".", 1)[-1] for m in json.loads((folder / "modules.json").read_text())]


@pytest.mark.parametrize("method, learning_rate", [("wwm", 5e-3), ("tsdae", 3e-3)])
@pytest.mark.slow
def test_a_sentence_transformers_model_is_scored_and_kept_as_the_grid_scores_it(tiny_st, blurbs_small, tmp_path, method,
                                                                               learning_rate):
    assert isinstance(get_encoder(str(tiny_st)), SentenceTransformerEncoder)
    before = grid_score(tiny_st, [blurbs_small])
    result = pretrain(tiny_st, [blurbs_small], method=method, output_dir=tmp_path / method,
                      **{**FAST, "max_steps": 12, "eval_every": 3, "learning_rate": learning_rate})
    run = result[S2S]
    assert run.baseline == {S2S: before}
    assert result.summary[0]["baseline"] == before

    best = run.best[42]
    assert best["step"] > 0, "the tiny model should improve, so that a trained checkpoint is compared"
    path = best["path"]
    assert _modules(path) == ["Transformer", "Pooling", "Normalize"]
    encoder = get_encoder(str(path))
    assert isinstance(encoder, SentenceTransformerEncoder) and encoder.model.max_seq_length == 48
    vectors = encoder.encode(["Ein Roman über Katzen", "Die Geschichte Berlins"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    # The grid scores the kept checkpoint what its evaluation during training scored, to the bit.
    assert grid_score(path, [blurbs_small]) == best["v_measure"]
    row = next(r for r in result.summary if r["checkpoint"] == "best")
    assert row["mean"] == best["v_measure"]
    summary = (tmp_path / method / "summary.md").read_text()
    assert "Transformer+Pooling+Normalize" in summary and "as `tecb-eval run` does" in summary
    evaluation = json.loads((tmp_path / method / S2S / "run.json").read_text())["evaluation"]
    assert evaluation["pooling"] == "model" and "Normalize" in evaluation["encoding"]


@pytest.mark.slow
def test_a_model_with_prompts_is_scored_with_the_prompt_the_grid_gives_its_task(tiny_st, blurbs_small, tmp_path):
    # The tiny model with a prompt for MTEB's clustering tasks in its configuration: the grid encodes
    # each dataset with its task's prompt, and so must pre-training's evaluation, before and after.
    import shutil

    prompted = tmp_path / "prompted"
    shutil.copytree(tiny_st, prompted)
    config = json.loads((prompted / "config_sentence_transformers.json").read_text())
    config["prompts"] = {"query": "", "document": "", "Clustering": "Thema: "}
    (prompted / "config_sentence_transformers.json").write_text(json.dumps(config))
    before = grid_score(prompted, [blurbs_small])
    unprompted = run_grid([blurbs_small], [{"spec": str(prompted), "prompt": ""}], configurations=[("minibatch_kmeans", "none")],
                          seed=42, progress=False, jobs=1, log=lambda message: None)
    assert float(unprompted.v_measure.mean()) != before  # the prompt moves the score: the check below can fail
    result = pretrain(prompted, [blurbs_small], method="tsdae", output_dir=tmp_path / "run",
                      **{**FAST, "max_steps": 6, "eval_every": 3, "learning_rate": 3e-3})
    assert result.baseline == {S2S: before}
    best = result[S2S].best[42]
    assert json.loads((best["path"] / "config_sentence_transformers.json").read_text())["prompts"]["Clustering"] == "Thema: "
    assert grid_score(best["path"], [blurbs_small]) == best["v_measure"]
    evaluation = json.loads((tmp_path / "run" / S2S / "run.json").read_text())["evaluation"]
    assert evaluation["encoding"].endswith("each dataset with the prompt MTEB gives its task")


@pytest.mark.slow
def test_a_plain_checkpoint_is_mean_pooled_as_the_grid_does_in_fp32(tiny_bert_with_dropout, blurbs_small, tmp_path):
    before = grid_score(tiny_bert_with_dropout, [blurbs_small])
    # (The random tiny BERT seldom improves on mean pooling, so its best checkpoint may be step 0's:
    # the trained checkpoints are compared in the sentence-transformers test, by the same code.)
    result = pretrain(tiny_bert_with_dropout, [blurbs_small], method="tsdae", output_dir=tmp_path / "fp32",
                      **{**FAST, "max_steps": 12, "eval_every": 3, "learning_rate": 3e-3})
    assert result.baseline == {S2S: before}
    best = result[S2S].best[42]
    assert not (best["path"] / "modules.json").exists()
    assert isinstance(get_encoder(str(best["path"])), MeanPoolingEncoder)
    assert grid_score(best["path"], [blurbs_small]) == best["v_measure"]
    # Training in bf16 does not change how the model is encoded: the grid encodes a checkpoint in fp32.
    bf16 = pretrain(tiny_bert_with_dropout, [blurbs_small], method="wwm", output_dir=tmp_path / "bf16",
                    precision="bf16", device="cpu", save_best=False, **{**FAST, "max_steps": 1, "eval_every": 1})
    assert bf16.baseline == {S2S: before}


@pytest.mark.slow
def test_the_paper_profile_says_how_far_its_logits_pooling_moves_the_scores(tiny_st, blurbs_small, tmp_path):
    out = tmp_path / "paper"
    result = pretrain(tiny_st, [blurbs_small], method="wwm", profile="paper", output_dir=out,
                      **{**FAST, "max_steps": 2, "eval_every": 1})
    before = grid_score(tiny_st, [blurbs_small])
    logits = result.baseline[S2S]
    assert logits != before  # the authors' pooling of the masked-LM logits, kept as the paper ran it
    run = json.loads((out / S2S / "run.json").read_text())
    assert run["evaluation"]["pooling"] == "logits"
    assert run["evaluation"]["grid_baseline"] == {S2S: before}
    best = result[S2S].best[42]
    assert _modules(best["path"]) == ["Transformer", "Pooling", "Normalize"]
    kept = grid_score(best["path"], [blurbs_small])
    assert best["grid_v_measure"] == kept and run["evaluation"]["grid_best"] == {"42": {S2S: kept}}
    summary = (out / "summary.md").read_text()
    assert f"{100 * before:.2f} without pre-training" in summary
    assert f"the logits pooling gives {100 * logits:.2f}, {100 * (logits - before):+.2f}" in summary
    assert f"{100 * kept:.2f} for the kept best checkpoints" in summary


@pytest.mark.slow
def test_minilm_baseline_is_the_grids_minilm(blurbs_small, tmp_path):
    """The case of the report: the built-in minilm-l6 (a sentence-transformers model with Normalize).
    The model is the point, not the number of splits: six of them, as the tiny models' tests."""
    result = pretrain("minilm-l6", [blurbs_small], method="wwm", seeds=(42,), progress=False, max_steps=1,
                      eval_every=1, batch_size=64, grad_accumulation=1, learning_rate=1e-5,
                      output_dir=tmp_path / "minilm")
    assert result.baseline == {S2S: grid_score("minilm-l6", [blurbs_small])}
    best = result[S2S].best[42]
    assert _modules(best["path"]) == ["Transformer", "Pooling", "Normalize"]
    assert grid_score(best["path"], [blurbs_small]) == best["v_measure"]


# -- a run that diverges --------------------------------------------------------------------------

def _overflowing_bert(tiny_bert_with_dropout, folder, logit: float):
    """The tiny BERT with a masked-LM head whose logit for the word "der" is ``-logit`` for every
    text: near float32's limit, out of the way until "der" is first a masked target (a few steps
    in), when its gradient or its loss overflows, as a real model's do when fp16 or a large rate
    pushes its numbers there. The learning rates allowed (at most 1) do not make the tiny BERT
    itself diverge in fp32. The model without pre-training encodes as usual: no head takes part."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tiny_bert_with_dropout))
    config = transformers.AutoConfig.from_pretrained(str(tiny_bert_with_dropout))
    config.tie_word_embeddings = False
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(config)
    model.bert.load_state_dict(transformers.AutoModel.from_pretrained(str(tiny_bert_with_dropout)).state_dict(),
                               strict=False)
    head = model.cls.predictions
    width = config.hidden_size
    with torch.no_grad():
        # Layer normalisation leaves every vector with mean 0, so with a bias of 10 each its dot
        # product with a constant row is exactly -logit.
        head.transform.LayerNorm.bias.fill_(10.0)
        head.decoder.weight[tokenizer.convert_tokens_to_ids("der")] = -logit / (10.0 * width)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def overflowing_gradient(tmp_path_factory, tiny_bert_with_dropout):
    return _overflowing_bert(tiny_bert_with_dropout, tmp_path_factory.mktemp("overflowing-gradient"), 1e36)


@pytest.fixture(scope="module")
def overflowing_loss(tmp_path_factory, tiny_bert_with_dropout):
    return _overflowing_bert(tiny_bert_with_dropout, tmp_path_factory.mktemp("overflowing-loss"), 1e39)


@pytest.mark.slow
def test_a_diverging_run_stops_in_one_line_and_keeps_its_best_checkpoint(overflowing_gradient, tiny_bert_with_dropout,
                                                                         blurbs, tmp_path, capsys):
    from tecb_eval.cli import main

    out = tmp_path / "out"
    args = ["pretrain", "--model", str(overflowing_gradient), "--data", blurbs.location, "--out", str(out),
            "--method", "wwm", "--learning-rate", "0.005", "--batch-size", "16", "--grad-accumulation", "1",
            "--max-steps", "12", "--eval-every", "1", "--seeds", "42", "--quiet"]
    code = main(args)
    captured = capsys.readouterr()
    error = captured.err.strip().splitlines()
    assert code == 2 and error[-1].startswith("tecb-eval: error: training diverged at step "), captured.err
    line = error[-1]
    step = int(line.split("training diverged at step ")[1].split()[0])
    assert 1 < step < 12, line
    assert f"of 12 (seed 42, {S2S}): the gradients' norm is inf" in line
    assert "nothing was published" in line and "--learning-rate (this run: 0.005)" in line
    assert not out.exists()
    partial = tmp_path / "out.partial" / S2S
    best = partial / "seed-42" / "best"
    info = json.loads((best / "pretraining.json").read_text())
    assert f"best checkpoint before it (step {info['step']}, V-measure {100 * info['v_measure']:.2f}) are in {best}," in line
    assert info["step"] < step
    assert np.isfinite(get_encoder(str(best)).encode(["Ein Roman", "Die Geschichte Berlins"])).all()
    with open(partial / "evaluations.csv", newline="") as fh:
        steps = [int(r["step"]) for r in csv.DictReader(fh)]
    assert steps == list(range(step))  # evaluated after every step before the one that diverged
    with open(partial / "losses.csv", newline="") as fh:
        losses = list(csv.DictReader(fh))
    assert [int(r["step"]) for r in losses] == list(range(1, step + 1))
    assert all(np.isfinite(float(r["loss"])) for r in losses)
    # The next run into the same --out starts afresh, as after Ctrl-C.
    assert main(["pretrain", "--model", str(tiny_bert_with_dropout), *args[3:5], "--out", str(out), "--max-steps", "1",
                 "--eval-every", "1", "--seeds", "42", "--quiet"]) == 0, capsys.readouterr().err
    assert out.is_dir() and not (tmp_path / "out.partial").exists()
    capsys.readouterr()


@pytest.mark.slow
def test_a_loss_that_overflows_is_a_user_error_of_the_library(overflowing_loss, blurbs_small, tmp_path):
    with pytest.raises(TrainingDiverged, match=r"training diverged at step \d+ of 12 \(seed 42, "
                                               r"blurbs-clustering-s2s\): the loss is inf;") as caught:
        pretrain(overflowing_loss, [blurbs_small], method="wwm", seeds=(42,), progress=False, max_steps=12,
                 eval_every=4, batch_size=16, grad_accumulation=1, learning_rate=5e-3, output_dir=tmp_path / "lib")
    assert isinstance(caught.value, UserError) and caught.value.exit_code == 2
    assert not (tmp_path / "lib").exists() and (tmp_path / "lib.partial" / S2S / "seed-42" / "best").is_dir()
    with open(tmp_path / "lib.partial" / S2S / "losses.csv", newline="") as fh:
        assert next(reversed(list(csv.DictReader(fh))))["loss"] == "inf"


def test_a_model_that_gives_nan_before_training_is_one_line(tiny_bert_with_dropout, blurbs_small, tmp_path):
    import shutil

    from safetensors.torch import load_file, save_file

    broken = tmp_path / "nan-bert"
    shutil.copytree(tiny_bert_with_dropout, broken)
    weights = load_file(broken / "model.safetensors")
    name = next(k for k in weights if k.endswith("embeddings.LayerNorm.weight"))
    weights[name] = torch.full_like(weights[name], float("nan"))
    save_file(weights, broken / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(UserError, match="the model without pre-training gives vectors that are not finite"):
        pretrain(broken, [blurbs_small], method="wwm", output_dir=tmp_path / "x", **FAST)
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.partial").exists()

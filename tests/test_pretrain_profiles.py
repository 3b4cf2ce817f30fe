"""Pre-training under the two profiles: ``paper`` differs from ``current`` exactly where the authors'
scripts and today's libraries part (whole word masking, pooling in WWM evaluations, TSDAE epochs
and evaluation schedule) and agrees everywhere else."""

from __future__ import annotations

import csv
import dataclasses
import json
import random

import numpy as np
import pytest

import torch  # noqa: E402
import transformers  # noqa: E402

from helpers import SPECIAL_TOKENS as SPECIAL  # noqa: E402

from tecb_data.errors import UserError  # noqa: E402
from tecb_eval.clustering.evaluation import unique_texts  # noqa: E402
from tecb_eval.pretraining import pretrain, settings_for  # noqa: E402
from tecb_eval.pretraining.loop import evaluation_due  # noqa: E402
from tecb_eval.training.tracking import LiveLogitsPoolingEncoder, LiveMeanPoolingEncoder  # noqa: E402
from tecb_eval.pretraining.wwm import (ClassicWholeWordMask, TransformersWholeWordMask, WholeWordMasking,  # noqa: E402
                                       masker, unmasked_share)
from tecb_eval.clustering.profiles import get_profile  # noqa: E402

S2S = "blurbs-clustering-s2s"


@pytest.fixture(scope="module")
def tokenizer(tiny_bert_with_dropout):
    return transformers.AutoTokenizer.from_pretrained(str(tiny_bert_with_dropout))


@pytest.fixture(scope="module")
def titles(blurbs):
    return unique_texts([blurbs])


def _classic(tokenizer, seed=0):
    return ClassicWholeWordMask(tokenizer, mlm_probability=0.15, max_length=64, seed=seed)


def _batches(collate, texts, size=32):
    for start in range(0, len(texts), size):
        chunk = texts[start:start + size]
        yield chunk, collate(chunk)


def test_classic_masks_whole_words_within_the_exact_budget(tokenizer, titles):
    collate = _classic(tokenizer)
    exact = 0
    for chunk, batch in _batches(collate, titles):
        assert set(batch) == {"input_ids", "labels"}  # as the 4.x collator: no attention mask
        for row, text in enumerate(chunk):
            ids = tokenizer(text, truncation=True, max_length=64)["input_ids"]
            tokens = tokenizer.convert_ids_to_tokens(ids)
            labels = batch["labels"][row, :len(ids)].tolist()
            inputs = batch["input_ids"][row, :len(ids)].tolist()
            assert (batch["labels"][row, len(ids):] == -100).all()
            assert (batch["input_ids"][row, len(ids):] == tokenizer.pad_token_id).all()
            chosen = {i for i, label in enumerate(labels) if label != -100}
            assert all(labels[i] == ids[i] for i in chosen)
            assert all(inputs[i] == ids[i] for i in range(len(ids)) if i not in chosen)
            assert not chosen & {0, len(ids) - 1}  # [CLS], [SEP]
            words = collate.words(tokens)
            assert all(not (set(w) & chosen) or set(w) <= chosen for w in words)  # whole words only
            budget = max(1, round(len(ids) * 0.15))  # [CLS] and [SEP] count
            assert len(chosen) <= budget
            left = budget - len(chosen)
            # Every word left out was too long for what was left of the budget.
            assert all(len(w) > left for w in words if not set(w) & chosen)
            if sum(len(w) == 1 for w in words) >= budget:
                assert len(chosen) == budget
                exact += 1
    assert exact > len(titles) / 2
    # Twenty one-piece words and [CLS] / [SEP]: round(22 x 0.15) = 3 tokens, three words.
    letters = [c for c in "abcdefghijklmnopqrstuvwxyz" if c in tokenizer.get_vocab()][:20]
    assert len(letters) == 20
    labels = collate([" ".join(letters)])["labels"][0]
    assert int((labels != -100).sum()) == 3
    # As in 4.x, an [UNK] word can be drawn: it uses up the budget but is not masked.
    unknown = "\u2603"  # a snowman, in no title
    assert tokenizer.tokenize(unknown) == ["[UNK]"]
    masked = [int((collate([" ".join([unknown] * 20)])["labels"][0] != -100).sum()) for _ in range(5)]
    assert masked == [0] * 5


def test_classic_replaces_80_10_10(tokenizer, titles):
    collate = _classic(tokenizer, seed=3)
    mask_id = tokenizer.mask_token_id
    counts = {"mask": 0, "random": 0, "kept": 0}
    while sum(counts.values()) < 20_000:
        for chunk, batch in _batches(collate, titles, size=64):
            originals = [tokenizer(t, truncation=True, max_length=64)["input_ids"] for t in chunk]
            for row, ids in enumerate(originals):
                for i in torch.nonzero(batch["labels"][row] != -100).flatten().tolist():
                    token = int(batch["input_ids"][row, i])
                    counts["mask" if token == mask_id else "kept" if token == ids[i] else "random"] += 1
    n = sum(counts.values())
    vocab = len(tokenizer)
    # A random token can happen to be the original or [MASK]: 1/vocab of the random 10 % each.
    assert counts["mask"] / n == pytest.approx(0.8 + 0.1 / vocab, abs=0.015)
    assert counts["random"] / n == pytest.approx(0.1 * (1 - 2 / vocab), abs=0.01)
    assert counts["kept"] / n == pytest.approx(0.1 + 0.1 / vocab, abs=0.01)


def test_transformers_collator_leaves_short_texts_unmasked_where_classic_does_not(tokenizer, titles):
    current = masker(tokenizer, "transformers", mlm_probability=0.15, max_length=64, seed=0)
    classic = masker(tokenizer, "classic", mlm_probability=0.15, max_length=64, seed=0)
    assert isinstance(current, TransformersWholeWordMask) and isinstance(classic, ClassicWholeWordMask)
    shares = {}
    for name, collate in (("current", current), ("classic", classic)):
        batches = list(_batches(collate, titles))
        shares[name] = sum(unmasked_share(b) * len(c) for c, b in batches) / len(titles)
        if name == "current":
            # transformers 5: whole words always become [MASK], never a random token.
            for _, batch in batches:
                chosen = batch["labels"] != -100
                assert (batch["input_ids"][chosen] == tokenizer.mask_token_id).all()
                assert "attention_mask" in batch
    # Every title here has a one-piece word, which always fits the classic budget.
    assert shares["classic"] == 0.0
    assert shares["current"] > 0.2


def test_classic_masking_is_seeded_and_leaves_global_random_states_alone(tokenizer, titles):
    states = (random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state().clone())
    first = _classic(tokenizer, seed=7)(titles[:64])
    again = _classic(tokenizer, seed=7)(titles[:64])
    other = _classic(tokenizer, seed=8)(titles[:64])
    assert torch.equal(first["input_ids"], again["input_ids"]) and torch.equal(first["labels"], again["labels"])
    assert not torch.equal(first["labels"], other["labels"])
    assert random.getstate() == states[0]
    assert (np.random.get_state()[1] == states[1]).all() and torch.equal(torch.get_rng_state(), states[2])


def test_classic_masking_needs_a_wordpiece_tokenizer(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(SPECIAL + list("abcdefghij")) + "\n", encoding="utf-8")
    plain = transformers.BertTokenizerFast(vocab=str(vocab))
    with pytest.raises(UserError, match="WordPiece tokenizer.*--profile current"):
        masker(plain, "classic", mlm_probability=0.15, max_length=32, seed=0)


def test_the_profile_picks_the_masker_and_nothing_else(tiny_bert_with_dropout):
    s = settings_for("wwm", max_length=64)
    paper = WholeWordMasking(tiny_bert_with_dropout, s, 1, "cpu", get_profile("paper"))
    current = WholeWordMasking(tiny_bert_with_dropout, s, 1, "cpu", get_profile("current"))
    assert isinstance(paper.masker, ClassicWholeWordMask) and isinstance(current.masker, TransformersWholeWordMask)
    assert settings_for("wwm", "paper") == settings_for("wwm", "current")


def test_logits_pooling_gives_vocabulary_sized_vectors_unlike_hidden_pooling(tiny_bert_with_dropout, tokenizer, titles):
    torch.manual_seed(0)
    model = transformers.AutoModelForMaskedLM.from_pretrained(str(tiny_bert_with_dropout)).train()
    texts = titles[:40]
    options = dict(max_length=64, batch_size=16, device="cpu")
    logits = LiveLogitsPoolingEncoder(model, tokenizer, **options).encode(texts)
    hidden = LiveMeanPoolingEncoder(model.base_model, tokenizer, **options).encode(texts)
    assert logits.shape == (40, model.config.vocab_size) and hidden.shape == (40, 32)
    assert model.training  # encoding switched dropout off and back on
    # The authors' pooling: the mean over a text's tokens of the masked-LM head's logits.
    with torch.no_grad():
        one = model.eval()(**tokenizer(texts[3], return_tensors="pt")).logits[0].mean(0).numpy()
    np.testing.assert_allclose(logits[3], one, rtol=1e-4, atol=1e-5)
    assert logits.dtype == np.float32 and np.isfinite(logits).all()


@pytest.mark.slow
def test_paper_wwm_run_masks_classically_and_evaluates_on_logits(tiny_bert_with_dropout, blurbs_small, tmp_path):
    common = dict(method="wwm", seeds=(2,), progress=False, max_steps=2, eval_every=1, batch_size=16,
                  grad_accumulation=1, learning_rate=5e-3)
    paper = pretrain(tiny_bert_with_dropout, blurbs_small, profile="paper", output_dir=tmp_path / "paper", **common)
    current = pretrain(tiny_bert_with_dropout, blurbs_small, output_dir=tmp_path / "current", **common)
    assert paper.profile.name == "paper" and current.profile.name == "current"
    assert paper.settings == current.settings  # only the masking and the evaluation pooling differ
    assert paper.baseline[S2S] != current.baseline[S2S]  # the untrained model, pooled two ways
    run_dir = tmp_path / "paper" / S2S

    def losses(folder):
        with open(folder / "losses.csv", newline="") as fh:
            return [r["loss"] for r in csv.DictReader(fh)]

    assert losses(run_dir) != losses(tmp_path / "current" / S2S)
    for folder, name, pooling in ((tmp_path / "paper", "paper", "logits"), (tmp_path / "current", "current", "hidden")):
        run = json.loads((folder / S2S / "run.json").read_text())
        assert run["profile"]["name"] == name and run["evaluation_pooling"] == pooling
        assert json.loads((folder / "run.json").read_text())["profile"]["name"] == name
        with open(folder / "summary.csv", newline="") as fh:
            assert {r["profile"] for r in csv.DictReader(fh)} == {name}
        assert f"Profile `{name}`" in (folder / "summary.md").read_text()
    assert "vocabulary logits" in (tmp_path / "paper" / "summary.md").read_text()
    assert "vocabulary logits" not in (tmp_path / "current" / "summary.md").read_text()
    checkpoint = json.loads((run_dir / "seed-2" / "best" / "pretraining.json").read_text())
    assert checkpoint["profile"] == "paper" and checkpoint["evaluation_pooling"] == "logits"
    # The best checkpoint is chosen on the logits-pooled scores.
    scores = {r["step"]: r["v_measure"] for r in paper.evaluations}
    assert paper[S2S].best[2]["v_measure"] == max(scores.values())


def test_tsdae_defaults_by_profile():
    current, paper = settings_for("tsdae"), settings_for("tsdae", "paper")
    assert (current.epochs, current.eval_schedule) == (1, "global")
    assert (paper.epochs, paper.eval_schedule) == (30, "per-epoch")
    assert dataclasses.replace(paper, epochs=1, eval_schedule="global") == current
    assert settings_for("tsdae", "paper", epochs=2).epochs == 2  # an explicit setting wins
    assert settings_for("tsdae", "paper", eval_schedule="global").eval_schedule == "global"
    with pytest.raises(UserError, match="eval_schedule must be one of"):
        settings_for("wwm", eval_schedule="sometimes")


def test_per_epoch_schedule_restarts_each_epoch_and_evaluates_each_epoch_end():
    # sentence-transformers 2.2: 231 steps an epoch, evaluation every 512 -> only at each epoch's end.
    s = settings_for("tsdae", "paper")
    due = [step for step in range(1, 3 * 231 + 1)
           if evaluation_due(s, step, (step - 1) % 231 + 1, step % 231 == 0, 3 * 231)]
    assert due == [231, 462, 693]
    g = settings_for("tsdae")
    due = [step for step in range(1, 3 * 231 + 1)
           if evaluation_due(g, step, (step - 1) % 231 + 1, step % 231 == 0, 3 * 231)]
    assert due == [512, 693]
    # Counted within the epoch: 10 steps an epoch, every 4 -> 4, 8, 10 | 14, 18, 20.
    s4 = dataclasses.replace(s, eval_every=4)
    due = [step for step in range(1, 21) if evaluation_due(s4, step, (step - 1) % 10 + 1, step % 10 == 0, 20)]
    assert due == [4, 8, 10, 14, 18, 20]


def test_paper_tsdae_run_evaluates_at_each_epoch_end(tiny_bert_with_dropout, blurbs_small, tmp_path):
    result = pretrain(tiny_bert_with_dropout, blurbs_small, method="tsdae", profile="paper", epochs=2, seeds=(1,),
                      eval_every=512, batch_size=64, learning_rate=3e-3, progress=False, output_dir=tmp_path / "tsdae")
    per_epoch = -(-len(unique_texts([blurbs_small])) // 64)
    assert sorted({r["step"] for r in result.evaluations}) == [0, per_epoch, 2 * per_epoch]
    run = json.loads((tmp_path / "tsdae" / S2S / "run.json").read_text())
    assert run["evaluation_pooling"] == "hidden"  # TSDAE evaluates like the grid under both profiles
    assert run["settings"]["eval_schedule"] == "per-epoch" and run["settings"]["epochs"] == 2


def test_unknown_profile_is_a_one_line_error(tiny_bert_with_dropout, blurbs, tmp_path, capsys):
    from tecb_eval.cli import main

    with pytest.raises(UserError, match="unknown profile 'papr'; choose from current, paper"):
        pretrain(tiny_bert_with_dropout, blurbs, profile="papr", output_dir=tmp_path / "x", progress=False)
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.partial").exists()
    # On the command line --profile offers its choices, so argparse refuses it: one line, exit 2.
    with pytest.raises(SystemExit) as stopped:
        main(["pretrain", "--model", str(tiny_bert_with_dropout), "--data", blurbs.location, "--profile", "papr",
              "--out", str(tmp_path / "y"), "--quiet"])
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and error.count("\n") == 1, error
    assert "invalid choice: 'papr'" in error and "'paper'" in error and "try `tecb-eval pretrain --help`" in error
    assert not (tmp_path / "y").exists() and not (tmp_path / "y.partial").exists()

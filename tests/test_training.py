"""What both kinds of training stand on (``tecb_eval.training``: the model source, the live encoder,
tracking, parameter groups and optimiser, checkpoints, the seeded data order).

A tiny pre-training run (WWM and TSDAE) and a tiny fine-tuning run (COB and triplet) give the bytes
recorded here: their losses, scores and the SHA-256 of every file of their kept checkpoints (on
this tiny random model the best checkpoint is the one before training; the losses after the first
step and the scores after the last depend on every update). A value here changes only with a
deliberate change of behaviour, named in the commit that changes it. A checkpoint's bytes do not
depend on how its tokenizer was read; pre-training and fine-tuning stand on training and never on
each other.

Runs on one torch thread (restored afterwards), so that the recorded bytes do not depend on how
many cores the machine lends the test.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

import torch

import tecb_data  # noqa: E402
from helpers import REPO  # noqa: E402

S2S = "blurbs-clustering-s2s"
# Files whose text names library versions or absolute paths, not what was computed.
SKIPPED = {"run.json", "key.json", "README.md", "config_sentence_transformers.json"}

# Settings left out of finetuning.json's digest (the COB authors' options; the runs pass the values
# the digest was recorded with).
SETTINGS_LEFT_OUT = ("adam_eps", "triple_fraction", "self_pairs")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _checkpoint(folder: Path) -> dict[str, str]:
    found = {str(p.relative_to(folder)): _digest(p) for p in sorted(folder.rglob("*"))
             if p.is_file() and p.name not in SKIPPED}
    if (folder / "finetuning.json").is_file():
        # Its base model is named by the (temporary) folder it was read from.
        info = json.loads((folder / "finetuning.json").read_text(encoding="utf-8"))
        del info["base_model"]
        for name in SETTINGS_LEFT_OUT:
            info["settings"].pop(name, None)
        found["finetuning.json"] = hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest()
    return found


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@pytest.fixture
def one_thread():
    """One torch thread for the test, its thread count put back afterwards. Set for each test, not
    once for the module: the count is process state, which code the process runs between two of
    this module's tests can change, and at two threads the losses' bytes differ."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    changed = torch.get_num_threads()
    torch.set_num_threads(previous)
    assert changed == 1, "the run changed torch's thread count"


def pretraining_record(tiny_bert, blurbs_folder, out: Path, method: str) -> dict:
    from tecb_eval.pretraining import pretrain

    small = dataclasses.replace(tecb_data.load(blurbs_folder))
    small = dataclasses.replace(small, splits=small.splits[:3])
    fast = dict(batch_size=16, grad_accumulation=1, learning_rate=5e-3, eval_every=2, max_steps=3)
    if method == "wwm":
        fast["warmup_ratio"] = 0.5
    pretrain(tiny_bert, [small], method=method, epochs=1, seeds=(42,), output_dir=out, progress=False, **fast)
    run = out / S2S
    return {"losses": _text(run / "losses.csv"), "evaluations": _text(run / "evaluations_splits.csv"),
            "summary": _text(run / "summary.csv"), "checkpoint": _checkpoint(run / "seed-42" / "best")}


def finetuning_record(tiny_bert, blurbs_folder, out: Path, **settings) -> dict:
    from tecb_eval.finetuning import finetune

    # The settings the bytes were recorded with, not today's defaults (those follow the COB authors:
    # AdamW eps 1e-6, 1 epoch, self pairs in the regulariser; tests/test_cob_fidelity.py).
    fast = dict(max_steps=2, eval_every=1, instance_size=20, triples_per_instance=16, learning_rate=1e-3,
                adam_eps=1e-8, epochs=2, self_pairs=False)
    fast.update(settings)
    finetune(str(tiny_bert), blurbs_folder, method=("cob", "triplet"), folds=1, seeds=(42,), score_seeds=(42, 1),
             output_dir=out, progress=False, resamples=99, **fast)
    record = {"scores": _text(out / "scores.csv"), "summary": _text(out / "summary.csv"),
              "comparisons": _text(out / "comparisons.csv")}
    for method in ("cob", "triplet"):
        unit = out / method / "fold-01" / "seed-42"
        record[method] = {"losses": _text(unit / "losses.csv"), "evaluations": _text(unit / "evaluations.csv"),
                          "checkpoint": _checkpoint(unit / "best")}
    return record


def _fingerprint(record) -> dict:
    """Texts by their digest (the golden values stay short); digests as they are."""
    if isinstance(record, dict):
        return {k: _fingerprint(v) for k, v in record.items()}
    return record if len(record) == 64 else hashlib.sha256(record.encode("utf-8")).hexdigest()


# Recorded with torch 2 on CPU, one thread. A checkpoint leaves transformers' loading options out of
# its tokenizer_config.json (tecb_eval.training.checkpoints.drop_loading_options): transformers
# writes "local_files_only": true there under HF_HUB_OFFLINE=1 and false online, and the bytes would
# depend on the environment.
GOLDEN: dict = {'finetuning': {'cob': {'checkpoint': {'1_Pooling/config.json': '652ae4d1fa6df34d651fcf6a67b2f001607cf4e338790358a6ef0d5ff9498fd8',
                                       'config.json': 'd0fe0a6be3669142c536ad92b2baf3b53f8ddcc6bcd2fef09326b1b52f590405',
                                       'finetuning.json': '75210fa865e2f7fbba5d65d403764ba3310a53eb683178786785510349ad5dd0',
                                       'model.safetensors': '967ebe171f5c56a8f140447ed411c60d228b0d269de2475458c2cf555e236433',
                                       'modules.json': 'e4068aab8a95663636c4c28044a95eafdb6492387397ec8283d8f8b31078d645',
                                       'sentence_bert_config.json': '3084164002c0bca01b0259c5327123803fce32e660a57feb93184ffead186fc8',
                                       'tokenizer.json': 'ef3238bf431fc26f89df3aa31ec9a4e13738ba7850bdf1418701f4ff6c24d654',
                                       'tokenizer_config.json': '18fdfd0d1a40a00df1481de65f94ed6d9c1e1af08f7582520db12e1656d9b628'},
                        'evaluations': '8742a73903a868e1ef62b693be43564b7d1200ecf3bfc5ceeff8f47090b07b9b',
                        'losses': '0824a3f1955f76081b20dcbd1c7187597bc7737578a64ba4953d37076c74ee5f'},
                'comparisons': '544f9edf4b3c5c1d82bf9c1a58ab89d7089e01d9d6ab77f64785f2895174ba09',
                'scores': 'b074cf9019e1dc3fa211593e7e1a6821a98490e63e31915ed4642c9fd8289064',
                'summary': 'c1f4ca3fd5529763ccab75333f0a8f7ef4d9207f4f5eeaa50ae241d32efd5958',
                'triplet': {'checkpoint': {'1_Pooling/config.json': '652ae4d1fa6df34d651fcf6a67b2f001607cf4e338790358a6ef0d5ff9498fd8',
                                           'config.json': 'd0fe0a6be3669142c536ad92b2baf3b53f8ddcc6bcd2fef09326b1b52f590405',
                                           'finetuning.json': '13973ff89057ae58baa840059dfb4d4b3b829d4e776ef39b687cfceb47549eaf',
                                           'model.safetensors': '967ebe171f5c56a8f140447ed411c60d228b0d269de2475458c2cf555e236433',
                                           'modules.json': 'e4068aab8a95663636c4c28044a95eafdb6492387397ec8283d8f8b31078d645',
                                           'sentence_bert_config.json': '3084164002c0bca01b0259c5327123803fce32e660a57feb93184ffead186fc8',
                                           'tokenizer.json': 'ef3238bf431fc26f89df3aa31ec9a4e13738ba7850bdf1418701f4ff6c24d654',
                                           'tokenizer_config.json': '18fdfd0d1a40a00df1481de65f94ed6d9c1e1af08f7582520db12e1656d9b628'},
                            'evaluations': 'b9a5b1370285e625e88ae934db206cd0c64c36fb9d88971904d3c3e4654e1456',
                            'losses': 'f2fddaa96c1c82e7f2c20b3eeb04699184f7a160a20b2e5709a7c2623fc14d67'}},
 'pretraining-tsdae': {'checkpoint': {'config.json': 'd0fe0a6be3669142c536ad92b2baf3b53f8ddcc6bcd2fef09326b1b52f590405',
                                      'model.safetensors': '967ebe171f5c56a8f140447ed411c60d228b0d269de2475458c2cf555e236433',
                                      'pretraining.json': 'd623ea37b9aafff7d15e5fd3ec238e66f78ee115859d9f84d65342d33ba4914a',
                                      'tokenizer.json': '5c6d43aa2ca788963ba2502ab36ce86df140a71abd0ad28574935bb1bb8c4e89',
                                      'tokenizer_config.json': '38bb90d500c7c8baf8ffdfabf6037eafaa48a1c288f965a966fecbb0fe984ad8'},
                       'evaluations': '2689f59cf2728e7f0c0e855fe3eb90cae388a615dae670979d82004cdddf9785',
                       'losses': '68eaa29ad3946c79e93780277794e8ad957bf675ce8eb6e72b6033aab9d8b0e4',
                       'summary': '4d77786b1d912d9c549315a45b927081110af5b6edf362eb5625b2a0ae975a6a'},
 'pretraining-wwm': {'checkpoint': {'config.json': 'bfba683805e2b94fba49fbd142d29801ca4cab9085a87e0dff1965227bd64063',
                                    'model.safetensors': '639812134651a1c24dae4b497e077baecc18e9e44e6986772528411570886275',
                                    'pretraining.json': '57e7a495d42fa13fb1df2f50e1aeb266b62680f2493b8f3cf1bf5bc95311bae5',
                                    'tokenizer.json': '5c6d43aa2ca788963ba2502ab36ce86df140a71abd0ad28574935bb1bb8c4e89',
                                    'tokenizer_config.json': 'd6b89d890b13deda918682744553c33beff66843a9c701f1a0c9419d77536c93'},
                     'evaluations': 'ccda768fd5696f559159ad5fd572379bc8e3fbd01315a9b878a4589a27729d2e',
                     'losses': '43ff33f28b4e046adeb25ab664dff6513594aa9cfa6758e5f3c516d91fabcd27',
                     'summary': '0ce286f9c7ed9ab57aa0c9301094428aac1a8c21384b2194dd87fb561db3743a'}}


@pytest.mark.parametrize("method", ["wwm", "tsdae"])
@pytest.mark.slow
def test_pretraining_gives_the_recorded_bytes(one_thread, tiny_bert, blurbs_folder, tmp_path, method):
    got = _fingerprint(pretraining_record(tiny_bert, blurbs_folder, tmp_path / "out", method))
    assert got == GOLDEN.get(f"pretraining-{method}"), got


def test_finetuning_gives_the_recorded_bytes(one_thread, tiny_bert, blurbs_folder, tmp_path):
    got = _fingerprint(finetuning_record(tiny_bert, blurbs_folder, tmp_path / "out"))
    assert got == GOLDEN.get("finetuning"), got


def test_a_checkpoint_says_nothing_of_how_its_tokenizer_was_read(tiny_bert, tmp_path):
    """The same tokenizer read with local_files_only True (what HF_HUB_OFFLINE=1 forces) and False
    gives the same checkpoint bytes (transformers would keep the option in tokenizer_config.json)."""
    from transformers import AutoTokenizer

    from tecb_eval.training.checkpoints import save_checkpoint

    written = []
    for offline in (True, False):
        tokenizer = AutoTokenizer.from_pretrained(str(tiny_bert), local_files_only=offline)
        target = tmp_path / f"offline-{offline}"
        save_checkpoint(lambda folder: tokenizer.save_pretrained(str(folder)), target, "record.json", {"seed": 42})
        written.append({p.name: p.read_bytes() for p in sorted(target.iterdir())})
    assert written[0] == written[1]
    config = json.loads(written[0]["tokenizer_config.json"])
    assert "local_files_only" not in config and config["unk_token"] == "[UNK]"


def test_pretraining_and_finetuning_stand_on_training_and_never_on_each_other():
    from importgraph import import_graph, room

    graph = import_graph(REPO, ("tecb_data", "tecb_eval"))
    uses: dict[str, set[str]] = {}
    for source, deps in graph.items():
        uses.setdefault(room(source), set()).update(room(d) for d in deps)
    assert "finetuning" not in uses["pretraining"] and "pretraining" not in uses["finetuning"]
    assert "training" in uses["pretraining"] and "training" in uses["finetuning"]
    assert not uses["training"] & {"pretraining", "finetuning", "reports", "layers", "cli"}

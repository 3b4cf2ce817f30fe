"""Layer sweep (one forward pass, every layer, the grid's clustering) and truncated-model
pre-training, on a tiny 4-layer BERT built here with its own WordPiece vocabulary."""

from __future__ import annotations

import dataclasses
import json
import os
import math
import re

import numpy as np
import pandas as pd
import pytest

import torch  # noqa: E402
import transformers  # noqa: E402

from helpers import save_tiny_bert, text_vocabulary  # noqa: E402
import tecb_data  # noqa: E402
import tecb_eval  # noqa: E402
from tecb_data.errors import UserError  # noqa: E402
from tecb_eval.grid.cache import EmbeddingStore  # noqa: E402
from tecb_eval.models.encoders import get_encoder  # noqa: E402
from tecb_eval.clustering.evaluation import unique_texts  # noqa: E402
from tecb_eval.grid.run import run_grid  # noqa: E402
from tecb_eval.layers import parse_layers  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

N_LAYERS = 4
METRIC_COLUMNS = ["v_measure", "ami", "ari", "homogeneity", "completeness"]


@pytest.fixture(scope="module")
def datasets(demo_datasets):
    """Blurbs S2S and P2P of the demo sample, two splits each (the same texts recur across splits):
    every sweep and grid here clusters each split once per layer, and two splits are enough for
    what the tests compare (per-split scores, their mean and spread, texts shared by splits)."""
    loaded = [tecb_data.load(demo_datasets / name) for name in ("blurbs-clustering-s2s", "blurbs-clustering-p2p")]
    return [dataclasses.replace(b, splits=b.splits[:2]) for b in sorted(loaded, key=lambda b: b.name)]


@pytest.fixture(scope="module")
def tenkgnad(demo_datasets):
    """The demo's TenKGnad S2S and P2P folders (10 splits each): what the CLI reads whole."""
    return [demo_datasets / name for name in ("tenkgnad-clustering-p2p", "tenkgnad-clustering-s2s")]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory, datasets, tenkgnad):
    texts = unique_texts(datasets) + unique_texts([tecb_data.load(folder) for folder in tenkgnad])
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), text_vocabulary(texts), layers=N_LAYERS)


class ForwardCounter:
    """Counts the texts that go through any BertModel's forward pass (torch's global module hook)."""

    def __enter__(self):
        self.calls, self.texts = 0, 0

        def hook(module, args, output):
            if isinstance(module, transformers.BertModel):
                self.calls += 1
                self.texts += int(output.last_hidden_state.shape[0])

        self.handle = torch.nn.modules.module.register_module_forward_hook(hook)
        return self

    def __exit__(self, *exc):
        self.handle.remove()


def _grid_layer(model, datasets, layer, cache_dir, **kwargs):
    return run_grid(datasets, [{"spec": str(model), "layer": layer}], configurations=[("minibatch_kmeans", "none")],
                    protocol="legacy", seed=42, cache_dir=cache_dir, progress=False, **kwargs)


@pytest.mark.slow
def test_each_layer_scores_what_the_grid_scores_and_is_cached_for_it(tiny_bert, datasets, tmp_path):
    sweep_cache, grid_cache = tmp_path / "sweep-cache", tmp_path / "grid-cache"
    table = tecb_eval.layer_sweep(str(tiny_bert), datasets, cache_dir=sweep_cache, output_dir=tmp_path / "out",
                                  progress=False)
    splits = pd.read_csv(tmp_path / "out" / "splits.csv")
    assert sorted(table.layer.unique()) == list(range(N_LAYERS + 1))
    assert len(table) == len(datasets) * (N_LAYERS + 1)
    assert table.groupby("dataset").best.sum().tolist() == [1, 1]
    texts = unique_texts(datasets)
    for layer in range(N_LAYERS + 1):
        encoder = get_encoder(str(tiny_bert), layer=layer)
        # A separate grid run with layer=k, on its own cache: it encodes the texts itself.
        alone = _grid_layer(tiny_bert, datasets, layer, grid_cache).sort_values(["dataset", "split"])
        ours = splits[splits.layer == layer].sort_values(["dataset", "split"])
        assert list(alone.split) == list(ours.split)
        assert alone.model.unique().tolist() == [f"{tiny_bert.name}-layer{layer}"] == ours.model.unique().tolist()
        assert alone.model_identity.unique().tolist() == [encoder.identity] == ours.model_identity.unique().tolist()
        for column in METRIC_COLUMNS:
            # Through the CSV at 17 significant digits: a float64 round-trips exactly.
            assert alone[column].tolist() == ours[column].tolist(), (layer, column)
        for dataset, rows in alone.groupby("dataset"):
            row = table[(table.dataset == dataset) & (table.layer == layer)].iloc[0]
            assert row.v_measure == rows.v_measure.mean()
            # pandas' grouped and plain std sum in different orders: equal to the last bits or so.
            assert row.v_measure_sd == pytest.approx(rows.v_measure.std(ddof=0), rel=1e-12)
        # The sweep's vectors of layer k are the grid's own, bit for bit, under the same identity.
        swept = EmbeddingStore(sweep_cache, encoder.identity).embeddings().rows(texts)
        encoded = EmbeddingStore(grid_cache, encoder.identity).embeddings().rows(texts)
        assert swept.shape == (len(texts), 32) and np.array_equal(swept, encoded)
        # ... and those of a plain encode of the texts (its batches pad differently: float noise only).
        np.testing.assert_allclose(swept, encoder.encode(texts), rtol=0, atol=1e-5)
        # A later grid run with layer=k on the sweep's cache finds every vector and encodes nothing.
        said = []
        with ForwardCounter() as counter:
            again = _grid_layer(tiny_bert, datasets, layer, sweep_cache, log=said.append)
        assert counter.texts == 0 and not any("encoded" in line for line in said)
        assert again.sort_values(["dataset", "split"]).v_measure.tolist() == ours.v_measure.tolist()


@pytest.mark.slow
def test_layer_zero_is_the_embedding_layer_and_the_last_is_last_hidden_state(tiny_bert, datasets):
    encoder = get_encoder(str(tiny_bert), layer=-1)
    texts = unique_texts(datasets)[:20]
    vectors = encoder.encode_layers(texts, [0, 2, N_LAYERS])
    tokenizer, model = encoder.tokenizer, encoder.model
    for i in (0, 7):
        batch = tokenizer([texts[i]], return_tensors="pt", truncation=True, max_length=64)
        with torch.inference_mode():
            output = model(**batch, output_hidden_states=True)
        for layer, hidden in ((0, output.hidden_states[0]), (2, output.hidden_states[2]),
                              (N_LAYERS, output.last_hidden_state)):
            np.testing.assert_allclose(vectors[layer][i], hidden[0].mean(0).numpy(), rtol=0, atol=1e-5)
    assert np.array_equal(vectors[N_LAYERS], encoder.encode(texts))
    assert np.array_equal(vectors[2], encoder.at_layer(2).encode(texts))
    assert encoder.at_layer(N_LAYERS).identity == get_encoder(str(tiny_bert)).identity


@pytest.mark.slow
def test_the_sweep_encodes_each_unique_text_once(tiny_bert, datasets, tmp_path):
    # What is counted is the texts through the model: one dataset (two splits that share texts) shows it.
    datasets = datasets[1:]
    texts = unique_texts(datasets)
    assert sum(len(s.texts) for b in datasets for s in b.splits) > len(texts)  # splits share texts
    with ForwardCounter() as sweep:
        table = tecb_eval.layer_sweep(str(tiny_bert), datasets, cache_dir=tmp_path / "c", progress=False)
    assert sweep.texts == len(texts) == table.attrs["encoded_texts"]
    assert sweep.calls == math.ceil(len(texts) / 32)
    # The same layers one by one through the grid: every layer sends every text through the model.
    with ForwardCounter() as one_by_one:
        for layer in range(N_LAYERS + 1):
            _grid_layer(tiny_bert, datasets, layer, tmp_path / "one-by-one")
    assert one_by_one.texts == (N_LAYERS + 1) * len(texts)
    # Cached: a second sweep runs nothing through the model; new layers cost one pass for all of them.
    with ForwardCounter() as again:
        tecb_eval.layer_sweep(str(tiny_bert), datasets, cache_dir=tmp_path / "c", progress=False)
    assert again.texts == 0
    with ForwardCounter() as partial:
        tecb_eval.layer_sweep(str(tiny_bert), datasets, layers="0-1", cache_dir=tmp_path / "d", progress=False)
        wider = tecb_eval.layer_sweep(str(tiny_bert), datasets, layers=[0, 1, 3, 4], cache_dir=tmp_path / "d",
                                      progress=False)
    assert partial.texts == 2 * len(texts) and wider.layer.unique().tolist() == [0, 1, 3, 4]
    # Without a cache folder the vectors live in a temporary one: same scores.
    fresh = tecb_eval.layer_sweep(str(tiny_bert), datasets, layers="3", progress=False)
    expected = table[table.layer == 3].reset_index(drop=True)
    assert fresh.v_measure.tolist() == expected.v_measure.tolist()


@pytest.mark.slow
def test_outputs_and_cli(tiny_bert, tenkgnad, tmp_path, capsys):
    from tecb_eval.cli import main

    out = tmp_path / "out"
    code = main(["layers", "--model", str(tiny_bert), "--data", str(tenkgnad[0]), "--data", str(tenkgnad[1]),
                 "--layers", "0,2-4", "--out", str(out), "--cache-dir", str(tmp_path / "cache"),
                 "--results", str(tmp_path / "results.jsonl"), "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [".tecb-output.json", "figure.png", "layers.csv", "splits.csv",
                                                     "summary.md"]
    assert (out / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = pd.read_csv(out / "layers.csv")
    assert table.layer.unique().tolist() == [0, 2, 3, 4]
    for dataset, rows in table.groupby("dataset"):
        best = rows[rows.best]
        assert len(best) == 1 and best.v_measure.iloc[0] == rows.v_measure.max()
        assert f"{dataset}: best layer {int(best.layer.iloc[0])}" in printed
    # The CLI reads the whole folders (10 splits each); the results store holds one k-means cell per
    # (dataset, layer, split), as a grid run with layer=k writes it.
    from tecb_eval.grid.store import read_results

    stored = read_results(tmp_path / "results.jsonl")
    n_splits = sum(len(tecb_data.load(folder).splits) for folder in tenkgnad)
    assert n_splits == 20
    assert len(stored) == 4 * n_splits
    assert set(stored.model) == {f"{tiny_bert.name}-layer{k}" for k in (0, 2, 3, 4)}
    assert set(zip(stored.algorithm, stored.reduction)) == {("minibatch_kmeans", "none")}


@pytest.mark.parametrize("layers, message", [
    ("5-2", "runs backwards"), ("a-b", "not a layer or a range"), ("", "not a layer or a range"),
    ("1,,3", "not a layer or a range"), ("-1", "not a layer or a range"), ([], "at least one layer"),
    ([-2], "negative"), ("0-9", "has layers 0..4"), ([5], "has layers 0..4"),
])
def test_bad_layers_are_one_line_errors(tiny_bert, datasets, tmp_path, capsys, layers, message):
    from tecb_eval.cli import main

    with pytest.raises(UserError, match=re.escape(message)):
        tecb_eval.layer_sweep(str(tiny_bert), datasets, layers=layers, cache_dir=tmp_path / "c", progress=False)
    if isinstance(layers, str) and layers:
        code = main(["layers", "--model", str(tiny_bert), "--data", datasets[0].location, "--layers", layers,
                     "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "c"), "--quiet"])
        error = capsys.readouterr().err.strip().splitlines()
        # One error line, the last; above it at most transformers' own "Loading weights" bar.
        assert code == 2 and error[-1].startswith("tecb-eval: error: ") and message in error[-1]
        assert not [line for line in error[:-1] if line.strip() and "Loading weights" not in line]
    assert not (tmp_path / "out").exists() and not (tmp_path / "c").exists()


def test_models_without_layers_are_one_line_errors(datasets, tmp_path):
    with pytest.raises(UserError, match="no hidden layers to sweep"):
        tecb_eval.layer_sweep("tfidf-lsa", datasets, progress=False)
    with pytest.raises(UserError, match="not an encoder object"):
        tecb_eval.layer_sweep(get_encoder("tfidf-lsa"), datasets, progress=False)
    assert parse_layers(None) is None and parse_layers("all") is None
    assert parse_layers("0,4,6-8") == [0, 4, 6, 7, 8] and parse_layers([3, 1, 3]) == [1, 3] and parse_layers(2) == [2]


# -- truncated models ---------------------------------------------------------------------------

def test_truncated_checkpoint_keeps_exactly_k_layers(tiny_bert, datasets, tmp_path):
    from tecb_eval.pretraining.truncate import truncate_checkpoint

    folder = truncate_checkpoint(tiny_bert, 2, tmp_path / "first-2")
    config = transformers.AutoConfig.from_pretrained(folder)
    assert config.num_hidden_layers == 2
    assert len(transformers.AutoModel.from_pretrained(folder).encoder.layer) == 2
    texts = unique_texts(datasets)[:40]
    # Its last layer is the original's layer 2, and it loads through get_encoder as any model.
    truncated = get_encoder(str(folder))
    assert np.array_equal(truncated.encode(texts), get_encoder(str(tiny_bert), layer=2).encode(texts))
    assert truncated.n_layers == 2
    for k in (0, 5, "2"):
        with pytest.raises(UserError, match=r"this model has 4 layers; keep between 1 and 4"):
            truncate_checkpoint(tiny_bert, k, tmp_path / f"bad-{k}")


FAST = dict(seeds=(42,), progress=False, max_steps=2, eval_every=1, batch_size=16, grad_accumulation=1,
            learning_rate=5e-3)


@pytest.mark.parametrize("method", ["wwm", "tsdae"])
@pytest.mark.slow
def test_pretraining_a_truncated_model(tiny_bert, datasets, tmp_path, method):
    from tecb_eval.clustering.evaluation import evaluate_kmeans

    s2s = datasets[1]
    assert s2s.name == "blurbs-clustering-s2s"
    out = tmp_path / method
    result = tecb_eval.pretrain(str(tiny_bert), [s2s], method=method, truncate_at=2, output_dir=out, **FAST)
    run = result[s2s.name]
    best = run.best[42]["path"]
    # The checkpoint is a 2-layer model and reloads through get_encoder.
    assert transformers.AutoConfig.from_pretrained(best).num_hidden_layers == 2
    encoder = get_encoder(str(best))
    assert encoder.n_layers == 2 and encoder.encode(["Ein Roman"]).shape == (1, 32)
    assert json.loads((best / "pretraining.json").read_text())["truncate_at"] == 2
    assert json.loads((out / "run.json").read_text())["settings"]["truncate_at"] == 2
    summary = (out / "summary.md").read_text()
    assert f"{tiny_bert.name} truncated at layer 2 of 4" in summary
    # Before training, the truncated model is the original's layer 2.
    original_layer_2 = get_encoder(str(tiny_bert), layer=2, max_length=64)
    expected = np.mean([r["v_measure"] for r in evaluate_kmeans([s2s], original_layer_2.encode, seed=42)])
    assert run.baseline[s2s.name] == pytest.approx(expected, abs=1e-6)
    # A layer sweep of the result is one call away.
    table = tecb_eval.layer_sweep(str(best), [s2s], progress=False)
    assert table.layer.tolist() == [0, 1, 2]


def test_tsdae_decoder_of_a_truncated_model_has_k_layers(tiny_bert, tmp_path):
    from tecb_eval.pretraining.settings import settings_for
    from tecb_eval.pretraining.truncate import truncate_checkpoint
    from tecb_eval.pretraining.tsdae import Tsdae

    folder = truncate_checkpoint(tiny_bert, 3, tmp_path / "first-3")
    objective = Tsdae(folder, settings_for("tsdae", max_length=64), 42, "cpu")
    assert objective.module.decoder.config.num_hidden_layers == 3
    assert len(objective.encoder.encoder.layer) == 3


def test_truncate_at_errors_leave_nothing_behind(tiny_bert, datasets, tmp_path, capsys):
    from tecb_eval.cli import main

    for k, message in ((5, "this model has 4 layers"), (0, "truncate_at must be a positive integer")):
        with pytest.raises(UserError, match=message):
            tecb_eval.pretrain(str(tiny_bert), [datasets[1]], truncate_at=k, output_dir=tmp_path / "x", **FAST)
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.partial").exists()
    code = main(["pretrain", "--model", str(tiny_bert), "--data", datasets[1].location, "--truncate-at", "9",
                 "--out", str(tmp_path / "y"), "--quiet"])
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and "--truncate-at 1..4" in error
    assert not (tmp_path / "y").exists()


def test_an_output_inside_a_dataset_is_refused_before_any_work(tiny_bert, datasets, tmp_path):
    inside = f"{datasets[1].location}/sweep"
    with ForwardCounter() as counter, pytest.raises(UserError, match="lies inside the dataset folder"):
        tecb_eval.layer_sweep(str(tiny_bert), datasets, output_dir=inside, progress=False)
    assert counter.texts == 0 and not os.path.exists(inside)

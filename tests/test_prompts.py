"""Prompts as MTEB uses them, and the referee: a tiny prompted sentence-transformers model (built
here: a StaticEmbedding over its own word vocabulary, whose vectors depend on each text alone, so
batching changes nothing) scored by MTEB on our demo folders, loaded as MTEB loads it, and by our
grid through the plain folder (its prompts chosen per task as MTEB's wrapper chooses them), the
``mteb:`` spec and the MTEB object itself: equal per split and per bootstrap draw."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import mteb  # noqa: E402

from helpers import SPECIAL_TOKENS, eval_error, run_args, save_tiny_bert  # noqa: E402
from tecb_data.errors import UserError  # noqa: E402
from tecb_eval.grid.run import run_grid  # noqa: E402
from tecb_eval.models import encoders  # noqa: E402
from tecb_eval.mteb import tasks as mteb_bridge  # noqa: E402

# Both sides at one thread, MTEB's draws for our fast protocol made in this process (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("one_thread", "draws_here")
TOLERANCE = 1e-9
PROMPTS = {
    "BlurbsClusteringS2S": "Ordne den Buchtitel einem Genre zu: ",
    "Clustering": "Thema des Textes: ",
    "query": "Frage: ",
    "document": "",
}


def _vocabulary(folders) -> list[str]:
    import tecb_data

    words = set()
    for folder in folders:
        for split in tecb_data.load(folder).splits:
            for text in split.texts:
                words.update(text.lower().split())
    for prompt in PROMPTS.values():
        words.update(prompt.lower().split())
    return ["[UNK]", *sorted(words)]


def build_static_model(folder, vocabulary, prompts, default_prompt_name=None, dims=24, seed=7):
    """A sentence-transformers model: mean of per-word vectors (seeded), then Normalize, with
    ``prompts`` in its configuration."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocabulary)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    weights = np.random.default_rng(seed).standard_normal((len(vocabulary), dims)).astype(np.float32)
    model = SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_weights=weights), Normalize()],
                                device="cpu", prompts=prompts, default_prompt_name=default_prompt_name)
    model.save(str(folder), create_model_card=False)
    return folder


@pytest.fixture(scope="module")
def demo(demo_datasets):
    return {"s2s": demo_datasets / "blurbs-clustering-s2s", "p2p": demo_datasets / "blurbs-clustering-p2p",
            "gnad": demo_datasets / "tenkgnad-clustering-s2s"}


@pytest.fixture(scope="module")
def prompted(tmp_path_factory, demo):
    return build_static_model(tmp_path_factory.mktemp("prompted"), _vocabulary(demo.values()), PROMPTS)


def _metadata(name, version="legacy"):
    return mteb_bridge.task_class(name, version).metadata


def test_the_prompt_is_the_one_mtebs_wrapper_chooses_per_task(prompted):
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper, _resolve_prompt

    encoder = encoders.get_encoder(str(prompted))
    wrapper = SentenceTransformerEncoderWrapper(str(prompted))
    for task, version in [("BlurbsClusteringS2S", "legacy"), ("BlurbsClusteringS2S", "v2"),
                          ("BlurbsClusteringP2P", "legacy"), ("TenKGnadClusteringS2S", "legacy")]:
        metadata = _metadata(task, version)
        bound = encoder.for_task(metadata)
        # MTEB's own choice for a clustering task (no query/document prompt type).
        assert bound.prompt == _resolve_prompt(wrapper.model_prompts, metadata, None)
    assert encoder.for_task(_metadata("BlurbsClusteringS2S")).prompt == PROMPTS["BlurbsClusteringS2S"]
    # The v2 task has another name: MTEB falls back to the task type's prompt, and so do we.
    assert encoder.for_task(_metadata("BlurbsClusteringS2S", "v2")).prompt == PROMPTS["Clustering"]
    assert encoder.for_task(_metadata("TenKGnadClusteringS2S")).prompt == PROMPTS["Clustering"]


def test_the_prompt_is_part_of_the_identity_and_changes_the_vectors(prompted):
    plain = encoders.get_encoder(str(prompted), prompt="")
    auto = encoders.get_encoder(str(prompted)).for_task(_metadata("BlurbsClusteringS2S"))
    explicit = encoders.get_encoder(str(prompted), prompt=PROMPTS["BlurbsClusteringS2S"])
    named = encoders.get_encoder(str(prompted), prompt_name="BlurbsClusteringS2S")
    assert "prompt=" not in plain.identity
    assert auto.identity == explicit.identity == named.identity != plain.identity
    assert '|prompt="Ordne den Buchtitel einem Genre zu: "' in auto.identity
    texts = ["Der Hobbit", "Kochen für Anfänger", "Eine kurze Geschichte der Zeit"]
    with_prompt, without = auto.encode(texts), plain.encode(texts)
    assert np.abs(with_prompt - without).max() > 0.05
    np.testing.assert_array_equal(with_prompt, explicit.encode(texts))


def test_a_model_without_prompts_keeps_its_identity(tmp_path, demo):
    """New identity fields only add: a model without prompts, backend or dtype has the identity (and
    so the cache folder) it had before prompts existed."""
    folder = build_static_model(tmp_path / "plain", _vocabulary([demo["s2s"]]), prompts=None)
    encoder = encoders.get_encoder(str(folder))
    assert re.fullmatch(r"st:plain#[0-9a-f]{20}\|pooling=Normalize\|layer=last\|max_length=\w+", encoder.identity)
    assert not getattr(encoder, "per_task")
    assert encoder.for_task(_metadata("BlurbsClusteringS2S")) is encoder


def test_the_default_prompt_is_what_sentence_transformers_uses_where_mteb_picks_none(tmp_path, demo):
    folder = build_static_model(tmp_path / "default", _vocabulary([demo["s2s"]]),
                                {"query": "Frage: ", "document": "Text: "}, default_prompt_name="document")
    encoder = encoders.get_encoder(str(folder))
    assert encoder.prompt == "Text: " and encoder.for_task(_metadata("BlurbsClusteringS2S")).prompt == "Text: "


def _ours(folder, model, protocol, cache_dir):
    import tecb_data

    frame = run_grid([folder], [model], configurations=["minibatch_kmeans:none"], protocol=protocol,
                     cache_dir=cache_dir, progress=False, log=lambda m: None)
    order = [s.name for s in tecb_data.load(folder).splits] if protocol == "legacy" else sorted(frame.split)
    by_split = dict(zip(frame.split, frame.v_measure))
    return [by_split[name] for name in order], frame


def _mtebs(folder, model, version):
    result = mteb.evaluate(model, tasks=mteb_bridge.mteb_tasks([folder], version=version), cache=None,
                           show_progress_bar=False, encode_kwargs={"batch_size": 32})
    (task_result,) = result.task_results
    scores = task_result.scores["test"][0]
    return scores["v_measures"]["Level 0"] if version == "v2" else scores["v_measures"]


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["legacy", "fast"])
@pytest.mark.parametrize("view", ["s2s", "p2p"])
def test_ours_equal_mtebs_scores_of_the_prompted_model(prompted, demo, protocol, view, tmp_path):
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    folder = demo[view]
    version = "v2" if protocol == "fast" else "legacy"
    # As MTEB loads a sentence-transformers model it has no registry entry for.
    theirs = _mtebs(folder, SentenceTransformerEncoderWrapper(str(prompted)), version)
    # Not a degenerate agreement: the model separates the labels to some degree, differently per split.
    assert min(theirs) > 0 and len(set(np.round(theirs, 12))) > 1
    runs = {
        "folder": str(prompted),                                   # our plain path, prompts chosen per task
        "mteb-spec": f"mteb:{prompted}",                           # loaded and encoded through MTEB's wrapper
        "mteb-object": SentenceTransformerEncoderWrapper(str(prompted)),  # any MTEB model object
    }
    # The fast protocol's draws are MTEB's, the same for every model (tecb_eval/grid/samples.py): the
    # first run draws them and the others read them from a copy in their own cache folder, where
    # each still encodes every text itself.
    drawn = tmp_path / "folder" / "samples"

    def own_cache(label):
        if drawn.is_dir():
            shutil.copytree(drawn, tmp_path / label / "samples")
        return tmp_path / label

    for label, model in runs.items():
        ours, frame = _ours(folder, model, protocol, own_cache(label))
        assert len(ours) == len(theirs) > 1, label
        assert max(abs(a - b) for a, b in zip(ours, theirs)) < TOLERANCE, label
        expected = PROMPTS["BlurbsClusteringS2S"] if (view, version) == ("s2s", "legacy") else PROMPTS["Clustering"]
        assert set(frame.prompt) == {expected}, label
    # The prompt matters here: without it the same model scores otherwise.
    unprompted, frame = _ours(folder, {"spec": str(prompted), "prompt": ""}, protocol, own_cache("none"))
    assert max(abs(a - b) for a, b in zip(unprompted, theirs)) > 1e-6
    assert frame.model.iloc[0].endswith("-no-prompt") and set(frame.prompt) == {""}


def test_prompted_and_unprompted_runs_stay_apart_in_cache_and_store(prompted, demo, tmp_path):
    store, cache = tmp_path / "results.jsonl", tmp_path / "cache"
    kwargs = dict(configurations=["minibatch_kmeans:none"], cache_dir=cache, results=store, progress=False,
                  log=lambda m: None, limit_splits=2)
    first = run_grid([demo["s2s"]], [str(prompted), {"spec": str(prompted), "prompt": ""}], **kwargs)
    assert first.model.nunique() == 2 and first.model_identity.nunique() == 2
    assert len(list((cache / "embeddings").iterdir())) == 2
    messages = []
    again = run_grid([demo["s2s"]], [str(prompted)], **{**kwargs, "log": messages.append})
    assert not any("encoded" in m for m in messages)  # every cell came from the store
    assert sorted(again.v_measure) == sorted(first[first.model == again.model.iloc[0]].v_measure)


def test_bad_prompt_backend_and_dtype_options_are_one_line_before_encoding(prompted, demo, tmp_path):
    def refused(model, match):
        with pytest.raises(UserError, match=match) as info:
            run_grid([demo["s2s"]], [model], configurations=["minibatch_kmeans:none"], cache_dir=tmp_path,
                     progress=False, log=lambda m: None)
        assert "\n" not in str(info.value)

    refused({"spec": str(prompted), "prompt_name": "Retrieval"}, "has no prompt named 'Retrieval'")
    refused({"spec": str(prompted), "prompt": "a", "prompt_name": "query"}, "given together")
    refused({"spec": str(prompted), "backend": "tensorrt"}, "backend='tensorrt' is not one of")
    refused({"spec": str(prompted), "dtype": "float16", "device": "cpu"}, "dtype=float16 needs a CUDA GPU")
    refused({"spec": str(prompted), "dtype": "int4"}, "dtype='int4' is not one of")
    refused({"spec": str(prompted), "backend": "onnx", "dtype": "bfloat16"}, "leave one of them out")
    refused({"spec": str(prompted), "dtype": "int8"}, "dtype=int8 quantizes the ONNX export")
    refused({"spec": str(prompted), "layer": 1, "prompt": "x"}, "layer= mean-pools")
    refused({"spec": "tfidf-lsa", "prompt": "x"}, "does not take prompt=x")
    refused("mteb:no-such-org/no-such-model", "MTEB's model registry does not know this model")
    refused({"spec": "mteb:intfloat/multilingual-e5-small", "prompt": "x"}, "does not take prompt=x")


def test_a_backend_that_cannot_be_imported_is_one_line(prompted, demo, tmp_path, monkeypatch):
    import sys

    # Whether OpenVINO is installed or not: here it cannot be imported (None in sys.modules makes
    # any import of it fail), so the test runs everywhere instead of skipping where it is installed.
    monkeypatch.setitem(sys.modules, "optimum.intel.openvino", None)
    with pytest.raises(UserError, match=r"backend=openvino needs optimum.intel.openvino") as info:
        run_grid([demo["s2s"]], [{"spec": str(prompted), "backend": "openvino"}],
                 configurations=["minibatch_kmeans:none"], cache_dir=tmp_path, progress=False, log=lambda m: None)
    assert "\n" not in str(info.value)


def test_a_prompt_that_leaves_no_room_is_refused_and_cut_text_is_counted(tiny_sentence_transformer, demo_datasets,
                                                                         tmp_path, capsys):
    from tecb_eval.grid.run import run_grid

    data = demo_datasets / "tenkgnad-clustering-s2s"
    long_prompt = "Ordne den Text ein " * 20
    argv = run_args(data, tmp_path / "r.jsonl", tmp_path / "cache", "--limit-splits", "1")
    argv[argv.index("tfidf-lsa")] = f"{tiny_sentence_transformer},prompt={long_prompt}"
    error = eval_error(capsys, argv)
    assert "leaves no room for the text" in error and not (tmp_path / "r.jsonl").exists()
    said = []
    run_grid([data], [{"spec": str(tiny_sentence_transformer), "prompt": "Ordne den Text ein " * 5}],
             configurations=["minibatch_kmeans:none"], limit_splits=1, progress=False, log=said.append,
             cache_dir=tmp_path / "cache2")
    notes = [line for line in said if "were cut" in line]
    assert len(notes) == 1 and "tokens not encoded" in notes[0], said


@pytest.fixture(scope="module")
def tiny_bert_st(tmp_path_factory, demo):
    """A sentence-transformers model around a tiny random BERT (mean pooling, Normalize)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    root = tmp_path_factory.mktemp("tiny-bert")
    save_tiny_bert(root / "bert", SPECIAL_TOKENS + [w for w in _vocabulary([demo["s2s"]]) if w != "[UNK]"])
    model = SentenceTransformer(modules=[Transformer(str(root / "bert"), max_seq_length=48), Pooling(32, "mean"),
                                         Normalize()], device="cpu", prompts={"Clustering": "Thema: "})
    model.save(str(root / "st"), create_model_card=False)
    return root / "st"


@pytest.fixture(scope="module")
def onnx_encoders(tiny_bert_st, tmp_path_factory):
    """The tiny model on ONNX Runtime, float and int8, each exported once for the module (an export
    takes tens of seconds): made from an empty working directory, whose contents afterwards are
    recorded for the test that the export leaves it as it was."""
    here = tmp_path_factory.mktemp("cwd")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(here)
        made = {"float": encoders.get_encoder(str(tiny_bert_st), backend="onnx"),
                "int8": encoders.get_encoder(str(tiny_bert_st), backend="onnx", dtype="int8")}
        bound = made["int8"].for_task(_metadata("BlurbsClusteringS2S", "v2"))
        made["encoded"] = bound.encode(["Der kleine Prinz", "Ein Kochbuch"])
        made["float"].encode(["Der kleine Prinz"])  # exported here too
        made["left"] = sorted(p.name for p in here.iterdir())
    return made


def _grid_of_spec(model_spec, loaded, folder, cache):
    """``run_grid`` of the model as a spec, on 2 splits, into ``cache``. The vectors of ``loaded``
    (the same model and options, exported already) are stored under its identity first, so the
    spec's run reads them and exports nothing again (tests/test_onnx_backend.py: a grid whose texts
    are cached loads no model); what the spec itself decides (its name and columns) is its own."""
    kwargs = dict(configurations=["minibatch_kmeans:none"], cache_dir=cache, progress=False, log=lambda m: None,
                  limit_splits=2)
    first = run_grid([folder], [loaded], **kwargs)
    frame = run_grid([folder], [model_spec], **kwargs)
    assert set(frame.model_identity) == set(first.model_identity), (frame.model_identity, first.model_identity)
    return frame


@pytest.mark.slow
def test_onnx_int8_runs_the_quantized_export_under_its_own_identity(tiny_bert_st, onnx_encoders, demo, tmp_path):
    import onnx

    texts = ["Der kleine Prinz", "Ein Kochbuch für Studenten", "Geschichte des Römischen Reiches und mehr"]
    metadata = _metadata("BlurbsClusteringS2S", "v2")
    float_encoder = onnx_encoders["float"].for_task(metadata)
    int8_encoder = onnx_encoders["int8"].for_task(metadata)
    assert int8_encoder.identity == float_encoder.identity + "|dtype=int8"
    runs = int8_encoder.model[0].model.model_path
    ops = {node.op_type for node in onnx.load(str(runs)).graph.node}
    assert runs.name == "model.int8.onnx" and {"DynamicQuantizeLinear", "MatMulInteger"} <= ops, ops
    a, b = float_encoder.encode(texts), int8_encoder.encode(texts)
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert not np.array_equal(a, b) and cosine.min() > 0.9  # quantized: near the float vectors, not them
    frame = _grid_of_spec({"spec": str(tiny_bert_st), "backend": "onnx", "dtype": "int8"}, onnx_encoders["int8"],
                          demo["s2s"], tmp_path)
    assert set(frame.dtype) == {"int8"} and frame.model.iloc[0].endswith("-onnx-int8")


@pytest.mark.slow
def test_onnx_backend_runs_the_transformer_on_onnx_runtime(tiny_bert_st, onnx_encoders, demo, tmp_path):
    texts = ["Der kleine Prinz", "Ein Kochbuch für Studenten", "Geschichte des Römischen Reiches und mehr"]
    metadata = _metadata("BlurbsClusteringS2S", "v2")
    torch_encoder = encoders.get_encoder(str(tiny_bert_st)).for_task(metadata)
    onnx_encoder = onnx_encoders["float"].for_task(metadata)
    assert onnx_encoder.prompt == torch_encoder.prompt == "Thema: "  # prompts stay sentence-transformers' own
    assert onnx_encoder.identity.startswith(torch_encoder.identity) and "|backend=onnx" in onnx_encoder.identity
    assert type(onnx_encoder.model[0].model).__name__ == "OrtTransformer"
    a, b = torch_encoder.encode(texts), onnx_encoder.encode(texts)
    assert np.abs(a - b).max() < 1e-4
    frame = _grid_of_spec({"spec": str(tiny_bert_st), "backend": "onnx"}, onnx_encoders["float"], demo["s2s"],
                          tmp_path)
    assert set(frame.backend) == {"onnx"} and frame.model.iloc[0].endswith("-onnx")


@pytest.mark.slow
def test_mteb_model_weights_missing_offline_is_one_line(demo, tmp_path):
    """A model MTEB's registry knows whose weights are not in the (empty) Hugging Face cache, with
    the Hub switched off the way huggingface_hub is switched off: one line, nothing loaded."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")}
    code = "from tecb_eval.cli import main; raise SystemExit(main(['run', '--data', %r, '--model', " \
           "'mteb:intfloat/multilingual-e5-small', '--results', %r, '--quiet']))"
    done = subprocess.run([sys.executable, "-c", code % (str(demo["s2s"]), str(tmp_path / "r.jsonl"))], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "not in the local Hugging Face cache" in lines[0], done.stderr
    assert not (tmp_path / "r.jsonl").exists()


def test_bfloat16_on_cpu_is_its_own_identity_with_float32_vectors_close_to_float32s():
    texts = ["Der kleine Prinz", "Ein Kochbuch für Studenten", "Geschichte des Römischen Reiches"]
    full = encoders.get_encoder("minilm-l6", device="cpu")
    half = encoders.get_encoder("minilm-l6", device="cpu", dtype="bfloat16")
    assert half.identity == full.identity + "|dtype=bfloat16" and "dtype" not in full.identity
    a, b = full.encode(texts), half.encode(texts)
    assert b.dtype == np.float32 and b.shape == a.shape
    cosine = np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cosine.min() > 0.99 and not np.array_equal(a, b)


def test_cli_model_options_take_prompts_with_commas_and_defaults_where_taken():
    import argparse

    from tecb_eval.cli.options import encoding_defaults, parse_model

    assert parse_model("minilm-l6,dtype=bfloat16,prompt=Titel, kurz: ") == {
        "spec": "minilm-l6", "dtype": "bfloat16", "prompt": "Titel, kurz: "}
    args = argparse.Namespace(model=["minilm-l6", "tfidf-lsa", "mteb:intfloat/multilingual-e5-small"],
                              prompt="query: ", device="cpu", dtype=None)
    defaults = encoding_defaults(args)
    assert parse_model("minilm-l6", defaults) == {"spec": "minilm-l6", "prompt": "query: ", "device": "cpu"}
    assert parse_model("minilm-l6,prompt_name=query", defaults) == {
        "spec": "minilm-l6", "prompt_name": "query", "device": "cpu"}
    assert parse_model("tfidf-lsa", defaults) == "tfidf-lsa"
    assert parse_model("mteb:intfloat/multilingual-e5-small", defaults) == {
        "spec": "mteb:intfloat/multilingual-e5-small", "device": "cpu"}
    with pytest.raises(UserError, match="--prompt x: none of the models takes it"):
        encoding_defaults(argparse.Namespace(model=["tfidf-lsa"], prompt="x", device=None, dtype=None))


@pytest.mark.slow
def test_an_int8_export_leaves_the_working_directory_as_it_was(onnx_encoders):
    """ONNX Runtime's quantization tooling saves `sym_shape_infer_temp.onnx` and uuid-named `.data`
    files to a relative path (its symbolic shape inference, when incomplete): run from an empty
    folder (the module's exports, :func:`onnx_encoders`), the export and its int8 quantization
    must leave it empty."""
    assert onnx_encoders["encoded"].shape[0] == 2
    assert onnx_encoders["int8"].model[0].model.model_path.name == "model.int8.onnx"
    assert onnx_encoders["left"] == []

"""Models behind an OpenAI-compatible embeddings API (``openai:NAME``), against a real HTTP server
on 127.0.0.1 (tests/openai_server.py) that serves the offline MiniLM: the same scores as MiniLM
in-process, paid for once (a rerun, a second seed, a resumed run send no text twice but one cached
text asked again to check the server still serves the same model), a provider's
habits (429 with Retry-After, items out of order, base64, 401, answers that are wrong), and the key
in no file and no output."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from api_runs import DATASET, KEY, KEY_VARIABLE, api_model, eval_error, run, run_argv, shards
from openai_server import EmbeddingServer, TOO_LONG  # noqa: F401 (the wording the client parses)

from helpers import store_rows

# Both runs cluster the same texts at the same seed. float32 in base64 round-trips exactly, but the
# server encodes the client's batches of 8, padded otherwise than minilm-l6's own batches in-process,
# so a few vectors differ in the 7th decimal (one of the demo's 73, by 1.3e-7); k-means gives the
# same labels on them, so the scores agree to rounding.
V_MEASURE_TOLERANCE = 1e-6


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    return KEY


@pytest.fixture(scope="module")
def served(minilm_encoder, demo_datasets, tmp_path_factory):
    """One grid run of MiniLM served over HTTP, its key in the environment, with a price: the
    store, the rows this run wrote, the cache, the export, the server and what was printed.
    Read-only: a test that runs again on this store or cache runs on a copy."""
    folder = tmp_path_factory.mktemp("api-run")
    mp = pytest.MonkeyPatch()
    mp.setenv(KEY_VARIABLE, KEY)
    with EmbeddingServer(minilm_encoder.encode, key=KEY) as server:
        model = api_model(server, price_per_million_tokens="0.02")
        code, output = run(run_argv(demo_datasets / DATASET, model, folder, "--out", str(folder / "export")))
        rows = store_rows(folder / "results.jsonl") if code == 0 else []
        requests = server.requests
        texts = list(server.texts)
        seen = b"".join(server.bodies).decode() + "".join(server.headers)
        yield {"folder": folder, "code": code, "output": output, "rows": rows, "requests": requests, "texts": texts,
               "server": server, "model": model, "seen": seen}
    mp.undo()


def test_minilm_served_over_http_scores_as_minilm_in_process(served, demo_datasets, tmp_path):
    assert served["code"] == 0, served["output"]
    code, output = run(run_argv(demo_datasets / DATASET, "minilm-l6", tmp_path))
    assert code == 0, output
    ours = {(r["split"], r["seed"]): r["v_measure"] for r in served["rows"]}
    theirs = {(r["split"], r["seed"]): r["v_measure"] for r in store_rows(tmp_path / "results.jsonl")}
    assert ours.keys() == theirs.keys() and len(ours) == 2
    for row, score in theirs.items():
        assert abs(ours[row] - score) <= V_MEASURE_TOLERANCE, (row, ours[row], score)


def test_a_rerun_sends_nothing_and_a_second_seed_only_the_canary(served, demo_datasets, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    server = served["server"]
    assert len(served["texts"]) == len(set(served["texts"])) > 0  # each text sent once
    folder = tmp_path / "rerun"
    shutil.copytree(served["folder"], folder)  # its store and cache, as they were after the run
    code, output = run(run_argv(demo_datasets / DATASET, served["model"], folder))
    assert code == 0, output
    assert server.requests == served["requests"]  # every cell stored: nothing to encode, nothing asked
    code, output = run(run_argv(demo_datasets / DATASET, served["model"], folder, "--seed", "7"))
    assert code == 0, output
    # Every vector came from the cache; the run asked again for one cached text only (its canary).
    assert server.requests == served["requests"] + 1 and len(server.texts) == len(served["texts"]) + 1
    assert server.texts[-1] in served["texts"]
    rows = store_rows(folder / "results.jsonl")
    seven = [r for r in rows if r["seed"] == 7]
    assert seven and all(r["api_requests"] == 1 and r["api_cache_hits"] > 0 for r in seven)


def test_rows_record_tokens_requests_and_cost(served):
    rows = store_rows(served["folder"] / "results.jsonl")
    server = served["server"]
    first = [r for r in rows if r["seed"] == 42]
    assert first
    for row in first:
        assert row["api_requests"] == served["requests"] and row["api_retries"] == 0
        assert row["api_texts_sent"] == len(served["texts"]) and row["api_cache_hits"] == 0
        assert row["api_tokens"] > 0 and row["price_per_million_tokens"] == 0.02
        assert row["api_cost"] == pytest.approx(row["api_tokens"] * 0.02 / 1e6)
    # The cache keeps what the server reported, shared out over each request's texts; a row
    # counts its split's texts (the two splits share some, and cover all).
    from openai_server import tokens

    from tecb_eval.grid.cache import EmbeddingStore

    reported = sum(tokens(t) for t in served["texts"])
    stored = EmbeddingStore(served["folder"] / "cache", first[0]["model_identity"]).embeddings()
    assert stored.tokens_of(served["texts"]) == pytest.approx(reported, rel=1e-9)
    assert all(r["api_tokens"] < reported for r in first) and sum(r["api_tokens"] for r in first) >= reported
    assert "texts leave this machine" in served["output"] and server.url.split("//")[1] in served["output"]
    assert served["output"].count("texts leave this machine") == 1


def test_the_table_shows_cost_beside_quality(served):
    code, output = run(["table", str(served["folder"] / "results.jsonl"), "--table", "2"])
    assert code == 0, output
    assert "cost" in output.lower()


def test_the_key_is_in_no_file_and_no_output(served, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    store = served["folder"] / "results.jsonl"
    outputs = [served["output"]]
    for argv in (["table", str(store)], ["recommend", str(store), "--resamples", "99"],
                 ["report", str(store), "--out", str(tmp_path / "report"), "--no-figures"],
                 ["export", str(store), "--out", str(tmp_path / "export")]):
        code, output = run(argv)
        assert code == 0, output
        outputs.append(output)
    assert "OpenAIBackend" in outputs[2]  # recommend's snippet builds BERTopic's OpenAI backend
    files = [p for root in (served["folder"], tmp_path) for p in root.rglob("*") if p.is_file()]
    assert len(files) > 10 and shards(served["folder"] / "cache")
    assert not [str(p) for p in files if KEY.encode() in p.read_bytes()]
    assert not [o for o in outputs if KEY in o]
    assert f"Bearer {KEY}" in served["seen"]  # the server did get the key: the search above can find it


def test_recommends_snippet_reads_the_key_from_the_variable_the_run_read(served):
    # The run named its own variable (api_key_env): the snippet must not send OPENAI_API_KEY's key instead.
    store = served["folder"] / "results.jsonl"
    assert {json.loads(line)["api_key_env"] for line in store.read_text().splitlines()} == {KEY_VARIABLE}
    code, output = run(["recommend", str(store), "--resamples", "99"])
    assert code == 0, output
    assert f"api_key=os.environ[{KEY_VARIABLE!r}]" in output and "import os" in output


def test_credentials_in_the_base_url_are_used_and_never_shown(minilm_encoder, key):
    from tecb_data.errors import UserError
    from tecb_eval.models.encoders import get_encoder

    said = []
    with EmbeddingServer(minilm_encoder.encode) as server:
        url = server.url.replace("http://", "http://tecbuser:tecbPassw0rd@")
        encoder = get_encoder("openai:minilm", base_url=url, api_key_env=KEY_VARIABLE)
        encoder.log = said.append
        encoder.encode(["ein Text"])
        server.nan = True
        with pytest.raises(UserError) as error:
            encoder.encode(["noch ein Text"])
    assert "Basic " in server.headers[0]  # httpx sent them, as the URL asks
    shown = [encoder.identity, str(error.value), *said]
    assert server.url in encoder.identity and not [s for s in shown if "tecbPassw0rd" in s or "tecbuser" in s]


def test_every_third_request_throttled_the_run_finishes_and_says_how_long_it_waited(
        minilm_encoder, demo_datasets, tmp_path, key):
    with EmbeddingServer(minilm_encoder.encode) as server:
        server.throttle_every, server.retry_after = 3, "0.05"
        code, output = run(run_argv(demo_datasets / DATASET, api_model(server), tmp_path))
    assert code == 0, output
    waits = [line for line in output.splitlines() if "HTTP 429" in line]
    assert waits and all("after waiting" in line and line.rstrip().endswith(" s") for line in waits)
    seconds = [float(line.rsplit("waiting ", 1)[1].split()[0]) for line in waits]
    assert min(seconds) >= 0.04  # Retry-After was honoured
    rows = store_rows(tmp_path / "results.jsonl")
    assert rows and rows[0]["api_retries"] == len(waits) and rows[0]["api_waited_s"] >= sum(seconds) - 0.01
    assert len(server.texts) == len(set(server.texts))


def test_items_out_of_order_and_base64_or_float_give_the_same_vectors(minilm_encoder, key):
    from tecb_eval.models.encoders import get_encoder

    texts = [f"Nachricht {i}: " + "Wort " * (i % 5) for i in range(20)]
    expected = minilm_encoder.encode(texts)
    got = {}
    with EmbeddingServer(minilm_encoder.encode) as server:
        for name, fmt, reverse in (("base64", "base64", False), ("float", "float", False),
                                   ("reversed", "base64", True)):
            server.reverse = reverse
            encoder = get_encoder("openai:minilm", base_url=server.url, api_key_env=KEY_VARIABLE, batch_size=7,
                                  concurrency=3, encoding_format=fmt)
            encoder.log = lambda message: None
            got[name] = encoder.encode(texts)
        assert server.formats.count("float") == 3 and server.formats.count("base64") == 6
    assert got["base64"].dtype == np.float32
    np.testing.assert_array_equal(got["base64"], got["float"])
    np.testing.assert_array_equal(got["base64"], got["reversed"])
    np.testing.assert_allclose(got["base64"], expected, atol=1e-6)


@pytest.mark.parametrize("fault, said", [
    ("wrong_count", "returned 7 vectors for 8 texts"),
    ("wrong_dimension", "383 dimensions, not dimensions=384"),
    ("nan", "NaN or infinity"),
    ("not_json", "not JSON"),
])
def test_a_wrong_answer_is_one_line_naming_batch_and_model_and_nothing_is_cached(
        fault, said, minilm_encoder, demo_datasets, tmp_path, capsys, key):
    with EmbeddingServer(minilm_encoder.encode) as server:
        setattr(server, fault, True)
        error = eval_error(capsys, run_argv(demo_datasets / DATASET, api_model(server, dimensions=384,
                                                                                concurrency=1), tmp_path))
    assert said in error and "openai:minilm" in error and "batch 1 of " in error, error
    assert "nothing of this batch was cached" in error
    assert not shards(tmp_path / "cache") and not (tmp_path / "results.jsonl").exists()


def test_a_refused_key_is_one_line_naming_its_variable(minilm_encoder, demo_datasets, tmp_path, capsys, key):
    with EmbeddingServer(minilm_encoder.encode, key="sk-another-key") as server:
        error = eval_error(capsys, run_argv(demo_datasets / DATASET, api_model(server), tmp_path))
    assert "HTTP 401" in error and KEY_VARIABLE in error and KEY not in error and KEY[-4:] not in error, error


def test_a_missing_key_is_one_line_before_anything_is_sent(demo_datasets, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    error = eval_error(capsys, run_argv(demo_datasets / DATASET, f"openai:m,api_key_env={KEY_VARIABLE}", tmp_path))
    assert f"set the environment variable {KEY_VARIABLE}" in error


def test_a_server_that_stops_mid_run_then_resume_sends_no_text_twice(
        minilm_encoder, demo_datasets, tmp_path, capsys, key):
    with EmbeddingServer(minilm_encoder.encode) as server:
        server.stop_after = 3
        model = api_model(server, max_retries=1, concurrency=2)
        error = eval_error(capsys, run_argv(demo_datasets / DATASET, model, tmp_path))
        port, first = server.port, list(server.texts)
    assert "could not reach" in error and "rerun to resume" in error, error
    assert len(shards(tmp_path / "cache")) == server.answered >= 3  # every answered batch was stored
    with EmbeddingServer(minilm_encoder.encode, port=port) as again:
        code, output = run(run_argv(demo_datasets / DATASET, model, tmp_path))
        second = list(again.texts)
    assert code == 0, output
    sent = first + second
    # No text sent twice but the canary (one cached text the resumed run asked for again).
    assert second and len(sent) == len(set(sent)) + 1 and second[0] in first


@pytest.mark.parametrize("truncate", ["refuse", "end"])
def test_a_text_too_long_is_refused_with_its_index_or_cut(truncate, minilm_encoder, key):
    from tecb_data.errors import UserError
    from tecb_eval.models.encoders import get_encoder

    texts = ["kurz eins", "kurz zwei", "lang " * 30, "kurz drei"]
    with EmbeddingServer(minilm_encoder.encode) as server:
        server.max_tokens = 20
        encoder = get_encoder("openai:minilm", base_url=server.url, api_key_env=KEY_VARIABLE, batch_size=4,
                              truncate=truncate)
        encoder.log = lambda message: None
        saved = []
        if truncate == "refuse":
            with pytest.raises(UserError, match=r"text 2 .* is longer than minilm takes .*truncate=end"):
                encoder.encode_batches(texts, lambda batch, vectors, tokens: saved.extend(batch))
            assert sorted(saved) == ["kurz eins", "kurz zwei"]  # the rest of the batch was paid for and kept
        else:
            encoder.encode_batches(texts, lambda batch, vectors, tokens: saved.extend(batch))
            assert sorted(saved) == sorted(texts) and encoder.usage.truncated == 1
            assert "|truncate=end" in encoder.identity


def test_a_scheduler_run_encodes_in_this_process_and_clusters_on_the_workers(
        minilm_encoder, demo_datasets, tmp_path, key, kept_environment):
    import distributed

    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                                  silence_logs=40) as cluster, \
            EmbeddingServer(minilm_encoder.encode) as server:
        code, output = run(run_argv(demo_datasets / DATASET, api_model(server), tmp_path, "--scheduler",
                                    cluster.scheduler_address))
    assert code == 0, output
    rows = store_rows(tmp_path / "results.jsonl")
    assert len(rows) == 2 and rows[0]["api_requests"] == server.answered > 0

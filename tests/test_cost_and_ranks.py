"""Cost where people compare, and ties where ranks are printed: an API model's tokens and cost on
the report's leaderboard and model page, in results.csv, under Table 2 and in `recommend`; models
whose figures print alike share a rank ("1=") on the leaderboard and in `recommend`; a pick whose
AMI interval holds 0 is said to barely beat chance."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re

import pytest

from apirows import PRICE, api_copy, split_tokens
from helpers import store_rows, write_store

API = "api-small"


def run(argv: list[str]) -> str:
    from tecb_eval.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(argv) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def tied_store(small_store, tmp_path_factory):
    """tfidf-lsa, and the same scores as an API model's (a tie), with tokens and a price."""
    rows = store_rows(small_store)
    return write_store(tmp_path_factory.mktemp("tied") / "results.jsonl", rows + api_copy(rows, API))


def expected_usage(rows: list[dict]) -> tuple[float, float]:
    tokens = sum(split_tokens(s) for s in {r["split"] for r in rows})
    return tokens, tokens * PRICE / 1e6


@pytest.fixture(scope="module")
def site(tied_store, tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "report"
    run(["report", str(tied_store), "--out", str(out), "--no-figures"])
    return out


def _cells(html: str, css: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(rf'<td class="[^"]*\b{css}\b[^"]*"[^>]*>(.*?)</td>', html)]


def test_the_leaderboard_shares_the_rank_of_a_tie_and_shows_cost_beside_quality(site, small_store):
    html = (site / "index.html").read_text(encoding="utf-8")
    assert _cells(html, "rank") == ["1=", "1="]
    assert _cells(html, "margin")[0] == "tied"
    tokens, cost = expected_usage(store_rows(small_store))
    rows = re.findall(r"<tr>\s*<td class=\"num rank\".*?</tr>", html, flags=re.DOTALL)
    api_row = next(r for r in rows if f">{API}</a>" in r)
    local_row = next(r for r in rows if ">tfidf-lsa</a>" in r)
    assert f"{tokens:,.0f} tokens, cost {cost:.6g}" in _cells(api_row, "cost")[0]
    assert _cells(local_row, "cost") == ["–"]  # a model that runs here shows no cost, not 0


def test_the_model_page_of_an_api_model_shows_its_cost_on_each_dataset(site, small_store):
    tokens, cost = expected_usage(store_rows(small_store))
    page = (site / "models" / f"{API}.html").read_text(encoding="utf-8")
    assert f"{tokens:,.0f} tokens, cost {cost:.6g}" in page and f"at {PRICE} per million tokens" in page
    assert "API cost" not in (site / "models" / "tfidf-lsa.html").read_text(encoding="utf-8")


def test_results_csv_has_each_api_models_tokens_and_cost_and_none_for_a_local_model(tied_store, small_store):
    text = run(["table", str(tied_store), "--table", "full", "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(text)))
    tokens, cost = expected_usage(store_rows(small_store))
    api = [r for r in rows if r["transformer"] == API]
    local = [r for r in rows if r["transformer"] == "tfidf-lsa"]
    assert api and local
    assert {float(r["api_tokens"]) for r in api} == {tokens}
    assert [float(r["api_cost"]) for r in api] == pytest.approx([cost] * len(api))
    assert {(r["api_tokens"], r["api_cost"]) for r in local} == {("", "")}
    markdown = run(["table", str(tied_store), "--table", "full"])
    assert f"{tokens:,.0f}" in markdown and f"{cost:.6g}" in markdown  # text, not a figure x100


def test_table2_says_each_api_models_total_over_the_splits(tied_store, small_store):
    tokens, cost = expected_usage(store_rows(small_store))
    text = run(["table", str(tied_store), "--table", "2"])
    assert f"{API} on BlurbsClusteringS2S {tokens:,.0f} tokens, cost {cost:.6g} over 4 splits" in text


def test_recommend_shows_cost_of_the_pick_and_runner_up_and_a_shared_rank(tied_store, small_store):
    tokens, cost = expected_usage(store_rows(small_store))
    text = run(["recommend", str(tied_store), "--resamples", "99"])
    assert f"API cost: {tokens:,.0f} tokens, cost {cost:.6g} for the texts of the 4 splits compared" in text
    ranked = next(line for line in text.splitlines() if "pipelines ranked" in line)
    assert f"1=. {API}, none reduction, minibatch_kmeans" in ranked and "1=. tfidf-lsa, none" in ranked
    assert f"({tokens:,.0f} tokens, cost {cost:.6g})" in ranked
    record = json.loads(run(["recommend", str(tied_store), "--resamples", "99", "--format", "json"]))
    best = record["recommendations"][0]
    assert best["model"] == API and best["usage"]["tokens"] == tokens
    assert best["runner_up"]["usage"] is None  # tfidf-lsa runs here: no cost, not 0
    # JSON readers sort and compare ranks as numbers: the shared rank is 1 for both, flagged as shared.
    assert [(p["rank"], p["rank_tied"]) for p in best["pipelines"][:2]] == [(1, True), (1, True)]
    assert all(type(p["rank"]) is int and type(p["rank_tied"]) is bool for p in best["pipelines"])


def test_shared_ranks_as_numbers_for_machine_readable_outputs_and_as_text_for_people():
    from tecb_eval.reports import tables

    values = [0.41234, 0.41231, 0.40, 0.39, 0.39001]
    assert tables.shared_rank_numbers(values) == [(1, True), (1, True), (3, False), (4, True), (4, True)]
    assert tables.shared_ranks(values) == ["1=", "1=", "3", "4=", "4="]


def test_a_pick_whose_ami_interval_holds_zero_is_said_to_barely_beat_chance(small_store, tmp_path):
    rows = store_rows(small_store)
    # AMI around 0 on the splits: some below, some above, so its interval holds 0.
    splits = sorted({r["split"] for r in rows})
    for row in rows:
        row["ami"] = (-0.02, 0.03, -0.01, 0.02)[splits.index(row["split"]) % 4]
    store = write_store(tmp_path / "results.jsonl", rows)
    text = run(["recommend", str(store), "--resamples", "99"])
    assert "barely beat chance" in text, text
    assert "barely beat chance" not in run(["recommend", str(write_store(tmp_path / "clear.jsonl", store_rows(small_store))),
                                            "--resamples", "99"])


def test_a_results_csv_with_cost_columns_is_read_back_as_a_reference(small_store, tmp_path):
    from tecb_eval.clustering.algorithms import PAPER_CONFIGURATIONS
    from tecb_eval.clustering.registry import TABLE2_CONFIGURATION
    from tecb_eval.reports import tables

    # Every paper configuration, as a full grid writes them: a reference is blocks of all 14.
    base = [r for r in store_rows(small_store) if (r["algorithm"], r["reduction"]) == TABLE2_CONFIGURATION]
    rows = [{**r, "algorithm": a, "reduction": d, "v_measure": r["v_measure"] * (1 - i / 100)}
            for i, (a, d) in enumerate(PAPER_CONFIGURATIONS) for r in base]
    # The API model also ran a dataset the local one did not: its column (an MTEB task name the
    # authors' file spells otherwise) is empty on the local model's rows.
    other = [{**r, "mteb_name": "TenKGnadClusteringS2S", "dataset": "tenkgnad-s2s",
              "dataset_fingerprint": "f" * len(r["dataset_fingerprint"])} for r in rows]
    store = write_store(tmp_path / "results.jsonl", rows + api_copy(rows + other, API))
    results_csv = tmp_path / "results.csv"
    results_csv.write_text(run(["table", str(store), "--table", "full", "--format", "csv"]), encoding="utf-8")
    written = list(csv.DictReader(io.StringIO(results_csv.read_text(encoding="utf-8"))))
    assert list(written[0])[-2:] == ["api_tokens", "api_cost"]
    reference = tables.read_reference(results_csv)
    expected = [(r["transformer"], column, float(r[column])) for r in written
                for column in ("BlurbsClusteringS2S", "TenKGnadClusteringS2S") if r[column]]
    assert len(expected) == 3 * len(PAPER_CONFIGURATIONS)  # the local model has no TenKGnad cells
    got = list(zip(reference.model, reference.mteb_name, reference.v_measure))
    assert [g[:2] for g in got] == [e[:2] for e in expected]
    assert [g[2] for g in got] == pytest.approx([e[2] for e in expected])

"""The German Reddit views as MTEB tasks, and what `compare` on the fast protocol can conclude.

The German Reddit views are our own MTEB tasks, in German, never MTEB's English
``RedditClusteringP2P`` (whose v2 embeds 4 % of the texts). Checked against the real mteb package
on Reddit folders built by tecb_data from a filled rehydration cache (no network, no praw call:
every id is already in the cache).

``compare`` on the fast protocol draws no conclusion the draws cannot carry, refuses a
resample count that gives no interval, and says in one line what is wrong with ``--seed=-1`` or a
model that only another version of the store holds.
"""

from __future__ import annotations

import io
import json
import random

import numpy as np
import pandas as pd
import pytest

import mteb  # noqa: E402

from helpers import draws_in_this_process  # noqa: E402
from helpers import b36  # noqa: E402
from tecb_data import layout  # noqa: E402
from tecb_data.sources.reddit import build_from_ids  # noqa: E402
from tecb_data.sources.reddit_cache import RehydrationCache  # noqa: E402
from tecb_data.sources.reddit_text import Fetched  # noqa: E402
from tecb_eval.cli import main  # noqa: E402
from tecb_eval.grid.run import run_grid  # noqa: E402
from tecb_eval.mteb import encoders as mteb_encoders, tasks as mteb_bridge  # noqa: E402
from tecb_eval.mteb.encoders import HashingEncoder  # noqa: E402
from tecb_eval.mteb.sampling import fast_sample  # noqa: E402

# Both sides at one thread, MTEB's draws for our fast protocol made in this process (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("one_thread", "draws_here")
TOLERANCE = 1e-9
TOPICS = {
    "Fahrrad": "Fahrrad Kette Sattel Radweg Schaltung Reifen",
    "Kochen": "Rezept Pfanne Zwiebel Ofen Teig Gewürz",
    "Garten": "Tomaten Beet Rasen Kompost Gießkanne Hecke",
    "Finanzen": "Aktien Zinsen Sparplan Depot Rente Steuer",
    "Reisen": "Flug Hotel Koffer Strand Bahnfahrt Urlaub",
    "Musik": "Gitarre Konzert Album Schlagzeug Band Bühne",
    "Filme": "Kino Regisseur Drehbuch Serie Schauspieler Trailer",
    "Buecher": "Roman Autorin Kapitel Bibliothek Lesung Krimi",
    "Technik": "Laptop Prozessor Grafikkarte Linux Tastatur Akku",
    "Politik": "Bundestag Wahl Partei Koalition Gesetz Minister",
    "Fussball": "Tor Abseits Trainer Bundesliga Elfmeter Stadion",
    "Katzen": "Kater Futter Kratzbaum Tierarzt Schnurren Pfote",
}
PER_SUBREDDIT = 24


@pytest.fixture(scope="module")
def reddit(tmp_path_factory):
    """``reddit-clustering-s2s`` and ``-p2p`` as ``tecb-data`` builds them, from a cache that holds every id."""
    root = tmp_path_factory.mktemp("reddit")
    rng = random.Random(7)
    posts = []
    for s, (subreddit, words) in enumerate(sorted(TOPICS.items())):
        vocabulary = words.split()
        for i in range(PER_SUBREDDIT):
            item_id = b36(36 ** 5 + 1000 * s + i)
            title = f"{rng.choice(vocabulary)} und {rng.choice(vocabulary)}: Frage {i}"
            body = " ".join(rng.choice(vocabulary) for _ in range(12)) + f" (Beitrag {s}-{i})"
            posts.append(Fetched(item_id, subreddit, title, body, None, False))
    ids = root / "ids.txt"
    ids.write_text("id,subreddit\n" + "".join(f"{p.id},{p.subreddit}\n" for p in posts))
    with RehydrationCache(root / "cache") as cache:
        cache.start(refresh=False)
        cache.store_batch([p.id for p in posts], posts)
    build_from_ids(ids, root / "out", cache=root / "cache")
    return {view: root / "out" / f"reddit-clustering-{view}" for view in ("s2s", "p2p")}


# -- our own German tasks ------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["legacy", "v2"])
@pytest.mark.slow
def test_both_reddit_views_are_our_own_german_tasks_not_mtebs_english_ones(reddit, version):
    from mteb.abstasks.clustering import AbsTaskClustering
    from mteb.abstasks.clustering_legacy import AbsTaskClusteringLegacy

    mtebs_names = {t.metadata.name for t in mteb.get_tasks()}
    english = {type(mteb.get_task(mteb_bridge.task_name(n, version))) for n in ("RedditClusteringP2P", "RedditClustering")}
    for view, folder in sorted(reddit.items()):  # p2p first: the view MTEB has an English task of
        registry_name = layout.verify(folder)["mteb_name"]
        (task,) = mteb_bridge.mteb_tasks([folder], version=version)
        assert task.metadata.eval_langs == ["deu-Latn"] and task.metadata.languages == ["deu"]
        name = mteb_bridge.task_name(f"{registry_name}-DE", version)
        assert task.metadata.name == name and name not in mtebs_names
        assert type(task) not in english
        assert isinstance(task, AbsTaskClustering if version == "v2" else AbsTaskClusteringLegacy)
        assert task.metadata.dataset["path"] == str(folder)
        assert "German Reddit" in task.metadata.description
    # MTEB's own English task is untouched.
    assert mteb.get_task("RedditClusteringP2P").metadata.eval_langs == ["eng-Latn"]


def test_german_datasets_mteb_has_keep_mtebs_own_classes(demo_datasets):
    for name, folder in (("BlurbsClusteringS2S", "blurbs-clustering-s2s"), ("TenKGnadClusteringS2S", "tenkgnad-clustering-s2s")):
        for version in ("legacy", "v2"):
            (task,) = mteb_bridge.mteb_tasks([demo_datasets / folder], version=version)
            assert type(task) is type(mteb.get_task(mteb_bridge.task_name(name, version)))


def test_fast_protocol_on_reddit_p2p_embeds_every_text_as_our_v2_task_and_mteb_agree(reddit, tmp_path):
    import tecb_data

    bench = tecb_data.load(reddit["p2p"])
    texts = {t for split in bench.splits for t in split.texts}
    sample = fast_sample(bench, 42)
    # MTEB's English v2 embeds 4 % of the pooled texts; ours embeds all of them, once each.
    assert sorted(sample.texts) == sorted(texts)
    assert len(sample.bootstraps) == 10

    (task,) = mteb_bridge.mteb_tasks([reddit["p2p"]], version="v2")
    result = mteb.evaluate(mteb_encoders.MtebEncoder(HashingEncoder()), tasks=[task], cache=None,
                           show_progress_bar=False, encode_kwargs={"batch_size": 64})
    (task_result,) = result.task_results
    assert task_result.task_name == "RedditClusteringP2P-DE.v2"
    theirs = task_result.scores["test"][0]["v_measures"]["Level 0"]
    frame = run_grid([reddit["p2p"]], [HashingEncoder()], configurations=["minibatch_kmeans:none"], protocol="fast",
                     cache_dir=tmp_path, progress=False, log=lambda m: None)
    ours = frame.sort_values("split").v_measure.tolist()
    assert len(ours) == len(theirs) == 10 and max(abs(a - b) for a, b in zip(ours, theirs)) < TOLERANCE
    assert len(set(np.round(ours, 12))) > 1 and min(ours) > 0


@pytest.mark.slow
def test_export_writes_reddit_under_our_german_task_names(reddit, tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    for protocol in ("legacy", "fast"):
        assert main(["run", "--data", str(reddit["s2s"]), "--data", str(reddit["p2p"]), "--model", "tfidf-lsa",
                     "--config", "minibatch_kmeans:none", "--protocol", protocol, "--results", str(results),
                     "--cache-dir", str(tmp_path / "cache"), "--quiet", "--no-figure1"]) == 0
    capsys.readouterr()
    written = {}
    for protocol in ("legacy", "fast"):
        out = tmp_path / f"export-{protocol}"
        assert main(["export", str(results), "--out", str(out), "--protocol", protocol]) == 0, capsys.readouterr().err
        written[protocol] = {p.name: json.loads(p.read_text()) for p in (out / "mteb").rglob("*.json")
                             if p.name != "model_meta.json"}
    assert set(written["legacy"]) == {"RedditClusteringS2S-DE.json", "RedditClusteringP2P-DE.json"}
    assert set(written["fast"]) == {"RedditClusteringS2S-DE.v2.json", "RedditClusteringP2P-DE.v2.json"}
    for files in written.values():
        for data in files.values():
            assert data["scores"]["test"][0]["languages"] == ["deu-Latn"]
    # MTEB reads them back as our tasks.
    loaded = mteb.ResultCache(tmp_path / "export-fast" / "mteb").load_results(include_remote=False)
    (model,) = loaded.model_results
    assert {r.task_name for r in model.task_results} == {"RedditClusteringS2S-DE.v2", "RedditClusteringP2P-DE.v2"}


# -- what a comparison can conclude --------------------------------------------------------------
S2S = "TenKGnadClusteringS2S"
MODELS = [("hashing", HashingEncoder()), "tfidf-lsa"]


def _grid(data, models, results, cache, **kwargs):
    return run_grid([data], models, configurations=["minibatch_kmeans:none"], cache_dir=cache, results=results,
                    progress=False, log=lambda m: None, **kwargs)


@pytest.fixture(scope="module")
def store(demo_datasets, tmp_path_factory):
    """hashing and tfidf-lsa on the demo TenKGnad S2S, legacy (10 splits) and fast (10 draws)."""
    root = tmp_path_factory.mktemp("compare")
    data = demo_datasets / "tenkgnad-clustering-s2s"
    with draws_in_this_process():
        for protocol in ("legacy", "fast"):
            _grid(data, MODELS, root / "results.jsonl", root / "cache", protocol=protocol)
    return root / "results.jsonl"


def _compare(results, *extra):
    return main(["compare", str(results), "--model", "hashing", "--model", "tfidf-lsa", *extra])


def _one_line_error(capsys, code, *needles):
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("tecb-eval: error: "), captured.err
    for needle in needles:
        assert needle in captured.err, captured.err


@pytest.mark.slow
def test_fast_protocol_compare_gives_difference_and_spread_but_no_p_or_verdict(store, capsys):
    rows = pd.read_json(store, lines=True)
    fast = rows[(rows.protocol == "fast")].pivot_table(index="split", columns="model", values="v_measure")
    per_draw = (fast["hashing"] - fast["tfidf-lsa"]).tolist()
    assert len(per_draw) == 10 and len({round(x, 12) for x in per_draw}) > 1

    assert _compare(store, "--protocol", "fast", "--format", "csv") == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index("dataset")
    row = table.loc[S2S]
    assert row["difference"] == pytest.approx(sum(per_draw) / 10, abs=1e-6)
    assert row["spread"] == pytest.approx(pd.Series(per_draw).std(ddof=1), abs=1e-6)
    assert pd.isna(row["low"]) and pd.isna(row["high"]) and pd.isna(row["p_value"]) and pd.isna(row["holds"])
    assert not row["independent"]

    assert _compare(store, "--protocol", "fast") == 0
    out = capsys.readouterr().out
    (sentence,) = [line for line in out.splitlines() if line.startswith(f"{S2S}:")]
    assert "p =" not in sentence and "holds" not in sentence and "interval" in sentence
    assert "not independent evidence" in sentence and "10 bootstrap draws" in sentence
    assert "Fast protocol: sd is the SD over its bootstrap draws" in out

    # The legacy protocol's splits are independent: interval, p and verdict as before.
    assert _compare(store, "--protocol", "legacy", "--format", "csv") == 0
    legacy = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index("dataset").loc[S2S]
    assert legacy["low"] <= legacy["difference"] <= legacy["high"] and 0 < legacy["p_value"] <= 1
    # The verdict is the documented rule (tecb_eval/reports/compare.py): the interval excludes 0 and
    # p < 1 - confidence; not merely some boolean.
    rule = (legacy["low"] > 0 or legacy["high"] < 0) and legacy["p_value"] < 1 - legacy["confidence"]
    assert legacy["independent"] and isinstance(legacy["holds"], (bool, np.bool_)) and legacy["holds"] == rule


def test_table_markers_never_rank_on_fast_draws(store):
    from tecb_eval.reports import compare as comparing

    rows = pd.read_json(store, lines=True)
    marks = comparing.against_best(rows[rows.protocol == "fast"])
    assert sorted(marks.values()) == ["*", "="]


@pytest.mark.parametrize("extra, needles", [
    (["--resamples", "1"], ["--resamples 1", "at least 40", "--resamples 40 or more"]),
    (["--resamples", "39"], ["--resamples 39", "at least 40"]),
    (["--resamples", "0"], ["--resamples 0"]),
    (["--confidence", "0.99", "--resamples", "199"], ["--resamples 199", "99 % interval needs at least 200"]),
    (["--confidence", "nan"], ["--confidence nan", "between 0 and 1"]),
    (["--seed=-1"], ["--seed -1", "non-negative integer"]),
])
def test_settings_that_give_no_interval_are_one_line(store, capsys, extra, needles):
    _one_line_error(capsys, _compare(store, "--protocol", "legacy", *extra), *needles)


def test_the_fewest_resamples_that_give_an_interval_give_one(store, capsys):
    assert _compare(store, "--protocol", "legacy", "--resamples", "40", "--format", "csv") == 0
    row = pd.read_csv(io.StringIO(capsys.readouterr().out)).iloc[0]
    assert row["low"] < row["high"]


@pytest.mark.slow
def test_a_model_only_in_another_version_is_named_with_that_version(demo_datasets, tmp_path, capsys):
    data = demo_datasets / "tenkgnad-clustering-s2s"
    results, cache = tmp_path / "results.jsonl", tmp_path / "cache"
    _grid(data, MODELS, results, cache, limit_splits=3)
    _grid(data, ["tfidf-lsa"], results, cache, protocol="fast")  # newest: the fast protocol, tfidf-lsa alone
    _one_line_error(capsys, _compare(results), "'hashing'", "only in other versions", "protocol legacy",
                    "--protocol")
    assert _compare(results, "--protocol", "legacy", "--format", "csv") == 0
    capsys.readouterr()

    seeds = tmp_path / "seeds.jsonl"
    _grid(data, MODELS, seeds, cache, limit_splits=3, seed=42)
    _grid(data, ["tfidf-lsa"], seeds, cache, limit_splits=3, seed=1)  # newest seed set: 1, tfidf-lsa alone
    _one_line_error(capsys, _compare(seeds), "'hashing'", "only in other versions", "seeds 42", "--seeds")
    assert _compare(seeds, "--seeds", "42", "--format", "csv") == 0
    capsys.readouterr()
    # A model the store never saw is still named with the ones it has.
    _one_line_error(capsys, main(["compare", str(seeds), "--model", "hashing", "--model", "nope",
                                        "--seeds", "42"]), "'nope'",
                    "the store has")


def test_one_split_gives_no_interval_and_no_verdict():
    from tecb_eval.reports import compare as comparing

    index = pd.MultiIndex.from_tuples([("sample-00", 42)], names=["split", "seed"])
    result = comparing.paired_difference(pd.Series([0.33], index=index), pd.Series([0.10], index=index), dataset="D")
    assert result.difference == pytest.approx(0.23) and not result.holds
    assert np.isnan(result.low) and np.isnan(result.high) and np.isnan(result.p_value)
    assert "one split gives no interval" in result.sentence() and "0.23 to 0.23" not in result.sentence()
    assert result.record()["holds"] is None


def test_a_table_dataset_named_like_an_english_mteb_task_gets_our_own_german_task():
    # `tecb-data build table --name arxiv` publishes ArxivClusteringP2P, a name MTEB gives an English set.
    reference = {"path": "/data/arxiv-p2p", "revision": "fp"}
    for version in ("legacy", "v2"):
        task = mteb_bridge.task_for("ArxivClusteringP2P", version, reference, 42)
        assert task.metadata.name == mteb_bridge.task_name("ArxivClusteringP2P-DE", version)
        assert task.metadata.eval_langs == ["deu-Latn"] and task.metadata.dataset == reference
        assert type(task) is not type(mteb.get_task(mteb_bridge.task_name("ArxivClusteringP2P", version)))
    assert mteb_bridge.task_for("GermanNewsClusteringS2S", "v2", reference, 42).metadata.name == "GermanNewsClusteringS2S.v2"

"""Seeds in the tables, paired comparisons, and versions kept apart.

Expected figures are computed here with plain ``statistics`` over explicit numbers, never through
the functions under test; the grid cases run the real grid (tfidf-lsa, the demo TenKGnad data).
"""

from __future__ import annotations

import json
import random
import statistics

import pandas as pd
import pytest

from tecb_data.build import build
from tecb_data.demo import demo_input
from tecb_data.errors import UserError
from tecb_eval.reports import compare, tables as report, versions
from tecb_eval.cli import main

# One thread for torch and BLAS (tests/conftest.py): the grid cases encode with minilm-l6.
pytestmark = pytest.mark.usefixtures("one_thread")
S2S = "TenKGnadClusteringS2S"


# -- frames built by hand ------------------------------------------------------------------------
def _rows(model, dataset, scores: dict, *, fingerprint="fp-a", seeds=None, protocol="legacy", order=0,
          algorithm="minibatch_kmeans", reduction="none"):
    """Rows for {(split, seed): v_measure}; ``seeds`` the run's seed set (default: the seeds used)."""
    seed_set = ",".join(str(s) for s in sorted(seeds or {s for _, s in scores}))
    return [dict(model=model, model_identity=f"id:{model}", mteb_name=dataset, dataset=dataset.lower(),
                 dataset_fingerprint=fingerprint, dataset_location=f"/data/{dataset}", protocol=protocol,
                 profile="current", seeds=seed_set, seed=seed, split=split, algorithm=algorithm,
                 reduction=reduction, v_measure=value, ami=value / 2, encode_s=0.0, reduce_s=0.0, cluster_s=0.0,
                 store_order=order + i)
            for i, ((split, seed), value) in enumerate(sorted(scores.items()))]


def _scores(base: float, splits=10, seeds=(42, 1, 2), spread=0.05, noise=0.004, seed=0):
    rng = random.Random(seed)
    return {(f"sample-{i:02d}", s): base + spread * ((i * 7) % 5 - 2) / 2 + rng.uniform(-noise, noise)
            for i in range(splits) for s in seeds}


def _series(scores: dict) -> pd.Series:
    index = pd.MultiIndex.from_tuples(sorted(scores), names=["split", "seed"])
    return pd.Series([scores[k] for k in sorted(scores)], index=index)


# -- the paired comparison against known answers -------------------------------------------------
def test_identical_models_interval_contains_zero_and_p_is_one():
    a = _series(_scores(0.3))
    result = compare.paired_difference(a, a.copy(), dataset="D", model_a="x", model_b="y")
    assert result.low <= 0 <= result.high and result.p_value == 1.0 and not result.holds
    assert "no ranking" in result.sentence()
    # Two models that differ only by noise around the same mean: no ranking either.
    b = _series({k: v + random.Random(str(k)).uniform(-0.01, 0.01) for k, v in _scores(0.3).items()})
    noisy = compare.paired_difference(a, b, dataset="D", model_a="x", model_b="y")
    assert noisy.low < 0 < noisy.high and noisy.p_value > 0.05 and "does not hold" in noisy.sentence()


def test_a_constant_shift_excludes_zero():
    scores = _scores(0.3)
    a = _series({k: v + 0.02 for k, v in scores.items()})
    result = compare.paired_difference(a, _series(scores), dataset="D", model_a="x", model_b="y")
    assert result.low > 0 and result.difference == pytest.approx(0.02) and result.holds
    assert result.low == pytest.approx(0.02) and result.high == pytest.approx(0.02)
    # 10 splits: of the 2**10 sign flips only "all +" and "all -" are as extreme (exact two-sided p).
    assert result.p_value == pytest.approx(2 / 2 ** 10) and result.sentence().endswith("the ranking holds.")
    # Shifted by less than the noise on some splits but consistently: still holds, with a real interval.
    b = _series({k: v - 0.01 + random.Random(str(k)).uniform(-0.004, 0.004) for k, v in scores.items()})
    shifted = compare.paired_difference(_series(scores), b, dataset="D")
    assert 0 < shifted.low < 0.01 < shifted.high and shifted.p_value < 0.01 and shifted.holds
    assert (shifted.splits, shifted.seeds, shifted.pairs) == (10, 3, 30)


def test_the_difference_is_the_difference_of_the_table_figures_and_is_seeded():
    a, b = _scores(0.3, seed=1), _scores(0.28, seed=2)
    # By hand: the mean over seeds of the mean over splits, per model.
    def figure(scores):
        return statistics.mean(statistics.mean(v for (_, s), v in scores.items() if s == seed) for seed in (42, 1, 2))

    one = compare.paired_difference(_series(a), _series(b), dataset="D", model_a="a", model_b="b")
    assert one.difference == pytest.approx(figure(a) - figure(b), abs=1e-12)
    # Same inputs in another order, same seed: the same interval and p; another seed: another draw.
    shuffled = _series(a).sample(frac=1, random_state=3)
    again = compare.paired_difference(shuffled, _series(b), dataset="D", model_a="a", model_b="b")
    assert (again.low, again.high, again.p_value) == (one.low, one.high, one.p_value)
    other = compare.paired_difference(_series(a), _series(b), dataset="D", model_a="a", model_b="b", seed=7)
    assert (other.low, other.high) != (one.low, one.high)


def test_only_shared_splits_and_seeds_are_paired_and_nothing_shared_is_an_error():
    a = _scores(0.3)
    b = {k: v for k, v in _scores(0.2).items() if k[1] != 2}
    result = compare.paired_difference(_series(a), _series(b), dataset="D")
    assert (result.seeds, result.pairs) == (2, 20)
    with pytest.raises(UserError, match="share no"):
        compare.paired_difference(_series(a), _series({("other", 9): 0.1}), dataset="D", model_a="x", model_b="y")


def test_identical_scores_get_identical_intervals_whatever_their_names():
    import numpy as np
    import pandas as pd

    from tecb_eval.reports import compare

    index = pd.MultiIndex.from_product([[f"split{i}" for i in range(10)], [42]], names=["split", "seed"])
    scores = pd.Series(np.random.default_rng(3).uniform(0.3, 0.6, len(index)), index=index)
    assert compare.mean_interval(scores, name="D/none/v") == compare.mean_interval(scores.copy(), name="D/cob/v")
    other = scores + np.random.default_rng(4).normal(0, 0.02, len(index))
    one = compare.paired_difference(other, scores, dataset="D", model_a="cob", model_b="none")
    two = compare.paired_difference(other.copy(), scores.copy(), dataset="D", model_a="triplet", model_b="none")
    assert (one.low, one.high, one.p_value) == (two.low, two.high, two.p_value)


# -- Tables 2 and 3 with seeds -------------------------------------------------------------------
def _three_models(order=0):
    rows = []
    for i, (model, base) in enumerate([("alpha", 0.30), ("beta", 0.299), ("gamma", 0.25)]):
        for j, dataset in enumerate([S2S, "TenKGnadClusteringP2P"]):
            rows += _rows(model, dataset, _scores(base + 0.05 * j, seed=10 * i + j), fingerprint=f"fp-{dataset}",
                          order=order + 1000 * (2 * i + j))
    return pd.DataFrame(rows)


def test_table2_shows_mean_and_sd_over_seeds_and_marks_against_the_best():
    frame = _three_models()
    t2 = report.table2(frame, stats=True, markers=True)
    alpha = frame[(frame.model == "alpha") & (frame.mteb_name == S2S)]
    per_seed = [statistics.mean(alpha[alpha.seed == s].v_measure) for s in (1, 2, 42)]
    per_seed_sd = [statistics.pstdev(alpha[alpha.seed == s].v_measure) for s in (1, 2, 42)]
    assert t2.loc["alpha", (S2S, "mean")] == pytest.approx(statistics.mean(per_seed), abs=1e-12)
    assert t2.loc["alpha", (S2S, "sd_seeds")] == pytest.approx(statistics.stdev(per_seed), abs=1e-12)
    assert t2.loc["alpha", (S2S, "sd_splits")] == pytest.approx(statistics.mean(per_seed_sd), abs=1e-12)
    # alpha is best; beta is 0.1 points behind (within noise); gamma 5 points behind (holds).
    assert [t2.loc[m, (S2S, "marker")] for m in ("alpha", "beta", "gamma")] == ["*", "=", ""]
    md = report.format_table(t2, "md")
    cell = f"{100 * statistics.mean(per_seed):.2f} ±{100 * statistics.stdev(per_seed):.2f} " \
           f"({100 * statistics.mean(per_seed_sd):.2f}) *"
    assert f"| alpha | {cell} |" in md
    csv = report.format_table(t2, "csv").splitlines()
    assert csv[0] == ("model," + ",".join(f"{d},{d} sd_seeds,{d} sd_splits,{d} marker" for d in [S2S, "TenKGnadClusteringP2P"])
                      + ",avg,avg sd_seeds")
    assert report.format_table(t2, "latex").count(r"$\pm$") >= 6
    # Table 3 (averaged over the three models): its k-means row is the mean of Table 2's rows.
    t3 = report.table3(frame, stats=True)
    assert t3.loc[("minibatch_kmeans", "none"), (S2S, "mean")] == pytest.approx(t2[(S2S, "mean")].mean(), abs=1e-12)


def test_one_seed_has_no_sd_over_seeds_column():
    frame = pd.DataFrame(_rows("alpha", S2S, _scores(0.3, seeds=(42,))) + _rows("beta", S2S, _scores(0.2, seeds=(42,))))
    t2 = report.table2(frame, stats=True, markers=True)
    assert report.format_table(t2, "csv").splitlines()[0] == f"model,{S2S},{S2S} sd_splits,{S2S} marker,avg"
    assert "±" not in report.format_table(t2, "md") and "seed 42" in report.tables(frame)["table2"][1]


@pytest.mark.slow
def test_same_seeds_give_byte_identical_tables_whatever_the_row_order(tmp_path):
    frame = _three_models()
    shuffled = frame.sample(frac=1, random_state=5).reset_index(drop=True)
    texts = []
    for f in (frame, shuffled):
        shown = report.tables(f)
        texts.append("".join(report.format_table(t, fmt, note=n) for t, n in shown.values() for fmt in ("md", "csv", "latex")))
    assert texts[0] == texts[1] and "*" in texts[0]
    from tecb_eval.reports import figures

    pngs = [figures.plot_table2_dots(f, tmp_path / f"dots{i}.png").read_bytes() for i, f in enumerate((frame, shuffled))]
    assert pngs[0] == pngs[1] and pngs[0][:4] == b"\x89PNG"


# -- versions kept apart -------------------------------------------------------------------------
def test_two_builds_of_a_dataset_are_never_averaged():
    old = _rows("m", S2S, _scores(0.38, seeds=(42,)), fingerprint="aaaa1111", order=0)
    new = _rows("m", S2S, _scores(0.34, seeds=(42,)), fingerprint="bbbb2222", order=100)
    frame = pd.DataFrame(old + new)
    newest = statistics.mean(r["v_measure"] for r in new)
    oldest = statistics.mean(r["v_measure"] for r in old)
    # A mean of both builds is never made: a bare table of both is refused.
    with pytest.raises(UserError, match="several versions"):
        report.table2(frame)
    shown = report.tables(frame)
    assert report.means_of(shown["table2"][0]).loc["m", S2S] == pytest.approx(newest, abs=1e-12)
    note = shown["table2"][1].splitlines()[-1]
    assert note.startswith("Left out 10 rows") and "aaaa1111" in note and "bbbb2222" in note
    # Asked for: the older build, and then the other is what is left out.
    chosen, left = versions.select(frame, fingerprints=["aaaa"])
    assert report.table2(chosen).loc["m", S2S] == pytest.approx(oldest, abs=1e-12) and left is None
    with pytest.raises(UserError, match="starting 'cccc'"):
        versions.select(frame, fingerprints=["cccc"])


def test_two_one_seed_runs_are_two_versions_and_a_seed_set_is_one():
    seed42 = _rows("m", S2S, _scores(0.3, seeds=(42,)), order=0)
    seed1 = _rows("m", S2S, _scores(0.25, seeds=(1,)), order=100)
    both = _rows("m", S2S, _scores(0.2, seeds=(42, 1)), order=200)
    frame = pd.DataFrame(seed42 + seed1)
    assert report.table2(versions.select(frame)[0]).loc["m", S2S] == pytest.approx(
        statistics.mean(r["v_measure"] for r in seed1), abs=1e-12)
    chosen, _ = versions.select(pd.DataFrame(seed42 + seed1 + both), seeds="1,42")
    assert set(chosen.seeds) == {"1,42"} and len(chosen) == 20
    listed = versions.versions(pd.DataFrame(seed42 + seed1 + both))
    assert list(listed.seeds) == ["1", "1,42", "42"] and list(listed.shown) == ["no", "yes", "no"]
    with pytest.raises(UserError, match="seed set"):
        versions.select(frame, seeds="1,x")
    with pytest.raises(UserError, match="seed set 7"):
        versions.select(frame, seeds="7")


def test_protocols_and_profiles_are_one_per_table():
    legacy = _rows("m", S2S, _scores(0.2, seeds=(42,)), order=0)
    fast = _rows("m", S2S, _scores(0.3, seeds=(42,)), protocol="fast", order=100)
    chosen, left = versions.select(pd.DataFrame(legacy + fast))
    assert set(chosen.protocol) == {"fast"} and "protocol legacy" in left
    chosen, left = versions.select(pd.DataFrame(legacy + fast), protocol="legacy")
    assert set(chosen.protocol) == {"legacy"} and left is None


# -- the real grid: two builds and two seeds in one store, end to end -----------------------------
@pytest.fixture(scope="module")
def two_builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("versions")
    for seed in (42, 7):
        build("tenkgnad", demo_input("tenkgnad"), root / f"build-{seed}", seed=seed, views=("s2s",))
    return root


def _run(root, data, results, *extra):
    return ["run", "--data", str(data / "tenkgnad-clustering-s2s"), "--model", "tfidf-lsa", "--model", "minilm-l6",
            "--config", "minibatch_kmeans:none", "--results", str(results), "--cache-dir", str(root / "cache"),
            "--quiet", "--no-figure1", *extra]  # every split: MTEB's JSON holds complete results only


def _cell(text: str, model: str) -> str:
    row = next(line for line in text.splitlines() if line.startswith(f"| {model} |"))
    return row.split("|")[2].split()[0]


@pytest.mark.slow
def test_two_builds_in_one_store_run_table_export_and_mteb_agree(two_builds, tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    assert main(_run(two_builds, two_builds / "build-42", results)) == 0
    first = capsys.readouterr().out
    assert main(_run(two_builds, two_builds / "build-7", results, "--out", str(tmp_path / "run-out"))) == 0
    second = capsys.readouterr().out
    assert _cell(first, "tfidf-lsa") != _cell(second, "tfidf-lsa")
    assert "Left out" not in second  # a run's own tables hold its own version
    assert main(["table", str(results), "--table", "2"]) == 0
    table = capsys.readouterr().out
    assert _cell(table, "tfidf-lsa") == _cell(second, "tfidf-lsa") and _cell(table, "minilm-l6") == _cell(second, "minilm-l6")
    assert "Left out 20 rows of other versions" in table
    assert main(["export", str(results), "--out", str(tmp_path / "export")]) == 0
    assert "Left out 20 rows" in capsys.readouterr().err
    md = (tmp_path / "export" / "table2.md").read_text()
    assert md == table
    for model in ("tfidf-lsa", "minilm-l6"):
        (path,) = (tmp_path / "export" / "mteb" / "results" / model).rglob(f"{S2S}.json")
        main_score = json.loads(path.read_text())["scores"]["test"][0]["main_score"]
        assert f"{100 * main_score:.2f}" == _cell(md, model)
        # The run's own export names the same build and figure.
        (own,) = (tmp_path / "run-out" / "mteb" / "results" / model).rglob(f"{S2S}.json")
        assert json.loads(own.read_text()) == json.loads(path.read_text())
    assert (tmp_path / "export" / "table2.png").read_bytes()[:4] == b"\x89PNG"
    # The older build, asked for by its fingerprint, is the first run's figure.
    fingerprint = json.loads((two_builds / "build-42" / "tenkgnad-clustering-s2s" / "manifest.json").read_text())["fingerprint"]
    assert main(["table", str(results), "--table", "2", "--fingerprint", fingerprint[:10]]) == 0
    assert _cell(capsys.readouterr().out, "tfidf-lsa") == _cell(first, "tfidf-lsa")
    assert main(["table", str(results), "--versions"]) == 0
    listed = capsys.readouterr().out
    assert listed.count("| yes |") == 2 and listed.count("| no |") == 2


def test_two_one_seed_runs_in_one_store_and_compare(two_builds, tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    data = two_builds / "build-42"
    assert main(_run(two_builds, data, results, "--seed", "42", "--limit-splits", "4")) == 0
    capsys.readouterr()
    assert main(_run(two_builds, data, results, "--seed", "1", "--limit-splits", "4")) == 0
    second = capsys.readouterr().out
    assert main(["table", str(results), "--table", "2"]) == 0
    table = capsys.readouterr().out
    assert _cell(table, "tfidf-lsa") == _cell(second, "tfidf-lsa") and "seeds 42 (8 rows; shown: build" in table
    assert main(["compare", str(results), "--model", "minilm-l6", "--model", "tfidf-lsa", "--seeds", "42"]) == 0
    out = capsys.readouterr()
    (sentence,) = [line for line in out.out.splitlines() if line.startswith(f"{S2S}:")]
    # Four splits: the exact sign-flip p is at least 2 / 2**4, so no ranking can hold, and it says why.
    assert "4 splits x 1 seed" in sentence and "too few splits to tell" in sentence and "does not hold" in sentence
    assert main(["compare", str(results), "--model", "minilm-l6"]) == 2
    assert "two models" in capsys.readouterr().err
    assert main(["compare", str(results), "--model", "minilm-l6", "--model", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'nope'" in err


@pytest.mark.slow
def test_a_seed_set_in_one_run_gives_sd_over_seeds_everywhere(two_builds, tmp_path, capsys):
    from tecb_eval.grid.run import run_grid

    results = tmp_path / "results.jsonl"
    frame = run_grid([two_builds / "build-42" / "tenkgnad-clustering-s2s"], ["tfidf-lsa", "minilm-l6"],
                     configurations=["minibatch_kmeans:none"], seeds=(42, 1, 2), cache_dir=two_builds / "cache",
                     results=results, progress=False, log=lambda m: None)
    assert set(frame.seeds) == {"1,2,42"} and len(frame) == 2 * 10 * 3
    assert main(["table", str(results), "--table", "2", "--format", "csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert f"{S2S} sd_seeds" in header
    assert main(["export", str(results), "--out", str(tmp_path / "out")]) == 0
    (path,) = (tmp_path / "out" / "mteb" / "results" / "tfidf-lsa").rglob(f"{S2S}.json")
    scores = json.loads(path.read_text())["scores"]["test"][0]
    per_seed = [statistics.mean(frame[(frame.model == "tfidf-lsa") & (frame.seed == s)].v_measure) for s in (1, 2, 42)]
    assert scores["main_score"] == pytest.approx(statistics.mean(per_seed), abs=1e-12)
    assert scores["tecb_seeds"] == "1,2,42" and scores["tecb_v_measure_sd_seeds"] == pytest.approx(statistics.stdev(per_seed))
    assert len(scores["v_measures"]) == 10 and "tecb_seed" not in scores
    # Byte-identical tables from a rerun (which only resumes) and from the export.
    first = (tmp_path / "out" / "table2.md").read_bytes()
    assert main(["export", str(results), "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "table2.md").read_bytes() == first
    assert (tmp_path / "again" / "table2.png").read_bytes() == (tmp_path / "out" / "table2.png").read_bytes()


def test_the_order_of_a_seed_set_changes_nothing(demo_datasets, tmp_path):
    from tecb_eval.grid.run import run_grid

    results = tmp_path / "results.jsonl"
    options = dict(configurations=["minibatch_kmeans:none", "minibatch_kmeans:pca"], cache_dir=tmp_path / "cache",
                   results=results, limit_splits=2, progress=False, log=lambda m: None)
    data = [demo_datasets / "tenkgnad-clustering-p2p"]
    first = run_grid(data, ["tfidf-lsa"], seeds=(42, 1, 2), **options)
    written = results.read_bytes()
    again = run_grid(data, ["tfidf-lsa"], seeds=(2, 1, 42), **options)
    assert results.read_bytes() == written, "the same seed set in another order computed its cells again"
    assert set(first.model_identity) == set(again.model_identity) and set(first.seeds) == {"1,2,42"}
    pd.testing.assert_frame_equal(first, again[first.columns])
    other = tmp_path / "other.jsonl"
    reordered = run_grid(data, ["tfidf-lsa"], seeds=(2, 42, 1), **{**options, "results": other})
    # Every timing (a field ending in _s), and whether the reduction came from the cache (the second run reads it).
    timings = [c for c in first.columns if c.endswith("_s")] + ["reduce_cached"]
    pd.testing.assert_frame_equal(first.drop(columns=timings), reordered[first.columns].drop(columns=timings))

"""`tecb-eval report` without a browser: the folder it owns, what it refuses, the same bytes for the
same store, the figures it embeds. (What the pages show is tested in a browser:
tests/test_report_browser.py.)"""

from __future__ import annotations

import json
import re

import pytest

from reportstore import two_model_store


@pytest.fixture(scope="module")
def store(demo_datasets, tmp_path_factory):
    return two_model_store(demo_datasets, tmp_path_factory.mktemp("report-cli"),
                           configurations=["minibatch_kmeans:none", "hdbscan:pca"])


def _pages(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*.html"))}


@pytest.mark.slow
def test_the_folder_is_owned_and_replaced_whole(store, tmp_path, capsys):
    from tecb_data.outputs import MARKER
    from tecb_eval.cli import main

    out = tmp_path / "site"
    assert main(["report", str(store), "--out", str(out), "--no-figures"]) == 0
    marker = json.loads((out / MARKER).read_text(encoding="utf-8"))
    assert marker["written_by"] == "tecb-eval report" and "index.html" in marker["files"]
    first = _pages(out)
    assert set(first) == {"index.html", "models/tfidf-lsa.html", "models/tfidf-lsa-16.html"}
    # The same store again: the same bytes, whatever the run (no dates but the store's own).
    assert main(["report", str(store), "--out", str(out), "--no-figures"]) == 0
    assert _pages(out) == first
    assert not (tmp_path / "site.partial").exists()


def test_a_foreign_folder_the_store_and_a_dataset_are_refused(store, demo_datasets, tmp_path, capsys):
    from helpers import one_line_error

    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep me", encoding="utf-8")
    error = one_line_error(capsys, ["report", str(store), "--out", str(foreign)])
    assert "notes" in error and (foreign / "mine.txt").read_text(encoding="utf-8") == "keep me"
    error = one_line_error(capsys, ["report", str(store), "--out", str(store.parent)])
    assert "input" in error
    dataset = demo_datasets / "blurbs-clustering-s2s"
    before = sorted(p.name for p in dataset.iterdir())
    one_line_error(capsys, ["report", str(store), "--out", str(dataset)])
    assert sorted(p.name for p in dataset.iterdir()) == before


def test_a_users_file_added_to_the_report_is_never_deleted(store, tmp_path, capsys):
    from helpers import one_line_error
    from tecb_eval.cli import main

    out = tmp_path / "site"
    assert main(["report", str(store), "--out", str(out), "--no-figures"]) == 0
    (out / "my-notes.md").write_text("mine", encoding="utf-8")
    one_line_error(capsys, ["report", str(store), "--out", str(out), "--no-figures"])
    assert (out / "my-notes.md").read_text(encoding="utf-8") == "mine"


def test_missing_store_and_figures_folder_are_one_line(store, tmp_path, capsys):
    from helpers import one_line_error

    error = one_line_error(capsys, ["report", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "site")])
    assert "none.jsonl" in error
    error = one_line_error(capsys, ["report", str(store), "--out", str(tmp_path / "site"),
                                    "--figures", str(tmp_path / "nowhere")])
    assert "--figures" in error and "nowhere" in error
    assert not (tmp_path / "site").exists()


def test_figures_are_drawn_and_other_outputs_embedded(store, demo_datasets, tmp_path, capsys):
    """Table 3 one PNG per dataset; from --figures the PNGs of an export of the same store and of
    no store (a layer sweep) are embedded, an older export's of another store is left out and
    named, and a file name with # and ? is linked URL-encoded."""
    from urllib.parse import quote

    from PIL import Image

    from reportstore import two_model_store
    from tecb_eval.cli import main
    from tecb_eval.reports import figures

    extra = tmp_path / "layers"
    extra.mkdir()
    fig = figures.new_figure()[0]
    fig.gca().plot([0, 1], [0, 1])
    figures.save_figure(fig, extra / "a#b?c.png")
    export = tmp_path / "export"
    assert main(["export", str(store), "--out", str(export)]) == 0
    older = tmp_path / "older"
    other = two_model_store(demo_datasets, tmp_path / "other-run", configurations=["minibatch_kmeans:none"])
    assert main(["export", str(other), "--out", str(older)]) == 0
    (older / "table2.png").rename(older / "stale-table2.png")
    capsys.readouterr()
    out = tmp_path / "site"
    assert main(["report", str(store), "--out", str(out), "--figures", str(extra), "--figures", str(export),
                 "--figures", str(older)]) == 0
    drawn = sorted(p.name for p in (out / "figures").iterdir())
    assert drawn == ["extra-0-a#b?c.png", "table2.png", "table3-BlurbsClusteringS2S.png",
                     "table3-TenKGnadClusteringS2S.png"]
    for name in drawn:
        with Image.open(out / "figures" / name) as image:
            assert 100 < image.size[0] <= 1120  # shown at its own size on a page 1280 px wide
    captured = capsys.readouterr()
    assert "wrote 3 pages" in captured.out
    (line,) = [line for line in captured.err.splitlines() if line.startswith("--figures: left out")]
    assert "drawn from other results than these stores" in line and "older/stale-table2.png" in line
    assert "the report draws it itself: export/table2.png, export/table3.png" in line
    index = (out / "index.html").read_text(encoding="utf-8")
    assert f'src="figures/{quote("extra-0-a#b?c.png")}"' in index and "a%23b%3Fc" in index


def test_help_ends_with_an_example(capsys):
    from tecb_eval.cli import main

    for command in ("report", "recommend"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out.rstrip().splitlines()
        assert text[-2].startswith("example") and text[-1].strip().startswith(f"tecb-eval {command} ")


def test_several_stores_count_each_cell_once(store, tmp_path):
    """A store and a copy that grew from it: each cell once, the later store's row (as a later line
    of one store is newer)."""
    import shutil

    from tecb_eval.reports.leaderboard import boards, combined
    from tecb_eval.reports.versions import read_store, select

    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(store, copy)
    one, two = read_store(store), read_store(copy)
    both = combined([one, two])
    assert len(both) == len(one) and both.store_order.min() > one.store_order.max()
    shown = [[(e.model, e.mean, e.low, e.high, e.covered) for e in b.ranked]
             for b in boards(select(both, like_with_like=False)[0], set())]
    assert shown == [[(e.model, e.mean, e.low, e.high, e.covered) for e in b.ranked]
                     for b in boards(select(one, like_with_like=False)[0], set())]


@pytest.mark.slow
def test_ctrl_c_leaves_the_earlier_report_as_it_was(store, tmp_path):
    """Ctrl-C while the new site is drawn: the earlier one stays whole and the line says so. The
    report is held at its Table 3 plot until the Ctrl-C comes (an event, not a race)."""
    import os
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    from helpers import REPO
    from tecb_eval.cli import main

    out = tmp_path / "site"
    assert main(["report", str(store), "--out", str(out), "--no-figures"]) == 0
    before = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    held = tmp_path / "plotting"
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from tecb_eval.cli import main
        from tecb_eval.reports import figures

        def held(*args, **kwargs):
            Path({str(held)!r}).touch()
            time.sleep(600)  # until Ctrl-C

        figures.plot_table3 = held
        sys.exit(main(["report", {str(store)!r}, "--out", {str(out)!r}]))
    """)
    child = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not held.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert held.exists(), child.communicate(timeout=120)
    child.send_signal(signal.SIGINT)
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == 130, (stdout, stderr)
    assert stderr.strip().splitlines()[-1] == (
        f"tecb-eval: interrupted; nothing in {out} was changed (a report is written whole or not at all); "
        "run the same command again")
    after = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert after == before and not (tmp_path / "site.partial").exists()


@pytest.fixture(scope="module")
def mixed(mixed_seed_results):
    return mixed_seed_results


def test_models_over_other_seed_sets_are_ranked_on_the_seed_they_share(mixed, capsys):
    """Two models over seeds 42 and 1, a third later over 42 only: all three are ranked, on seed
    42 (not only the newest), and recommend's runner-up is another model."""
    from tecb_eval.cli import main
    from tecb_eval.reports.leaderboard import boards
    from tecb_eval.reports.ranking import shared_selection
    from tecb_eval.reports.versions import read_store

    chosen = shared_selection(read_store(mixed))
    for board in boards(chosen, set()):
        assert sorted(e.model for e in board.ranked) == ["tfidf-lsa", "tfidf-lsa-16", "tfidf-lsa-8"]
        assert board.apart == [] and "seed 42" in board.shared and board.cells == 2
        margins = [e.margin for e in board.ranked]
        assert margins[-1] != margins[-1] and all(m >= 0 for m in margins[:-1])  # NaN for the last
    assert set(chosen.rows.seed) == {42} and set(chosen.rows.seeds) == {"42"}
    capsys.readouterr()
    assert main(["recommend", str(mixed), "--format", "json", "--resamples", "999"]) == 0
    found = json.loads(capsys.readouterr().out)["recommendations"]
    assert len(found) == 2
    for r in found:
        assert r["runner_up"] is not None and r["runner_up"]["model"] != r["model"]
        assert r["seeds"] == 1


def test_models_and_datasets_without_a_shared_cell_stand_apart(mixed, demo_datasets, tmp_path, capsys):
    """A model that ran only Ward, a dataset with no Table 2 cell, and rows of another protocol:
    each is on the page with its reason, not only in the navigation and provenance."""
    import shutil

    from tecb_eval.cli import main
    from tecb_eval.grid.run import run_grid

    fast = tmp_path / "fast.jsonl"
    run_grid([demo_datasets / "blurbs-clustering-s2s"], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"],
             protocol="fast", results=fast, progress=False, cache_dir=tmp_path / "cache")
    store = tmp_path / "more.jsonl"
    shutil.copyfile(mixed, store)
    run_grid([demo_datasets / "blurbs-clustering-s2s"], [{"spec": "tfidf-lsa", "name": "ward-only", "n_components": 4}],
             configurations=["agglomerative:none"], results=store, limit_splits=2, seeds=[42], progress=False,
             cache_dir=tmp_path / "cache")
    run_grid([demo_datasets / "blurbs-clustering-p2p"], ["tfidf-lsa"], configurations=["hdbscan:pca"], results=store,
             limit_splits=1, seeds=[42], progress=False, cache_dir=tmp_path / "cache")
    capsys.readouterr()
    out = tmp_path / "site"
    assert main(["report", str(fast), str(store), "--out", str(out), "--no-figures"]) == 0
    err = capsys.readouterr().err
    assert "ward-only not ranked: no minibatch_kmeans:none cell" in err
    index = (out / "index.html").read_text(encoding="utf-8")
    s2s = index[index.index('">BlurbsClusteringS2S <span'):]
    assert "ward-only" in s2s[:s2s.index("</section>")]
    assert "protocol fast" in s2s[:s2s.index('<table class="sortable leaderboard"')]  # named by the board
    p2p = index[index.index('">BlurbsClusteringP2P <span'):]
    p2p = p2p[:p2p.index("</section>")]
    assert "No model ran Minibatch k-Means" in p2p and "hdbscan / pca" in p2p
    assert 'class="sortable leaderboard"' not in p2p


def test_a_score_of_zero_says_why(mixed, capsys):
    """DBSTREAM on PCA puts every demo text in one cluster: its 0 has a reason; a cell of all noise
    has its own; a real score has none (the pages show it: tests/test_report_browser.py)."""
    from tecb_eval.reports.scores import zero_reason
    from tecb_eval.reports.versions import read_store

    rows = read_store(mixed)
    dbstream = rows[(rows.algorithm == "dbstream") & (rows.reduction == "pca")]
    assert (dbstream.v_measure == 0).all() and zero_reason(dbstream) == "one cluster (or none) for all texts"
    noise = dbstream.assign(noise_fraction=1.0, n_clusters_found=0)
    assert zero_reason(noise) == "every text left as noise: no cluster found"
    kmeans = rows[(rows.algorithm == "minibatch_kmeans")]
    assert zero_reason(kmeans) is None


def test_a_figure_named_with_url_characters_is_linked_by_its_escaped_name(tmp_path, demo_datasets):
    from tecb_eval.reports.html import render

    store = two_model_store(demo_datasets, tmp_path, configurations=["minibatch_kmeans:none"])
    extra = tmp_path / "figs"
    extra.mkdir()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tecb_eval.reports.figures import save_figure

    fig = plt.figure(figsize=(1, 1))
    save_figure(fig, extra / "a#b?c.png")  # a tecb figure drawn from no results store: --figures takes it
    render([store], tmp_path / "report", figure_folders=[extra], draw_figures=False, log=lambda *_: None)
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert re.search(r'src="figures/[^"]*a%23b%3Fc\.png"', page) and "#b?c.png\"" not in page.split("<img")[1]

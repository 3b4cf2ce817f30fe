"""Small wordings that said something odd: a count of one row is "1 row", a one-dataset Figure 1
legend does not name "texts" as its dataset."""

from __future__ import annotations

import io

from tecb_data.progress import Progress
from tecb_eval.reports.figures import legend_title


def test_a_count_of_one_is_singular_off_a_terminal():
    out = io.StringIO()
    with Progress(desc="reading table rows", unit="rows", stream=out) as bar:
        bar.update(1)
    assert "reading table rows: 1 row" in out.getvalue() and "1 rows" not in out.getvalue(), out.getvalue()
    out = io.StringIO()
    with Progress(total=3, desc="grid cells", unit="cells", stream=out) as bar:
        bar.update(1)
    assert "grid cells: 1/3 cells" in out.getvalue()


def test_a_one_dataset_legend_names_no_dataset():
    assert legend_title(["BlurbsClusteringS2S"]) == "label (texts)"
    assert legend_title(["BlurbsClusteringS2S", "BlurbsClusteringP2P"]) == \
        "label (texts: BlurbsClusteringS2S | BlurbsClusteringP2P)"

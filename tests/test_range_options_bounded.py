"""Every range option (`--k`, `--min-cluster-size`, `--layers`) counts its points from the bounds
before it builds a list: a huge range is one line at once, never gigabytes of integers."""

from __future__ import annotations

import pytest

from helpers import eval_error
from tecb_data.errors import UserError
from tecb_eval.clustering.cluster_counts import parse_range
from tecb_eval.layers import parse_layers

HUGE = 10 ** 15  # a list of this many points would never fit in memory: only counting can refuse it


@pytest.mark.parametrize("option", ["--k", "--min-cluster-size"])
@pytest.mark.parametrize("text", [f"2:{HUGE}:1", f"2:{HUGE}"])
def test_a_huge_cluster_count_range_is_refused_from_its_bounds(option, text):
    with pytest.raises(UserError, match=r"points; give at most"):
        parse_range(text, option)


def test_a_python_range_reads_as_its_colon_spelling():
    assert parse_range(range(2, 11, 4), "--k") == parse_range("2:10:4", "--k") == (2, 6, 10)


def test_a_huge_layer_range_is_refused_from_its_bounds():
    with pytest.raises(UserError, match=r"layers '0-1000000000000000'.*no model has more"):
        parse_layers(f"0-{HUGE}")
    with pytest.raises(UserError, match="no model has more"):
        parse_layers(",".join(f"{i * 600}-{i * 600 + 599}" for i in range(2)))


def test_run_refuses_a_huge_k_in_one_line(tmp_path, capsys, blurbs_folder):
    line = eval_error(capsys, ["run", "--data", str(blurbs_folder), "--model", "tfidf-lsa", "--config",
                               "minibatch_kmeans:none", "--k", f"2:{HUGE}:1", "--results", str(tmp_path / "r.jsonl"),
                               "--cache-dir", str(tmp_path / "c"), "--quiet"])
    assert f"--k '2:{HUGE}:1': {HUGE - 1:,} points" in line
    assert not (tmp_path / "r.jsonl").exists()

"""MTEB's results layout as we export it (``tecb_eval.mteb.results``): what the export reads from a
store is checked before any file is written, and a perfect score's float round-off is a score."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from tecb_data.errors import UserError


def test_the_mteb_export_checks_what_it_reads(small_store, tmp_path):
    from tecb_eval.grid.store import read_results
    from tecb_eval.mteb.results import write_results

    frame = read_results(small_store)
    for edit, problem in (({"model": ".."}, "cannot name a folder"), ({"prompt": 5}, "prompt 5 is not text"),
                          ({"v_measure": "0.5"}, "v_measure '0.5' is not a number"),
                          ({"encode_s": np.inf}, "encode_s inf is not a number of seconds")):
        edited = frame.copy()
        for column, value in edit.items():
            edited[column] = pd.Series([value] * len(edited), index=edited.index, dtype=object)
        with pytest.raises(UserError, match=re.escape(problem)):
            write_results(edited, tmp_path / "mteb")
        assert not any(p.is_file() for p in tmp_path.rglob("*"))  # refused before any file is written


def test_the_mteb_export_takes_a_perfect_score_with_its_round_off_and_refuses_one_past_it():
    """A perfect clustering's V-measure can be 1.0000000000000002 (the metric's own float
    arithmetic): the store reads it, so the export writes it; 1.1 is refused by both."""
    import pandas as pd

    from tecb_eval.grid.store import row_problem
    from tecb_eval.mteb.results import check_rows

    row = {"model": "tfidf-lsa", "mteb_name": "RedditClusteringP2P", "split": "bootstrap-00", "seed": 42,
           "v_measure": 1.0000000000000002, "ami": 1.0}
    check_rows(pd.DataFrame([row]))
    assert row_problem(row) is None
    with pytest.raises(UserError, match="v_measure 1.1 is not a number from 0 to 1"):
        check_rows(pd.DataFrame([{**row, "v_measure": 1.1}]))


def test_two_model_names_that_share_an_mteb_folder_are_named(tmp_path, small_store):
    import json

    from tecb_eval.grid.store import ResultsStore
    from tecb_eval.mteb.results import write_results

    rows = [json.loads(line) for line in small_store.read_text(encoding="utf-8").splitlines()]
    both = [{**r, "model": "org/m"} for r in rows] + [{**r, "model": "org__m"} for r in rows]
    store = tmp_path / "both.jsonl"
    store.write_text("".join(json.dumps(r) + "\n" for r in both), encoding="utf-8")
    with pytest.raises(UserError, match=r"models 'org/m' and 'org__m': .*folder 'org__m'"):
        write_results(ResultsStore(store).frame(), tmp_path / "mteb")
    assert not (tmp_path / "mteb").exists()

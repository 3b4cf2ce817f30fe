"""Small wordings that said something odd: a count of one row is "1 row", a one-dataset Figure 1
legend does not name "texts" as its dataset, and rows of empty text are counted as empty, none as
an exact duplicate "(one copy kept)" of a copy that was not kept."""

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


def test_rows_of_empty_text_are_all_counted_as_empty_none_as_a_kept_copy(tmp_path):
    from tablefiles import table_build, table_rows

    path = tmp_path / "t.tsv"
    path.write_text("text\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in table_rows(40)) + "\tSport\n" * 10,
                    encoding="utf-8")
    done = table_build(path, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "removed_empty_text 10" in done.stdout and "removed_exact_duplicate 0" in done.stdout, done.stdout


def test_a_cell_twice_with_other_scores_is_noted_with_its_lines(tmp_path, small_store, capsys):
    import json

    from tecb_eval.grid.store import ResultsStore

    lines = small_store.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[0])
    row["v_measure"] = row["v_measure"] / 2
    joined = tmp_path / "joined.jsonl"
    joined.write_text("\n".join([*lines, json.dumps(row), lines[1]]) + "\n", encoding="utf-8")
    capsys.readouterr()
    ResultsStore(joined)
    err = capsys.readouterr().err
    assert f"1 cell(s) appear twice with different scores (lines 1 and {len(lines) + 1})" in err, err


def test_two_model_names_that_share_an_mteb_folder_are_named(tmp_path, small_store):
    import json

    import pytest

    from tecb_data.errors import UserError
    from tecb_eval.grid.store import ResultsStore
    from tecb_eval.mteb.results import write_results

    rows = [json.loads(line) for line in small_store.read_text(encoding="utf-8").splitlines()]
    both = [{**r, "model": "org/m"} for r in rows] + [{**r, "model": "org__m"} for r in rows]
    store = tmp_path / "both.jsonl"
    store.write_text("".join(json.dumps(r) + "\n" for r in both), encoding="utf-8")
    with pytest.raises(UserError, match=r"models 'org/m' and 'org__m': .*folder 'org__m'"):
        write_results(ResultsStore(store).frame(), tmp_path / "mteb")
    assert not (tmp_path / "mteb").exists()


def test_labels_kept_with_few_texts_are_named_in_a_note(tmp_path):
    from tablefiles import table_build, table_rows

    rows = table_rows(40) + [(f"Wahl und Regen Nummer {i}", "Regenwahl") for i in range(3)]
    path = tmp_path / "t.tsv"
    path.write_text("text\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in rows), encoding="utf-8")
    done = table_build(path, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "note: 1 label(s) kept with fewer than 5 texts ('Regenwahl' 3); pass --min-per-label 5" in done.stderr
    done = table_build(path, tmp_path / "out2", "--min-per-label", "5")
    assert done.returncode == 0 and "kept with fewer" not in done.stderr, done.stderr

"""What building a dataset from a user's table says of the rows it left out or kept: rows of empty
text counted as empty (none as an exact duplicate of a copy that was not kept), and labels kept
with few texts named in a note."""

from __future__ import annotations

from tablefiles import table_build, table_rows


def test_rows_of_empty_text_are_all_counted_as_empty_none_as_a_kept_copy(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("text\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in table_rows(40)) + "\tSport\n" * 10,
                    encoding="utf-8")
    done = table_build(path, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "removed_empty_text 10" in done.stdout and "removed_exact_duplicate 0" in done.stdout, done.stdout


def test_labels_kept_with_few_texts_are_named_in_a_note(tmp_path):
    rows = table_rows(40) + [(f"Wahl und Regen Nummer {i}", "Regenwahl") for i in range(3)]
    path = tmp_path / "t.tsv"
    path.write_text("text\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in rows), encoding="utf-8")
    done = table_build(path, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "note: 1 label(s) kept with fewer than 5 texts ('Regenwahl' 3); pass --min-per-label 5" in done.stderr
    done = table_build(path, tmp_path / "out2", "--min-per-label", "5")
    assert done.returncode == 0 and "kept with fewer" not in done.stderr, done.stderr

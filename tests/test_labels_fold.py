"""A label a reader sees as one is one label (``tecb_data.labels``). Every label is normalised (NFC, format
characters dropped, whitespace collapsed), each change counted in the build report; labels that
still read as one (NFKC, case, Unicode's confusables) stop the build naming both spellings and
where they stand, unless --similar-labels keeps them apart or merges them. In JSON Lines, CSV and
TSV alike, and for the parents of --label-path; numbers spelled 1, 1.0 and "1" are one label."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from helpers import run_cli_here
from tablefiles import built_labels, table_build, table_rows
from tecb_data.labels import fold_key, normalise, skeleton

FORMATS = ("jsonl", "csv", "tsv")
OTHERS = ("Politik", "Wetter")


def rows_with(spellings: list[str], n: int = 48) -> list[dict]:
    """``n`` rows with unique texts: the spellings of one label take turns on a third of them (the
    first spelling most often), two other labels share the rest."""
    rows = []
    for i in range(n):
        if i % 3 == 0:
            turn = (i // 3) % (len(spellings) + 1)
            label = spellings[max(0, turn - 1)]
        else:
            label = OTHERS[i % 3 - 1]
        rows.append({"text": f"Meldung {i} über {['Tore', 'Wahlen', 'Regen'][i % 3]} und mehr", "label": label})
    return rows


def write(folder: Path, fmt: str, rows: list[dict], columns=("text", "label")) -> Path:
    path = folder / f"labels.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    else:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            if fmt == "tsv":
                fh.write("\t".join(columns) + "\n" + "".join("\t".join(r[c] for c in columns) + "\n" for r in rows))
            else:
                writer = csv.DictWriter(fh, fieldnames=list(columns))
                writer.writeheader()
                writer.writerows(rows)
    return path


def build(path: Path, out: Path, *extra: str, label=("--label", "label")):
    return run_cli_here("build", "--source", "table", "--input", str(path), "--name", "w1", "--text", "text",
                        *label, "--out", str(out), "--quiet", *extra)


def published(out: Path) -> tuple[list[dict], dict]:
    folder = out / "w1-s2s"
    rows = [json.loads(line) for line in (folder / "data" / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    return rows, json.loads((folder / "manifest.json").read_text(encoding="utf-8"))


# -- normalised: one label, counted ------------------------------------------------------------------

NORMALISED = {
    "nfc": ["Künste", "Ku\u0308nste"],
    "format_characters": ["Ratgeber", "Rat\u200bgeber", "Rat\u00adgeber", "\ufeffRatgeber", "Rat\u2060geber"],
    "whitespace": ["Neue Medien", "Neue\u00a0 Medien ", "Neue\u2800Medien\u2800"],
    # Default_Ignorable but not format characters (category Cf): invisible all the same.
    "invisible_characters": ["Sport", "Sp\u034fort", "Sport\u3164", "Sport\U000E0100", "Sport\u180b",
                             "Sport\ufe0f", "\u115fSport"],
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("change", sorted(NORMALISED))
def test_spellings_that_normalise_to_one_label_are_one_label_and_counted(tmp_path, fmt, change):
    spellings = NORMALISED[change]
    done = build(write(tmp_path, fmt, rows_with(spellings)), tmp_path / "out")
    assert done.returncode == 0, done.stderr
    samples, manifest = published(tmp_path / "out")
    assert {row["label"] for row in samples} == {spellings[0], *OTHERS}
    report = manifest["report"]
    changed = sum(1 for row in rows_with(spellings) if row["label"] in spellings[1:])
    assert report[f"labels_respelled_{change}"] == changed > 0
    assert f"labels_respelled_{change} {changed}" in done.stdout
    card = (tmp_path / "out" / "w1-s2s" / "README.md").read_text(encoding="utf-8")
    assert "Labels are composed (NFC) in" in card


def test_a_text_labelled_once_composed_once_decomposed_is_one_record_not_a_conflict(tmp_path):
    rows = rows_with(["Künste"])
    rows.append({"text": rows[0]["text"], "label": "Ku\u0308nste"})
    done = build(write(tmp_path, "jsonl", rows), tmp_path / "out", "--report", str(tmp_path / "removed.json"))
    assert done.returncode == 0, done.stderr
    _, manifest = published(tmp_path / "out")
    assert manifest["report"]["removed_conflicting_duplicate"] == 0
    assert manifest["report"]["removed_exact_duplicate"] == 1
    assert "Künste, Künste" not in (tmp_path / "removed.json").read_text(encoding="utf-8")


# -- read as one: the build stops naming both --------------------------------------------------------

LOOK_ALIKES = {
    "ligature": ("Sachbuch ﬁktion", "Sachbuch fiktion"),
    "fullwidth": ("Ｒatgeber", "Ratgeber"),
    "cyrillic": ("Kr\u0430mi", "Krami"),
    "non-breaking hyphen": ("Kinder\u2011buch", "Kinder-buch"),
    "apostrophe": ("Kinder’s Welt", "Kinder's Welt"),
    "case": ("Ratgeber", "ratgeber"),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", sorted(LOOK_ALIKES))
def test_labels_that_read_as_one_stop_the_build_naming_both(tmp_path, fmt, kind):
    a, b = LOOK_ALIKES[kind]
    done = build(write(tmp_path, fmt, rows_with([a, b])), tmp_path / "out")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert repr(a) in lines[0] and repr(b) in lines[0] and "--similar-labels" in lines[0]
    # Where each spelling first stands: the line of the file.
    first, second = ("(line 1)", "(line 7)") if fmt == "jsonl" else ("(row 1 (line 2))", "(row 7 (line 8))")
    assert f"{a!r} {first}" in lines[0] and f"{b!r} {second}" in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_three_cases_of_one_word_stop_then_merge_into_the_most_frequent(tmp_path):
    spellings = ["Ratgeber", "ratgeber", "RATGEBER"]
    path = write(tmp_path, "csv", rows_with(spellings))
    done = build(path, tmp_path / "stop")
    assert done.returncode == 2 and "'Ratgeber'" in done.stderr and "case" in done.stderr
    done = build(path, tmp_path / "merged", "--similar-labels", "merge")
    assert done.returncode == 0, done.stderr
    samples, manifest = published(tmp_path / "merged")
    assert {row["label"] for row in samples} == {"Ratgeber", *OTHERS}
    assert manifest["report"]["labels_merged"] == sum(1 for r in rows_with(spellings) if r["label"] in spellings[1:])
    assert manifest["table"]["similar_labels"] == "merge"
    done = build(path, tmp_path / "kept", "--similar-labels", "keep")
    assert done.returncode == 0, done.stderr
    samples, manifest = published(tmp_path / "kept")
    assert {row["label"] for row in samples} == {*spellings, *OTHERS}
    assert manifest["report"]["labels_kept_apart"] == 3


def test_a_label_path_parent_is_one_label_and_its_look_alike_stops_the_build(tmp_path):
    def paths(parents):
        rows = []
        for i in range(60):
            parent = parents[(i // 2) % len(parents)] if i % 2 == 0 else "Sachbuch"
            rows.append({"text": f"Klappentext {i} zu {parent}", "genre": f"{parent} > Kind {i % 3}"})
        return rows

    done = build(write(tmp_path, "jsonl", paths(["Künste", "Ku\u0308nste"]), columns=("text", "genre")),
                 tmp_path / "out", label=("--label-path", "genre"))
    assert done.returncode == 0, done.stderr
    samples, manifest = published(tmp_path / "out")
    assert {row["path"][0].split(" > ")[0] for row in samples} == {"Künste", "Sachbuch"}
    assert manifest["report"]["labels_respelled_nfc"] == 15
    done = build(write(tmp_path, "jsonl", paths(["Ratgeber", "Ratgeber", "RATGEBER"]), columns=("text", "genre")),
                 tmp_path / "out2", label=("--label-path", "genre"))
    assert done.returncode == 2 and "parent labels 'Ratgeber'" in done.stderr and "'RATGEBER'" in done.stderr
    done = build(write(tmp_path, "jsonl", paths(["Ratgeber", "Ratgeber", "RATGEBER"]), columns=("text", "genre")),
                 tmp_path / "out3", "--similar-labels", "merge", label=("--label-path", "genre"))
    assert done.returncode == 0, done.stderr
    samples, _ = published(tmp_path / "out3")
    assert {row["path"][0].split(" > ")[0] for row in samples} == {"Ratgeber", "Sachbuch"}


def test_different_labels_do_not_fold():
    labels = ["Sport", "Politik", "Kultur", "Wirtschaft", "Inland", "International", "Etat", "Web", "Panorama",
              "Wissenschaft", "Krimi & Thriller", "Romane & Erzählungen", "Kinderbuch & Jugendbuch"]
    assert len({fold_key(label) for label in labels}) == len(labels)


def test_every_default_ignorable_code_point_and_blank_is_dropped_from_a_label():
    import regex

    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    ignorable = regex.findall(r"\p{Default_Ignorable_Code_Point}", every)
    assert len(ignorable) > 4000  # the property, not a list: reserved ranges included
    for c in ignorable + ["\u2800"]:
        assert normalise(f"Sp{c}ort{c}")[0] in ("Sport", "Sp ort"), hex(ord(c))
    assert normalise("Liebe \u2764\ufe0f") == ("Liebe \u2764", ("invisible_characters",))


def test_sharp_s_against_ss_is_two_words_not_a_case_difference(tmp_path):
    assert fold_key("Maße") != fold_key("Masse") and fold_key("MASSE") != fold_key("Maße")
    assert fold_key("MAẞE") == fold_key("Maße")  # capital sharp s is the case of ß
    rows = [{"text": f"Text {i} über {['Gewichte', 'Physik'][i % 2]}", "label": ["Maße", "Masse"][i % 2]}
            for i in range(60)]
    done = build(write(tmp_path, "jsonl", rows), tmp_path / "out")
    assert done.returncode == 0, done.stderr
    samples, _ = published(tmp_path / "out")
    assert {row["label"] for row in samples} == {"Maße", "Masse"}


def test_the_folds_each_join_their_pair():
    assert normalise("Rat\u200bge\u00adber\ufeff\u2060 ") == ("Ratgeber", ("format_characters", "whitespace"))
    assert skeleton("Kr\u0430mi") == skeleton("Krami") and skeleton("’") == skeleton("'")
    for a, b in LOOK_ALIKES.values():
        assert fold_key(a) == fold_key(b), (a, b)


@pytest.mark.slow
def test_numeric_labels_spelled_1_1dot0_and_quoted_are_one_label(tmp_path):
    rows = []
    for i, (text, label) in enumerate(table_rows(60)):
        rows.append({"text": text, "label": [1, 1.0, "1"][i % 3] if label in ("Sport", "Kultur") else 2})
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    done = table_build(path, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert built_labels(tmp_path / "out") == {"1", "2"}

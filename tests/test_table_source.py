"""The generic `table` source: any labelled table through the recipes, card, manifest and publication,
checked against the sources we already trust (10kGNAD csv, GermEval 2019 dev set)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from helpers import one_error_line, run_cli, run_cli_here, shared_file
from tablefiles import built_texts, german_news, table_build, table_rows, write_tsv
from tecb_data import cli, layout
from tecb_data.build import build, build_table
from tecb_data.errors import UserError
from tecb_data.sources import blurbs, collapse_spaces, table
from tecb_data.sources.table import TableSettings

TOPICS = {
    "Sport": "Tor Spiel Mannschaft Trainer Liga Saison Punkte Sieg",
    "Kultur": "Theater Oper Roman Ausstellung Bühne Konzert Museum Lesung",
    "Wirtschaft": "Börse Aktie Umsatz Konzern Inflation Zinsen Markt Bilanz",
    "Wissenschaft": "Forschung Studie Labor Physik Zelle Teleskop Daten Klima",
}
BIBTEX = "@misc{test-table,\n  title = {A test table},\n  year = {2024},\n}\n"


def rows(n_per_label: int = 12, seed: int = 0) -> list[dict]:
    """A labelled corpus with titles, bodies, a parent > child path and ids."""
    rng = random.Random(seed)
    out = []
    for label, words in TOPICS.items():
        vocab = words.split()
        for i in range(n_per_label):
            parent = "Unterhaltung" if label in ("Sport", "Kultur") else "Sachwissen"
            title = f"{label} Meldung {i}: " + " ".join(rng.sample(vocab, 3))
            body = " ".join(rng.choice(vocab) for _ in range(25))
            out.append({"id": f"{label[:3]}{i:03d}", "title": title, "body": body, "label": label,
                        "parent": parent, "path": f"{parent} > {label}"})
    return out


def write_csv(path: Path, records: list[dict], delimiter: str = ",") -> Path:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(records[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(records)
    return path


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def write_parquet(path: Path, records: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(records), path)
    return path


def write_datasets(path: Path, records: list[dict]) -> Path:
    import datasets

    datasets.DatasetDict({"train": datasets.Dataset.from_list(records)}).save_to_disk(str(path))
    return path


def files(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in (layout.DATA_FILE, layout.SAMPLES_FILE)}


def members(folder: Path) -> dict[str, list[tuple[str, str]]]:
    """(id, label) per split, in published order, from the samples table."""
    out: dict[str, list] = {}
    for line in (folder / layout.SAMPLES_FILE).read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        out.setdefault(row["split"], []).append((row["id"], row["label"]))
    return out


# -- formats, views, recipes ---------------------------------------------------------------------------
@pytest.mark.parametrize("writer, suffix, extra", [
    (write_jsonl, "data.jsonl", {}),
    (write_parquet, "data.parquet", {}),
    (write_datasets, "saved", {"split": "train"}),
    (lambda p, r: write_csv(p, r, "\t"), "data.tsv", {}),
    (lambda p, r: write_csv(p, r, ";"), "data.txt", {"input_format": "csv"}),
])
def test_every_input_format_builds_the_same_data_as_csv(tmp_path, writer, suffix, extra):
    records = rows()
    options = dict(name="news", text="title", text_p2p="title,body", label="label", id="id", description="News.")
    reference = build_table(write_csv(tmp_path / "data.csv", records), tmp_path / "csv", TableSettings(**options))
    other = build_table(writer(tmp_path / suffix, records), tmp_path / "other", TableSettings(**options, **extra))
    assert [f.name for f, _ in reference] == [f.name for f, _ in other] == ["news-s2s", "news-p2p"]
    for (a, _), (b, _) in zip(reference, other):
        assert files(a) == files(b)
        layout.verify(b)


def test_flat_labels_get_the_tenkgnad_recipe_and_two_views_their_own_members(tmp_path):
    built = build_table(write_csv(tmp_path / "t.csv", rows()), tmp_path / "out",
                        TableSettings(name="news", text="title", text_p2p="title,body", label="label"))
    (s2s, m_s2s), (p2p, m_p2p) = built
    assert m_s2s["recipe"] == {"name": "table-flat", "version": "1", "draws_as": "tenkgnad", "splits": 10,
                               "min_fraction": 0.1, "max_fraction": 1.0, "members": "per-view"}
    assert [s["name"] for s in m_s2s["splits"]] == [f"sample-{i:02d}" for i in range(10)]
    assert [s["size"] for s in m_s2s["splits"]] == [s["size"] for s in m_p2p["splits"]]
    assert members(s2s) != members(p2p)  # per-view draws, as the published datasets
    assert all(min(s["labels"].values()) >= 1 and len(s["labels"]) >= 2 for s in m_s2s["splits"])
    texts = {json.loads(line)["id"]: json.loads(line)["text"] for line in (p2p / layout.SAMPLES_FILE).open()}
    first = rows()[0]
    assert texts[table.record_id({"s2s": first["title"], "p2p": f"{first['title']} {first['body']}"},
                                 {"category": first["label"]})] == f"{first['title']} {first['body']}"
    assert m_s2s["mteb_name"] == "NewsClusteringS2S" and m_p2p["mteb_name"] == "NewsClusteringP2P"
    assert m_s2s["source"] == "table" and m_s2s["language"] == "de" and m_s2s["table"]["text"] == ["title"]


def test_paired_split_count_and_fraction_range(tmp_path):
    built = build_table(write_csv(tmp_path / "t.csv", rows()), tmp_path / "out",
                        TableSettings(name="news", text="title", text_p2p="body", label="label", splits=4,
                                      min_fraction=0.5, max_fraction=0.6), paired=True)
    (s2s, manifest), (p2p, _) = built
    assert members(s2s) == members(p2p)
    assert manifest["recipe"]["members"] == "paired" and len(manifest["splits"]) == 4
    assert all(0.5 * 48 <= s["size"] <= 0.6 * 48 + 1 for s in manifest["splits"])
    with pytest.raises(UserError, match="fraction range"):
        build_table(tmp_path / "t.csv", tmp_path / "bad",
                    TableSettings(name="news", text="title", label="label", min_fraction=0.7, max_fraction=0.5))


@pytest.mark.parametrize("labels", [{"label_path": "path"}, {"label": "label", "label_parent": "parent"}])
def test_two_level_labels_get_the_blurbs_recipe(tmp_path, labels):
    (folder, manifest), = build_table(write_csv(tmp_path / "t.csv", rows()), tmp_path / "out",
                                      TableSettings(name="books", text="title", id="id", **labels))
    names = [s["name"] for s in manifest["splits"]]
    assert names == [f"coarse-{i:02d}" for i in range(10)] + [f"fine-{i:02d}" for i in range(10)] + [
        "within-Sachwissen", "within-Unterhaltung"]
    assert {s["level"] for s in manifest["splits"]} == {"top", "fine"}
    assert manifest["splits"][-1]["labels"] == {"Kultur": 12, "Sport": 12}
    assert manifest["recipe"]["name"] == "table-hierarchical"
    sample = json.loads((folder / layout.SAMPLES_FILE).read_text(encoding="utf-8").splitlines()[0])
    assert sample["path"][0].count(" > ") == 1


# -- cleaning -------------------------------------------------------------------------------------------
def dirty_rows() -> list[dict]:
    records = rows()
    first, second = records[0], records[20]
    records += [
        dict(first, id="dup1"),  # the same text and label again
        dict(first, id="dup2", title=first["title"].replace(" ", "  ")),  # the same after whitespace
        dict(second, id="c1", label="Wirtschaft"),  # second's text with another label: both go
        dict(first, id="e1", title="   "),  # empty text
        dict(first, id="s1", title="Kurz"),  # too short with --min-chars 5
        *[dict(first, id=f"r{i}", title=f"Seltenes Thema {i} lang genug", label="Selten") for i in range(2)],
    ]
    return records


def test_cleaning_counts_every_removed_row_by_reason_whatever_the_order(tmp_path):
    records = dirty_rows()
    shuffled = records[:]
    random.Random(1).shuffle(shuffled)
    options = dict(name="news", text="title", label="label", id="id", min_chars=5, min_per_label=3,
                   description="News.")
    (a, manifest), = build_table(write_csv(tmp_path / "a.csv", records), tmp_path / "a", TableSettings(**options),
                                 report=tmp_path / "r.json")
    (b, _), = build_table(write_csv(tmp_path / "b.csv", shuffled), tmp_path / "b", TableSettings(**options))
    assert files(a) == files(b)
    report = manifest["report"]
    assert report == {"rows_read": 55, "kept": 47, "removed_empty_text": 1, "removed_too_short": 1,
                      "removed_other_language": 0, "removed_exact_duplicate": 2, "removed_conflicting_duplicate": 2,
                      "removed_rare_label": 2, "labels_respelled_nfc": 0, "labels_respelled_format_characters": 0,
                      "labels_respelled_invisible_characters": 0,
                      "labels_respelled_whitespace": 0, "labels_merged": 0, "labels_kept_apart": 0}
    assert report["rows_read"] == report["kept"] + sum(v for k, v in report.items() if k.startswith("removed_"))
    card = (a / layout.CARD).read_text(encoding="utf-8")
    assert "55 rows read, 47 kept" in card and "| conflicting duplicate (same text, other labels; none kept) | 2 |" in card
    examples = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["examples"]
    assert sorted(examples) == ["conflicting_duplicate", "empty_text", "exact_duplicate", "rare_label", "too_short"]
    assert {e["id"] for e in examples["conflicting_duplicate"]} == {"c1", "Kul008"}
    assert examples["too_short"][0]["where"].startswith("row ") and "line" in examples["too_short"][0]["where"]


def test_language_filter_removes_rows_in_another_language(tmp_path):
    records = rows(6) + [dict(rows(1)[0], id=f"en{i}", label="Sport",
                              title=f"The weather is really nice today and we all go to the beach number {i}")
                         for i in range(3)]
    (folder, manifest), = build_table(write_jsonl(tmp_path / "t.jsonl", records), tmp_path / "out",
                                      TableSettings(name="news", text="title", label="label", id="id",
                                                    language_filter=True))
    assert manifest["report"]["removed_other_language"] == 3
    assert not any(i.startswith("en") for split in members(folder).values() for i, _ in split)


# -- downstream: verify, load, stats, card, push, MTEB tasks, grid ------------------------------------------
@pytest.fixture(scope="module")
def cli_built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("table")
    (tmp / "ref.bib").write_text(BIBTEX, encoding="utf-8")
    write_csv(tmp / "news.csv", rows())
    code = cli.main(["build", "--source", "table", "--input", str(tmp / "news.csv"), "--name", "german-news",
                     "--text", "title", "--text-p2p", "title,body", "--label", "label", "--id", "id",
                     "--licence", "CC-BY-4.0", "--citation", str(tmp / "ref.bib"), "--out", str(tmp / "out"), "--quiet"])
    assert code == 0
    return tmp / "out"


def test_the_folder_verifies_loads_and_describes_itself(cli_built, capsys):
    import tecb_data

    folder = cli_built / "german-news-p2p"
    assert cli.main(["verify", str(folder)]) == 0
    bench = tecb_data.load(folder)
    assert bench.name == "german-news-p2p" and bench.mteb_name == "GermanNewsClusteringP2P"
    assert len(bench.splits) == 10 and all(len(set(s.labels)) == 4 for s in bench.splits)
    assert cli.main(["stats", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "german-news-p2p" in out and "unique texts" in out and "48" in out


def test_the_card_passes_the_hub_checks_and_says_what_how_and_whose(cli_built):
    from tecb_data.card import card_problems

    folder = cli_built / "german-news-s2s"
    manifest = layout.read_manifest(folder)
    card = (folder / layout.CARD).read_text(encoding="utf-8")
    assert card_problems(card, manifest) == []
    assert "license: cc-by-4.0" in card and "@misc{test-table," in card and "Wehrli" in card
    assert "Texts: the column `title`" in card and "Labels: column `label`" in card and "Record ids: column `id`" in card
    assert manifest["license"] == "cc-by-4.0" and manifest["citation"].startswith("@misc{test-table")


def test_push_dry_run_and_a_push_without_licence_is_refused(cli_built, tmp_path):
    from hubserver import TOKEN, FakeHub

    hub = FakeHub(tokens={TOKEN: "maintainer"})
    hub.start()
    try:
        env = {"HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0",
               "HF_HUB_DISABLE_XET": "1"}
        result = run_cli("push", str(cli_built / "german-news-p2p"), "--repo-id", "me/german-news-p2p", "--dry-run",
                         env=env)
        assert result.returncode == 0, result.stderr
        assert "add     README.md" in result.stdout and "nothing was sent" in result.stdout
        pushed = run_cli("push", str(cli_built / "german-news-p2p"), "--repo-id", "me/german-news-p2p", env=env)
        assert pushed.returncode == 0, pushed.stderr
        assert "committed" in pushed.stdout
        write_csv(tmp_path / "t.csv", rows())
        build_table(tmp_path / "t.csv", tmp_path / "out", TableSettings(name="news", text="title", label="label"))
        refused = run_cli("push", str(tmp_path / "out" / "news-s2s"), "--repo-id", "me/news", "--dry-run", env=env)
        assert refused.returncode == 2 and "built without a licence" in refused.stderr
        assert refused.stderr.strip().count("\n") == 0
    finally:
        hub.stop()


def test_mteb_task_under_its_own_name_and_language_and_the_grid_runs(cli_built, tmp_path):
    from tecb_eval import mteb_tasks, run_grid

    folder = cli_built / "german-news-s2s"
    (legacy,) = mteb_tasks([folder])
    (fast,) = mteb_tasks(folder, version="v2")
    assert legacy.metadata.name == "GermanNewsClusteringS2S" and fast.metadata.name == "GermanNewsClusteringS2S.v2"
    assert legacy.metadata.eval_langs == ["deu-Latn"] and legacy.metadata.type == "Clustering"
    frame = run_grid([folder], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], cache_dir=tmp_path,
                     limit_splits=3, progress=False)
    # The titles name their topic: any encoder should separate them.
    assert len(frame) == 3 and frame.v_measure.between(0.5, 1 + 1e-9).all()


def test_a_french_table_is_a_french_task_in_mteb_and_in_the_export(tmp_path):
    import json as json_module

    import mteb

    from tecb_eval import mteb_tasks, run_grid
    from tecb_eval.cli import main as eval_main

    ((folder, manifest),) = build_table(write_csv(tmp_path / "fr.csv", rows()), tmp_path / "out",
                                        TableSettings(name="nouvelles", text="title", label="label", language="fr"))
    assert manifest["language"] == "fr"
    (legacy,) = mteb_tasks([folder])
    (fast,) = mteb_tasks([folder], version="v2")
    assert legacy.metadata.eval_langs == fast.metadata.eval_langs == ["fra-Latn"]
    results = tmp_path / "results.jsonl"
    run_grid([folder], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], cache_dir=tmp_path / "cache",
             results=results, progress=False, log=lambda m: None)
    assert eval_main(["export", str(results), "--out", str(tmp_path / "export")]) == 0
    (path,) = (tmp_path / "export" / "mteb" / "results").rglob("NouvellesClusteringS2S.json")
    assert json_module.loads(path.read_text())["scores"]["test"][0]["languages"] == ["fra-Latn"]
    loaded = mteb.ResultCache(tmp_path / "export" / "mteb").load_results(include_remote=False)
    assert [r.task_name for m in loaded.model_results for r in m.task_results] == ["NouvellesClusteringS2S"]


# -- bad input: one line naming file, row and column; exit 2; nothing written ----------------------------
def _bad_inputs(tmp: Path) -> list[tuple[Path, str, str]]:
    """(input, label column, the message's pattern)."""
    good = rows()
    empty_label = [dict(r) for r in good]
    empty_label[5]["label"] = " "
    one_label = [dict(r, label="Sport") for r in good]
    (tmp / "latin1.csv").write_bytes("id,title,label\n1,Übung,Sport\n".encode("latin-1"))
    write_jsonl(tmp / "broken.jsonl", good[:3])
    with open(tmp / "broken.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"id": "x", "title": "unterbrochen\n')
    write_csv(tmp / "wide.csv", good)
    with open(tmp / "wide.csv", "a", encoding="utf-8") as fh:
        fh.write("1,2,3,4,5,6,7;8\t9|0\n")  # too wide under every delimiter: no reading parses the file
    return [
        (tmp / "wide.csv", "label", r"wide\.csv: row 49 \(line 50\): 7 fields, the header has 6 \(delimiter ','"),
        (write_csv(tmp / "missing.csv", good), "category", r"missing\.csv: line 1 \(header\): no column 'category'"),
        (write_csv(tmp / "empty.csv", empty_label), "label", r"empty\.csv: row 6 \(line 7\), column 'label': empty label"),
        (write_jsonl(tmp / "empty.jsonl", empty_label), "label", r"empty\.jsonl: line 6, column 'label': empty label"),
        (write_csv(tmp / "one.csv", one_label), "label",
         r"one\.csv: column 'label': every one of the 48 rows has the label 'Sport'"),
        (write_parquet(tmp / "really.csv", good), "label", r"really\.csv: not a CSV text file, it is a Parquet file"),
        (write_csv(tmp / "really.parquet", good), "label", r"really\.parquet: not a Parquet file .*looks like text"),
        (tmp / "latin1.csv", "label", r"latin1\.csv: line 2, byte 3 of the line: not UTF-8 text \(byte 0xdc\)"),
        (tmp / "broken.jsonl", "label", r"broken\.jsonl: line 4, character \d+: not JSON"),
    ]


def test_bad_input_is_one_line_naming_file_row_and_column_and_writes_nothing(tmp_path):
    for i, (path, label, message) in enumerate(_bad_inputs(tmp_path)):
        out = tmp_path / f"out-{path.name}"
        argv = ["build", "--source", "table", "--input", str(path), "--name", "news", "--text", "title",
                "--label", label, "--out", str(out), "--quiet"]
        # The first as a user runs it, in a fresh interpreter; the rest through the same entry point
        # in this process (the CLI's main is what turns an error into its line and exit code).
        result = run_cli(*argv) if i == 0 else run_cli_here(*argv)
        assert result.returncode == 2, (path, result.stdout, result.stderr)
        line = result.stderr.strip()
        assert line.count("\n") == 0 and str(path) in line, line
        assert re.search(message, line), (message, line)
        assert not out.exists()


def test_option_mistakes_are_user_errors(tmp_path):
    path = write_csv(tmp_path / "t.csv", rows())
    for options, build_options, message in [
        (dict(name="tenkgnad-clustering", text_p2p="body", label="label"), {}, "registry's tenkgnad-clustering-p2p"),
        (dict(name="Bad Name", text="title", label="label"), {}, "--name 'Bad Name'"),
        (dict(text="title", label="label"), {}, "--source table needs --name NAME"),
        (dict(name="news", label="label"), {}, "needs --text"),
        (dict(name="news", text="title", label="label", licence="cc-by-5.0"), {}, "--licence 'cc-by-5.0'"),
        (dict(name="news", text="title", label="label", citation=tmp_path / "none.bib"), {}, "--citation"),
        (dict(name="news", text="title", label="label"), dict(views=("p2p",)), "--view p2p: no text columns"),
    ]:
        with pytest.raises(UserError, match=re.escape(message)):
            build_table(path, tmp_path / "out", TableSettings(**options), **build_options)
    assert not (tmp_path / "out").exists()
    assert cli.main(["build", "--source", "tenkgnad", "--demo", "--text", "x", "--out", str(tmp_path / "o")]) == 2


def test_build_builds_a_table_as_build_table_does(tmp_path):
    path = write_csv(tmp_path / "t.csv", rows())
    (a, _), = build("table", path, tmp_path / "a", name="news", text="title", label="label", seed=3)
    (b, _), = build_table(path, tmp_path / "b", TableSettings(name="news", text="title", label="label"), seed=3)
    assert files(a) == files(b)


def test_every_table_option_is_a_settings_field_with_its_words():
    import dataclasses
    import inspect

    from tecb_data.build import READERS

    fields = [f.name for f in dataclasses.fields(TableSettings)]
    assert set(READERS["table"].options.values()) - {"report"} == set(fields)
    # Fields carry no docstrings: each says what it is in a comment on its line or just above it,
    # which the API page renders.
    lines = inspect.getsource(TableSettings).splitlines()
    for name in fields:
        (at,) = [i for i, line in enumerate(lines) if re.match(rf"\s+{name}:", line)]
        assert "#" in lines[at] or lines[at - 1].strip().startswith("#"), f"TableSettings.{name} has no comment"


# -- what a reader of each format could get wrong: quotes, records over several lines, long fields ---

def _written_by(writer: str, path: Path, rows: list[tuple], header: list[str]) -> Path:
    if writer == "pandas":
        import pandas as pd

        pd.DataFrame(rows, columns=header).to_csv(path, index=False)
    else:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(header)
            out.writerows(rows)
    return path


@pytest.mark.parametrize("writer", ["pandas", "csv"])
def test_a_csv_written_by_pandas_or_the_csv_module_reads_as_written_without_options(tmp_path, writer):
    news = german_news()
    for header in (["text"], ["text", "label"]):
        path = _written_by(writer, tmp_path / f"{writer}-{len(header)}.csv", [r[:len(header)] for r in news], header)
        source = table.TableSource(label="label" if "label" in header else None, text=("text",))
        result, _ = table.read_table(path, source)
        got = sorted((i.views["s2s"], i.labels.get("category")) for i in result.items)
        want = sorted((collapse_spaces(t), l if "label" in header else None) for t, l in news)
        assert got == want, (writer, header)


def test_a_one_column_csv_from_pandas_builds_with_the_table_source(tmp_path):
    import pandas as pd

    path = tmp_path / "news.csv"
    pd.DataFrame({"text": [t for t, _ in german_news()]}).to_csv(path, index=False)
    done = run_cli_here("build", "--source", "table", "--input", str(path), "--name", "news", "--text", "text",
                        "--out", str(tmp_path / "out"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert built_texts(tmp_path / "out") == {collapse_spaces(t) for t, _ in german_news()}


def test_the_sniffer_decides_only_between_readings_under_which_the_whole_file_parses():
    # 10kGNAD's own shape, label;'text' with '' inside: both quote characters parse it, the sniffer
    # picks the one that leaves no text wrapped in quotes.
    tenkgnad = "".join(f"{l};'Er sagte: ''{t}'' und ging'\n" for t, l in table_rows(20))
    assert table.choose_dialect(tenkgnad) == (";", "'")
    # Past the sniffed sample a record splits differently under ';': only ',' parses the whole file.
    text = "text,label\n" + "".join(f"{t} 'a;b',{l}\n" for t, l in table_rows(3000))
    assert len(text) > table.SNIFF_CHARS and table.choose_dialect(text) == (",", '"')


@pytest.mark.slow
def test_a_stray_quote_in_a_tsv_joins_no_rows(tmp_path):
    # Long texts: the quotes lie past the part of the file a dialect sniffer reads.
    rows = [(f"{text} " + "Wort " * 80, label) for text, label in table_rows()]
    rows[180] = ('"Zitat ohne Ende ' + rows[180][0], rows[180][1])
    rows[184] = (rows[184][0] + ' Ende"', rows[184][1])
    out = tmp_path / "out"
    done = table_build(write_tsv(tmp_path / "stray.tsv", rows), out)
    assert done.returncode == 0, done.stderr
    texts = built_texts(out)
    assert len(texts) == 200 and any(t.startswith('"Zitat ohne Ende') for t in texts)


@pytest.mark.slow
def test_a_csv_record_over_several_lines_is_said_with_its_line(tmp_path):
    rows = table_rows(40)
    lines = ["text,label"] + [f"{t},{l}" for t, l in rows]
    lines[11] = '"Er sagte hallo'  # a quote opens a field that runs on to the quote two lines down
    lines[13] = 'und ging",Sport'
    path = tmp_path / "stray.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = table_build(path, tmp_path / "out")
    said = done.stderr + done.stdout
    assert done.returncode == 0 and "line 12" in said and "span several lines" in said, said


@pytest.mark.slow
def test_a_line_separator_inside_a_json_string_is_valid_json_lines(tmp_path):
    rows = [{"text": t, "label": l} for t, l in table_rows(40)]
    rows[3]["text"] = "Zeile mit\u2028Trenner und\u2029Absatz"
    path = tmp_path / "sep.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    done = table_build(path, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert len(built_texts(tmp_path / "out")) == 40


@pytest.mark.slow
def test_a_csv_field_longer_than_the_csv_modules_default_limit_is_read(tmp_path):
    rows = table_rows(40)
    rows[7] = ("Langer Text " + "x" * 200_000, rows[7][1])
    path = tmp_path / "long.csv"
    path.write_text("text,label\n" + "".join(f'"{t}",{l}\n' for t, l in rows), encoding="utf-8")
    done = table_build(path, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert max(len(t) for t in built_texts(tmp_path / "out")) > 200_000


@pytest.mark.slow
def test_a_datasetdict_error_names_input_split(tmp_path):
    import datasets

    rows = table_rows(40)
    part = datasets.Dataset.from_dict({"text": [t for t, _ in rows], "label": [l for _, l in rows]})
    datasets.DatasetDict({"train": part, "test": part}).save_to_disk(str(tmp_path / "dd"))
    error = one_error_line(table_build(tmp_path / "dd", tmp_path / "out"))
    assert "--input-split" in error and "--split " not in error


@pytest.mark.slow
def test_a_truncated_parquet_file_is_called_truncated(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = table_rows(200)
    pq.write_table(pa.Table.from_pylist([{"text": t, "label": l} for t, l in rows]), tmp_path / "whole.parquet")
    raw = (tmp_path / "whole.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(raw[: len(raw) // 2])
    error = one_error_line(table_build(tmp_path / "cut.parquet", tmp_path / "out"))
    assert "truncated" in error and "looks like a Parquet file" not in error and "name it .parquet" not in error


@pytest.mark.slow
def test_a_language_mteb_does_not_know_is_refused_at_build_time(tmp_path):
    source = write_tsv(tmp_path / "in.tsv", table_rows())
    error = one_error_line(table_build(source, tmp_path / "out", "--language", "zz"))
    assert "--language 'zz'" in error and not (tmp_path / "out").exists()


# -- equivalence with the sources we trust ----------------------------------------------------------------
def tenkgnad_rows(path: Path) -> list[tuple[str, str]]:
    text = path.read_text(encoding="utf-8")
    return [(r[0], r[1]) for r in csv.reader(io.StringIO(text), delimiter=";", quotechar="'") if r]


def test_the_10kgnad_csv_through_the_table_source_builds_what_the_tenkgnad_source_builds(tmp_path):
    csv_path = shared_file("10kgnad/test.csv")
    (source, expected), = build("tenkgnad", csv_path, tmp_path / "source")
    # The csv itself, read by the table source: delimiter ; and quote ' sniffed, no header row.
    code = cli.main(["build", "--source", "table", "--input", str(csv_path), "--columns", "label,text",
                     "--text-p2p", "text", "--label", "label", "--name", "tenkgnad-table", "--out",
                     str(tmp_path / "table"), "--quiet"])
    assert code == 0
    manifest = layout.read_manifest(tmp_path / "table" / "tenkgnad-table-p2p")
    assert [(s["name"], s["size"]) for s in manifest["splits"]] == [(s["name"], s["size"]) for s in expected["splits"]]
    assert manifest["statistics"]["unique_texts"] == expected["statistics"]["unique_texts"]
    assert [len(s["labels"]) for s in manifest["splits"]] == [len(s["labels"]) for s in expected["splits"]]
    # The same records with the same labels go into the recipe; only their ids (and so members) differ.
    from tecb_data.sources import tenkgnad

    source_items = tenkgnad.read(csv_path).items
    table_items = table.read_table(csv_path, table.TableSource(label="label", text_p2p=("text",),
                                                               columns=("label", "text")))[0].items
    assert Counter(i.labels["category"] for i in table_items) == Counter(i.labels["category"] for i in source_items)
    assert sorted(i.views["p2p"] for i in table_items) == sorted(i.views["p2p"] for i in source_items)
    # With the ids the source gives its records, the same members, texts and rows: the same bytes.
    with_ids = [{"id": hashlib.blake2b(collapse_spaces(body).encode("utf-8"), digest_size=8).hexdigest(),
                 "label": label, "text": body} for label, body in tenkgnad_rows(csv_path)]
    (table_folder, manifest), = build_table(write_csv(tmp_path / "ids.csv", with_ids), tmp_path / "ids",
                                            TableSettings(name="tenkgnad-table", text_p2p="text", label="label",
                                                          id="id"))
    assert manifest["splits"] == expected["splits"] and manifest["statistics"] == expected["statistics"]
    assert files(table_folder) == files(source)


def test_the_germeval_dev_set_as_a_table_builds_the_blurbs_splits_and_members(germeval_dev_datasets, tmp_path):
    dev = shared_file("germeval2019/blurbs_dev.txt.gz")
    built = germeval_dev_datasets
    books, _, _ = blurbs.read_books(dev)
    items, _ = blurbs.select(books)
    by_isbn = {b.isbn: b for b in books}
    flat = [{"isbn": i.id, "title": by_isbn[i.id].title, "blurb": by_isbn[i.id].blurb,
             "genre": " > ".join(v for v in (i.labels["top"], i.labels["fine"]) if v)} for i in items]
    random.Random(7).shuffle(flat)  # row order must not matter
    for_table = write_parquet(tmp_path / "blurbs.parquet", flat)
    code = cli.main(["build", "--source", "table", "--input", str(for_table), "--name", "blurbs-table",
                     "--text", "title", "--text-p2p", "title,blurb", "--label-path", "genre", "--path-sep", ">",
                     "--id", "isbn", "--out", str(tmp_path / "table"), "--quiet"])
    assert code == 0
    for view in ("s2s", "p2p"):
        source_folder, expected = built[f"blurbs-clustering-{view}"]
        folder = tmp_path / "table" / f"blurbs-table-{view}"
        manifest = layout.read_manifest(folder)
        assert manifest["splits"] == expected["splits"]  # names, levels, sizes, label counts: all 28
        assert members(folder) == members(source_folder)
        ours = layout.read_split_rows(folder)
        theirs = layout.read_split_rows(source_folder)
        # Texts equal up to whitespace, which the table source collapses as the 10kGNAD source does.
        assert [[collapse_spaces(t) for t in texts] for texts, _ in theirs] == [texts for texts, _ in ours]


# -- what the card writes as a command, names with control characters, UTF-16 ----------------------

def test_the_cards_command_is_the_build_argv_and_runs_again_to_the_same_files(tmp_path, monkeypatch):
    """Every value quoted for the shell (a column with spaces and '&', a description with quotes, '$'
    and a backtick): shlex.split gives back the argv that built it, and that argv builds the same
    folder again from copies of the input and the citation file in the current folder."""
    import shlex

    records = [{"Titel des Buches": r["title"], "Sachgebiet & Thema": r["label"], "Kennung": r["id"]} for r in rows()]
    source = write_csv(tmp_path / "meine tabelle.csv", records)
    (tmp_path / "ref.bib").write_text(BIBTEX, encoding="utf-8")
    options = ["--name", "news", "--text", "Titel des Buches", "--label", "Sachgebiet & Thema", "--id", "Kennung",
               "--min-chars", "3", "--licence", "cc-by-4.0", "--citation", "ref.bib",
               "--description", "Nachrichten \"aus\" $HOME und `uname`; it's 100% echt.", "--seed", "7"]
    monkeypatch.chdir(tmp_path)
    assert cli.main(["build", "--source", "table", "--input", str(source), *options, "--out", str(tmp_path / "a"),
                     "--quiet"]) == 0
    card = (tmp_path / "a" / "news-s2s" / "README.md").read_text(encoding="utf-8")
    command = re.search(r"Built with `tecb` \S+ \((`+) ?(.*?) ?\1\)", card).group(2)
    argv = shlex.split(command)
    expected = ["tecb-data", "build", "--source", "table", "--input", "meine tabelle.csv", "--name", "news",
                "--text", "Titel des Buches", "--label", "Sachgebiet & Thema", "--id", "Kennung", "--min-chars", "3",
                "--licence", "cc-by-4.0", "--citation", "ref.bib", "--description",
                "Nachrichten \"aus\" $HOME und `uname`; it's 100% echt.", "--seed", "7", "--out", "out"]
    assert argv == expected
    again = tmp_path / "again"
    again.mkdir()
    (again / "meine tabelle.csv").write_bytes(source.read_bytes())
    (again / "ref.bib").write_text(BIBTEX, encoding="utf-8")
    monkeypatch.chdir(again)
    assert cli.main(argv[1:] + ["--quiet"]) == 0
    assert files(again / "out" / "news-s2s") == files(tmp_path / "a" / "news-s2s")


@pytest.mark.parametrize("option, value", [
    ("--text", "Titel\nimport os"), ("--text", "title,bo\tdy"), ("--label", "la\rbel"),
    ("--label-parent", "par\x1bent"), ("--id", "i\x00d"), ("--name", "news\n"), ("--columns", "id,ti\ntle,label"),
    ("--pretty-name", "News\n---\nlicense: mit"), ("--description", "Zwei\tSpalten"),
])
def test_a_name_with_a_control_character_is_refused_where_it_is_given(tmp_path, option, value):
    argv = {"--name": "news", "--text": "title", "--label": "label", "--id": "id"}
    argv[option] = value
    done = run_cli_here("build", "--source", "table", "--input", str(write_csv(tmp_path / "t.csv", rows())),
                        *[w for pair in argv.items() for w in pair], "--out", str(tmp_path / "out"))
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert option in lines[0] and "control character" in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fmt, bom", [("tsv", True), ("csv", True), ("tsv", False), ("jsonl", False)])
def test_a_utf16_table_is_named_utf16_with_what_to_do(tmp_path, fmt, bom):
    records = rows()
    if fmt == "jsonl":
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    else:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(records[0]), delimiter="\t" if fmt == "tsv" else ",")
        writer.writeheader()
        writer.writerows(records)
        text = buffer.getvalue()
    path = tmp_path / f"unicode.{fmt}"
    path.write_bytes(text.encode("utf-16") if bom else text.encode("utf-16-le"))
    with pytest.raises(UserError) as caught:
        build_table(path, tmp_path / "out", TableSettings(name="news", text="title", label="label"))
    message = str(caught.value)
    assert "UTF-16" in message and "re-save it as UTF-8" in message and "binary" not in message
    assert "\n" not in message

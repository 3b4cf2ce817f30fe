"""A dataset has two names (docs/datasets.md): its folder's (`tenkgnad-clustering-s2s`, what
`tecb-data` builds, states and pushes) and its MTEB task's (`TenKGnadClusteringS2S`, what every
results output names: a run's lines, the tables, compare, recommend, the report and the exports).
Each kind of output uses its one name; a folder shows in a results output only as a path."""

from __future__ import annotations

import re

from helpers import run_args


def test_a_runs_summary_and_tables_name_the_dataset_by_its_task_name(demo_datasets, tmp_path, capsys):
    from tecb_eval.cli import main

    folder = demo_datasets / "tenkgnad-clustering-s2s"
    capsys.readouterr()
    assert main(run_args(folder, tmp_path / "r.jsonl", tmp_path / "cache", "--limit-splits", "1")) == 0
    said = "\n".join(capsys.readouterr())
    assert re.search(r"^TenKGnadClusteringS2S: 1 cell computed", said, re.MULTILINE), said
    # The folder's name only as part of a path.
    assert not re.search(r"(?<![/\w-])tenkgnad-clustering-s2s", said), said


def test_the_label_free_table_a_run_prints_and_exports_names_the_task(tmp_path, capsys):
    from tablefiles import unlabelled_corpus
    from tecb_eval.cli import main

    corpus = unlabelled_corpus(tmp_path, n=60)
    capsys.readouterr()
    assert main(["run", "--data", str(corpus), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none", "--k",
                 "3,6", "--stability", "0", "--results", str(tmp_path / "r.jsonl"), "--cache-dir", str(tmp_path / "c"),
                 "--out", str(tmp_path / "export"), "--quiet"]) == 0
    said = "\n".join(capsys.readouterr()) + (tmp_path / "export" / "label_free.md").read_text(encoding="utf-8")
    assert "| tfidf-lsa | CorpusClusteringS2S | none | minibatch_kmeans | k=3 |" in said, said
    assert not re.search(r"(?<![/\w-])corpus-s2s", said), said


def test_the_reports_label_free_section_and_corpus_page_name_the_task(tmp_path, capsys):
    from tablefiles import unlabelled_corpus
    from tecb_eval.cli import main

    corpus = unlabelled_corpus(tmp_path, n=60)
    assert main(["run", "--data", str(corpus), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none", "--k",
                 "3,6", "--stability", "0", "--results", str(tmp_path / "r.jsonl"), "--cache-dir", str(tmp_path / "c"),
                 "--quiet"]) == 0
    assert main(["report", str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "site"), "--no-figures"]) == 0
    capsys.readouterr()
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    page = (tmp_path / "site" / "corpora" / "corpus-s2s.html").read_text(encoding="utf-8")
    assert "CorpusClusteringS2S: label-free scores</h2>" in index
    assert 'href="corpora/corpus-s2s.html"' in index  # the section still links its page
    assert "CorpusClusteringS2S: a corpus without labels</h1>" in page
    assert "CorpusClusteringS2S: label-free criteria per pipeline" in page
    # The folder's name only as part of a path or a file name.
    for html in (index, page):
        assert not re.search(r"(?<![/\w-])corpus-s2s(?![\w.-])", html), re.findall(r".{60}corpus-s2s.{20}", html)

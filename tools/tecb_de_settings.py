"""Read the clustering and reduction settings the paper's authors ran out of their own scripts:
the referee for ``profile="paper"``'s estimators (tests/test_fidelity_settings.py).

The authors' evaluator is ``scripts/FlexibleClusteringEvaluator.py`` of github.com/ClimSocAna/tecb-de,
their grid ``scripts/run_cteb_de.py`` and their pins ``requirements.txt``. This script parses those
files at a pinned commit (Python's ``ast``, nothing run) and records, with file and line:

- per algorithm and per reduction, the class the evaluator builds and the arguments it passes
  (``n_clusters`` is the split's number of labels; ``**clustering_params`` is empty in every grid cell),
  and the defaults it fills into ``clustering_params`` itself (k-means' batch size and ``n_init``);
- the grid's 14 (reduction, algorithm) cells;
- the library versions they pinned.

- the constructor defaults of the classes they built, read (``ast`` again) from the very releases
  they pinned, downloaded by pip without installing them: what "no argument" meant in their runs.
  scikit-learn is not pinned there (mteb 1.0.1 asks for >= 1.0.2), so its defaults are today's.

Usage (any Python 3.10+, git on the path)::

    git clone https://github.com/ClimSocAna/tecb-de /tmp/tecb-de
    pip download --no-deps -d /tmp/pins umap-learn==0.5.3 hdbscan==0.8.29
    pip download --no-deps -d /tmp/pins --only-binary=:all: --python-version 3.10 \
        --platform manylinux2014_x86_64 river==0.14.0
    python tools/tecb_de_settings.py /tmp/tecb-de 81b56bd7b42d7727bddeefef285590d02c71b1fd \
        tests/data/tecb_de_settings.json /tmp/pins
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

EVALUATOR = "scripts/FlexibleClusteringEvaluator.py"
GRID = "scripts/run_cteb_de.py"
PINS = "requirements.txt"
# (release file in the pins folder, source file inside it, class): the classes the evaluator builds.
PINNED_CLASSES = {
    "umap.UMAP": ("umap-learn-0.5.3.tar.gz", "umap-learn-0.5.3/umap/umap_.py", "UMAP"),
    "hdbscan.HDBSCAN": ("hdbscan-0.8.29.tar.gz", "hdbscan-0.8.29/hdbscan/hdbscan_.py", "HDBSCAN"),
    "river.cluster.DBSTREAM": ("river-0.14.0-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                               "river/cluster/dbstream.py", "DBSTREAM"),
}


def show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    raise ValueError(f"line {node.lineno}: not a dotted name: {ast.dump(node)}")


def argument(node: ast.AST):
    """A literal as itself; anything else (a variable) as its source text in angle brackets."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        return f"<{ast.unparse(node)}>"


def call(node: ast.Call) -> dict:
    """A constructor call: class, positional and keyword arguments, ``**`` spreads, line; nested calls
    (``make_pipeline(PCA(...), UMAP(...))``) become ``steps``."""
    entry = {"class": dotted(node.func), "line": node.lineno}
    if any(isinstance(a, ast.Call) for a in node.args):
        entry["steps"] = [call(a) for a in node.args]
    elif node.args:
        entry["args"] = [argument(a) for a in node.args]
    entry["kwargs"] = {k.arg: argument(k.value) for k in node.keywords if k.arg is not None}
    entry["spread"] = [ast.unparse(k.value) for k in node.keywords if k.arg is None]
    return entry


def branches(function: ast.FunctionDef, variable: str, target: str) -> dict:
    """``if variable == "name": ... self.<target> = Call(...)`` chains -> name -> the call and the
    defaults that branch writes into a params dict (``params["key"] = value``)."""
    found = {}

    def visit(node: ast.If):
        test = node.test
        if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == variable
                and isinstance(test.ops[0], (ast.Eq, ast.Is))):
            name = ast.literal_eval(test.comparators[0])
            entry: dict = {"test_line": node.lineno, "defaults": {}}
            for statement in ast.walk(ast.Module(body=node.body, type_ignores=[])):
                if not isinstance(statement, ast.Assign):
                    continue
                goal = statement.targets[0]
                if isinstance(goal, ast.Attribute) and goal.attr == target and isinstance(statement.value, ast.Call):
                    entry.update(call(statement.value))
                elif isinstance(goal, ast.Subscript):
                    entry["defaults"][ast.literal_eval(goal.slice)] = {"value": argument(statement.value),
                                                                       "line": statement.lineno}
                elif isinstance(goal, ast.Attribute) and goal.attr == target and isinstance(statement.value, ast.Constant):
                    entry.update({"class": None, "line": statement.lineno})
            found["none" if name is None else name] = entry
        for other in node.orelse:
            if isinstance(other, ast.If):
                visit(other)

    for node in function.body:
        if isinstance(node, ast.If):
            visit(node)
    return found


def evaluator_settings(source: str) -> dict:
    tree = ast.parse(source)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    init = next(f for f in classes["FlexibleClusteringEvaluator"].body
                if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    algorithms = branches(init, "clustering_alg", "clustering_model")
    reductions = branches(init, "dim_red", "dim_red_model")
    wrappers = {name: {"bases": [dotted(b) for b in node.bases], "line": node.lineno}
                for name, node in classes.items() if name != "FlexibleClusteringEvaluator"}
    return {"algorithms": algorithms, "reductions": reductions, "wrappers": wrappers}


def grid_cells(source: str) -> dict:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "task_configs":
            return {"line": node.lineno, "cells": ast.literal_eval(node.value)}
    raise ValueError(f"{GRID}: no task_configs")


def release_source(release: Path, member: str) -> str:
    if release.name.endswith(".tar.gz"):
        with tarfile.open(release) as archive:
            return archive.extractfile(member).read().decode()
    with zipfile.ZipFile(release) as archive:
        return archive.read(member).decode()


def constructor_defaults(source: str, class_name: str) -> dict:
    """The keyword defaults of ``class_name.__init__`` (literals; others as their source text)."""
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    positional = init.args.args[len(init.args.args) - len(init.args.defaults):]
    pairs = list(zip(positional, init.args.defaults))
    pairs += [(a, d) for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults) if d is not None]
    return {"line": init.lineno, "defaults": {a.arg: argument(d) for a, d in pairs}}


def pinned_defaults(pins: Path) -> dict:
    found = {}
    for name, (release, member, class_name) in PINNED_CLASSES.items():
        found[name] = {"release": release, "file": member,
                       **constructor_defaults(release_source(pins / release, member), class_name)}
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: tecb_de_settings.py TECB_DE_CLONE COMMIT OUTPUT.json PINS_FOLDER", file=sys.stderr)
        return 2
    repo, commit, out, pins = Path(argv[0]), argv[1], Path(argv[2]), Path(argv[3])
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", commit], check=True, capture_output=True,
                            text=True).stdout.strip()
    document = {
        "about": "the clustering and reduction settings of the paper's evaluator, parsed from the authors' "
                 "scripts at a pinned commit; written by tools/tecb_de_settings.py",
        "repository": "https://github.com/ClimSocAna/tecb-de",
        "commit": commit,
        "evaluator": {"file": EVALUATOR, **evaluator_settings(show(repo, commit, EVALUATOR))},
        "grid": {"file": GRID, **grid_cells(show(repo, commit, GRID))},
        "pins": {"file": PINS, "requirements": [line.strip() for line in show(repo, commit, PINS).splitlines()
                                                if line.strip() and not line.startswith("#")]},
        "pinned_defaults": pinned_defaults(pins),
    }
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    temporary.replace(out)
    print(f"wrote {out}: {len(document['evaluator']['algorithms'])} algorithms, "
          f"{len(document['evaluator']['reductions'])} reductions, {len(document['grid']['cells'])} grid cells "
          f"at {commit[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The model registry is the one place a spec means a kind of model: every entry is complete, each
kind's example is recognised as that kind, and no module outside ``tecb_eval/models/`` tells a
model's kind by comparing its name, spec or identity with a string."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from helpers import REPO
from tecb_eval.models.kinds.common import Encoder, Option

STRING_TESTS = ("startswith", "endswith")


def _names_a_kind(value, words: tuple[str, ...]) -> bool:
    return isinstance(value, str) and bool(value) and any(value == w or value.startswith(w) for w in words)


def _kind_literals(node: ast.AST, words: tuple[str, ...]) -> list[str]:
    """The string constants in ``node`` (itself, or the items of a tuple, list or set) that name a kind."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [item.value for item in items if isinstance(item, ast.Constant) and _names_a_kind(item.value, words)]


def kind_comparisons(tree: ast.AST, words: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, literal) for each comparison with a literal that names a model kind: a ``Compare`` with
    one on either side (``==``, ``!=``, ``in``, ...), a ``.startswith``/``.endswith`` call with one,
    and a ``match`` case on one."""
    found = []
    for node in ast.walk(tree):
        literals: list[str] = []
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                literals += _kind_literals(side, words)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STRING_TESTS:
            for argument in node.args:
                literals += _kind_literals(argument, words)
        elif isinstance(node, ast.MatchValue):
            literals += _kind_literals(node.value, words)
        found += [(node.lineno, literal) for literal in literals]
    return sorted(set(found))


def modules_outside_models(root: Path) -> list[Path]:
    models = root / "tecb_eval" / "models"
    return [path for package in ("tecb_eval", "tecb_data") for path in sorted((root / package).rglob("*.py"))
            if models not in path.parents]


def kind_tests_outside_models(root: Path, words: tuple[str, ...]) -> list[str]:
    found = []
    for path in modules_outside_models(root):
        for line, literal in kind_comparisons(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), words):
            found.append(f"{path.relative_to(root).as_posix()}:{line} compares with {literal!r}")
    return found


def _words() -> tuple[str, ...]:
    from tecb_eval.models import registry

    return registry.KIND_WORDS


# -- no kind told by a string outside the registry ------------------------------------------------
def test_no_module_outside_models_tells_a_models_kind_by_a_string():
    # The registry (tecb_eval/models/registry.py) recognises a spec; everything else asks it.
    assert kind_tests_outside_models(REPO, _words()) == []


def test_the_words_of_the_check_are_the_registrys_names_and_prefixes():
    from tecb_eval.models import registry

    words = set(registry.KIND_WORDS)
    assert {"minilm-l6", "use-multilingual", "tfidf-lsa", "mteb:"} <= words
    assert set(registry.BUILTIN_NAMES) | set(registry.SPEC_PREFIXES) <= words


def test_the_check_finds_the_comparisons_a_kind_test_is_made_of(tmp_path):
    module = tmp_path / "tecb_eval" / "grid" / "chain.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "def kind(text, identity):\n"
        "    if text == 'minilm-l6':\n"
        "        return 1\n"
        "    if text in ('tfidf-lsa', 'use-multilingual') or text.startswith('mteb:'):\n"
        "        return 2\n"
        "    if 'use-multilingual' != text and identity.startswith(('tfidf-lsa:', 'x')):\n"
        "        return 3\n"
        "    match text:\n"
        "        case 'minilm-l6':\n"
        "            return 4\n"
        "    return text == 'kmeans' or text.startswith('/')\n")
    inside = tmp_path / "tecb_eval" / "models" / "registry.py"
    inside.parent.mkdir(parents=True)
    inside.write_text("def matches(text):\n    return text == 'minilm-l6'\n")
    (tmp_path / "tecb_data").mkdir()
    assert kind_tests_outside_models(tmp_path, ("minilm-l6", "use-multilingual", "tfidf-lsa", "mteb:")) == [
        "tecb_eval/grid/chain.py:2 compares with 'minilm-l6'",
        "tecb_eval/grid/chain.py:4 compares with 'mteb:'",
        "tecb_eval/grid/chain.py:4 compares with 'tfidf-lsa'",
        "tecb_eval/grid/chain.py:4 compares with 'use-multilingual'",
        "tecb_eval/grid/chain.py:6 compares with 'tfidf-lsa:'",
        "tecb_eval/grid/chain.py:6 compares with 'use-multilingual'",
        "tecb_eval/grid/chain.py:9 compares with 'minilm-l6'",
    ]


# -- the entries ---------------------------------------------------------------------------------
def _kinds():
    from tecb_eval.models import registry

    return registry.MODEL_KINDS


# Each field of an entry and what a complete entry holds there; a new field needs its line here.
COMPLETE = {
    "name": lambda v: isinstance(v, str) and v,
    "description": lambda v: isinstance(v, str) and v,
    "example": lambda v: v is not None,
    "spec_name": lambda v: isinstance(v, str),
    "spec_prefix": lambda v: isinstance(v, str),
    "accepts": lambda v: v is None or callable(v),
    "options": lambda v: isinstance(v, dict) and v and all(isinstance(o, str) and isinstance(d, Option)
                                                           for o, d in v.items()),
    "load": callable,
    "check": callable,
    "find": callable,
    "opens_on_a_worker": callable,
    "display": callable,
    "encoder_classes": lambda v: isinstance(v, tuple) and v and all(isinstance(c, type) for c in v),
    "identity_prefixes": lambda v: isinstance(v, tuple) and v and all(isinstance(p, str) and p for p in v),
    "snippet": lambda v: v is None or callable(v),
    "offline_folder": lambda v: v is None or callable(v),
    "checkpoint": lambda v: v is None or callable(v),
    "identity_from_files": callable,
}


@pytest.mark.parametrize("kind", _kinds(), ids=lambda kind: kind.name)
def test_every_kind_has_each_field(kind):
    assert set(COMPLETE) == {f.name for f in dataclasses.fields(kind)}
    for name, complete in COMPLETE.items():
        assert complete(getattr(kind, name)), f"{kind.name}: {name} = {getattr(kind, name)!r}"
    # Recognised one way: by its whole name, by a prefix, or by a predicate.
    assert [bool(kind.spec_name), bool(kind.spec_prefix), kind.accepts is not None].count(True) == 1
    assert isinstance(kind.display(kind.example), str) and kind.display(kind.example)


def test_kind_names_are_unique_and_the_catch_all_comes_last():
    from tecb_eval.models import registry

    kinds = registry.MODEL_KINDS
    assert len({k.name for k in kinds}) == len(kinds) == len(registry.KINDS)
    # Any text no earlier kind claims is a folder or a Hub id.
    assert kinds[-1].accepts is not None and kinds[-1].matches("any/thing") and not kinds[-1].matches(object())
    assert registry.BUILTIN_NAMES == ("minilm-l6", "use-multilingual", "tfidf-lsa")


@pytest.mark.parametrize("kind", _kinds(), ids=lambda kind: kind.name)
def test_each_kinds_example_is_recognised_as_that_kind(kind):
    from tecb_eval.models import registry

    assert registry.kind_of(kind.example) is kind
    for prefix in kind.identity_prefixes:
        assert registry.kind_of_identity(prefix + "x|layer=last") is kind


@pytest.mark.parametrize("spec, kind", [
    ("minilm-l6", "minilm-l6"), (Path("minilm-l6"), "minilm-l6"), ("use-multilingual", "use-multilingual"),
    ("tfidf-lsa", "tfidf-lsa"), ("mteb:intfloat/multilingual-e5-small", "mteb"), ("mteb:./my-model", "mteb"),
    # Not a built-in's whole name: a folder or a Hub id, as a spec has always been read.
    ("minilm-l6/", "pretrained"), ("tfidf-lsa-16", "pretrained"), ("deepset/gbert-base@main", "pretrained"),
    ("./models/bert", "pretrained"), (Path("/models/bert"), "pretrained"), ("other:name", "pretrained"),
])
def test_a_spec_is_recognised_as_its_kind(spec, kind):
    from tecb_eval.models import registry

    assert registry.kind_of(spec).name == kind


def test_an_identity_is_recognised_as_the_kind_that_gives_it():
    from tecb_eval.models import registry
    from tecb_eval.models.encoders import get_encoder

    minilm = get_encoder("minilm-l6")
    assert registry.kind_of_identity(minilm.identity).name == "minilm-l6"
    assert registry.kind_of_identity(get_encoder("minilm-l6", layer=3).identity).name == "pretrained"
    assert registry.kind_of_identity(get_encoder("tfidf-lsa").identity).name == "tfidf-lsa"
    assert registry.kind_of_identity("st:deepset/gbert-base@abc|pooling=Pooling").name == "pretrained"
    assert registry.kind_of_identity("my own encoder v1") is None


# -- what a kind decides, read from its entry ----------------------------------------------------
def test_options_and_names_follow_the_kind():
    from tecb_eval.models import encoders, registry
    from tecb_eval.models.kinds.objects import Example

    transformer = registry.TRANSFORMER_OPTIONS
    assert {"layer", "prompt", "backend", "dtype", "device"} <= set(transformer)
    assert encoders.options_taken("minilm-l6") == encoders.options_taken("owner/model") == transformer
    assert set(encoders.options_taken("tfidf-lsa")) == {"n_components", "max_features"}
    assert set(encoders.options_taken("use-multilingual")) == {"batch_size", "threads"}
    assert set(encoders.options_taken("mteb:intfloat/multilingual-e5-small")) == {"batch_size", "device"}
    assert set(encoders.options_taken(Example())) == {"identity", "batch_size"}
    assert encoders.display_name("mteb:intfloat/multilingual-e5-small") == "mteb:multilingual-e5-small"
    assert encoders.display_name("deepset/gbert-base@main") == "gbert-base"
    assert encoders.display_name("tfidf-lsa") == "tfidf-lsa" and encoders.display_name(Example()) == "Example"


def test_each_kind_declares_its_options_types_once():
    from tecb_data.errors import UserError
    from tecb_eval.cli.options import parse_model
    from tecb_eval.models import encoders, registry

    for kind in registry.MODEL_KINDS:
        for name, option in kind.options.items():
            assert option.type in (int, float, str), (kind.name, name)
    # The command line reads an option's text as its kind declares it, and get_encoder checks it.
    assert parse_model("openai:m,timeout=2.5,dimensions=8,truncate=end") == {
        "spec": "openai:m", "timeout": 2.5, "dimensions": 8, "truncate": "end"}
    assert parse_model("tfidf-lsa,n_components=4") == {"spec": "tfidf-lsa", "n_components": 4}
    with pytest.raises(UserError, match=r"--model 'openai:m,timeout=soon': timeout must be a number"):
        parse_model("openai:m,timeout=soon")
    for spec, options, said in [
        ("openai:m", {"max_retries": -1}, "max_retries=-1 must be an integer of at least 0"),
        ("openai:m", {"timeout": 0.0}, "timeout=0.0 must be a positive number"),
        ("openai:m", {"truncate": "middle"}, "truncate='middle' is not one of refuse, end"),
        ("minilm-l6", {"layer": "3"}, "layer='3' is not an integer"),
        ("minilm-l6", {"backend": "tpu"}, "backend='tpu' is not one of torch, onnx, openvino"),
        ("tfidf-lsa", {"n_components": 0}, "n_components=0 must be a positive integer"),
    ]:
        with pytest.raises(UserError, match=f"^model {spec}: {re.escape(said)}$"):
            encoders.check_options(spec, **options)


def test_a_kind_without_a_checkpoint_is_one_line_for_training():
    from tecb_data.errors import UserError
    from tecb_eval.models import registry
    from tecb_eval.models.kinds.minilm import minilm_folder

    assert registry.checkpoint("minilm-l6") == (minilm_folder(), "minilm-l6")
    for spec in ("tfidf-lsa", "use-multilingual", "mteb:intfloat/multilingual-e5-small"):
        with pytest.raises(UserError, match="has no transformers checkpoint to train"):
            registry.checkpoint(spec)


def test_a_snippet_for_a_kind_without_its_own_loads_the_model_by_its_identity():
    from tecb_eval.models import registry

    snippet = registry.embedding_snippet("object:my.Encoder", None)
    assert snippet.lines[-1].startswith("embedding_model = SentenceTransformer(") and not snippet.precomputed
    with pytest.raises(ValueError):
        registry.embedding_snippet("tfidf-lsa:sklearn==1|dim=x", None)


def test_a_new_kind_is_one_entry(monkeypatch):
    """A kind the registry did not have (a prefix and its loader) is recognised, checked, loaded,
    found, named and described by every reader, with nothing else changed."""
    import numpy as np

    from tecb_data.errors import UserError
    from tecb_eval.grid.cluster_encode import opens_on_a_worker
    from tecb_eval.models import encoders, registry
    from tecb_eval.models.spec import ModelSpec, find_model, model_spec

    class Echo(Encoder):  # a new kind's encoder declares its features on the base class
        def __init__(self, name, size):
            self.identity = f"echo:{name}|size={size}"
            self.size = size

        def encode(self, texts):
            return np.ones((len(texts), self.size), dtype=np.float32)

    def check(spec, given, here):
        if str(spec) == "echo:":
            raise UserError("echo:: give a name after echo:")

    found = []
    echo = registry.ModelKind(
        "echo", "a test's kind", example="echo:hello", options={"size": Option(int, least=1)},
        load=lambda load: Echo(str(load.spec)[5:], load.options.get("size", 3)), encoder_classes=(Echo,),
        identity_prefixes=("echo:",), spec_prefix="echo:", check=check, find=found.append,
        display=lambda spec: str(spec).replace(":", "-"))
    monkeypatch.setattr(registry, "MODEL_KINDS", (echo, *registry.MODEL_KINDS))

    encoder = encoders.get_encoder("echo:hello", size=4)
    assert encoder.identity == "echo:hello|size=4" and encoder.encode(["a", "b"]).shape == (2, 4)
    assert set(encoders.options_taken("echo:hello")) == {"size"}
    with pytest.raises(UserError, match=r"^model echo:hello: size=0 must be a positive integer$"):
        encoders.get_encoder("echo:hello", size=0)
    with pytest.raises(UserError, match="does not take layer=2"):
        encoders.get_encoder("echo:hello", layer=2)
    with pytest.raises(UserError, match="give a name after echo:"):
        encoders.preflight("echo:")
    assert model_spec("echo:hello").name == "echo-hello"
    find_model("echo:hello")
    assert found == ["echo:hello"]
    assert not opens_on_a_worker(ModelSpec("echo:hello", "echo-hello"))
    assert registry.kind_of_identity(encoder.identity) is echo

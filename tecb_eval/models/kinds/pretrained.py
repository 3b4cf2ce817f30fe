"""A model by folder or Hub id (``id`` or ``id@revision``): a sentence-transformers model (its
folder has ``modules.json``), used as the model defines its pooling, or a plain transformers
checkpoint, mean-pooled over the tokens of the last hidden layer or ``layer=k``.

Hub models go through huggingface_hub's own cache and settings (HF_HUB_OFFLINE, HF_TOKEN,
HF_ENDPOINT). ``builtins``, where a function takes it, are the registry's built-in names, which an
error names when a spec is neither a folder nor a Hub id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from tecb_data.errors import UserError
from tecb_eval.models.kinds.common import (
    DEFAULT_BATCH_SIZE, DEFAULT_MAX_LENGTH, EmbeddingSnippet, Load, folder_digest, identity_parts,
)
from tecb_eval.models.kinds.mean_pooling import MeanPoolingEncoder
from tecb_eval.models.kinds.sentence_transformer import SentenceTransformerEncoder, check_backend, identity_from_files

# What mean pooling over a layer (torch) cannot take: only a sentence-transformers model runs them.
SENTENCE_TRANSFORMERS_ONLY = ("prompt", "prompt_name", "backend", "dtype")


def is_sentence_transformers_folder(folder: Path) -> bool:
    return (Path(folder) / "modules.json").is_file()


def resolve_model(spec: str, builtins: Sequence[str] = ()) -> tuple[Path, str]:
    """Local folder (as given, or the Hub snapshot of ``repo_id[@revision]``) and a stable model id.

    The snapshot folder's name is the resolved commit, which pins the identity.
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        return path, f"{path.resolve().name}#{folder_digest(path)}"
    if path.exists():
        raise UserError(f"{spec}: is a file, not a model folder; pass the folder holding config.json")
    repo_id, _, revision = spec.partition("@")
    if repo_id.count("/") != 1 or spec.startswith((".", "/", "~")):
        raise UserError(
            f"{spec}: no such model folder, and not a Hub repo id (owner/name); "
            f"built-in encoders: {', '.join(builtins)}"
        )
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    try:
        folder = Path(snapshot_download(repo_id, revision=revision or None))
    except LocalEntryNotFoundError:
        raise UserError(
            f"{spec}: not in the local Hugging Face cache and the Hub cannot be reached "
            "(HF_HUB_OFFLINE=1?); download it once online or pass a local folder"
        ) from None
    except RepositoryNotFoundError:
        raise UserError(f"{spec}: no such model repository on the Hub (or no access: set HF_TOKEN)") from None
    except HfHubHTTPError as exc:
        raise UserError(f"{spec}: the Hub answered {exc.response.status_code if exc.response is not None else 'an error'}") from None
    return folder, f"{repo_id}@{folder.name}"


def check_model_folder(folder: Path) -> None:
    """One line naming the file if a model folder's ``modules.json`` or ``config.json`` cannot be
    read as transformers reads it (transformers itself is the referee), before loading weights."""
    from transformers import AutoConfig

    folder = Path(folder)
    configs = [folder] if (folder / "config.json").is_file() else []
    modules = folder / "modules.json"
    if modules.is_file():
        try:
            first = json.loads(modules.read_text(encoding="utf-8"))[0].get("path", "")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, IndexError, KeyError, AttributeError, TypeError) as exc:
            raise UserError(f"{modules}: not a sentence-transformers module list ({exc}); repair or re-download the "
                            "model") from None
        if (folder / first / "config.json").is_file() and folder / first not in configs:
            configs.append(folder / first)
    for where in configs:
        try:
            AutoConfig.from_pretrained(str(where))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"{where / 'config.json'}: transformers cannot read it ({problem}); repair or re-download "
                            "the model") from None


# -- the kind --------------------------------------------------------------------------------------
def load(load: Load, *, builtins: Sequence[str] = ()):
    spec = str(load.spec)
    folder, model_id = resolve_model(spec, builtins)
    # Where the user keeps it: the identity hashes the files, not the path, and recommend's snippet
    # must name the folder to load it again (not a Hub snapshot or a package's copy).
    location = str(folder.resolve()) if Path(spec).expanduser().is_dir() else None
    return open_folder(folder, model_id, load, location)


def open_folder(folder: Path, model_id: str, load: Load, location: str | None = None):
    """The encoder of a model folder: sentence-transformers where it has ``modules.json`` (unless a
    ``layer`` asks for mean pooling over that layer, which loads its transformer directly), else
    mean pooling over the checkpoint's tokens."""
    name = str(load.spec)
    batch_size = load.batch_size or DEFAULT_BATCH_SIZE
    if not (folder / "config.json").is_file() and not is_sentence_transformers_folder(folder):
        raise UserError(f"{folder}: neither a sentence-transformers model (modules.json) nor a transformers checkpoint (config.json)")
    check_model_folder(folder)
    given = {k: load.options[k] for k in SENTENCE_TRANSFORMERS_ONLY if load.options.get(k) is not None}
    if is_sentence_transformers_folder(folder) and load.layer is None:
        encoder = SentenceTransformerEncoder(folder, model_id, max_length=load.max_length, batch_size=batch_size,
                                             device=load.device, **given)
    else:
        if given:
            raise UserError(f"model {name}: a plain transformers checkpoint (no modules.json) is mean-pooled in torch; "
                            f"{', '.join(given)} need a sentence-transformers model")
        encoder = MeanPoolingEncoder(folder, model_id, layer=load.layer,
                                     max_length=load.max_length or DEFAULT_MAX_LENGTH, batch_size=batch_size,
                                     device=load.device)
    if location is not None:
        encoder.location = location
    return encoder


def check(spec, given: dict, here: bool) -> None:
    name = str(spec)
    check_backend(given.get("backend"), name)
    check_folder(Path(name), name, given, here)


def check_folder(folder: Path, name: str, given: dict, here: bool) -> None:
    """A model folder's configuration (``here``: transformers reads it on this machine) and a
    ``prompt_name`` it lacks; a Hub id is resolved, and its prompts read, when it is opened."""
    if not folder.is_dir():
        return
    if here:
        check_model_folder(folder)
    if "prompt_name" in given:
        from tecb_eval.models import prompts as prompt_rules

        config = folder / "config_sentence_transformers.json"
        try:
            configured = json.loads(config.read_text(encoding="utf-8")).get("prompts") if config.is_file() else None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
            raise UserError(f"{config}: cannot be read ({exc}); repair or re-download the model") from None
        prompt_rules.named_prompt(configured, given["prompt_name"], name)


def find(spec, *, builtins: Sequence[str] = ()) -> None:
    """The Hub model in huggingface_hub's cache (downloaded now if the Hub can be reached); a folder
    is here already, and a spec with a scheme no kind knows (``name:...``) is refused when opened."""
    text = str(spec)
    if Path(text).expanduser().is_dir() or ":" in text.partition("@")[0]:
        return
    resolve_model(text, builtins)


def opens_on_a_worker(spec, options: dict, *, builtins: Sequence[str] = ()) -> bool:
    """A sentence-transformers model, told from its files alone (no torch here); a ``layer`` is mean
    pooling in torch, which opens where the grid runs."""
    if "layer" in options:
        return False
    text = str(spec)
    folder = Path(text).expanduser()
    if not folder.is_dir():
        folder = resolve_model(text, builtins)[0]  # found (downloaded) already by find_model
    return is_sentence_transformers_folder(folder)


def identity(spec, options: dict, *, builtins: Sequence[str] = ()) -> str | None:
    """The identity a sentence-transformers folder or Hub model would get, from its files (their
    fingerprint, the Hub snapshot) without loading it; None where only loading tells."""
    folder, model_id = resolve_model(str(spec), builtins)
    if not is_sentence_transformers_folder(folder):
        return None
    return identity_from_files(folder, model_id, options)


def checkpoint(spec, *, builtins: Sequence[str] = ()) -> tuple[Path, str]:
    return resolve_model(str(spec), builtins)


def snippet(identity: str, location: str | None) -> EmbeddingSnippet:
    """``st:`` a sentence-transformers model; ``hf:`` a plain checkpoint, which the grid mean-pooled
    as SentenceTransformer does when it loads one."""
    lines = []
    model_id = identity.split("|", 1)[0].removeprefix("st:").removeprefix("hf:")
    if "#" in model_id and location is not None:  # a local folder, where the grid read it
        source = repr(location)
    elif "#" in model_id:  # a folder of a store written before rows said where: its name only
        lines.append("# a folder model: the results store does not say where the folder was; put its path here")
        source = repr(model_id.split("#", 1)[0])
    else:  # a Hub id at its commit
        repo, _, revision = model_id.partition("@")
        source = repr(repo) + (f", revision={revision!r}" if revision else "")
    return sentence_transformer_snippet(identity, ["from sentence_transformers import SentenceTransformer"], source,
                                        lines)


def sentence_transformer_snippet(identity: str, imports: list[str], source: str,
                                 lines: Sequence[str] = ()) -> EmbeddingSnippet:
    """The snippet's ``SentenceTransformer(source)``, with a comment where the grid ran options it
    does not take."""
    lines = list(lines)
    parts = identity_parts(identity)
    if parts.get("layer", "last") != "last" or "prompt" in parts:
        lines.append("# the grid ran this model with options (a layer or a prompt) that SentenceTransformer "
                     "does not take here: the vectors differ")
    lines.append(f"embedding_model = SentenceTransformer({source})")
    # One text's vector gives the length under every sentence-transformers version (>= 3).
    return EmbeddingSnippet(imports, lines, False, "dims = embedding_model.encode(docs[:1]).shape[1]")

"""Publishing a dataset folder to the Hugging Face Hub in one commit, and fetching one back.

Everything about the Hub goes through huggingface_hub and its own configuration: the endpoint
(``HF_ENDPOINT``), the token (``HF_TOKEN`` or ``hf auth login``), offline mode and the cache. This
module never reads, prints or stores the token itself.

A push is one ``create_commit``: the Hub applies a commit whole or not at all, so a push that fails
(network, 5xx, a concurrent commit) publishes nothing, and re-running it is safe because a dataset
whose fingerprint equals the remote ``manifest.json`` makes no commit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import huggingface_hub
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from huggingface_hub import errors as hf_errors
from huggingface_hub.utils import validate_repo_id

from tecb_data import layout, network, publication
from tecb_data.card import SYNTHETIC_NOTICE, check_card
from tecb_data.demo import is_demo_manifest
from tecb_data.errors import UserError, VerificationError
from tecb_data.recipes import DATASETS
from tecb_data.version import __version__

log = logging.getLogger(__name__)
REPO_TYPE = "dataset"
DEFAULT_BRANCH = "main"
# Created by the Hub with every repository (it routes large files to LFS/Xet); not part of a dataset.
HUB_OWNED_FILES = frozenset({".gitattributes"})


@dataclass(frozen=True)
class Change:
    action: str  # "add" (new remote file), "update", "keep" (same bytes remotely) or "delete"
    path: str
    size: int | None  # bytes of the local file; None for deletions


@dataclass(frozen=True)
class PushResult:
    repo_id: str
    branch: str
    outcome: str  # "committed", "unchanged", "dry-run" or "offline-plan" (dry run without the Hub)
    fingerprint: str
    changes: tuple[Change, ...]
    create_repo: bool  # the repository did not exist (and was created, unless dry run)
    commit_oid: str | None = None
    commit_url: str | None = None
    note: str | None = None  # something the user asked for that had no effect
    offline: str | None = None  # offline-plan: why the Hub was not read
    token: bool | None = None  # offline-plan: whether a token was found for the real push
    synthetic: bool = False  # built from the embedded demo sample

    @property
    def sent(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.action != "keep")


@dataclass(frozen=True)
class _Remote:
    """What the target branch holds now."""

    repo_exists: bool
    branch_exists: bool
    private: bool | None
    head: str | None  # commit sha of the branch
    files: dict[str, str]  # path -> oid: git blob sha1 of a regular file, sha256 of an LFS file
    fingerprint: str | None  # of the remote manifest.json, when there is a readable one


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Connection failures of whichever HTTP client this huggingface_hub release is built on."""
    for module in ("httpx2", "httpx"):
        try:
            return (__import__(module).TransportError,)
        except (ImportError, AttributeError):
            continue
    import requests

    return (requests.ConnectionError, requests.Timeout)


def _endpoint() -> str:
    return huggingface_hub.constants.ENDPOINT


@contextlib.contextmanager
def hub_errors(what: str, *, published_nothing: bool = False):
    """Turn huggingface_hub's errors into one line saying what failed and what to do.

    ``what`` names the repository and the step; messages carry the server's own words (never
    request headers, so never the token).
    """
    tail = "; nothing was published" if published_nothing else ""
    network.configure_hub()
    with _hub_errors(what, tail):
        try:
            yield
        except Exception as exc:
            # First: a timeout, also one huggingface_hub wrapped in its own error, names its setting.
            timed_out = None if isinstance(exc, UserError) else network.hub_timeout_line(exc, _endpoint())
            if timed_out is None:
                raise
            if published_nothing and "ConnectTimeout" in timed_out:
                timed_out += tail
            elif published_nothing:  # the request went out: the Hub may have acted on it before the timeout
                timed_out += "; it may have been applied: run the same push again (it never duplicates a commit)"
            raise UserError(f"{what}: {timed_out}") from None


@contextlib.contextmanager
def _hub_errors(what: str, tail: str):
    try:
        yield
    except hf_errors.OfflineModeIsEnabled:
        raise UserError(f"{what}: HF_HUB_OFFLINE is set; unset it to reach the Hub at {_endpoint()}") from None
    except hf_errors.GatedRepoError:
        raise UserError(f"{what}: the repository is gated; request access on the Hub, then log in") from None
    except hf_errors.RevisionNotFoundError:
        raise UserError(f"{what}: no such revision on {_endpoint()}; check the branch, tag or commit") from None
    except hf_errors.RepositoryNotFoundError:
        raise UserError(
            f"{what}: no such dataset repository on {_endpoint()} (or it is private and the token cannot read it); "
            "check the repo id and HF_TOKEN / `hf auth login`"
        ) from None
    except hf_errors.RemoteEntryNotFoundError as exc:
        raise UserError(f"{what}: file not found on the Hub ({_server_words(exc)})") from None
    except hf_errors.HfHubHTTPError as exc:
        raise UserError(_http_error_line(what, exc, tail)) from None
    except hf_errors.LocalEntryNotFoundError:
        # huggingface_hub's own sentence ("An error happened while trying to locate the file ...")
        # says neither why nor what to do; the reason is one of these two.
        why = ("HF_HUB_OFFLINE is set" if huggingface_hub.constants.HF_HUB_OFFLINE
               else f"the Hub at {_endpoint()} cannot be reached")
        raise UserError(f"{what}: not in the local Hugging Face cache, and {why}; load it once online "
                        "(or unset HF_HUB_OFFLINE)") from None
    except hf_errors.LocalTokenNotFoundError:
        raise UserError(f"{what}: no Hugging Face token; set HF_TOKEN or run `hf auth login`") from None
    except _transport_errors() as exc:
        raise UserError(
            f"{what}: cannot reach the Hub at {_endpoint()} ({network.describe(exc)}){tail}; "
            "check HF_ENDPOINT and the network, then re-run"
        ) from None


def _server_words(exc: hf_errors.HfHubHTTPError) -> str:
    words = (exc.server_message or "").strip().replace("\n", " ")
    return words or str(exc).strip().splitlines()[0]


def _http_error_line(what: str, exc: hf_errors.HfHubHTTPError, tail: str) -> str:
    status = exc.response.status_code if exc.response is not None else None
    words = _server_words(exc)
    if status == 401:
        return (
            f"{what}: the Hub at {_endpoint()} rejected the credentials (401: {words}){tail}; "
            "set HF_TOKEN or run `hf auth login` with a token that has write access"
        )
    if status == 403:
        return f"{what}: the token may not write here (403: {words}){tail}; use a token with write access to this namespace"
    if status == 409:
        return f"{what}: the Hub reported a conflict (409: {words}){tail}; wait for the other operation to finish and re-run"
    if status == 412:
        return f"{what}: the branch moved while pushing (412: someone else committed){tail}; re-run to push onto the new head"
    if status is not None and status >= 500:
        return f"{what}: the Hub failed (HTTP {status}: {words}){tail}; re-run later (a re-run never duplicates a commit)"
    return f"{what}: the Hub answered HTTP {status}: {words}{tail}"


def check_repo_id(repo_id: str) -> str:
    """``ORG/NAME`` as the Hub spells repository ids; anything else is a user error."""
    try:
        validate_repo_id(repo_id)
    except hf_errors.HFValidationError as exc:
        raise UserError(f"--repo-id {repo_id!r}: not a Hub repository id ({exc})") from None
    if repo_id.count("/") != 1:
        raise UserError(f"--repo-id {repo_id!r}: give the namespace too, as ORG/NAME")
    return repo_id


def check_publishable(folder: Path, manifest: dict) -> None:
    """Only datasets whose texts may be redistributed leave the machine; the manifest flag and the
    registry must both say so, so neither a hand-edited manifest nor a new spec slips through."""
    name = manifest.get("dataset")
    spec = DATASETS.get(name)
    if spec is None and manifest.get("source") == "table":
        # A table dataset is the builder's: it leaves the machine only with a licence and a citation
        # that its card states (the manifest's fingerprint covers the source, not these two).
        if manifest.get("license") in (None, "unknown"):
            raise UserError(f"{folder}: {name} was built without a licence; rebuild it with --licence ID "
                            "(the data's Hub licence id, e.g. cc-by-4.0) and --citation FILE to push it")
        if not manifest.get("citation"):
            raise UserError(f"{folder}: {name} was built without a citation; rebuild it with --citation FILE "
                            "(the source's BibTeX entry) to push it")
        if manifest.get("publishable") is not True:
            raise UserError(f"{folder}: {name} says publishable=false; it is not pushed")
        return
    if spec is None:
        raise UserError(f"{folder}: dataset {name!r} is not in the tecb registry; only registry datasets "
                        "and table datasets built with --source table are pushed")
    if manifest.get("publishable") is not True or not spec.publishable:
        raise UserError(
            f"{folder}: {name} holds texts that must not be republished (publishable=false); "
            "push the ids-only dataset instead (reddit-clustering-ids) and let users rehydrate it"
        )


def _git_blob_sha1(path: Path) -> str:
    """The oid the Hub reports for a regular (non-LFS) file: git's blob hash."""
    digest = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_remote(api: HfApi, repo_id: str, branch: str) -> _Remote:
    try:
        info = api.repo_info(repo_id, repo_type=REPO_TYPE, revision=branch)
    except hf_errors.RevisionNotFoundError:
        info = api.repo_info(repo_id, repo_type=REPO_TYPE)
        return _Remote(True, False, info.private, None, {}, None)
    except hf_errors.RepositoryNotFoundError:
        return _Remote(False, False, None, None, {}, None)
    head = info.sha
    files = {
        entry.path: (entry.lfs.sha256 if entry.lfs is not None else entry.blob_id)
        for entry in api.list_repo_tree(repo_id, repo_type=REPO_TYPE, revision=head, recursive=True)
        if isinstance(entry, huggingface_hub.hf_api.RepoFile)
    }
    fingerprint = None
    if layout.MANIFEST in files:
        path = api.hf_hub_download(repo_id, layout.MANIFEST, repo_type=REPO_TYPE, revision=head)
        try:
            fingerprint = json.loads(Path(path).read_text(encoding="utf-8")).get("fingerprint")
        except (UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            fingerprint = None  # an unreadable remote manifest never counts as "unchanged"
    return _Remote(True, True, info.private, head, files, fingerprint)


def _plan(folder: Path, manifest: dict, remote: _Remote) -> tuple[Change, ...]:
    changes = []
    for relative in sorted([*manifest["files"], layout.MANIFEST]):
        path = folder / relative
        remote_oid = remote.files.get(relative)
        if remote_oid is None:
            action = "add"
        else:
            # The Hub names an LFS file by its SHA-256 and a regular one by its git blob hash.
            local_sha256 = manifest["files"].get(relative) or layout.sha256_file(path)
            same = remote_oid == local_sha256 or remote_oid == _git_blob_sha1(path)
            action = "keep" if same else "update"
        changes.append(Change(action, relative, path.stat().st_size))
    wanted = {c.path for c in changes}
    changes += [
        Change("delete", relative, None)
        for relative in sorted(remote.files)
        if relative not in wanted and relative not in HUB_OWNED_FILES
    ]
    return tuple(changes)


def _offline(exc: BaseException) -> bool:
    """Whether reading the Hub failed because this machine is offline (no name resolution, no
    route, a refused connection), as opposed to a Hub that answered or stalled."""
    import httpx2

    for item in network.causes(exc):
        if isinstance(item, hf_errors.OfflineModeIsEnabled) or network.unresolvable(item):
            return True
        if isinstance(item, (httpx2.ConnectError, ConnectionRefusedError, OSError)) and not isinstance(item, TimeoutError):
            return True
    return False


def is_synthetic(manifest: dict) -> bool:
    """Built from the embedded demo sample: said by the manifest, or found from its inputs' hashes
    (a folder built before the manifest said it)."""
    return manifest.get("synthetic") is True or is_demo_manifest(manifest)


def check_synthetic(folder: Path, manifest: dict, *, allow: bool, dry_run: bool) -> bool:
    """Synthetic data leave the machine only when asked (``allow``), with the card saying so in its
    first line (below the metadata block); a dry run plans either way and says so. Returns whether
    the folder is synthetic."""
    if not is_synthetic(manifest):
        return False
    if not allow and not dry_run:
        raise UserError(f"{folder}: synthetic demo data (built from tecb's embedded demo sample), not a real dataset; "
                        "it is not pushed unless you pass --allow-synthetic (nothing was sent)")
    card = (folder / layout.CARD).read_text(encoding="utf-8")
    body = card.split("\n---\n", 1)[1] if card.startswith("---\n") and "\n---\n" in card[3:] else card
    if allow and not body.startswith(SYNTHETIC_NOTICE):
        raise UserError(f"{folder / layout.CARD}: synthetic demo data whose card does not say so in its first line; "
                        "rebuild the folder with this tecb (`tecb-data build --demo`) before pushing it")
    return True


def _offline_plan(folder: Path, manifest: dict, repo_id: str, branch: str, *, reason: str) -> PushResult:
    """The part of a dry run that needs no Hub: the folder verified, publishable and its card valid
    (done before this), the files a first commit would send, and whether a token is there. What
    the repository already holds (files to keep, update or delete; whether anything changed) needs it."""
    empty = _Remote(False, False, None, None, {}, None)
    return PushResult(repo_id=repo_id, branch=branch, outcome="offline-plan", fingerprint=manifest["fingerprint"],
                      changes=_plan(folder, manifest, empty), create_repo=False, offline=reason,
                      token=huggingface_hub.get_token() is not None, synthetic=is_synthetic(manifest))


def _commit_text(manifest: dict) -> tuple[str, str]:
    recipe = manifest.get("recipe", {})
    summary = f"Publish {manifest['dataset']} {manifest['fingerprint'][:12]} (tecb {manifest.get('package_version')})"
    description = (
        f"Built by tecb {manifest.get('package_version')} with recipe {recipe.get('name')} "
        f"version {recipe.get('version')}, seed {manifest.get('seed')}.\n"
        f"Fingerprint {manifest['fingerprint']} (manifest.json lists every file's SHA-256)."
    )
    return summary, description


def push(
    folder: Path,
    repo_id: str,
    *,
    branch: str | None = None,
    private: bool = False,
    dry_run: bool = False,
    message: str | None = None,
    allow_synthetic: bool = False,
) -> PushResult:
    """Publish a verified, publishable dataset folder to ``repo_id`` in one commit.

    With ``dry_run`` the Hub is only read (repository, file list, remote manifest). Synthetic demo
    data are refused unless ``allow_synthetic`` (:func:`check_synthetic`).

    Args:
        folder (Path): A dataset folder written by ``tecb-data build``; verified before anything is sent.
        repo_id (str): The Hub dataset repository, ``ORG/NAME``; created if it does not exist.
        branch (str | None): The branch to commit to; None: ``main``.
        private (bool): Create the repository private (an existing repository keeps its visibility).
        dry_run (bool): Only read the Hub (repository, file list, remote manifest) and say what a push
            would change.
        message (str | None): The commit message; None: a summary of the dataset and its fingerprint.
        allow_synthetic (bool): Allow pushing the synthetic demo data, which is refused otherwise.

    Returns:
        PushResult: The repository, branch, commit and what changed (or would change, with ``dry_run``).

    Raises:
        UserError: A folder that fails verification or lacks a licence or citation, synthetic data
            without ``allow_synthetic``, an invalid repo id, an empty message, or a Hub error (named
            with what to do, e.g. log in).
    """
    folder = Path(folder)
    branch = branch or DEFAULT_BRANCH
    manifest = layout.verify(folder)
    check_publishable(folder, manifest)
    synthetic = check_synthetic(folder, manifest, allow=allow_synthetic, dry_run=dry_run)
    check_card((folder / layout.CARD).read_text(encoding="utf-8"), manifest, where=str(folder / layout.CARD))
    check_repo_id(repo_id)
    if message is not None and not message.strip():
        raise UserError("--message is empty; give a commit message or leave the option out")

    api = HfApi(library_name="tecb", library_version=__version__)
    where = f"{repo_id}@{branch}"
    try:
        if dry_run and huggingface_hub.constants.HF_HUB_OFFLINE:
            raise UserError("HF_HUB_OFFLINE is set")
        with hub_errors(f"{where}: reading the repository"):
            # Reading is safe to repeat; huggingface_hub retries its file requests, not its API calls.
            remote = network.retrying(lambda: _read_remote(api, repo_id, branch), f"{where}: reading the repository",
                                      transient=network.hub_transient())
    except UserError as exc:
        if not dry_run or not (huggingface_hub.constants.HF_HUB_OFFLINE or _offline(exc)):
            raise
        return _offline_plan(folder, manifest, repo_id, branch, reason=str(exc))
    changes = _plan(folder, manifest, remote)
    note = None
    if private and remote.repo_exists and not remote.private:
        note = f"--private applies when a repository is created; {repo_id} exists and stays public"
    result = dict(
        repo_id=repo_id,
        branch=branch,
        fingerprint=manifest["fingerprint"],
        changes=changes,
        create_repo=not remote.repo_exists,
        note=note,
        synthetic=synthetic,
    )
    if remote.fingerprint == manifest["fingerprint"] and all(c.action == "keep" for c in changes):
        return PushResult(outcome="unchanged", commit_oid=remote.head, commit_url=_commit_url(repo_id, remote.head), **result)
    if dry_run:
        return PushResult(outcome="dry-run", **result)
    if huggingface_hub.get_token() is None:
        raise UserError(f"{where}: no Hugging Face token; set HF_TOKEN or run `hf auth login` (nothing was published)")

    if not remote.repo_exists:
        with hub_errors(f"{repo_id}: creating the dataset repository", published_nothing=True):
            # private=None leaves the namespace's default visibility in charge.
            api.create_repo(repo_id, repo_type=REPO_TYPE, private=True if private else None, exist_ok=True)
    if not remote.branch_exists and branch != DEFAULT_BRANCH:
        with hub_errors(f"{where}: creating the branch", published_nothing=True):
            api.create_branch(repo_id, branch=branch, repo_type=REPO_TYPE, exist_ok=True)
    operations = [
        CommitOperationAdd(path_in_repo=c.path, path_or_fileobj=str(folder / c.path))
        for c in changes
        if c.action in ("add", "update")
    ] + [CommitOperationDelete(path_in_repo=c.path) for c in changes if c.action == "delete"]
    summary, description = _commit_text(manifest)
    with hub_errors(f"{where}: committing", published_nothing=True), publication.remote_commit(where):
        try:
            info = api.create_commit(
                repo_id,
                operations,
                commit_message=message or summary,
                commit_description=description,
                repo_type=REPO_TYPE,
                revision=branch,
                # Compare-and-swap: if someone committed after we read the branch, the Hub refuses
                # (412) instead of silently mixing their files with ours.
                parent_commit=remote.head,
            )
        except ValueError as exc:  # the Hub's YAML validation of README.md (raised before any upload)
            if "metadata" not in str(exc):
                raise
            raise UserError(f"{folder / layout.CARD}: the Hub rejected the card metadata: {' '.join(str(exc).split())}") from None
    return PushResult(outcome="committed", commit_oid=info.oid, commit_url=info.commit_url, **result)


def _commit_url(repo_id: str, oid: str | None) -> str | None:
    return f"{_endpoint()}/datasets/{repo_id}/commit/{oid}" if oid else None


def download(repo_id: str, revision: str | None = None, *, cache_dir: Path | None = None) -> tuple[Path, dict, str]:
    """Fetch a published dataset into the Hugging Face cache, pinned to one commit, and verify it.

    Returns (snapshot folder, manifest, commit sha). The manifest comes first and decides which files
    are fetched, so files in the repository that are not part of the dataset (``.gitattributes``)
    are neither downloaded nor in the way of verification.
    """
    check_repo_id(repo_id)
    where = f"{repo_id}@{revision or DEFAULT_BRANCH}"
    with hub_errors(f"{where}: downloading"):
        pinned = _resolve(repo_id, revision, cache_dir=cache_dir, where=where)
        try:
            manifest_path = Path(
                huggingface_hub.hf_hub_download(
                    repo_id, layout.MANIFEST, repo_type=REPO_TYPE, revision=pinned, cache_dir=cache_dir
                )
            )
        except hf_errors.RemoteEntryNotFoundError:
            raise UserError(f"{where}: no {layout.MANIFEST}; this repository was not published by `tecb-data push`") from None
        folder = manifest_path.parent
        commit = folder.name  # the cache keeps every commit in snapshots/<commit sha>/
        manifest = layout.read_manifest(folder)
        huggingface_hub.snapshot_download(
            repo_id,
            repo_type=REPO_TYPE,
            revision=commit,
            cache_dir=cache_dir,
            allow_patterns=sorted(manifest["files"]),
        )
    verify_listed(folder, manifest, where=f"{repo_id}@{commit}")
    return folder, manifest, commit


def _resolve(repo_id: str, revision: str | None, *, cache_dir: Path | None, where: str) -> str | None:
    """The commit ``revision`` names now, asked once (with our bounded retries) before any file
    request: huggingface_hub retries a metadata request it cannot answer from the cache six times
    with a fixed 60 s timeout each, minutes against a Hub that accepts connections and never
    answers. Offline, or with the Hub unreachable and the file cached, the cache decides, as huggingface_hub does."""
    if huggingface_hub.constants.HF_HUB_OFFLINE:
        return revision
    api = HfApi(library_name="tecb", library_version=__version__)
    try:
        info = network.retrying(
            lambda: api.repo_info(repo_id, repo_type=REPO_TYPE, revision=revision),
            f"{where}: resolving the revision",
            transient=network.hub_transient(),
        )
    except network.hub_transient():
        cached = huggingface_hub.try_to_load_from_cache(
            repo_id, layout.MANIFEST, cache_dir=cache_dir, revision=revision, repo_type=REPO_TYPE
        )
        if isinstance(cached, str):
            log.warning("%s: the Hub at %s cannot be reached; using the cached copy", where, _endpoint())
            return revision
        raise
    return info.sha


def verify_listed(folder: Path, manifest: dict, *, where: str) -> None:
    """Every file the manifest lists is there with its hash, and the fingerprint matches."""
    files = manifest["files"]
    for relative in sorted(files):
        path = folder / relative
        if not path.is_file() or layout.sha256_file(path) != files[relative]:
            raise VerificationError(
                f"{where}: {relative} does not match {layout.MANIFEST} (damaged download or repository); "
                f"delete {folder} from the Hugging Face cache and load again"
            )
    layout.check_fingerprint(manifest, where=f"{where}: {layout.MANIFEST}", fix="re-publish it")

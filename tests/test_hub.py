"""`tecb-data push` and loading by repo id: the real huggingface_hub client (and datasets) in a
subprocess, against the test Hub of tests/hubserver.py on 127.0.0.1 via HF_ENDPOINT."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_cli
from tecb_data import layout
from hubserver import TOKEN, FakeHub

REPO = "tecb-test/blurbs-clustering-s2s"


@pytest.fixture
def hub():
    server = FakeHub(tokens={TOKEN: "maintainer"})
    server.start()
    yield server
    server.stop()


@pytest.fixture
def hub_env(hub, tmp_path):
    """huggingface_hub's own configuration, pointing at the test Hub; nothing of the user's HF setup."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(
        HF_ENDPOINT=hub.url,
        HF_TOKEN=TOKEN,
        HF_HOME=str(tmp_path / "hf-home"),
        HF_DATASETS_CACHE=str(tmp_path / "datasets-cache"),
        HF_HUB_OFFLINE="0",
        HF_HUB_DISABLE_XET="1",  # the test Hub speaks git-LFS, not Xet
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
    )
    return env


@pytest.fixture
def dataset(demo_datasets, tmp_path):
    """A private copy of the demo Blurbs S2S dataset that a test may change."""
    target = tmp_path / "out" / "blurbs-clustering-s2s"
    shutil.copytree(demo_datasets / "blurbs-clustering-s2s", target)
    return target


def push(folder: Path, env: dict, *extra: str, repo: str = REPO) -> subprocess.CompletedProcess:
    # The demo sample is synthetic: pushed only when asked (tests/test_outputs_say_what_they_are.py).
    return run_cli("push", str(folder), "--repo-id", repo, "--allow-synthetic", *extra, env=env)


def python(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def local_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_dry_run_sends_nothing(hub, hub_env, dataset):
    result = push(dataset, hub_env, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "would create the dataset repository" in result.stdout
    for path in ("README.md", "data/test.jsonl", "data/samples.jsonl", "manifest.json"):
        assert f"add     {path}" in result.stdout
    assert "nothing was sent" in result.stdout
    assert hub.writes() == [] and hub.repos == {}


def test_first_push_then_unchanged_push_makes_no_commit(hub, hub_env, dataset):
    first = push(dataset, hub_env)
    assert first.returncode == 0, first.stderr
    history = hub.history(REPO)
    assert len(history) == 2  # the Hub's initial commit, then ours: one commit for the whole dataset
    assert f"commit: {hub.url}/datasets/{REPO}/commit/{history[0].sha}" in first.stdout
    assert f"revision: {history[0].sha}" in first.stdout
    remote = hub.files(REPO)
    assert {k: v for k, v in remote.items() if k != ".gitattributes"} == local_files(dataset)

    writes = len(hub.writes())
    again = push(dataset, hub_env)
    assert again.returncode == 0, again.stderr
    assert "unchanged" in again.stdout and "no commit made" in again.stdout
    assert len(hub.writes()) == writes  # not even a preupload
    assert len(hub.history(REPO)) == 2


@pytest.mark.slow
def test_changed_data_is_one_new_commit_that_also_deletes_stale_files(hub, hub_env, dataset, tmp_path):
    from tecb_data.build import build
    from tecb_data.demo import demo_input

    assert push(dataset, hub_env).returncode == 0
    hub.put_file(REPO, "notes/old.txt", b"left over from an earlier layout\n")
    (rebuilt, manifest), *_ = build("blurbs", demo_input("blurbs"), tmp_path / "seed7", seed=7, views=("s2s",))
    before = len(hub.history(REPO))

    plan = push(rebuilt, hub_env, "--dry-run")
    assert "delete  notes/old.txt" in plan.stdout and "update  data/test.jsonl" in plan.stdout
    assert len(hub.history(REPO)) == before

    result = push(rebuilt, hub_env, "--message", "Rebuild with seed 7")
    assert result.returncode == 0, result.stderr
    history = hub.history(REPO)
    assert len(history) == before + 1 and history[0].summary == "Rebuild with seed 7"
    remote = hub.files(REPO)
    assert "notes/old.txt" not in remote and ".gitattributes" in remote
    assert json.loads(remote["manifest.json"])["fingerprint"] == manifest["fingerprint"]


def test_wrong_token_is_401_with_one_line_and_nothing_published(hub, hub_env, dataset):
    result = push(dataset, {**hub_env, "HF_TOKEN": "hf_notAValidToken"})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "401" in result.stderr and "HF_TOKEN" in result.stderr
    assert "hf_notAValidToken" not in result.stderr + result.stdout
    assert hub.repos == {}


def test_no_token_at_all_is_refused_before_any_write(hub, hub_env, dataset):
    env = {k: v for k, v in hub_env.items() if k != "HF_TOKEN"}
    result = push(dataset, env)
    assert result.returncode == 2 and "no Hugging Face token" in result.stderr
    assert hub.writes() == []


def test_conflict_409_publishes_nothing_and_a_rerun_succeeds(hub, hub_env, dataset):
    hub.fail("POST", r"/commit/", 409, "Cannot commit: another conflicting operation is in progress")
    result = push(dataset, hub_env)
    assert result.returncode == 2 and "409" in result.stderr and "nothing was published" in result.stderr
    assert set(hub.files(REPO)) == {".gitattributes"}
    retry = push(dataset, hub_env)
    assert retry.returncode == 0, retry.stderr
    assert len(hub.history(REPO)) == 2


def test_server_error_during_commit_publishes_nothing_and_a_retry_succeeds(hub, hub_env, dataset):
    assert push(dataset, hub_env).returncode == 0
    hub.put_file(REPO, "notes/old.txt", b"x\n")  # so that the next push has something to commit
    head = hub.history(REPO)[0].sha
    hub.fail("POST", r"/commit/", 500, "Internal Error")
    result = push(dataset, hub_env)
    assert result.returncode == 2
    assert "500" in result.stderr and "nothing was published" in result.stderr and "re-run" in result.stderr
    assert hub.history(REPO)[0].sha == head and "notes/old.txt" in hub.files(REPO)
    retry = push(dataset, hub_env)
    assert retry.returncode == 0, retry.stderr
    assert hub.history(REPO)[0].parent == head and "notes/old.txt" not in hub.files(REPO)


def test_a_commit_landing_mid_push_is_refused_not_mixed(hub, hub_env, dataset):
    assert push(dataset, hub_env).returncode == 0
    hub.put_file(REPO, "notes/old.txt", b"x\n")
    # Someone else commits after our push read the branch, just before our commit arrives.
    hub.before("POST", r"/commit/", lambda h: h.put_file(REPO, "notes/theirs.txt", b"theirs\n"))
    result = push(dataset, hub_env)
    assert result.returncode == 2 and "412" in result.stderr and "re-run" in result.stderr
    assert "notes/theirs.txt" in hub.files(REPO) and "notes/old.txt" in hub.files(REPO)
    assert push(dataset, hub_env).returncode == 0
    assert not any(p.startswith("notes/") for p in hub.files(REPO))


def test_hub_rejecting_the_card_is_one_line(hub, hub_env, dataset):
    hub.fail("POST", r"/api/validate-yaml", 400, '"license" must be a valid license identifier')
    result = push(dataset, hub_env)
    assert result.returncode == 2 and "README.md" in result.stderr and "card metadata" in result.stderr
    assert set(hub.files(REPO)) == {".gitattributes"}


def test_unverified_or_unpublishable_folders_never_reach_the_hub(hub, hub_env, dataset):
    data = dataset / "data" / "test.jsonl"
    original = data.read_bytes()
    data.write_bytes(original + b"\n")
    damaged = push(dataset, hub_env)
    assert damaged.returncode == 1 and "data/test.jsonl" in damaged.stderr
    data.write_bytes(original)

    manifest_path = dataset / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    # An edited manifest is refused as such: its fingerprint covers what the data means.
    manifest_path.write_text(json.dumps({**manifest, "publishable": True, "seed": 7}), encoding="utf-8")
    edited = push(dataset, hub_env)
    assert edited.returncode == 1 and "manifest was edited" in edited.stderr

    def built_as(**fields):  # a manifest as a build of that kind would have written it
        changed = {**manifest, **fields}
        changed["fingerprint"] = layout.manifest_fingerprint(changed)
        manifest_path.write_text(json.dumps(changed), encoding="utf-8")

    built_as(publishable=False)
    refused = push(dataset, hub_env)
    assert refused.returncode == 2 and "must not be republished" in refused.stderr
    built_as(dataset="reddit-clustering-s2s", source="reddit", mteb_name="RedditClusteringS2S")
    refused = push(dataset, hub_env)
    assert refused.returncode == 2 and "reddit-clustering-s2s" in refused.stderr
    assert hub.requests == []


def test_bad_repo_id_is_a_user_error(hub, hub_env, dataset):
    result = push(dataset, hub_env, repo="no-namespace")
    assert result.returncode == 2 and "ORG/NAME" in result.stderr
    assert hub.requests == []


@pytest.mark.slow
def test_push_then_load_by_repo_id_round_trips_pinned_and_offline(hub, hub_env, dataset, tmp_path):
    from tecb_data.build import build
    from tecb_data.demo import demo_input
    from tecb_data.load import load

    local = load(dataset)
    assert push(dataset, hub_env).returncode == 0
    first_commit = hub.history(REPO)[0].sha
    code = (
        "import json, sys, tecb_data\n"
        "b = tecb_data.load(sys.argv[1], revision=sys.argv[2] if len(sys.argv) > 2 else None)\n"
        "print(json.dumps({'name': b.name, 'fingerprint': b.fingerprint, 'location': b.location,"
        " 'splits': [[s.name, list(s.texts), list(s.labels)] for s in b.splits]}))\n"
    )

    def load_remote(*args, env=hub_env):
        result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    remote = load_remote(REPO)
    assert remote["fingerprint"] == local.fingerprint and remote["location"] == f"{REPO}@{first_commit}"
    assert remote["splits"] == [[s.name, list(s.texts), list(s.labels)] for s in local.splits]

    (rebuilt, _), *_ = build("blurbs", demo_input("blurbs"), tmp_path / "seed7", seed=7, views=("s2s",))
    assert push(rebuilt, hub_env).returncode == 0
    assert load_remote(REPO)["fingerprint"] != local.fingerprint
    assert load_remote(REPO, first_commit)["fingerprint"] == local.fingerprint  # pinned
    offline = load_remote(REPO, first_commit, env={**hub_env, "HF_HUB_OFFLINE": "1"})  # from the cache
    assert offline["fingerprint"] == local.fingerprint


def test_leave_one_genre_out_folds_from_the_hub_are_the_local_folder_s(hub, hub_env, dataset):
    # Fine-tuning's leave-one-genre-out reads the genre paths in data/samples.jsonl: from a dataset
    # loaded by repo id, the copy in the Hub cache's snapshot, giving the same folds as the folder.
    from tecb_data.load import load
    from tecb_eval.finetuning import protocols

    local = [f.manifest() for f in protocols.leave_one_genre_out(load(dataset))]
    assert push(dataset, hub_env).returncode == 0
    code = ("import json, tecb_data\n"
            "from tecb_eval.finetuning import protocols\n"
            f"b = tecb_data.load({REPO!r})\n"
            "print(json.dumps([f.manifest() for f in protocols.leave_one_genre_out(b)]))\n")
    result = python(code, hub_env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == local and len(local) == 8


def test_load_dataset_reads_the_pushed_repo_like_the_published_mteb_datasets(hub, hub_env, dataset):
    assert push(dataset, hub_env).returncode == 0
    code = (
        "import json, sys, datasets\n"
        "d = datasets.load_dataset(sys.argv[1], split='test')\n"
        "print(json.dumps({'columns': sorted(d.column_names), 'rows': [[r['sentences'], r['labels']] for r in d]}))\n"
    )
    result = python(code.replace("sys.argv[1]", repr(REPO)), hub_env)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    expected = [json.loads(line) for line in (dataset / "data" / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    # MTEB's two columns, and the Blurbs genre paths beside them (recipe 3) as they were written
    assert loaded["columns"] == sorted(expected[0]) and {"labels", "sentences"} <= set(loaded["columns"])
    assert loaded["rows"] == [[row["sentences"], row["labels"]] for row in expected]


def test_large_files_go_through_lfs_and_load_back(hub_env, dataset, tmp_path):
    small = FakeHub(tokens={TOKEN: "maintainer"}, lfs_threshold=4096)
    small.start()
    try:
        env = {**hub_env, "HF_ENDPOINT": small.url}
        assert push(dataset, env).returncode == 0
        assert any(path.endswith("/info/lfs/objects/batch") for _, path, _ in small.requests)
        lfs = {p for p, blob in small.repos[REPO].resolve("main").tree.items() if blob.lfs}
        assert {"data/test.jsonl", "data/samples.jsonl"} <= lfs
        result = python(f"import tecb_data; print(tecb_data.load({REPO!r}).fingerprint)", env)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == json.loads((dataset / "manifest.json").read_text())["fingerprint"]
        assert push(dataset, env).stdout.count("unchanged") == 1
    finally:
        small.stop()


def test_branch_and_private_repository(hub, hub_env, dataset):
    result = push(dataset, hub_env, "--revision", "v1", "--private")
    assert result.returncode == 0, result.stderr
    assert hub.repos[REPO].private
    assert set(hub.files(REPO, "main")) == {".gitattributes"} and "manifest.json" in hub.files(REPO, "v1")
    anonymous = {k: v for k, v in hub_env.items() if k != "HF_TOKEN"}
    denied = python(f"import tecb_data; tecb_data.load({REPO!r}, revision='v1')", anonymous)
    assert denied.returncode != 0 and "private" in denied.stderr
    allowed = python(f"import tecb_data; print(tecb_data.load({REPO!r}, revision='v1').name)", hub_env)
    assert allowed.stdout.strip() == "blurbs-clustering-s2s", allowed.stderr
    again = push(dataset, hub_env, "--revision", "v1")
    assert "unchanged" in again.stdout


@pytest.mark.slow
def test_the_token_never_reaches_output_or_files(hub, hub_env, dataset, tmp_path):
    outputs = [
        push(dataset, hub_env, "--dry-run"),
        push(dataset, hub_env),
        push(dataset, hub_env),
        python(f"import tecb_data; print(tecb_data.load({REPO!r}).location)", hub_env),
    ]
    hub.fail("POST", r"/commit/", 500, "Internal Error")
    hub.put_file(REPO, "x.txt", b"x")
    outputs.append(run_cli("--debug", "push", str(dataset), "--repo-id", REPO, "--allow-synthetic", env=hub_env))
    for result in outputs:
        assert TOKEN not in result.stdout + result.stderr
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any("snapshots" in p.parts for p in written)  # the HF cache was written, and holds no token
    for path in written:
        assert TOKEN.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_real_germeval_build_publishes_through_lfs_and_loads_back(hub, hub_env, germeval_dev_datasets):
    """The dev set of GermEval 2019: its P2P clustering file passes the Hub's 10 MB line, so it
    travels through git-LFS exactly as it would to huggingface.co."""
    folder, manifest = germeval_dev_datasets["blurbs-clustering-p2p"]
    assert (folder / "data" / "test.jsonl").stat().st_size >= hub.lfs_threshold
    result = push(folder, hub_env, repo="tecb-test/blurbs-clustering-p2p")
    assert result.returncode == 0, result.stderr
    tree = hub.repos["tecb-test/blurbs-clustering-p2p"].resolve("main").tree
    assert tree["data/test.jsonl"].lfs and not tree["README.md"].lfs
    code = (
        "import datasets, tecb_data\n"
        "b = tecb_data.load('tecb-test/blurbs-clustering-p2p')\n"
        "d = datasets.load_dataset('tecb-test/blurbs-clustering-p2p', split='test')\n"
        "print(b.fingerprint, len(b.splits), d.num_rows, sum(len(r) for r in d['sentences']))\n"
    )
    loaded = python(code, hub_env)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == [manifest["fingerprint"], "28", "28", str(manifest["statistics"]["samples"])]


def test_push_dry_run_plans_offline_and_says_what_needs_the_hub(demo_datasets, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    result = run_cli("push", str(demo_datasets / "blurbs-clustering-s2s"), "--repo-id", "me/blurbs", "--dry-run",
                     env=env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "dry run without the Hub (HF_HUB_OFFLINE is set)" in out and "needs the Hub:" in out
    for name in ("README.md", "data/test.jsonl", "data/samples.jsonl", "manifest.json"):
        assert f"send    {name}" in out
    assert "token: none" in out and "nothing was sent" in out
    # A real push still needs the Hub, and says so in one line.
    pushed = run_cli("push", str(demo_datasets / "blurbs-clustering-s2s"), "--repo-id", "me/blurbs", "--allow-synthetic",
                     env=env)
    assert pushed.returncode == 2 and pushed.stderr.count("\n") == 1 and "HF_HUB_OFFLINE" in pushed.stderr

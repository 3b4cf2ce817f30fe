"""A small Hugging Face Hub for tests: real HTTP on 127.0.0.1, speaking the endpoints that the real
huggingface_hub client (and datasets' HfFileSystem) call, with the status codes, headers and JSON
shapes the Hub uses. Dataset repositories only; state in memory.

Endpoints: repo create, YAML validation, repo info, tree listing, paths-info, preupload, commit
(NDJSON), branch create, git-LFS batch + upload, and file resolve (HEAD/GET with ranges).
``fail()`` makes the next matching requests answer an error, to test what a client does then.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

# Licence ids the Hub accepts (a subset of https://huggingface.co/docs/hub/repositories-licenses).
LICENSES = {"apache-2.0", "mit", "cc0-1.0", "cc-by-4.0", "cc-by-sa-4.0", "cc-by-nc-4.0", "cc-by-nc-sa-4.0", "odc-by", "other", "unknown"}
GITATTRIBUTES = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n*.arrow filter=lfs diff=lfs merge=lfs -text\n"
LFS_POINTER_SIZE = 134
# The write token the tests give their Hub (FakeHub(tokens={TOKEN: "maintainer"})).
TOKEN = "hf_tecbTestSecret0123456789abcdef"


def git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class Blob:
    data: bytes
    lfs: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def oid(self) -> str:
        """What preupload reports as the remote oid: sha256 for LFS, git blob sha1 otherwise."""
        return self.sha256 if self.lfs else git_oid(self.data)


@dataclass
class Commit:
    sha: str
    parent: str | None
    summary: str
    tree: dict[str, Blob]


@dataclass
class Repo:
    repo_id: str
    private: bool
    branches: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)

    def resolve(self, revision: str) -> Commit | None:
        sha = self.branches.get(revision, revision)
        return self.commits.get(sha)


@dataclass
class Fault:
    method: str
    pattern: re.Pattern
    status: int
    message: str
    remaining: int
    action: object = None  # instead of failing, run this on the hub first


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}


class FakeHub:
    def __init__(self, tokens: dict[str, str] | None = None, lfs_threshold: int = 10 * 1024 * 1024):
        self.tokens = dict(tokens or {})  # token -> user name; every user may write everywhere
        self.lfs_threshold = lfs_threshold  # files of this size or more go through LFS, like the Hub's 10 MB
        self.repos: dict[str, Repo] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status) of every request
        self.faults: list[Fault] = []
        self.lock = threading.RLock()
        self._counter = 0
        self._server: ThreadingHTTPServer | None = None

    # -- running -----------------------------------------------------------------------------
    def start(self) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.hub = self
        self._server = server
        # shutdown() waits for the serving loop's next poll: a short poll stops the server at once.
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def fail(self, method: str, path_regex: str, status: int, message: str = "injected failure", times: int = 1) -> None:
        """The next ``times`` requests matching method and path answer ``status``."""
        with self.lock:
            self.faults.append(Fault(method, re.compile(path_regex), status, message, times))

    def before(self, method: str, path_regex: str, action) -> None:
        """Run ``action(hub)`` once, just before the next matching request is handled (a race)."""
        with self.lock:
            self.faults.append(Fault(method, re.compile(path_regex), 0, "", 1, action))

    def put_file(self, repo_id: str, path: str, data: bytes, branch: str = "main") -> str:
        """Commit one file directly, as another user of the repository would."""
        with self.lock:
            repo = self.repos[repo_id]
            head = repo.branches[branch]
            tree = {**repo.commits[head].tree, path: Blob(data, False)}
            commit = self._new_commit(repo, head, f"Upload {path}", tree)
            repo.branches[branch] = commit.sha
            return commit.sha

    # -- inspection for tests ------------------------------------------------------------------
    def history(self, repo_id: str, branch: str = "main") -> list[Commit]:
        """Commits of a branch, newest first."""
        repo = self.repos[repo_id]
        commits, sha = [], repo.branches.get(branch)
        while sha is not None:
            commits.append(repo.commits[sha])
            sha = repo.commits[sha].parent
        return commits

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        commit = self.repos[repo_id].resolve(revision)
        return {path: blob.data for path, blob in sorted(commit.tree.items())}

    def writes(self) -> list[tuple[str, str, int]]:
        """Requests that could change state (everything but GET/HEAD and the read-only POSTs)."""
        reads = re.compile(r"/api/validate-yaml|/paths-info/")
        return [r for r in self.requests if r[0] not in ("GET", "HEAD") and not reads.search(r[1])]

    # -- state changes -------------------------------------------------------------------------
    def _new_commit(self, repo: Repo, parent: str | None, summary: str, tree: dict[str, Blob]) -> Commit:
        self._counter += 1
        digest = hashlib.sha1(json.dumps([repo.repo_id, parent, summary, self._counter, sorted(tree)]).encode())
        commit = Commit(digest.hexdigest(), parent, summary, tree)
        repo.commits[commit.sha] = commit
        return commit

    def _user(self, headers, *, required: bool) -> str | None:
        auth = headers.get("authorization")
        if auth is None:
            if required:
                raise HubError(401, "You must be authenticated to access this resource.")
            return None
        token = auth.removeprefix("Bearer ").strip()
        if token not in self.tokens:
            raise HubError(401, "Invalid credentials in Authorization header")
        return self.tokens[token]

    def _repo(self, repo_id: str, user: str | None) -> Repo:
        repo = self.repos.get(repo_id)
        if repo is None or (repo.private and user is None):
            raise HubError(404 if user else 401, "Repository not found", "RepoNotFound")
        return repo

    def _commit(self, repo: Repo, revision: str) -> Commit:
        commit = repo.resolve(revision)
        if commit is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return commit

    # -- endpoints -----------------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, query: dict, headers, body: bytes):
        """-> (status, headers, body bytes) or raises HubError."""
        parts = [unquote(p) for p in raw_path.strip("/").split("/")]
        with self.lock:
            for fault in self.faults:
                if fault.remaining > 0 and fault.method == method and fault.pattern.search(raw_path):
                    fault.remaining -= 1
                    if fault.action is None:
                        raise HubError(fault.status, fault.message)
                    fault.action(self)
        if method == "POST" and parts == ["api", "repos", "create"]:
            return self._create_repo(headers, json.loads(body))
        if method == "POST" and parts == ["api", "validate-yaml"]:
            return self._validate_yaml(json.loads(body))
        if method == "PUT" and parts[0] == "lfs-upload" and len(parts) == 2:
            return self._lfs_put(headers, parts[1], body)
        if len(parts) >= 4 and parts[0] == "api" and parts[1] == "datasets":
            repo_id, rest = f"{parts[2]}/{parts[3]}", parts[4:]
            return self._api(method, repo_id, rest, query, headers, body)
        if len(parts) >= 3 and parts[0] == "datasets" and parts[2].endswith(".git") and parts[3:] == ["info", "lfs", "objects", "batch"]:
            return self._lfs_batch(headers, f"{parts[1]}/{parts[2][:-4]}", json.loads(body))
        if len(parts) >= 6 and parts[0] == "datasets" and parts[3] == "resolve" and method in ("GET", "HEAD"):
            return self._resolve(method, f"{parts[1]}/{parts[2]}", parts[4], "/".join(parts[5:]), headers)
        raise HubError(404, f"no route for {method} {raw_path}")

    def _api(self, method, repo_id, rest, query, headers, body):
        if method == "GET" and (rest == [] or (len(rest) == 2 and rest[0] == "revision")):
            return self._info(repo_id, rest[1] if rest else "main", query, headers)
        if method == "GET" and len(rest) >= 2 and rest[0] == "tree":
            return self._tree(repo_id, rest[1], "/".join(rest[2:]), query, headers)
        if method == "POST" and len(rest) == 2 and rest[0] == "paths-info":
            paths = parse_qs(body.decode()).get("paths", [])
            return self._paths_info(repo_id, rest[1], paths, headers)
        if method == "POST" and len(rest) == 2 and rest[0] == "preupload":
            return self._preupload(repo_id, rest[1], headers, json.loads(body))
        if method == "POST" and len(rest) == 2 and rest[0] == "commit":
            return self._commit_files(repo_id, rest[1], headers, body)
        if method == "POST" and len(rest) == 2 and rest[0] == "branch":
            return self._create_branch(repo_id, rest[1], headers, json.loads(body or b"{}"))
        raise HubError(404, f"no route for {method} /api/datasets/{repo_id}/{'/'.join(rest)}")

    def _create_repo(self, headers, payload):
        self._user(headers, required=True)
        if payload.get("type") != "dataset":
            raise HubError(400, "this test Hub holds dataset repositories only")
        repo_id = f"{payload['organization']}/{payload['name']}" if payload.get("organization") else payload["name"]
        url = f"{self.url}/datasets/{repo_id}"
        with self.lock:
            if repo_id in self.repos:
                raise HubError(409, "You already created this dataset repo", headers={"X-Url": url})
            # huggingface_hub 1.x+ sends "visibility"; older clients sent "private".
            repo = Repo(repo_id, payload.get("visibility") == "private" or bool(payload.get("private")))
            # Like the Hub: a new repository starts with one commit holding .gitattributes.
            first = self._new_commit(repo, None, "initial commit", {".gitattributes": Blob(GITATTRIBUTES, False)})
            repo.branches["main"] = first.sha
            self.repos[repo_id] = repo
        return 200, {}, _json({"url": url, "name": repo_id, "id": repo_id})

    def _validate_yaml(self, payload):
        match = re.match(r"^---\r?\n(.*?)\r?\n---", payload.get("content", ""), re.S)
        errors = []
        try:
            meta = yaml.safe_load(match.group(1)) if match else {}
        except yaml.YAMLError as exc:
            meta, errors = {}, [f"YAML parse error: {exc}"]
        if not isinstance(meta, dict):
            errors.append("metadata must be a YAML mapping")
            meta = {}
        license_ = meta.get("license")
        for value in license_ if isinstance(license_, list) else [license_] if license_ is not None else []:
            if value not in LICENSES:
                errors.append(f'"license" must be a valid license identifier, got {value!r}')
        for config in meta.get("configs") or []:
            if not isinstance(config, dict) or "config_name" not in config:
                errors.append('"configs" entries need a "config_name"')
        if errors:
            return 400, {}, _json({"errors": [{"message": e} for e in errors]})
        return 200, {}, _json({"errors": [], "warnings": []})

    def _info(self, repo_id, revision, query, headers):
        user = self._user(headers, required=False)
        with self.lock:
            repo = self._repo(repo_id, user)
            commit = self._commit(repo, revision)
            blobs = query.get("blobs", ["false"])[0].lower() == "true"
            siblings = []
            for path, blob in sorted(commit.tree.items()):
                sibling = {"rfilename": path}
                if blobs:
                    sibling.update(self._file_entry(path, blob))
                    sibling["blobId"] = sibling.pop("oid")
                siblings.append(sibling)
            return 200, {}, _json(
                {
                    "_id": repo_id,
                    "id": repo_id,
                    "author": repo_id.split("/")[0],
                    "sha": commit.sha,
                    "private": repo.private,
                    "gated": False,
                    "disabled": False,
                    "lastModified": "2026-01-01T00:00:00.000Z",
                    "tags": [],
                    "siblings": siblings,
                }
            )

    @staticmethod
    def _file_entry(path: str, blob: Blob) -> dict:
        entry = {"type": "file", "path": path, "size": len(blob.data), "oid": git_oid(blob.data)}
        if blob.lfs:
            pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{blob.sha256}\nsize {len(blob.data)}\n"
            entry["oid"] = git_oid(pointer.encode())
            entry["lfs"] = {"oid": blob.sha256, "size": len(blob.data), "pointerSize": len(pointer)}
        return entry

    def _entries(self, commit: Commit, folder: str, recursive: bool) -> list[dict]:
        prefix = f"{folder}/" if folder else ""
        files, dirs = [], set()
        for path, blob in sorted(commit.tree.items()):
            if not path.startswith(prefix):
                continue
            rest = path[len(prefix):].split("/")
            for depth in range(1, len(rest)):
                if recursive or depth == 1:
                    dirs.add(prefix + "/".join(rest[:depth]))
            if recursive or len(rest) == 1:
                files.append(self._file_entry(path, blob))
        folders = [
            {"type": "directory", "path": d, "oid": hashlib.sha1(f"{commit.sha}:{d}".encode()).hexdigest(), "size": 0}
            for d in sorted(dirs)
        ]
        return folders + files

    def _tree(self, repo_id, revision, folder, query, headers):
        user = self._user(headers, required=False)
        with self.lock:
            commit = self._commit(self._repo(repo_id, user), revision)
            if folder and not any(p.startswith(folder + "/") for p in commit.tree):
                raise HubError(404, f"{folder} does not exist", "EntryNotFound")
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            return 200, {}, _json(self._entries(commit, folder, recursive))

    def _paths_info(self, repo_id, revision, paths, headers):
        user = self._user(headers, required=False)
        with self.lock:
            commit = self._commit(self._repo(repo_id, user), revision)
            found = []
            for path in paths:
                if path in commit.tree:
                    found.append(self._file_entry(path, commit.tree[path]))
                elif any(p.startswith(path.rstrip("/") + "/") for p in commit.tree) or path == "":
                    found.append({"type": "directory", "path": path, "oid": hashlib.sha1(path.encode()).hexdigest(), "size": 0})
            return 200, {}, _json(found)

    def _preupload(self, repo_id, revision, headers, payload):
        user = self._user(headers, required=True)
        with self.lock:
            commit = self._commit(self._repo(repo_id, user), revision)
            files = []
            for entry in payload["files"]:
                existing = commit.tree.get(entry["path"])
                files.append(
                    {
                        "path": entry["path"],
                        "uploadMode": "lfs" if entry["size"] >= self.lfs_threshold else "regular",
                        "shouldIgnore": False,
                        "oid": existing.oid if existing is not None else None,
                    }
                )
            return 200, {}, _json({"files": files, "commitOid": commit.sha})

    def _commit_files(self, repo_id, revision, headers, body):
        user = self._user(headers, required=True)
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header" or not lines[0]["value"].get("summary"):
            raise HubError(400, "the commit needs a header line with a summary")
        header = lines[0]["value"]
        with self.lock:
            repo = self._repo(repo_id, user)
            if revision not in repo.branches:
                raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
            head = repo.branches[revision]
            if header.get("parentCommit") not in (None, head):
                raise HubError(412, "A commit has happened since. Please refresh and try again.")
            tree = dict(repo.commits[head].tree)
            for line in lines[1:]:
                key, value = line["key"], line["value"]
                path = value["path"]
                if key == "file":
                    data = base64.b64decode(value["content"])
                    if len(data) >= self.lfs_threshold:
                        raise HubError(400, f"{path}: files of {self.lfs_threshold} bytes or more must go through LFS")
                    tree[path] = Blob(data, False)
                elif key == "lfsFile":
                    data = self.lfs_objects.get(value["oid"])
                    if data is None or len(data) != value["size"]:
                        raise HubError(422, f"{path}: LFS object {value['oid']} was not uploaded")
                    tree[path] = Blob(data, True)
                elif key == "deletedFile":
                    if path not in tree:
                        raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
                    del tree[path]
                elif key == "deletedFolder":
                    tree = {p: b for p, b in tree.items() if not p.startswith(path.rstrip("/") + "/")}
                else:
                    raise HubError(400, f"unknown commit operation {key!r}")
            commit = self._new_commit(repo, head, header["summary"], tree)
            repo.branches[revision] = commit.sha
        url = f"{self.url}/datasets/{repo_id}/commit/{commit.sha}"
        return 200, {}, _json({"success": True, "commitOid": commit.sha, "commitUrl": url, "hookOutput": ""})

    def _create_branch(self, repo_id, branch, headers, payload):
        user = self._user(headers, required=True)
        with self.lock:
            repo = self._repo(repo_id, user)
            if branch in repo.branches:
                raise HubError(409, f"Branch {branch} already exists")
            start = self._commit(repo, payload.get("startingPoint") or "main")
            repo.branches[branch] = start.sha
        return 200, {}, b""

    def _lfs_batch(self, headers, repo_id, payload):
        user = self._user(headers, required=True)
        with self.lock:
            self._repo(repo_id, user)
            objects = []
            for obj in payload["objects"]:
                answer = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
                if obj["oid"] not in self.lfs_objects:
                    answer["actions"] = {"upload": {"href": f"{self.url}/lfs-upload/{obj['oid']}", "header": {}}}
                objects.append(answer)
        return 200, {"Content-Type": "application/vnd.git-lfs+json"}, _json({"transfer": "basic", "objects": objects})

    def _lfs_put(self, headers, oid, body):
        if hashlib.sha256(body).hexdigest() != oid:
            raise HubError(400, "uploaded content does not match its oid")
        with self.lock:
            self.lfs_objects[oid] = body
        return 200, {}, b""

    def _resolve(self, method, repo_id, revision, path, headers):
        user = self._user(headers, required=False)
        with self.lock:
            commit = self._commit(self._repo(repo_id, user), revision)
            blob = commit.tree.get(path)
            if blob is None:
                raise HubError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": commit.sha})
        data = blob.data
        meta = {"X-Repo-Commit": commit.sha, "ETag": f'"{git_oid(data)}"', "Accept-Ranges": "bytes"}
        if blob.lfs:
            meta.update({"X-Linked-Etag": f'"{blob.sha256}"', "X-Linked-Size": str(len(data))})
        ranged = re.fullmatch(r"bytes=(\d+)-(\d*)", headers.get("range", "") or "")
        if ranged:
            start = int(ranged.group(1))
            end = min(int(ranged.group(2)) if ranged.group(2) else len(data) - 1, len(data) - 1)
            meta["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            return 206, meta, data[start : end + 1]
        return 200, meta, data


def _json(obj) -> bytes:
    return json.dumps(obj).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep test output clean
        pass

    def _body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def _serve(self):
        hub: FakeHub = self.server.hub
        url = urlsplit(self.path)
        body = self._body()
        try:
            status, headers, payload = hub.handle(self.command, url.path, parse_qs(url.query), self.headers, body)
            headers = {"Content-Type": "application/json", **headers}
        except HubError as exc:
            status, payload = exc.status, _json({"error": exc.message})
            headers = {"Content-Type": "application/json", "X-Error-Message": exc.message, **exc.headers}
            if exc.code:
                headers["X-Error-Code"] = exc.code
        except Exception as exc:  # a bug in this test Hub: answer 500 and keep serving
            status, payload, headers = 500, _json({"error": repr(exc)}), {"Content-Type": "application/json"}
        with hub.lock:
            hub.requests.append((self.command, url.path, status))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _serve


__all__ = ["FakeHub", "git_oid"]

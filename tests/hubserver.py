"""A small Hugging Face Hub look-alike on 127.0.0.1 for tests that download or upload
(``HF_ENDPOINT``).

It serves repositories laid out as ``<root>/{models,datasets}/<org>/<name>/<files>`` with the
endpoints huggingface_hub and datasets use: repo info by revision, tree listing, paths-info,
and ``resolve`` downloads (HEAD and GET, with ranges, commit and ETag headers). The commit of
a repository is the sha1 of its files' names and bytes. Every request is recorded in
``requests`` so a test can prove that an offline run made none.

Uploads take the path huggingface_hub 2.x takes for ``create_repo`` + ``upload_folder``:
``POST /api/repos/create``, ``POST /api/validate-yaml`` (a README's metadata),
``POST /api/{type}s/{repo}/preupload/{rev}`` (answered ``uploadMode: "regular"`` for every
file, so contents travel inline and no LFS/Xet storage is involved) and
``POST /api/{type}s/{repo}/commit/{rev}`` (an NDJSON body: a header line, then one line per
file with its base64 content, or a deletion). Write requests need a bearer token (``write_token``
when one is given); the ones seen are kept in ``tokens``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

_TYPES = {"models": "models", "datasets": "datasets", "spaces": "spaces"}


class FakeHub:
    def __init__(self, root: Path, write_token: str | None = None):
        self.root = root
        self.write_token = write_token  # when set, the only token write requests may carry
        self.requests: list[str] = []
        self.tokens: list[str] = []
        self.commits: list[dict[str, Any]] = []
        self.created: dict[str, dict[str, Any]] = {}  # repo id -> the create request's payload
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- repository contents -------------------------------------------------------------------

    def repo_dir(self, kind: str, repo: str) -> Path:
        return self.root / kind / repo

    def files(self, kind: str, repo: str) -> list[str]:
        d = self.repo_dir(kind, repo)
        return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())

    def commit(self, kind: str, repo: str) -> str:
        h = hashlib.sha1()
        d = self.repo_dir(kind, repo)
        for f in self.files(kind, repo):
            h.update(f.encode() + b"\0" + (d / f).read_bytes())
        return h.hexdigest()

    def _entry(self, kind: str, repo: str, rel: str) -> dict[str, Any]:
        p = self.repo_dir(kind, repo) / rel
        if p.is_dir():
            return {"type": "directory", "path": rel, "oid": hashlib.sha1(rel.encode()).hexdigest(), "size": 0}
        data = p.read_bytes()
        return {"type": "file", "path": rel, "size": len(data), "oid": hashlib.sha1(data).hexdigest()}

    def _info(self, kind: str, repo: str) -> dict[str, Any]:
        files = self.files(kind, repo)
        return {
            "_id": hashlib.sha1(repo.encode()).hexdigest()[:24], "id": repo, "sha": self.commit(kind, repo),
            "private": False, "gated": False, "disabled": False, "downloads": 0, "likes": 0, "tags": [],
            "lastModified": "2025-01-01T00:00:00.000Z", "createdAt": "2025-01-01T00:00:00.000Z",
            "siblings": [{"rfilename": f, "size": (self.repo_dir(kind, repo) / f).stat().st_size} for f in files],
            "cardData": {}, "author": repo.split("/")[0],
        }

    def git_oid(self, kind: str, repo: str, rel: str) -> str | None:
        """The git blob id of a stored file (what the hub compares with a client's local oid)."""
        p = self.repo_dir(kind, repo) / rel
        if not p.is_file():
            return None
        data = p.read_bytes()
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    def apply_commit(self, kind: str, repo: str, lines: list[dict[str, Any]]) -> None:
        """Write a commit's files (all of them, or none if a line is malformed)."""
        root = self.repo_dir(kind, repo)
        header, ops = lines[0], lines[1:]
        if header.get("key") != "header":
            raise ValueError("the first line of a commit must be its header")
        writes: dict[Path, bytes] = {}
        deletes: list[Path] = []
        for op in ops:
            key, value = op["key"], op["value"]
            target = (root / value["path"]).resolve()
            if root.resolve() not in target.parents:
                raise ValueError(f"path outside the repository: {value['path']}")
            if key == "file":
                if value.get("encoding") != "base64":
                    raise ValueError(f"unknown encoding {value.get('encoding')!r}")
                writes[target] = base64.b64decode(value["content"], validate=True)
            elif key == "deletedFile":
                deletes.append(target)
            else:  # lfsFile and friends: preupload never asks for them here
                raise ValueError(f"unsupported commit operation {key!r}")
        for target, data in writes.items():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        for target in deletes:
            target.unlink(missing_ok=True)
        self.commits.append({"repo": f"{kind}/{repo}", "summary": header["value"].get("summary"),
                             "files": sorted(str(t.relative_to(root.resolve())) for t in writes)})

    # -- HTTP ----------------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:
                pass

            def _send(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None,
                      ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _json(self, obj: Any, headers: dict[str, str] | None = None) -> None:
                self._send(200, json.dumps(obj).encode(), headers)

            def _missing(self, code: str, msg: str) -> None:
                self._send(404, json.dumps({"error": msg}).encode(), {"X-Error-Code": code, "X-Error-Message": msg})

            def _repo(self, kind: str, org: str, name: str) -> str | None:
                repo = f"{org}/{name}"
                if not hub.repo_dir(kind, repo).is_dir():
                    self._missing("RepoNotFound", f"Repository Not Found for url: {self.path}")
                    return None
                return repo

            def do_HEAD(self) -> None:
                self.do_GET()

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))

            def _error(self, code: int, msg: str) -> None:
                self._send(code, json.dumps({"error": msg}).encode(), {"X-Error-Message": msg})

            def _authorized(self) -> bool:
                auth = self.headers.get("Authorization", "")
                token = auth[7:] if auth.startswith("Bearer ") else ""
                hub.tokens.append(token)
                if not token or (hub.write_token is not None and token != hub.write_token):
                    self._error(401, "Invalid credentials in Authorization header")
                    return False
                return True

            def do_POST(self) -> None:
                hub.requests.append(f"POST {self.path}")
                u = urlparse(self.path)
                path = unquote(u.path)
                if path == "/api/validate-yaml":
                    self._body()
                    return self._json({"errors": [], "warnings": []})
                if path == "/api/repos/create":
                    return self._create_repo()
                m = re.fullmatch(r"/api/(models|datasets|spaces)/([^/]+)/([^/]+)/(paths-info|preupload|commit)/(.+)", path)
                if not m:
                    self._body()
                    return self._missing("EntryNotFound", f"no route {u.path}")
                kind, org, name, action, _rev = m.groups()
                body = self._body()
                repo = self._repo(kind, org, name)
                if repo is None:
                    return None
                if action == "paths-info":
                    if self.headers.get("Content-Type", "").startswith("application/json"):
                        paths = json.loads(body or b"{}").get("paths", [])
                    else:
                        paths = parse_qs(body.decode()).get("paths", [])
                    d = hub.repo_dir(kind, repo)
                    return self._json([hub._entry(kind, repo, p) for p in paths if (d / p).exists()])
                if not self._authorized():
                    return None
                if action == "preupload":
                    files = json.loads(body)["files"]
                    return self._json({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                                                  "oid": hub.git_oid(kind, repo, f["path"])} for f in files]})
                try:
                    lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
                    hub.apply_commit(kind, repo, lines)
                except (ValueError, KeyError, IndexError) as exc:
                    return self._error(400, f"bad commit: {exc}")
                sha = hub.commit(kind, repo)
                prefix = "" if kind == "models" else f"{kind}/"
                return self._json({"success": True, "commitOid": sha, "commitUrl": f"{hub.url}/{prefix}{repo}/commit/{sha}",
                                   "hookOutput": ""})

            def _create_repo(self) -> None:
                payload = json.loads(self._body() or b"{}")
                if not self._authorized():
                    return None
                kind = {"model": "models", "dataset": "datasets", "space": "spaces"}.get(payload.get("type") or "model")
                if kind is None or not payload.get("name"):
                    return self._error(400, "bad repository type or name")
                repo = f"{payload.get('organization') or 'testuser'}/{payload['name']}"
                prefix = "" if kind == "models" else f"{kind}/"
                url = f"{hub.url}/{prefix}{repo}"
                if hub.repo_dir(kind, repo).is_dir():
                    return self._send(409, json.dumps({"error": "You already created this model repo", "url": url}).encode(),
                                      {"X-Error-Message": "You already created this model repo"})
                hub.repo_dir(kind, repo).mkdir(parents=True)
                hub.created[repo] = payload
                return self._json({"url": url, "name": repo, "id": hashlib.sha1(repo.encode()).hexdigest()[:24]})

            def do_GET(self) -> None:
                hub.requests.append(f"{self.command} {self.path}")
                u = urlparse(self.path)
                path, query = unquote(u.path), parse_qs(u.query)
                m = re.fullmatch(r"/api/(models|datasets|spaces)/([^/]+)/([^/]+)(?:/revision/(.+))?", path)
                if m:
                    kind, org, name, _rev = m.groups()
                    repo = self._repo(kind, org, name)
                    return None if repo is None else self._json(hub._info(kind, repo))
                m = re.fullmatch(r"/api/(models|datasets|spaces)/([^/]+)/([^/]+)/tree/([^/]+)(?:/(.*))?", path)
                if m:
                    kind, org, name, _rev, sub = m.groups()
                    repo = self._repo(kind, org, name)
                    if repo is None:
                        return None
                    base = hub.repo_dir(kind, repo) / (sub or "")
                    if not base.exists():
                        return self._missing("EntryNotFound", f"{sub} does not exist")
                    recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
                    items = base.rglob("*") if recursive else base.iterdir()
                    root = hub.repo_dir(kind, repo)
                    return self._json([hub._entry(kind, repo, str(p.relative_to(root))) for p in sorted(items)])
                m = re.fullmatch(r"/(?:(datasets|spaces)/)?([^/]+)/([^/]+)/resolve/([^/]+)/(.+)", path)
                if m:
                    kind, org, name, _rev, rel = m.groups()
                    kind = kind or "models"
                    repo = self._repo(kind, org, name)
                    if repo is None:
                        return None
                    f = hub.repo_dir(kind, repo) / rel
                    if not f.is_file():
                        return self._missing("EntryNotFound", f"{rel} does not exist")
                    data = f.read_bytes()
                    headers = {"X-Repo-Commit": hub.commit(kind, repo), "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                               "Accept-Ranges": "bytes"}
                    rng = self.headers.get("Range")
                    if rng and self.command == "GET":
                        mm = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
                        if mm:
                            start = int(mm.group(1))
                            end = int(mm.group(2)) if mm.group(2) else len(data) - 1
                            part = data[start : end + 1]
                            headers["Content-Range"] = f"bytes {start}-{start + len(part) - 1}/{len(data)}"
                            return self._send(206, part, headers, "application/octet-stream")
                    return self._send(200, data, headers, "application/octet-stream")
                return self._missing("EntryNotFound", f"no route {path}")

        return Handler

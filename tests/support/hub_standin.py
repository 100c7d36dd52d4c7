"""A loopback stand-in for the Hugging Face Hub API: just what ``HfApi`` uses to publish a repo.

It keeps repositories in memory (``repos[repo_id]``: ``private``, ``branches`` of
``{path: bytes}``) and records every request (``requests``: ``(method, path)``). Files come
inline with the commit ("regular" upload mode), so no LFS or Xet storage is involved. Every
``/api`` request must carry ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["HubStandIn", "hub_standin"]


class HubStandIn:
    """The Hub's state and request log (see the module docstring)."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.url = ""
        self.repos: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def files(self, repo_id: str, branch: str = "main") -> dict[str, bytes]:
        """The files of ``repo_id`` on ``branch``."""
        return dict(self.repos[repo_id]["branches"][branch])


def _handler(hub: HubStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(
            self, status: int, body: Any = None, headers: dict[str, str] | None = None
        ) -> None:
            data = (
                b""
                if body is None
                else (body if isinstance(body, bytes) else json.dumps(body).encode())
            )
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if not isinstance(body, bytes):
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _handle(self) -> None:
            path = urllib.parse.urlsplit(self.path).path
            body = self._body()
            with hub.lock:
                hub.requests.append((self.command, path))
            if self.headers.get("Authorization") != f"Bearer {hub.token}":
                self._answer(401, {"error": "Invalid credentials"})
                return
            parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
            if parts == ["api", "whoami-v2"]:
                self._answer(200, {"type": "user", "name": "tester", "orgs": []})
            elif parts == ["api", "repos", "create"]:
                request = json.loads(body)
                repo_id = f"{request.get('organization') or 'tester'}/{request['name']}"
                with hub.lock:
                    if repo_id in hub.repos:
                        self._answer(
                            409,
                            {"error": "You already created this model repo",
                             "url": f"{hub.url}/{repo_id}"},
                        )  # fmt: skip
                        return
                    hub.repos[repo_id] = {
                        # huggingface_hub 1.x sends `visibility`, 0.x `private`
                        "private": request.get("visibility") == "private"
                        or request.get("private") is True,
                        "branches": {"main": {}},
                    }
                self._answer(200, {"url": f"{hub.url}/{repo_id}", "name": repo_id})
            elif parts == ["api", "validate-yaml"]:
                self._answer(200, {"errors": [], "warnings": []})
            elif parts[:2] == ["api", "models"] and len(parts) >= 6:
                repo_id, action, revision = f"{parts[2]}/{parts[3]}", parts[4], parts[5]
                self._repo_action(repo_id, action, revision, body)
            elif len(parts) >= 5 and parts[2] == "resolve":
                repo_id, revision, name = f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:])
                files = hub.repos.get(repo_id, {}).get("branches", {}).get(revision, {})
                if name not in files:
                    self._answer(
                        404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"}
                    )
                    return
                content = files[name]
                etag = f'"{len(content)}-{abs(hash(content))}"'
                self._answer(
                    200,
                    content,
                    {"ETag": etag, "X-Repo-Commit": "0" * 40, "Content-Type": "text/plain"},
                )
            else:
                self._answer(404, {"error": f"not in the stand-in: {self.command} {path}"})

        def _repo_action(self, repo_id: str, action: str, revision: str, body: bytes) -> None:
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._answer(
                    404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
                )
                return
            branches: dict[str, dict[str, bytes]] = repo["branches"]
            if action == "branch":
                with hub.lock:
                    if revision in branches:
                        self._answer(409, {"error": "Reference already exists"})
                        return
                    branches[revision] = dict(branches["main"])
                self._answer(200, {})
            elif action == "preupload":
                files = json.loads(body)["files"]
                self._answer(
                    200,
                    {
                        "files": [
                            {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                            for f in files
                        ]
                    },
                )
            elif action == "commit":
                if revision not in branches:
                    self._answer(
                        404, {"error": "Revision not found"}, {"X-Error-Code": "RevisionNotFound"}
                    )
                    return
                with hub.lock:
                    for line in body.splitlines():
                        item = json.loads(line)
                        if item["key"] == "file":
                            value = item["value"]
                            branches[revision][value["path"]] = base64.b64decode(value["content"])
                self._answer(
                    200,
                    {"commitUrl": f"{hub.url}/{repo_id}/commit/{'1' * 40}", "commitOid": "1" * 40},
                )
            else:
                self._answer(404, {"error": f"not in the stand-in: {action}"})

        do_GET = do_POST = do_HEAD = do_PUT = _handle

    return Handler


@contextlib.contextmanager
def hub_standin(token: str) -> Iterator[HubStandIn]:
    """Serve a :class:`HubStandIn` on a free loopback port (its ``url`` is set) until exit."""
    hub = HubStandIn(token)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    server.daemon_threads = True
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)

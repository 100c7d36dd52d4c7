"""The local server's REST routes: training runs, checkpoints, sessions, usage, downloads.

These answer from the state's stores and views; a checkpoint archive, a trace export or an
external weights file is served through a signed ``/_local/download/<token>`` link.
"""

from __future__ import annotations

import email.utils
import urllib.parse
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

from tinker_lite import types
from tinker_lite.local.http.responses import (
    API,
    Response,
    as_json,
    content_disposition,
    cursor,
    json_object,
    no_content,
    parse_range,
    query_int,
    query_opt,
    query_time,
)
from tinker_lite.local.protocol.parsing import parse_json, structure_request
from tinker_lite.local.refusals import InvalidRequest, NotFound, field_error
from tinker_lite.local.service.ledger import AUDIT_EVENT_TYPES
from tinker_lite.local.service.state import ServerState
from tinker_lite.local.storage.checkpoints import KINDS as CHECKPOINT_KINDS
from tinker_lite.local.storage.checkpoints import untyped_checkpoint_id

__all__ = ["RestRoutes"]

T = TypeVar("T")


class RestRoutes:
    """Answers the REST requests (everything under ``/api/v1`` that is not a POST operation)."""

    def __init__(
        self, state: ServerState, *, archive_ttl_s: float, base_url: Callable[[], str]
    ) -> None:
        self.state = state
        self.archive_ttl_s = archive_ttl_s
        self.base_url = base_url

    def _download_url(self, token: str) -> str:
        return f"{self.base_url()}/_local/download/{token}"

    def route(
        self,
        method: str,
        name: str,
        query: Mapping[str, list[str]],
        body: bytes,
        headers: Mapping[str, str],
    ) -> Response:
        """Answer the REST request ``method`` ``/api/v1/<name>``; 404 for an unknown path."""
        parts = [urllib.parse.unquote(p) for p in name.split("/")]
        state = self.state
        store, views = state.checkpoints, state.views
        if parts == ["training_runs"] and method == "GET":
            return _page(query, 20, "training_runs", store.list_runs(), views.training_run_view)
        if parts == ["checkpoints"] and method == "GET":
            return _page(query, 100, "checkpoints", store.list_all(), views.checkpoint_view)
        if len(parts) >= 2 and parts[0] == "training_runs":
            run_id = parts[1]
            if len(parts) >= 4 and parts[2] == "checkpoints" and parts[3] not in CHECKPOINT_KINDS:
                # a checkpoint id is "<kind>/<name>": an untyped one is a bad request, as the
                # service answers it (400), whether the run exists or not
                raise InvalidRequest(untyped_checkpoint_id(parts[3]))
            run = store.get_run(run_id)
            if run is None:
                raise NotFound(f"Training run not found: {run_id!r}")
            rest = parts[2:]
            if not rest and method == "GET":
                return as_json(state.views.training_run_view(run))
            if rest == ["checkpoints"] and method == "GET":
                return as_json(
                    {
                        "checkpoints": [
                            state.views.checkpoint_view(r) for r in store.list_run(run_id)
                        ]
                    }
                )
            if len(rest) in (3, 4) and rest[0] == "checkpoints":
                checkpoint_id = f"{rest[1]}/{rest[2]}"
                action = rest[3] if len(rest) == 4 else None
                return self._checkpoint_action(method, run_id, checkpoint_id, action, body)
        if len(parts) == 2 and parts[0] == "samplers" and method == "GET":
            return as_json(state.samplers.describe(parts[1]))
        if parts == ["sessions"] and method == "GET":
            return as_json(
                state.sessions.list_page(
                    query_int(query, "limit", 20), query_int(query, "offset", 0)
                )
            )
        if len(parts) == 2 and parts[0] == "sessions" and method == "GET":
            return as_json(state.sessions.describe(parts[1]))
        if len(parts) == 3 and parts[0] == "sessions" and parts[2] == "finish" and method == "POST":
            req = structure_request(parse_json(body), types.SessionFinishRequest)
            state.sessions.finish(parts[1], req)
            return no_content()
        if len(parts) == 3 and parts[0] == "sessions" and parts[2] == "trace_export":
            trace = state.views.session_trace(parts[1])
            file = store.write_artifact(f"trace-{uuid.uuid4().hex}.json", trace)
            token, _ = store.link_file(file, f"{parts[1]}.trace.json", self.archive_ttl_s)
            return as_json({"status": "ready", "url": self._download_url(token)})
        if len(parts) == 3 and parts[0] == "sessions" and parts[2] == "project" and method == "PUT":
            data = parse_json(body)
            project = data.get("project_id") if isinstance(data, dict) else None
            state.sessions.assign_project(parts[1], project)
            return no_content()
        if parts == ["sessions", "search"] and method == "POST":
            return as_json(state.sessions.search(json_object(body)))
        if parts == ["copy_weights"] and method == "POST":
            return as_json(
                state.views.copy_weights(json_object(body), headers.get("X-Idempotency-Key"))
            )
        if parts == ["save_weights_external"] and method == "POST":
            return as_json(state.training.save_weights_external(json_object(body)))
        if parts == ["audit"] and method == "GET":
            event_type = (query.get("event_type") or ["all"])[0]
            if event_type not in AUDIT_EVENT_TYPES:
                raise field_error(
                    ["query", "event_type"],
                    f"event_type: one of {', '.join(AUDIT_EVENT_TYPES)}",
                    "literal_error",
                )
            return as_json(state.ledger.audit_log(event_type, query_opt(query, "day")))
        if parts == ["billing", "usage", "events"] and method == "GET":
            start = query_time(query, "starting_on")
            end = query_time(query, "ending_before")
            return as_json(state.ledger.billing_usage(start, end, state.sessions.metadata()))
        if parts == ["billing", "usage", "checkpoints", "current"] and method == "GET":
            return as_json(state.views.storage_usage(query_opt(query, "project_id")))
        raise NotFound(f"Not found: {API}{name}")

    def _checkpoint_action(
        self, method: str, run_id: str, checkpoint_id: str, action: str | None, body: bytes
    ) -> Response:
        store = self.state.checkpoints
        audit = self.state.ledger.audit
        now = self.state.clock()
        path = f"tinker://{run_id}/{checkpoint_id}"
        if action is None and method == "DELETE":
            store.delete(run_id, checkpoint_id)
            audit(now, "checkpoint.deleted", model_id=run_id, tinker_path=path)
            return no_content()
        if action is None and method == "GET":
            return as_json(self.state.views.checkpoint_view(store.lookup(run_id, checkpoint_id)))
        if action == "publish" and method in ("POST", "DELETE"):
            store.set_public(run_id, checkpoint_id, method == "POST")
            event = "checkpoint.published" if method == "POST" else "checkpoint.unpublished"
            audit(now, event, model_id=run_id, tinker_path=path)
            return no_content()
        if action == "ttl" and method == "PUT":
            req = structure_request(parse_json(body), types.SetCheckpointTTLRequest)
            store.set_ttl(run_id, checkpoint_id, req.ttl_seconds)
            audit(now, "checkpoint.ttl_set", tinker_path=path, ttl_seconds=req.ttl_seconds)
            return no_content()
        if action == "external_weights_urls" and method == "GET":
            files = store.checkpoint_files(run_id, checkpoint_id)
            urls: dict[str, str] = {}
            expires_at = now + self.archive_ttl_s
            for rel, file in files.items():
                token, expires_at = store.link_file(file, rel, self.archive_ttl_s)
                urls[rel] = self._download_url(token)
            expires = datetime.fromtimestamp(expires_at, tz=timezone.utc).isoformat()
            return as_json({"urls": urls, "expires": expires})
        if action == "archive" and method == "GET":
            token, expires_at = store.make_archive(run_id, checkpoint_id, self.archive_ttl_s)
            # docs/protocol.rst §4.6: success is a 302 whose Location/Expires the client reads
            location = self._download_url(token)
            headers = {
                "Location": location,
                "Expires": email.utils.formatdate(expires_at, usegmt=True),
            }
            return Response(302, b"", None, headers)
        raise NotFound(f"Not found: {API}training_runs/{run_id}/checkpoints/{checkpoint_id}")

    def download(self, token: str, method: str, headers: Mapping[str, str]) -> Response:
        found = self.state.checkpoints.archive(token)
        if found is None:
            raise NotFound("Download link expired or unknown")
        file_path, filename = found
        try:
            data = file_path.read_bytes()
        except OSError:
            raise NotFound("Download link expired or unknown") from None
        size = len(data)
        out_headers = {
            "Accept-Ranges": "bytes",
            "Content-Disposition": content_disposition(filename),
            "ETag": f'"{token}"',
        }
        status = 200
        range_header = headers.get("Range")
        if range_header is not None and method == "GET":
            parsed = parse_range(range_header, size)
            if parsed == "unsatisfiable":
                out_headers["Content-Range"] = f"bytes */{size}"
                return Response(416, b"", None, out_headers)
            if isinstance(parsed, tuple):
                start, end = parsed
                data = data[start : end + 1]
                out_headers["Content-Range"] = f"bytes {start}-{end}/{size}"
                status = 206
        return Response(status, data, "application/gzip", out_headers)


def _page(
    query: Mapping[str, list[str]],
    default_limit: int,
    key: str,
    items: Sequence[T],
    view: Callable[[T], dict[str, Any]],
) -> Response:
    """One ``limit`` / ``offset`` page of ``items`` under ``key``, with its cursor."""
    limit = query_int(query, "limit", default_limit)
    offset = query_int(query, "offset", 0)
    page = [view(item) for item in items[offset : offset + limit]]
    return as_json({key: page, "cursor": cursor(offset, limit, len(items))})

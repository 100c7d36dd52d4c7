"""What the REST-only clients, :class:`RestClient` and :class:`AdminClient`, share: their
connection (their own, or a ServiceClient's) and running an operation on its REST threads."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from tinker_lite._api.endpoints import Endpoint
from tinker_lite._context import ClientContext, context_of
from tinker_lite._errors import InvalidInputError
from tinker_lite._futures.future import APIFuture
from tinker_lite._repr import tolerant_repr
from tinker_lite._secrets import redact_url
from tinker_lite._session.settings import resolve_settings

if TYPE_CHECKING:
    import requests

__all__ = ["RestOnlyClient"]

T = TypeVar("T")
C = TypeVar("C", bound="RestOnlyClient")


class RestOnlyClient:
    """The construction, closing and call plumbing of a REST-only client."""

    _context: ClientContext

    def __init__(
        self,
        _holder: object | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        verify: bool | str = True,
        default_headers: Mapping[str, str] | None = None,
        max_retries: int | None = None,
        stall_timeout: float | None = None,
        startup_timeout: float | None = None,
        telemetry: bool | None = None,
        requests_session: requests.Session | None = None,
    ) -> None:
        options: dict[str, Any] = {
            "api_key": api_key,
            "base_url": base_url,
            "verify": verify,
            "default_headers": default_headers,
            "max_retries": max_retries,
            "stall_timeout": stall_timeout,
            "startup_timeout": startup_timeout,
            "telemetry": telemetry,
            "requests_session": requests_session,
        }
        self._owns_context = _holder is None
        if _holder is None:
            # golden-0.38 README: a REST-only client creates no session and sends nothing
            # until its first call.
            settings = resolve_settings(allow_local=True, **options)
            self._context = ClientContext(settings, session=False)
        else:
            self._context = _shared_context(type(self).__name__, _holder, options)
        self._api = self._context.api

    @classmethod
    def _on_context(cls: type[C], context: ClientContext) -> C:
        """A client sharing ``context`` (it does not close it)."""
        return cls(context)

    @tolerant_repr
    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={redact_url(self._context.base_url)!r})"

    def close(self) -> None:
        """Close the connection this client opened itself (idempotent); a shared one stays open."""
        if self._owns_context:
            self._context.close()

    def __enter__(self: C) -> C:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, operation: Callable[[], T], *, sdk_method: str) -> APIFuture[T]:
        """Run one requestor operation on the REST threads; its future at once."""
        context = self._context
        return context.run_in(context.rest_pool(), operation, request_type=sdk_method)

    def _request(
        self,
        endpoint: Endpoint[T],
        *,
        sdk_method: str | None = None,
        query: Mapping[str, object] | None = None,
        body: object | None = None,
        headers: Mapping[str, str] | None = None,
        **ids: str,
    ) -> APIFuture[T]:
        """Send an endpoint row on the REST threads; its future at once (a bad id refused now)."""
        path = endpoint.url_path(**ids)
        method = sdk_method or endpoint.sdk_method or ""
        api = self._api
        return self._call(
            lambda: api.request(
                endpoint, path, sdk_method=method, query=query, body=body, headers=headers
            ),
            sdk_method=method,
        )


def _shared_context(client_name: str, holder: object, options: Mapping[str, Any]) -> ClientContext:
    """``holder``'s connection (a ServiceClient's or another client's), refusing settings of
    its own in ``options``."""
    shared = context_of(holder)
    if shared is None:
        # Never echo the value: in the old tinker_lite order it may be the API key.
        raise InvalidInputError(
            "_holder",
            f"{client_name}'s first positional argument is the connection of a ServiceClient "
            f"(the official 0.38 order), got a {type(holder).__name__}",
            f"pass {client_name}(base_url=..., api_key=...) as keywords",
        )
    defaults: dict[str, object] = {"verify": True}
    conflicting = [name for name, value in options.items() if value != defaults.get(name)]
    if conflicting:
        raise InvalidInputError(
            conflicting[0],
            f"cannot be combined with a ServiceClient or connection handed to {client_name}, "
            "which has its own settings",
            "pass either the ServiceClient or the connection settings",
        )
    return shared

"""Connections to the daemon: ``Hutch`` (blocking) and ``AsyncHutch`` (asyncio). Both move the
requests ``_transport`` builds, retry where that is safe, and turn connection failures into
``DaemonUnavailableError``."""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from typing import (
    Any,
    AsyncIterator,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Tuple,
    Union,
)

import httpx

from . import _transport as t
from ._version import __version__
from .errors import DaemonUnavailableError, wait_timeout
from .models import Key, Limits, PoolInfo

__all__ = ["Hutch", "AsyncHutch", "DEFAULT_URL", "Pools", "Keys", "AsyncPools", "AsyncKeys"]

DEFAULT_URL = "unix:///run/hutch/hutch.sock"
DEFAULT_SOCKET = "/run/hutch/hutch.sock"
# First delay between connection attempts; doubled each time.
_BACKOFF_S = 0.1


class _Endpoint:
    """Where the daemon listens: a Unix socket (``unix:///path``, or a bare absolute path) or
    ``http://host:port``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.socket: Optional[str] = None
        if url.startswith("unix://"):
            path = url[len("unix://") :]
            if not path.startswith("/"):
                raise ValueError(
                    f"invalid daemon URL {url!r}: a Unix socket URL needs an absolute path, "
                    "e.g. unix:///run/hutch/hutch.sock"
                )
            self.socket = path
            self.base_url = "http://localhost"
        elif url.startswith("/"):
            self.socket = url
            self.base_url = "http://localhost"
        elif url.startswith(("http://", "https://")):
            self.base_url = url.rstrip("/")
        else:
            raise ValueError(f"invalid daemon URL {url!r}: use unix:///PATH or http://HOST:PORT")

    def __str__(self) -> str:
        return self.socket if self.socket is not None else self.base_url

    def serve_hint(self) -> str:
        if self.socket is None:
            host = self.base_url.split("://", 1)[1]
            return f"hutch serve --tcp {host}"
        if self.socket == DEFAULT_SOCKET:
            return "hutch serve"
        return f"hutch serve --socket {self.socket}"

    def socket_missing(self) -> bool:
        return self.socket is not None and not os.path.exists(self.socket)


class _Base:
    """What both clients share: configuration, headers and error wording."""

    def __init__(
        self,
        url: Optional[str],
        api_key: Optional[str],
        timeout: Optional[float],
        max_retries: int,
    ) -> None:
        self.url: str = url or os.environ.get("HUTCH_URL") or DEFAULT_URL
        self._endpoint = _Endpoint(self.url)
        self.api_key: Optional[str] = (
            api_key if api_key is not None else os.environ.get("HUTCH_API_KEY") or None
        )
        self.timeout = timeout
        self.max_retries = max_retries
        headers = {"user-agent": f"hutch-sdk-python/{__version__}"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        self._headers = headers

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r})"

    def _timeout_for(self, seconds: Optional[float], exact: bool = False) -> Any:
        """The timeout of one request: ``seconds`` when ``exact``, else never shorter than the
        client's (a command's own limit may be longer than it)."""
        if exact and seconds is not None:
            return httpx.Timeout(seconds)
        if seconds is None or self.timeout is None or seconds <= self.timeout:
            return httpx.USE_CLIENT_DEFAULT
        return httpx.Timeout(seconds)

    def _unavailable(self, exc: Exception) -> DaemonUnavailableError:
        ep = self._endpoint
        if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
            if (
                ep.socket is not None
                and os.path.exists(ep.socket)
                and not os.access(ep.socket, os.R_OK | os.W_OK)
            ):
                msg = (
                    f"cannot reach the hutch daemon at {ep}: permission denied (its socket is for its "
                    "owner only: run as root, or use its TCP address in HUTCH_URL with HUTCH_API_KEY)"
                )
            else:
                msg = (
                    f"cannot reach the hutch daemon at {ep} (is it running? start it with: {ep.serve_hint()})"
                )
        elif isinstance(exc, httpx.TimeoutException):
            msg = f"the hutch daemon at {ep} did not answer in time ({type(exc).__name__})"
        else:
            msg = f"lost the connection to the hutch daemon at {ep}: {exc or type(exc).__name__}"
        return DaemonUnavailableError(msg)

    def _should_retry(self, req: t.Request, exc: Exception, attempt: int) -> bool:
        if not req.retry or attempt >= self.max_retries:
            return False
        if isinstance(exc, httpx.ConnectError):
            # nothing was sent; a missing socket will not appear by waiting
            return not self._endpoint.socket_missing()
        return req.idempotent and isinstance(
            exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
        )


def _http_transport_kwargs(ep: _Endpoint) -> Dict[str, Any]:
    return {"uds": ep.socket} if ep.socket is not None else {}


class Hutch(_Base):
    """A blocking client of ``hutch serve``.

    ``url``: ``unix:///path.sock`` or ``http://host:port``; default ``$HUTCH_URL``, else
    ``unix:///run/hutch/hutch.sock``. ``api_key``: default ``$HUTCH_API_KEY`` (needed on TCP).
    """

    def __init__(
        self,
        url: Optional[str] = None,
        api_key: Optional[str] = None,
        timeout: Optional[float] = 60.0,
        *,
        max_retries: int = 2,
    ) -> None:
        super().__init__(url, api_key, timeout, max_retries)
        self._http = httpx.Client(
            base_url=self._endpoint.base_url,
            transport=httpx.HTTPTransport(**_http_transport_kwargs(self._endpoint)),
            headers=self._headers,
            timeout=timeout,
        )
        self.pools = Pools(self)
        self.keys = Keys(self)

    # -- plumbing ----------------------------------------------------------------------------

    def _send(
        self, req: t.Request, timeout: Optional[float] = None, stream: bool = False, exact: bool = False
    ) -> httpx.Response:
        attempt = 0
        content = req.content
        while True:
            try:
                hreq = self._http.build_request(
                    req.method,
                    req.path,
                    content=content,
                    headers=req.headers,
                    timeout=self._timeout_for(timeout, exact),
                )
                resp = self._http.send(hreq, stream=stream)
            except httpx.TransportError as e:
                if self._should_retry(req, e, attempt):
                    time.sleep(_BACKOFF_S * 2**attempt)
                    attempt += 1
                    continue
                raise self._unavailable(e) from None
            if req.retry and attempt < self.max_retries and resp.status_code in (429, 503):
                if stream:
                    resp.read()
                wait = t.retry_after(resp.status_code, resp.content, resp.headers)
                if wait is not None:
                    resp.close()
                    time.sleep(wait)
                    attempt += 1
                    continue
            return resp

    def _call(
        self, op: str, args: Optional[Mapping[str, Any]] = None, timeout: Optional[float] = None
    ) -> Any:
        req = t.build(op, args)
        resp = self._send(req, timeout)
        return t.decode(op, resp.status_code, resp.content)

    def _events(
        self,
        op: str,
        args: Mapping[str, Any],
        timeout: Optional[float] = None,
        deadline: Optional[float] = None,
    ) -> Iterator[Tuple[str, Any]]:
        """The events of a Server-Sent Events operation, until the stream ends. With ``deadline``
        (a ``time.monotonic()`` value) it raises TimeoutError once that passes."""
        req = t.build(op, args)
        if deadline is not None:
            timeout = max(0.001, deadline - time.monotonic())
        resp = self._send(req, timeout, stream=True, exact=deadline is not None)
        try:
            if resp.status_code >= 400:
                resp.read()
                raise t.error_from_response(resp.status_code, resp.content)
            dec = t.SseDecoder()
            for line in resp.iter_lines():
                ev = dec.feed(line)
                if ev is not None:
                    yield ev
                if deadline is not None and time.monotonic() > deadline:
                    raise wait_timeout(timeout or 0)
            ev = dec.flush()
            if ev is not None:
                yield ev
        except httpx.TimeoutException as e:
            if deadline is not None:
                raise wait_timeout(timeout or 0) from None
            raise self._unavailable(e) from None
        except httpx.TransportError as e:
            raise self._unavailable(e) from None
        finally:
            resp.close()

    # -- system ------------------------------------------------------------------------------

    def health(self) -> Dict[str, Any]:
        """``{"status": "ok"}`` when the daemon answers."""
        return self._call("health")  # type: ignore[no-any-return]

    def version(self) -> Dict[str, Any]:
        """The daemon's version, agent protocol generation and backends."""
        return self._call("version")  # type: ignore[no-any-return]

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Hutch:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncHutch(_Base):
    """The asyncio twin of ``Hutch``: the same arguments, every call awaited."""

    def __init__(
        self,
        url: Optional[str] = None,
        api_key: Optional[str] = None,
        timeout: Optional[float] = 60.0,
        *,
        max_retries: int = 2,
    ) -> None:
        super().__init__(url, api_key, timeout, max_retries)
        self._http = httpx.AsyncClient(
            base_url=self._endpoint.base_url,
            transport=httpx.AsyncHTTPTransport(**_http_transport_kwargs(self._endpoint)),
            headers=self._headers,
            timeout=timeout,
        )
        self.pools = AsyncPools(self)
        self.keys = AsyncKeys(self)

    async def _send(
        self, req: t.Request, timeout: Optional[float] = None, stream: bool = False, exact: bool = False
    ) -> httpx.Response:
        attempt = 0
        content = req.content
        while True:
            try:
                hreq = self._http.build_request(
                    req.method,
                    req.path,
                    content=content,
                    headers=req.headers,
                    timeout=self._timeout_for(timeout, exact),
                )
                resp = await self._http.send(hreq, stream=stream)
            except httpx.TransportError as e:
                if self._should_retry(req, e, attempt):
                    await asyncio.sleep(_BACKOFF_S * 2**attempt)
                    attempt += 1
                    continue
                raise self._unavailable(e) from None
            if req.retry and attempt < self.max_retries and resp.status_code in (429, 503):
                if stream:
                    await resp.aread()
                wait = t.retry_after(resp.status_code, resp.content, resp.headers)
                if wait is not None:
                    await resp.aclose()
                    await asyncio.sleep(wait)
                    attempt += 1
                    continue
            return resp

    async def _call(
        self, op: str, args: Optional[Mapping[str, Any]] = None, timeout: Optional[float] = None
    ) -> Any:
        req = t.build(op, args)
        resp = await self._send(req, timeout)
        return t.decode(op, resp.status_code, resp.content)

    async def _events(
        self,
        op: str,
        args: Mapping[str, Any],
        timeout: Optional[float] = None,
        deadline: Optional[float] = None,
    ) -> AsyncIterator[Tuple[str, Any]]:
        req = t.build(op, args)
        if deadline is not None:
            timeout = max(0.001, deadline - time.monotonic())
        resp = await self._send(req, timeout, stream=True, exact=deadline is not None)
        try:
            if resp.status_code >= 400:
                await resp.aread()
                raise t.error_from_response(resp.status_code, resp.content)
            dec = t.SseDecoder()
            async for line in resp.aiter_lines():
                ev = dec.feed(line)
                if ev is not None:
                    yield ev
                if deadline is not None and time.monotonic() > deadline:
                    raise wait_timeout(timeout or 0)
            ev = dec.flush()
            if ev is not None:
                yield ev
        except httpx.TimeoutException as e:
            if deadline is not None:
                raise wait_timeout(timeout or 0) from None
            raise self._unavailable(e) from None
        except httpx.TransportError as e:
            raise self._unavailable(e) from None
        finally:
            await resp.aclose()

    async def health(self) -> Dict[str, Any]:
        return await self._call("health")  # type: ignore[no-any-return]

    async def version(self) -> Dict[str, Any]:
        return await self._call("version")  # type: ignore[no-any-return]

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncHutch:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


# -- admin: pools and keys --------------------------------------------------------------------

Template = Mapping[str, Any]


def _pool_args(
    name: str, size: int, max: Optional[int], reuse: Optional[str], template: Optional[Template]
) -> Dict[str, Any]:
    return {"name": name, "size": size, "max": max, "reuse": reuse, "template": template}


def _key_args(
    name: str, admin: bool, max_sandboxes: Optional[int], rate_per_minute: Optional[int]
) -> Dict[str, Any]:
    return {"name": name, "admin": admin, "max_sandboxes": max_sandboxes, "rate_per_minute": rate_per_minute}


class Pools:
    """Warm pools (managing them is for admins). Take a sandbox from one with
    ``Sandbox.create(pool=name)``; ``kill()`` gives it back (``reuse="recycle"`` wipes and reuses it)."""

    def __init__(self, client: Hutch) -> None:
        self._c = client

    def create(
        self,
        name: str,
        size: int,
        *,
        max: Optional[int] = None,
        reuse: Optional[str] = None,
        template: Optional[Template] = None,
    ) -> PoolInfo:
        """Define a pool of ``size`` warm sandboxes shaped by ``template`` (``runtime``, ``image``,
        ``limits``, ``env``, ``contexts``, ...); ``reuse`` is ``"fresh"`` (default) or ``"recycle"``."""
        return self._c._call("pools.create", _pool_args(name, size, max, reuse, template))  # type: ignore[no-any-return]

    def list(self) -> List[PoolInfo]:
        return self._c._call("pools.list")  # type: ignore[no-any-return]

    def get(self, name: str) -> PoolInfo:
        return self._c._call("pools.get", {"name": name})  # type: ignore[no-any-return]

    def delete(self, name: str) -> None:
        self._c._call("pools.delete", {"name": name})


class AsyncPools:
    """The asyncio twin of ``Pools``."""

    def __init__(self, client: AsyncHutch) -> None:
        self._c = client

    async def create(
        self,
        name: str,
        size: int,
        *,
        max: Optional[int] = None,
        reuse: Optional[str] = None,
        template: Optional[Template] = None,
    ) -> PoolInfo:
        return await self._c._call("pools.create", _pool_args(name, size, max, reuse, template))  # type: ignore[no-any-return]

    async def list(self) -> List[PoolInfo]:
        return await self._c._call("pools.list")  # type: ignore[no-any-return]

    async def get(self, name: str) -> PoolInfo:
        return await self._c._call("pools.get", {"name": name})  # type: ignore[no-any-return]

    async def delete(self, name: str) -> None:
        await self._c._call("pools.delete", {"name": name})


class Keys:
    """API keys (admin only). ``create`` returns the key with its ``secret``, shown only then."""

    def __init__(self, client: Hutch) -> None:
        self._c = client

    def create(
        self,
        name: str,
        admin: bool = False,
        max_sandboxes: Optional[int] = None,
        rate_per_minute: Optional[int] = None,
    ) -> Key:
        return self._c._call("keys.create", _key_args(name, admin, max_sandboxes, rate_per_minute))  # type: ignore[no-any-return]

    def list(self) -> List[Key]:
        return self._c._call("keys.list")  # type: ignore[no-any-return]

    def revoke(self, id: str) -> None:
        self._c._call("keys.revoke", {"id": id})


class AsyncKeys:
    """The asyncio twin of ``Keys``."""

    def __init__(self, client: AsyncHutch) -> None:
        self._c = client

    async def create(
        self,
        name: str,
        admin: bool = False,
        max_sandboxes: Optional[int] = None,
        rate_per_minute: Optional[int] = None,
    ) -> Key:
        return await self._c._call("keys.create", _key_args(name, admin, max_sandboxes, rate_per_minute))  # type: ignore[no-any-return]

    async def list(self) -> List[Key]:
        return await self._c._call("keys.list")  # type: ignore[no-any-return]

    async def revoke(self, id: str) -> None:
        await self._c._call("keys.revoke", {"id": id})


# -- default clients --------------------------------------------------------------------------

_default: Optional[Hutch] = None
_default_async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncHutch] = weakref.WeakKeyDictionary()


def default_client() -> Hutch:
    """The client ``Sandbox`` uses when given none (configured from the environment)."""
    global _default
    if _default is None:
        _default = Hutch()
    return _default


def default_async_client() -> AsyncHutch:
    """The ``AsyncHutch`` of the running event loop, for ``AsyncSandbox`` given no client."""
    loop = asyncio.get_running_loop()
    c = _default_async.get(loop)
    if c is None:
        c = AsyncHutch()
        _default_async[loop] = c
    return c


LimitsArg = Union[Limits, Mapping[str, Any], None]

"""Typed errors. Every error the daemon returns is JSON ``{"code", "message"}``; the code picks
the class (see ``CODE_TO_ERROR``) and the status decides when the code is one this SDK does not
know yet."""

from __future__ import annotations

from typing import Dict, Optional, Type

__all__ = [
    "HutchError",
    "InvalidRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ConflictError",
    "SandboxStoppedError",
    "RateLimitError",
    "CapacityError",
    "BackendUnavailableError",
    "NotSupportedError",
    "ServerError",
    "DaemonUnavailableError",
    "error_for",
]


class HutchError(Exception):
    """Base class of every error this SDK raises.

    ``status`` is the HTTP status (None when there was no response), ``code`` the API's stable
    error code and ``message`` its text for people.
    """

    def __init__(self, message: str, *, status: Optional[int] = None, code: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code

    def __str__(self) -> str:
        return f"{self.message} ({self.code})" if self.code else self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, message={self.message!r})"


class InvalidRequestError(HutchError):
    """The request was malformed or a value was out of bounds (400, 405, 413, 415)."""


class AuthenticationError(HutchError):
    """No API key, or an unknown or revoked one (401)."""


class PermissionDeniedError(HutchError):
    """The key may not do this, or the sandbox refused a path (403)."""


class NotFoundError(HutchError):
    """No such sandbox, pool, key, process, context or file (404)."""


class ConflictError(HutchError):
    """The thing exists already, or the state changed under the request (409)."""


class SandboxStoppedError(ConflictError):
    """The sandbox is stopped (its TTL expired, it was idle, or it was deleted)."""


class RateLimitError(HutchError):
    """The key is over its requests per minute, or owns its ``max_sandboxes`` already (429)."""


class CapacityError(HutchError):
    """The daemon is full and nothing can be evicted (503)."""


class BackendUnavailableError(HutchError):
    """The backend cannot run on the daemon's host, or the daemon is shutting down (503)."""


class NotSupportedError(HutchError):
    """The sandbox's backend does not do this."""


class ServerError(HutchError):
    """The daemon or the sandbox failed (5xx); the daemon log has the details."""


class DaemonUnavailableError(HutchError):
    """Nothing answered at the daemon's address, or the connection broke."""


class _WaitTimeout(HutchError, TimeoutError):
    """A wait with a timeout (``Process.wait``/``stream``) ran out; the process keeps running.
    Caught as the built-in ``TimeoutError``, or as ``HutchError`` with code ``timeout``."""


def wait_timeout(seconds: float) -> HutchError:
    return _WaitTimeout(f"timed out after {seconds:g} s (the process keeps running)", code="timeout")


CODE_TO_ERROR: Dict[str, Type[HutchError]] = {
    "invalid_request": InvalidRequestError,
    "invalid_path": InvalidRequestError,
    "payload_too_large": InvalidRequestError,
    "unsupported_media_type": InvalidRequestError,
    "method_not_allowed": InvalidRequestError,
    "unauthorized": AuthenticationError,
    "forbidden": PermissionDeniedError,
    "path_forbidden": PermissionDeniedError,
    "not_found": NotFoundError,
    "no_such_process": NotFoundError,
    "conflict": ConflictError,
    "sandbox_stopped": SandboxStoppedError,
    "rate_limited": RateLimitError,
    "capacity_exceeded": CapacityError,
    "backend_unavailable": BackendUnavailableError,
    "shutting_down": BackendUnavailableError,
    "not_supported": NotSupportedError,
    "internal": ServerError,
    "sandbox_error": ServerError,
    "insufficient_storage": ServerError,
}

_STATUS_TO_ERROR: Dict[int, Type[HutchError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    405: InvalidRequestError,
    409: ConflictError,
    413: InvalidRequestError,
    415: InvalidRequestError,
    429: RateLimitError,
}


def error_for(status: Optional[int], code: Optional[str], message: str) -> HutchError:
    """The typed error for an API error ``{code, message}`` answered with ``status``."""
    cls = CODE_TO_ERROR.get(code or "")
    if cls is None:
        if status is not None and status >= 500:
            cls = ServerError
        else:
            cls = _STATUS_TO_ERROR.get(status or 0, HutchError)
    return cls(message, status=status, code=code)

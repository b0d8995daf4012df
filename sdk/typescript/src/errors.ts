// Typed errors. Every error the daemon produces is JSON `{code, message}`; the SDK turns it into
// one of these classes by `code` (then by HTTP status for codes it does not know), keeping the
// server's message as is. The class names are the same in the Python SDK.

/** Base of every error the SDK throws on purpose. */
export class HutchError extends Error {
  override name = 'HutchError';
  /** The HTTP status, or null when the error did not come from an HTTP response. */
  readonly status: number | null;
  /** The API's stable error code (`not_found`, `sandbox_stopped`, ...), or null when there was none. */
  readonly code: string | null;
  /** Seconds from the `Retry-After` header (429 and 503 answers), or null. */
  readonly retryAfter: number | null;

  constructor(
    message: string,
    options: { status?: number | null; code?: string | null; retryAfter?: number | null; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = options.status ?? null;
    this.code = options.code ?? null;
    this.retryAfter = options.retryAfter ?? null;
  }
}

/** The request was malformed or not allowed as sent (400, 405, 413, 415). */
export class InvalidRequestError extends HutchError {
  override name = 'InvalidRequestError';
}

/** No API key where one is needed, or an unknown or revoked key (401). */
export class AuthenticationError extends HutchError {
  override name = 'AuthenticationError';
}

/** The key may not do this, or the sandbox refused the path (403). */
export class PermissionDeniedError extends HutchError {
  override name = 'PermissionDeniedError';
}

/** No such sandbox, pool, key, background process, context or file (404). */
export class NotFoundError extends HutchError {
  override name = 'NotFoundError';
}

/** The thing exists already, the process has exited, or the state changed under the request (409). */
export class ConflictError extends HutchError {
  override name = 'ConflictError';
}

/** The sandbox is stopped (TTL expired, idle, deleted) or not running (409 `sandbox_stopped`). */
export class SandboxStoppedError extends ConflictError {
  override name = 'SandboxStoppedError';
}

/** The key is over its requests per minute, or owns its `max_sandboxes` already (429). */
export class RateLimitError extends HutchError {
  override name = 'RateLimitError';
}

/** Every sandbox slot is in use and nothing can be evicted (503 `capacity_exceeded`). */
export class CapacityError extends HutchError {
  override name = 'CapacityError';
}

/** The backend cannot run on the daemon's host, or the daemon is shutting down (503). */
export class BackendUnavailableError extends HutchError {
  override name = 'BackendUnavailableError';
}

/** The backend does not support this operation. */
export class NotSupportedError extends HutchError {
  override name = 'NotSupportedError';
}

/** The daemon or the sandbox failed (500, 502, 507 and any other 5xx). */
export class ServerError extends HutchError {
  override name = 'ServerError';
}

/** Nothing answers at the daemon's socket or URL: it is not running, or not reachable from here. */
export class DaemonUnavailableError extends HutchError {
  override name = 'DaemonUnavailableError';
}

type ErrorClass = new (
  message: string,
  options?: { status?: number | null; code?: string | null; retryAfter?: number | null },
) => HutchError;

const BY_CODE: Record<string, ErrorClass> = {
  invalid_request: InvalidRequestError,
  invalid_path: InvalidRequestError,
  payload_too_large: InvalidRequestError,
  unsupported_media_type: InvalidRequestError,
  method_not_allowed: InvalidRequestError,
  unauthorized: AuthenticationError,
  forbidden: PermissionDeniedError,
  path_forbidden: PermissionDeniedError,
  not_found: NotFoundError,
  no_such_process: NotFoundError,
  conflict: ConflictError,
  sandbox_stopped: SandboxStoppedError,
  rate_limited: RateLimitError,
  capacity_exceeded: CapacityError,
  backend_unavailable: BackendUnavailableError,
  shutting_down: BackendUnavailableError,
  not_supported: NotSupportedError,
  internal: ServerError,
  sandbox_error: ServerError,
  insufficient_storage: ServerError,
};

function classForStatus(status: number | null): ErrorClass {
  if (status === null) return HutchError;
  if (status === 401) return AuthenticationError;
  if (status === 403) return PermissionDeniedError;
  if (status === 404) return NotFoundError;
  if (status === 409) return ConflictError;
  if (status === 429) return RateLimitError;
  if (status >= 500) return ServerError;
  if (status >= 400) return InvalidRequestError;
  return HutchError;
}

/** True when `code` is one of the API's error codes. */
export function isApiErrorCode(code: string): boolean {
  return Object.prototype.hasOwnProperty.call(BY_CODE, code);
}

/** The typed error for an API error `code` (falling back on the HTTP status for unknown codes). */
export function errorFromCode(
  code: string | null,
  message: string,
  status: number | null = null,
  retryAfter: number | null = null,
): HutchError {
  const cls = code !== null && isApiErrorCode(code) ? BY_CODE[code]! : classForStatus(status);
  return new cls(message, { status, code, retryAfter });
}

/** The typed error for an HTTP error response (status >= 400): its body, raw or parsed. */
export function errorFromResponse(
  status: number,
  body: Uint8Array | string | unknown,
  retryAfter: number | null = null,
): HutchError {
  let parsed: unknown = body;
  let text = '';
  if (body instanceof Uint8Array || typeof body === 'string') {
    text = typeof body === 'string' ? body : new TextDecoder().decode(body);
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
  }
  let code: string | null = null;
  let message = '';
  if (parsed !== null && typeof parsed === 'object') {
    const d = parsed as { code?: unknown; message?: unknown };
    if (typeof d.code === 'string') code = d.code;
    if (typeof d.message === 'string') message = d.message;
  }
  if (!message) message = text.trim().slice(0, 200) || `HTTP ${status}`;
  return errorFromCode(code, message, status, retryAfter);
}

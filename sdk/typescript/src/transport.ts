// The low-level client: `buildRequest(op, args)` turns an operation and its wire arguments
// (snake_case, as in spec/openapi.yaml and spec/test-vectors/sdk-v1.json) into an HTTP request,
// `decodeResponse(op, response)` turns the answer into the SDK's result or typed error, and
// `Transport` sends requests over a Unix socket or TCP with node:http. The high-level API
// (`Sandbox`, `Hutch`) is written on top of these three and nothing else, so what the shared
// vectors check is what users run.
import * as http from 'node:http';
import * as https from 'node:https';

import { DEFAULT_URL, type Endpoint, parseEndpoint } from './endpoint.js';
import { DaemonUnavailableError, HutchError, errorFromResponse } from './errors.js';
import {
  bytesFromBase64,
  toCommandResult,
  toContextInfo,
  toEntry,
  toExecution,
  toFileInfo,
  toKey,
  toLogs,
  toPoolInfo,
  toProcessInfo,
  toSandboxInfo,
  toVersionInfo,
  utf8,
} from './models.js';
import { type SseEvent, parseSse } from './sse.js';
import { VERSION } from './version.js';

/** An HTTP request as the SDK sends it. */
export interface HttpRequest {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** path with the query string, e.g. `/v1/sandboxes?state=waiting` */
  path: string;
  /** a JSON body */
  json?: unknown;
  /** a raw body (file uploads, process stdin) */
  body?: Uint8Array;
  /** the Content-Type of `body` */
  contentType?: string;
  /** the answer is a Server-Sent Events stream */
  stream?: boolean;
  /** how long the command itself may run (exec, code runs): added to the client's timeout */
  commandTimeoutMs?: number;
  /** false for requests that must never be sent twice (exec, code runs) */
  retry?: boolean;
}

/** An HTTP response, whole. */
export interface HttpResponse {
  status: number;
  headers?: Record<string, string | string[] | undefined>;
  /** the parsed JSON body, when it is JSON */
  json?: unknown;
  /** the raw body */
  body?: Uint8Array;
}

/* eslint-disable @typescript-eslint/no-explicit-any */
export type Args = Record<string, any>;

interface OpSpec {
  /** the arguments the operation takes (snake_case, as on the wire) */
  args: string[];
  build: (a: Args) => HttpRequest;
  /** turns a 2xx answer into the SDK's result */
  decode?: (json: any, res: HttpResponse) => unknown;
}

const seg = (v: unknown, name: string): string => {
  if (v === undefined || v === null || v === '') throw new TypeError(`missing argument ${name}`);
  return encodeURIComponent(String(v));
};

/** A required argument's value. */
const need = (a: Args, name: string): unknown => {
  const v = a[name];
  if (v === undefined || v === null || v === '') throw new TypeError(`missing argument ${name}`);
  return v;
};

const sbPath = (a: Args) => `/v1/sandboxes/${seg(a.id, 'id')}`;

/** A query string of the defined arguments, in the order given. */
function query(pairs: [string, unknown][]): string {
  const parts: string[] = [];
  for (const [k, v] of pairs) {
    if (v === undefined || v === null) continue;
    parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

/** A JSON object of the defined arguments among `keys`, in that order. */
function pick(a: Args, keys: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of keys) if (a[k] !== undefined) out[k] = a[k];
  return out;
}

/** `{"user": "alice"}` -> `user:alice` (the listing filter's format). */
function metadataFilter(m: unknown): string | undefined {
  if (m === undefined || m === null) return undefined;
  if (typeof m === 'string') return m;
  return Object.entries(m as Record<string, string>)
    .map(([k, v]) => `${k}:${v}`)
    .join(',');
}

/** A file mode as the API takes it: octal digits (`"640"`); numbers are written in octal. */
function octalMode(mode: unknown): string | undefined {
  if (mode === undefined || mode === null) return undefined;
  if (typeof mode === 'number') return mode.toString(8);
  return String(mode);
}

/** Raw bytes from `data` (string or bytes) or `data_b64`. */
function rawBody(a: Args): Uint8Array {
  if (a.data_b64 !== undefined) return bytesFromBase64(a.data_b64);
  if (typeof a.data === 'string') return utf8(a.data);
  if (a.data instanceof Uint8Array) return a.data;
  throw new TypeError('missing argument data (a string or a Uint8Array) or data_b64');
}

const EXEC_ARGS = ['id', 'command', 'shell', 'env', 'cwd', 'timeout_ms', 'stdin', 'stdin_b64'];
const execBody = (a: Args) => pick(a, ['command', 'shell', 'env', 'cwd', 'timeout_ms', 'stdin', 'stdin_b64']);
const SHAPE = ['backend', 'runtime', 'image', 'rootfs', 'limits', 'env', 'contexts'];

const get = (path: string): HttpRequest => ({ method: 'GET', path });
const del = (path: string): HttpRequest => ({ method: 'DELETE', path });
const post = (path: string, json?: unknown): HttpRequest =>
  json === undefined ? { method: 'POST', path } : { method: 'POST', path, json };
const none = () => undefined;

/**
 * Every operation: its name (shared with the Python SDK and the test vectors), its wire
 * arguments, the request it makes and how its answer is decoded.
 */
const OPS: Record<string, OpSpec> = {
  health: { args: [], build: () => get('/v1/health'), decode: (j) => j },
  version: { args: [], build: () => get('/v1/version'), decode: toVersionInfo },
  metrics: { args: [], build: () => get('/metrics'), decode: (_j, res) => new TextDecoder().decode(res.body) },

  'sandboxes.create': {
    args: [...SHAPE, 'metadata', 'ttl_seconds', 'pool'],
    build: (a) => post('/v1/sandboxes', pick(a, ['runtime', 'backend', 'image', 'rootfs', 'limits', 'env', 'contexts', 'metadata', 'ttl_seconds', 'pool'])),
    decode: toSandboxInfo,
  },
  'sandboxes.get': { args: ['id'], build: (a) => get(sbPath(a)), decode: toSandboxInfo },
  'sandboxes.list': {
    args: ['state', 'pool', 'backend', 'metadata', 'include_stopped', 'limit'],
    build: (a) =>
      get(
        `/v1/sandboxes${query([
          ['state', a.state],
          ['pool', a.pool],
          ['backend', a.backend],
          ['metadata', metadataFilter(a.metadata)],
          ['include_stopped', a.include_stopped],
          ['limit', a.limit],
        ])}`,
      ),
    decode: (j) => (j.sandboxes as unknown[]).map(toSandboxInfo),
  },
  'sandboxes.delete': { args: ['id'], build: (a) => del(sbPath(a)), decode: none },
  'sandboxes.set_ttl': {
    args: ['id', 'ttl_seconds'],
    build: (a) => post(`${sbPath(a)}/ttl`, { ttl_seconds: a.ttl_seconds }),
    decode: toSandboxInfo,
  },

  'sandbox.exec': {
    args: EXEC_ARGS,
    build: (a) => ({ ...post(`${sbPath(a)}/exec`, execBody(a)), commandTimeoutMs: a.timeout_ms, retry: false }),
    decode: toCommandResult,
  },
  'sandbox.exec_stream': {
    args: EXEC_ARGS,
    build: (a) => ({ ...post(`${sbPath(a)}/exec/stream`, execBody(a)), stream: true, retry: false }),
  },

  'processes.start': {
    args: EXEC_ARGS,
    build: (a) => post(`${sbPath(a)}/processes`, execBody(a)),
    decode: toProcessInfo,
  },
  'processes.list': {
    args: ['id'],
    build: (a) => get(`${sbPath(a)}/processes`),
    decode: (j) => (j.processes as unknown[]).map(toProcessInfo),
  },
  'processes.get': {
    args: ['id', 'pid'],
    build: (a) => get(`${sbPath(a)}/processes/${seg(a.pid, 'pid')}`),
    decode: toProcessInfo,
  },
  'processes.signal': {
    args: ['id', 'pid', 'signal'],
    build: (a) => post(`${sbPath(a)}/processes/${seg(a.pid, 'pid')}/signal`, { signal: a.signal ?? 15 }),
    decode: none,
  },
  'processes.write_stdin': {
    args: ['id', 'pid', 'data', 'data_b64'],
    build: (a) => ({
      method: 'POST',
      path: `${sbPath(a)}/processes/${seg(a.pid, 'pid')}/stdin`,
      body: rawBody(a),
      contentType: 'application/octet-stream',
    }),
    decode: none,
  },
  'processes.close_stdin': {
    args: ['id', 'pid'],
    build: (a) => post(`${sbPath(a)}/processes/${seg(a.pid, 'pid')}/stdin/close`),
    decode: none,
  },
  'processes.logs': {
    args: ['id', 'pid'],
    build: (a) => get(`${sbPath(a)}/processes/${seg(a.pid, 'pid')}/logs`),
    decode: toLogs,
  },
  'processes.attach': {
    args: ['id', 'pid'],
    build: (a) => ({ ...get(`${sbPath(a)}/processes/${seg(a.pid, 'pid')}/attach`), stream: true }),
  },

  'files.write': {
    args: ['id', 'path', 'data', 'data_b64', 'mode'],
    build: (a) => ({
      method: 'PUT',
      path: `${sbPath(a)}/files${query([['path', need(a, 'path')], ['mode', octalMode(a.mode)]])}`,
      body: rawBody(a),
      contentType: 'application/octet-stream',
    }),
    decode: none,
  },
  'files.read': {
    args: ['id', 'path'],
    build: (a) => get(`${sbPath(a)}/files${query([['path', need(a, 'path')]])}`),
    decode: (_j, res) => res.body ?? new Uint8Array(),
  },
  'files.list': {
    args: ['id', 'path'],
    build: (a) => get(`${sbPath(a)}/files/list${query([['path', need(a, 'path')]])}`),
    decode: (j) => (j.entries as unknown[]).map(toEntry),
  },
  'files.stat': {
    args: ['id', 'path'],
    build: (a) => get(`${sbPath(a)}/files/stat${query([['path', need(a, 'path')]])}`),
    decode: toFileInfo,
  },
  'files.make_dir': {
    args: ['id', 'path', 'parents'],
    build: (a) => post(`${sbPath(a)}/files/mkdir`, { path: need(a, 'path'), parents: Boolean(a.parents) }),
    decode: none,
  },
  'files.remove': {
    args: ['id', 'path', 'recursive'],
    build: (a) =>
      del(`${sbPath(a)}/files${query([['path', need(a, 'path')], ['recursive', a.recursive || undefined]])}`),
    decode: none,
  },
  'files.rename': {
    args: ['id', 'src', 'dst'],
    build: (a) => post(`${sbPath(a)}/files/move`, { from: need(a, 'src'), to: need(a, 'dst') }),
    decode: none,
  },

  'contexts.create': {
    args: ['id', 'language', 'cwd', 'env'],
    build: (a) => post(`${sbPath(a)}/contexts`, pick(a, ['language', 'cwd', 'env'])),
    decode: toContextInfo,
  },
  'contexts.list': {
    args: ['id'],
    build: (a) => get(`${sbPath(a)}/contexts`),
    decode: (j) => (j.contexts as unknown[]).map(toContextInfo),
  },
  'contexts.run': {
    args: ['id', 'context_id', 'code', 'timeout_ms'],
    build: (a) => ({
      ...post(`${sbPath(a)}/contexts/${seg(a.context_id, 'context_id')}/run`, pick(a, ['code', 'timeout_ms'])),
      commandTimeoutMs: a.timeout_ms,
      retry: false,
    }),
    decode: toExecution,
  },
  'contexts.run_stream': {
    args: ['id', 'context_id', 'code', 'timeout_ms'],
    build: (a) => ({
      ...post(`${sbPath(a)}/contexts/${seg(a.context_id, 'context_id')}/run/stream`, pick(a, ['code', 'timeout_ms'])),
      stream: true,
      retry: false,
    }),
  },
  'contexts.restart': {
    args: ['id', 'context_id'],
    build: (a) => post(`${sbPath(a)}/contexts/${seg(a.context_id, 'context_id')}/restart`),
    decode: toContextInfo,
  },
  'contexts.interrupt': {
    args: ['id', 'context_id'],
    build: (a) => post(`${sbPath(a)}/contexts/${seg(a.context_id, 'context_id')}/interrupt`),
    decode: none,
  },
  'contexts.delete': {
    args: ['id', 'context_id'],
    build: (a) => del(`${sbPath(a)}/contexts/${seg(a.context_id, 'context_id')}`),
    decode: none,
  },

  'pools.create': {
    args: ['name', 'size', 'max', 'reuse', 'template'],
    build: (a) => post('/v1/pools', pick(a, ['name', 'size', 'max', 'reuse', 'template'])),
    decode: toPoolInfo,
  },
  'pools.list': { args: [], build: () => get('/v1/pools'), decode: (j) => (j.pools as unknown[]).map(toPoolInfo) },
  'pools.get': { args: ['name'], build: (a) => get(`/v1/pools/${seg(a.name, 'name')}`), decode: toPoolInfo },
  'pools.delete': { args: ['name'], build: (a) => del(`/v1/pools/${seg(a.name, 'name')}`), decode: none },

  'keys.create': {
    args: ['name', 'admin', 'max_sandboxes', 'rate_per_minute'],
    build: (a) => post('/v1/keys', pick(a, ['name', 'admin', 'max_sandboxes', 'rate_per_minute'])),
    decode: toKey,
  },
  'keys.list': { args: [], build: () => get('/v1/keys'), decode: (j) => (j.keys as unknown[]).map(toKey) },
  'keys.revoke': { args: ['id'], build: (a) => del(`/v1/keys/${seg(a.id, 'id')}`), decode: none },

  'audit.list': {
    args: ['limit'],
    build: (a) => get(`/v1/audit${query([['limit', a.limit]])}`),
    decode: (j) => j.entries,
  },
};

/** The names of every operation `buildRequest` knows. */
export const OPERATIONS: readonly string[] = Object.freeze(Object.keys(OPS));

function spec(op: string): OpSpec {
  const s = OPS[op];
  if (!s) throw new TypeError(`unknown operation ${JSON.stringify(op)}`);
  return s;
}

/**
 * The HTTP request for an operation. `args` are the wire arguments (snake_case); `id` is the
 * sandbox's id where the operation is on a sandbox. Unknown arguments are a TypeError, so a typo
 * fails here rather than as a 400 from the server.
 */
export function buildRequest(op: string, args: Args = {}): HttpRequest {
  const s = spec(op);
  for (const k of Object.keys(args)) {
    if (!s.args.includes(k) && args[k] !== undefined) {
      throw new TypeError(`${op}: unknown argument ${JSON.stringify(k)} (takes ${s.args.join(', ') || 'none'})`);
    }
  }
  return s.build(args);
}

/**
 * The SDK's result for an operation's answer, or its typed error (`HutchError` subclasses) for
 * a status of 400 or more. `response.json` is used when given, else `response.body` is parsed.
 */
export function decodeResponse(op: string, response: HttpResponse): unknown {
  const s = spec(op);
  if (response.status >= 400) {
    throw errorFromResponse(
      response.status,
      response.json !== undefined ? response.json : (response.body ?? new Uint8Array()),
      retryAfterSeconds(response.headers),
    );
  }
  if (!s.decode) throw new TypeError(`${op} answers with a stream; use Transport.events`);
  let json = response.json;
  if (json === undefined && response.body && response.body.length > 0 && isJson(response)) {
    try {
      json = JSON.parse(new TextDecoder().decode(response.body));
    } catch (e) {
      throw new HutchError(`the daemon answered ${op} with a body that is not JSON`, { status: response.status, cause: e });
    }
  }
  return s.decode(json, response);
}

/** The bytes a request sends and their Content-Type, or null when it has no body. */
export function encodeBody(req: HttpRequest): { contentType: string; body: Uint8Array } | null {
  if (req.json !== undefined) return { contentType: 'application/json', body: utf8(JSON.stringify(req.json)) };
  if (req.body !== undefined) return { contentType: req.contentType ?? 'application/octet-stream', body: req.body };
  return null;
}

function header(headers: HttpResponse['headers'], name: string): string | undefined {
  const v = headers?.[name];
  return Array.isArray(v) ? v[0] : v;
}

function isJson(res: HttpResponse): boolean {
  const ct = header(res.headers, 'content-type');
  return ct === undefined || ct.includes('json');
}

/** `Retry-After` in seconds (the daemon sends a number of seconds), or null. */
function retryAfterSeconds(headers: HttpResponse['headers']): number | null {
  const v = header(headers, 'retry-after');
  if (v === undefined) return null;
  const n = Number(v);
  if (Number.isFinite(n) && n >= 0) return n;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, (at - Date.now()) / 1000);
}

// ---------------------------------------------------------------------------------------------
// Sending

export interface TransportOptions {
  /** `unix:///path.sock` or `http://host:port`; default `$HUTCH_URL`, else the daemon's default socket */
  url?: string;
  /** sent as `Authorization: Bearer`; default `$HUTCH_API_KEY` */
  apiKey?: string;
  /** how long to wait for an answer, on top of a command's own time limit (default 60000) */
  timeoutMs?: number;
  /** retries where they are safe (default 2): see `send` */
  maxRetries?: number;
}

/** Longest wait for a Retry-After. */
const MAX_RETRY_WAIT_MS = 30_000;
/** First wait before connecting again to a socket nobody listens on (doubled each time). */
const CONNECT_BACKOFF_MS = 100;
/** Error codes after which the daemon did nothing and asks to come back (with Retry-After). */
const RETRYABLE_CODES = new Set(['rate_limited', 'capacity_exceeded']);

const isIdempotent = (req: HttpRequest) => req.method === 'GET' || req.method === 'DELETE';

/**
 * How long to wait before sending `req` again after this answer, or null: only GET and DELETE,
 * only `429 rate_limited` / `503 capacity_exceeded` with a Retry-After.
 */
function retryAfterMs(req: HttpRequest, res: HttpResponse): number | null {
  if (!isIdempotent(req) || req.retry === false || (res.status !== 429 && res.status !== 503)) return null;
  const after = retryAfterSeconds(res.headers);
  if (after === null) return null;
  let code: unknown;
  try {
    code = JSON.parse(new TextDecoder().decode(res.body)).code;
  } catch {
    return null;
  }
  return typeof code === 'string' && RETRYABLE_CODES.has(code) ? Math.min(after * 1000, MAX_RETRY_WAIT_MS) : null;
}

/**
 * How long to wait before trying again after a failed connection, or null. Nothing was sent
 * when the connection was refused, so any request but exec and code runs may try again (a
 * missing socket will not appear by waiting); GET and DELETE are also sent again after a
 * connection that broke (e.g. a kept-alive one the daemon had closed).
 */
function retryConnectAfterMs(req: HttpRequest, e: unknown, attempt: number): number | null {
  if (req.retry === false || !(e instanceof DaemonUnavailableError)) return null;
  const code = (e.cause as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ECONNREFUSED') return CONNECT_BACKOFF_MS * 2 ** attempt;
  if (isIdempotent(req) && (code === 'ECONNRESET' || code === 'EPIPE')) return CONNECT_BACKOFF_MS * attempt;
  return null;
}

const USER_AGENT = `hutch-sdk-typescript/${VERSION} node/${process.versions.node}`;

interface Streamed {
  status: number;
  headers: http.IncomingHttpHeaders;
  res: http.IncomingMessage;
}

/** Sends requests to one daemon; safe to share. */
export class Transport {
  readonly endpoint: Endpoint;
  readonly timeoutMs: number;
  readonly maxRetries: number;
  readonly #apiKey: string | undefined;
  // kept-alive connections for GET and DELETE, which are sent again when one turns out to be
  // closed; a fresh connection for the rest, so a POST never lands on a closed one
  readonly #keepAlive: http.Agent;

  constructor(options: TransportOptions = {}) {
    const url = options.url ?? nonEmpty(process.env.HUTCH_URL) ?? DEFAULT_URL;
    this.endpoint = parseEndpoint(url);
    this.#apiKey = options.apiKey ?? nonEmpty(process.env.HUTCH_API_KEY);
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.maxRetries = options.maxRetries ?? 2;
    const AgentClass = this.endpoint.kind === 'tcp' && this.endpoint.protocol === 'https:' ? https.Agent : http.Agent;
    this.#keepAlive = new AgentClass({ keepAlive: true, maxSockets: 16 });
  }

  /** The daemon's URL as configured (`unix:///...` or `http://...`). */
  get url(): string {
    return this.endpoint.url;
  }

  /**
   * Builds, sends and decodes one operation. `commandTimeoutMs`: how long the command the
   * request runs may take (added to the timeout).
   */
  async call<T = unknown>(op: string, args: Args = {}, options: { commandTimeoutMs?: number } = {}): Promise<T> {
    const req = buildRequest(op, args);
    if (options.commandTimeoutMs !== undefined) req.commandTimeoutMs = options.commandTimeoutMs;
    const res = await this.send(req);
    return decodeResponse(op, res) as T;
  }

  /**
   * Sends an operation whose answer is a Server-Sent Events stream and yields its events, with
   * `data` parsed as JSON. An HTTP error before the stream starts is thrown as a typed error.
   * Leaving the loop early closes the connection (for exec, that kills the command).
   * `deadlineMs` bounds the whole stream: past it, a HutchError with code `timeout` is thrown.
   */
  async *events(
    op: string,
    args: Args = {},
    options: { commandTimeoutMs?: number; deadlineMs?: number } = {},
  ): AsyncGenerator<{ event: string; data: any }> {
    const req = buildRequest(op, args);
    if (options.commandTimeoutMs !== undefined) req.commandTimeoutMs = options.commandTimeoutMs;
    const started = Date.now();
    const { status, headers, res } = await this.#once(req, true);
    let deadline: NodeJS.Timeout | undefined;
    if (options.deadlineMs !== undefined) {
      const left = Math.max(0, options.deadlineMs - (Date.now() - started));
      deadline = setTimeout(
        () => res.destroy(new HutchError(`timed out after ${options.deadlineMs} ms`, { code: 'timeout' })),
        left,
      );
    }
    try {
      if (status >= 400) {
        const body = await readAll(res).catch((e: NodeJS.ErrnoException) => {
          throw e instanceof HutchError ? e : lost(this.endpoint, e);
        });
        throw errorFromResponse(status, body, retryAfterSeconds(headers));
      }
      for await (const ev of parseSse(guard(res, this.endpoint)) as AsyncGenerator<SseEvent>) {
        let data: unknown;
        try {
          data = JSON.parse(ev.data);
        } catch {
          data = ev.data;
        }
        yield { event: ev.event, data };
      }
    } finally {
      clearTimeout(deadline);
      res.destroy();
    }
  }

  /** Sends one request and reads the whole answer (retrying where that is safe). */
  async send(req: HttpRequest): Promise<HttpResponse> {
    for (let attempt = 0; ; attempt++) {
      let streamed: Streamed;
      try {
        streamed = await this.#once(req, false);
      } catch (e) {
        const wait = attempt < this.maxRetries ? retryConnectAfterMs(req, e, attempt) : null;
        if (wait === null) throw e;
        await sleep(wait);
        continue;
      }
      let body: Uint8Array;
      try {
        body = await readAll(streamed.res);
      } catch (e) {
        const err = e instanceof HutchError ? e : lost(this.endpoint, e as NodeJS.ErrnoException);
        const wait = attempt < this.maxRetries ? retryConnectAfterMs(req, err, attempt) : null;
        if (wait === null) throw err;
        await sleep(wait);
        continue;
      }
      const res: HttpResponse = { status: streamed.status, headers: streamed.headers, body };
      const wait = attempt < this.maxRetries ? retryAfterMs(req, res) : null;
      if (wait === null) return res;
      await sleep(wait);
    }
  }

  #once(req: HttpRequest, stream: boolean): Promise<Streamed> {
    const headers: Record<string, string> = { 'user-agent': USER_AGENT, host: 'hutch' };
    const encoded = encodeBody(req);
    const payload = encoded?.body;
    if (encoded) headers['content-type'] = encoded.contentType;
    if (payload !== undefined || req.method === 'POST' || req.method === 'PUT') {
      headers['content-length'] = String(payload?.byteLength ?? 0);
    }
    headers.accept = stream ? 'text/event-stream' : 'application/json';
    if (this.#apiKey) headers.authorization = `Bearer ${this.#apiKey}`;
    const idempotent = req.method === 'GET' || req.method === 'DELETE';
    const ep = this.endpoint;
    const options: http.RequestOptions = {
      method: req.method,
      path: req.path,
      headers,
      agent: idempotent && !stream ? this.#keepAlive : false,
    };
    if (ep.kind === 'unix') options.socketPath = ep.socketPath;
    else {
      options.host = ep.host;
      options.port = ep.port;
      headers.host = ep.port === (ep.protocol === 'https:' ? 443 : 80) ? ep.host : `${ep.host}:${ep.port}`;
    }
    const timeoutMs = this.timeoutMs + (req.commandTimeoutMs ?? 0);
    const mod = ep.kind === 'tcp' && ep.protocol === 'https:' ? https : http;

    return new Promise<Streamed>((resolve, reject) => {
      let settled = false;
      let response: http.IncomingMessage | undefined;
      const r = mod.request(options);
      const timer = setTimeout(() => {
        const err = new DaemonUnavailableError(
          `the hutch daemon at ${where(ep)} did not answer ${req.method} ${pathOnly(req.path)} in time (${timeoutMs} ms)`,
        );
        if (response) response.destroy(err);
        else r.destroy(err);
      }, timeoutMs);
      r.on('response', (res) => {
        settled = true;
        response = res;
        if (stream) clearTimeout(timer);
        else res.on('close', () => clearTimeout(timer));
        resolve({ status: res.statusCode ?? 0, headers: res.headers, res });
      });
      r.on('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        if (settled) return; // reported through the response stream
        settled = true;
        reject(err instanceof HutchError ? err : unavailable(ep, err));
      });
      r.end(payload);
    });
  }

  /** Closes idle keep-alive connections (they never keep the process alive anyway). */
  close(): void {
    this.#keepAlive.destroy();
  }
}

/** The socket path, or the URL. */
function where(ep: Endpoint): string {
  return ep.kind === 'unix' ? ep.socketPath : ep.url;
}

/** How to start a daemon listening there. */
function serveHint(ep: Endpoint): string {
  if (ep.kind === 'tcp') return `hutch serve --tcp ${ep.host}:${ep.port}`;
  return ep.url === DEFAULT_URL ? 'hutch serve' : `hutch serve --socket ${ep.socketPath}`;
}

/** A failed connection as DaemonUnavailableError (the system error is its `cause`). */
function unavailable(ep: Endpoint, err: NodeJS.ErrnoException): DaemonUnavailableError {
  if (err.code === 'EACCES' || err.code === 'EPERM') {
    return new DaemonUnavailableError(
      `cannot reach the hutch daemon at ${where(ep)}: permission denied (its socket is for its owner only: run as root, or use its TCP address in HUTCH_URL with HUTCH_API_KEY)`,
      { cause: err },
    );
  }
  const connecting = ['ENOENT', 'ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'EAI_AGAIN'];
  if (connecting.includes(err.code ?? '')) {
    return new DaemonUnavailableError(
      `cannot reach the hutch daemon at ${where(ep)} (is it running? start it with: ${serveHint(ep)})`,
      { cause: err },
    );
  }
  return lost(ep, err);
}

/** A connection that broke after it was made. */
function lost(ep: Endpoint, err: NodeJS.ErrnoException): DaemonUnavailableError {
  return new DaemonUnavailableError(`lost the connection to the hutch daemon at ${where(ep)}: ${err.message || err.code}`, {
    cause: err,
  });
}

/** The response's chunks, with a broken connection reported as DaemonUnavailableError. */
async function* guard(res: http.IncomingMessage, ep: Endpoint): AsyncGenerator<Uint8Array> {
  try {
    for await (const c of res) yield c as Uint8Array;
  } catch (e) {
    throw e instanceof HutchError ? e : lost(ep, e as NodeJS.ErrnoException);
  }
}

function pathOnly(p: string): string {
  const q = p.indexOf('?');
  return q === -1 ? p : p.slice(0, q);
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v;
}

async function readAll(res: http.IncomingMessage): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  const buf = Buffer.concat(chunks);
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

// What the API returns, as the SDK hands it out. The mapping from the wire is mechanical:
// snake_case fields become camelCase (`exit_code` -> `exitCode`, `context_id` -> `contextId`),
// fields the server may leave out become `null`, and bytes sent as base64 become `Uint8Array`s
// (`stdout_b64` -> `stdoutBytes`, an output chunk's `b64` -> a StreamEvent's `data`, a file's
// raw body -> what `files.read` returns). Maps the user owns (`metadata`, `env`, a result's
// `data`), the informational `spec` and a process's `status` are kept as sent.

/** Lifecycle state of a sandbox. */
export type SandboxState = 'cold' | 'warming' | 'warm' | 'running' | 'waiting' | 'stopped';

/** Resource limits; a field left out keeps hutch's secure default. */
export interface Limits {
  /** memory limit (default 512 MiB) */
  memoryBytes?: number;
  /** CPU share (default 1) */
  cpus?: number;
  /** processes at most (default 64) */
  pids?: number;
  /** wall-clock limit of one command (default 30000) */
  timeoutMs?: number;
  /** output kept per stream of one command (default 1 MiB) */
  outputBytes?: number;
  /** size of the tmpfs workspace and /tmp (default 256 MiB) */
  workspaceBytes?: number;
}

/** Start phases in milliseconds, when the request started the sandbox. */
export interface PhaseTimings {
  prepareMs: number | null;
  runtimeCreateMs: number | null;
  agentReadyMs: number | null;
  execMs: number | null;
  destroyMs: number | null;
  totalMs: number;
}

/** A sandbox as the daemon reports it. Times are unix milliseconds. */
export interface SandboxInfo {
  id: string;
  state: SandboxState;
  /** `container:crun`, `container:runc` or `process` */
  backend: string;
  /** the pool it came from, or null */
  pool: string | null;
  metadata: Record<string, string>;
  createdAt: number;
  lastUsedAt: number;
  /** null when it never expires */
  expiresAt: number | null;
  stoppedAt: number | null;
  /** `deleted`, `ttl expired`, `idle`, `daemon shutdown` (stopped sandboxes only) */
  stopReason: string | null;
  /** the full specification the backend received, as the server sent it (informational) */
  spec: Record<string, unknown> | null;
  /** start phases, when this request started it */
  timings: PhaseTimings | null;
  /** code contexts started with it (create responses, when contexts were asked for) */
  contexts: ContextInfo[];
}

/** How a command ended and what it printed. `exitCode` is null when a signal killed it. */
export class CommandResult {
  exitCode: number | null;
  signal: number | null;
  /** stdout as text (invalid UTF-8 replaced) */
  stdout: string;
  stderr: string;
  /** the exact stdout bytes */
  stdoutBytes: Uint8Array;
  stderrBytes: Uint8Array;
  timedOut: boolean;
  oomKilled: boolean;
  durationMs: number;
  /** the output was cut at the sandbox's `outputBytes` limit */
  stdoutTruncated: boolean;
  stderrTruncated: boolean;

  constructor(fields: Omit<CommandResult, 'ok'>) {
    this.exitCode = fields.exitCode;
    this.signal = fields.signal;
    this.stdout = fields.stdout;
    this.stderr = fields.stderr;
    this.stdoutBytes = fields.stdoutBytes;
    this.stderrBytes = fields.stderrBytes;
    this.timedOut = fields.timedOut;
    this.oomKilled = fields.oomKilled;
    this.durationMs = fields.durationMs;
    this.stdoutTruncated = fields.stdoutTruncated;
    this.stderrTruncated = fields.stderrTruncated;
  }

  /** True when the command exited with code 0. */
  get ok(): boolean {
    return this.exitCode === 0;
  }
}

/**
 * One event of a command's output stream (`commands.stream`, `Process.stream`): `stdout` and
 * `stderr` chunks (the exact bytes) as they come, then `exit` with the whole result.
 */
export type StreamEvent =
  | { kind: 'stdout' | 'stderr'; data: Uint8Array }
  | { kind: 'exit'; data: CommandResult };

/** A background process. `exitCode`/`signal` are set once it has ended. */
export interface ProcessInfo {
  pid: number;
  /** `{command: [argv]}` or `{shell: script}` */
  command: { command?: string[]; shell?: string };
  /** unix milliseconds */
  startedAt: number;
  running: boolean;
  exitCode: number | null;
  signal: number | null;
  /** how it ended, as the daemon reported it (the `exit` event's fields, snake_case), or null */
  status: Record<string, unknown> | null;
  /** set when the sandbox failed while the process ran */
  error: string | null;
  /** bytes dropped from the log because it was full */
  stdoutDropped: number;
  stderrDropped: number;
}

export type FileKind = 'file' | 'dir' | 'symlink' | 'other';

/** One entry of a directory listing. */
export interface Entry {
  name: string;
  kind: FileKind;
  size: number;
}

/** Metadata of a file, directory or symlink. */
export interface FileInfo {
  path: string;
  kind: FileKind;
  size: number;
  /** permission bits, e.g. 0o644 */
  mode: number;
  /** seconds since the epoch */
  mtime: number;
  symlinkTarget: string | null;
}

export type Language = 'python' | 'javascript' | 'bash';

/** A code context (a persistent interpreter). */
export interface ContextInfo {
  contextId: string;
  language: string;
  /** the interpreter's pid inside the sandbox */
  pid: number;
  version: string;
  executionCount: number;
  busy: boolean;
  cwd: string;
  /** microseconds from starting the interpreter to its ready signal */
  startupUs: number;
}

/** A rich result of a snippet: MIME type -> data. */
export class Result {
  /** true for the value of the snippet's last expression */
  readonly main: boolean;
  readonly data: Record<string, unknown>;

  constructor(main: boolean, data: Record<string, unknown>) {
    this.main = main;
    this.data = data;
  }

  private mime(type: string): string | null {
    const v = this.data[type];
    return typeof v === 'string' ? v : null;
  }

  /** `text/plain` */
  get text(): string | null {
    return this.mime('text/plain');
  }
  /** `text/html` */
  get html(): string | null {
    return this.mime('text/html');
  }
  /** `text/markdown` */
  get markdown(): string | null {
    return this.mime('text/markdown');
  }
  /** `image/svg+xml` */
  get svg(): string | null {
    return this.mime('image/svg+xml');
  }
  /** `image/png`, decoded from its base64 */
  get png(): Uint8Array | null {
    const v = this.mime('image/png');
    return v === null ? null : bytesFromBase64(v);
  }
  /** `image/jpeg`, decoded from its base64 */
  get jpeg(): Uint8Array | null {
    const v = this.mime('image/jpeg');
    return v === null ? null : bytesFromBase64(v);
  }
  /** `application/json` */
  get json(): unknown {
    return this.data['application/json'] ?? null;
  }
  /** the MIME types it has */
  get formats(): string[] {
    return Object.keys(this.data);
  }
}

/** What a snippet raised. */
export interface ExecutionError {
  name: string;
  value: string;
  traceback: string[];
}

/** A finished snippet run. */
export class Execution {
  stdout = '';
  stderr = '';
  results: Result[] = [];
  /** what the snippet raised, or null */
  error: ExecutionError | null = null;
  executionCount = 0;
  timedOut = false;
  /** set when the context had to be restarted (its state is gone) */
  restarted: string | null = null;
  /** bash only: the snippet's exit status */
  exitCode: number | null = null;
  stdoutTruncated = false;
  stderrTruncated = false;
  durationMs = 0;

  /** `text/plain` of the main result (the last expression's value), or null. */
  get text(): string | null {
    return this.results.find((r) => r.main)?.text ?? null;
  }
}

/** The shape of a pool's members. */
export interface PoolTemplate {
  backend?: string;
  runtime?: string;
  image?: string;
  rootfs?: string;
  limits?: Limits;
  env?: Record<string, string>;
  contexts?: string[];
}

export type Reuse = 'fresh' | 'recycle';

/** A warm pool with its members per state and its hit/miss counts. */
export interface PoolInfo {
  name: string;
  size: number;
  max: number | null;
  reuse: Reuse;
  template: PoolTemplate;
  members: { warming: number; warm: number; running: number; waiting: number };
  hits: number;
  misses: number;
}

/** An API key. `secret` is set only on the key `keys.create` returns. */
export interface Key {
  /** `key_...` */
  id: string;
  name: string;
  admin: boolean;
  maxSandboxes: number | null;
  ratePerMinute: number | null;
  createdAt: number;
  revokedAt: number | null;
  /** `hutch_...`; send it as `Authorization: Bearer <secret>` (keys.create only) */
  secret: string | null;
}

/** The daemon's version and which backends can run on its host. */
export interface VersionInfo {
  version: string;
  agentProtocol: number;
  backends: string[];
  unavailableBackends: Record<string, string>;
}

// ---------------------------------------------------------------------------------------------
// Wire -> SDK

/* eslint-disable @typescript-eslint/no-explicit-any */
type Wire = any;

export function bytesFromBase64(b64: string): Uint8Array {
  const buf = Buffer.from(b64, 'base64');
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

export function bytesToBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

export function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

/** The exact bytes of a text field that has a `*_b64` sibling when it is not valid UTF-8. */
function exactBytes(text: unknown, b64: unknown): Uint8Array {
  if (typeof b64 === 'string') return bytesFromBase64(b64);
  return utf8(typeof text === 'string' ? text : '');
}

const nullable = <T>(v: T | undefined): T | null => (v === undefined ? null : v);

export function toPhaseTimings(w: Wire): PhaseTimings | null {
  if (!w || typeof w !== 'object') return null;
  return {
    prepareMs: nullable(w.prepare_ms),
    runtimeCreateMs: nullable(w.runtime_create_ms),
    agentReadyMs: nullable(w.agent_ready_ms),
    execMs: nullable(w.exec_ms),
    destroyMs: nullable(w.destroy_ms),
    totalMs: w.total_ms ?? 0,
  };
}

export function toSandboxInfo(w: Wire): SandboxInfo {
  return {
    id: w.id,
    state: w.state,
    backend: w.backend,
    pool: nullable(w.pool),
    metadata: w.metadata ?? {},
    createdAt: w.created_at,
    lastUsedAt: w.last_used_at,
    expiresAt: nullable(w.expires_at),
    stoppedAt: nullable(w.stopped_at),
    stopReason: nullable(w.stop_reason),
    spec: nullable(w.spec),
    timings: toPhaseTimings(w.timings),
    contexts: Array.isArray(w.contexts) ? w.contexts.map(toContextInfo) : [],
  };
}

export function toCommandResult(w: Wire): CommandResult {
  return commandResult(w, exactBytes(w.stdout, w.stdout_b64), exactBytes(w.stderr, w.stderr_b64), w.stdout, w.stderr);
}

/** A result from an ExecResult or an `exit` event with the output collected from the stream. */
export function commandResult(w: Wire, stdoutBytes: Uint8Array, stderrBytes: Uint8Array, stdout?: string, stderr?: string): CommandResult {
  const dec = new TextDecoder();
  return new CommandResult({
    exitCode: nullable(w.exit_code),
    signal: nullable(w.signal),
    stdout: typeof stdout === 'string' ? stdout : dec.decode(stdoutBytes),
    stderr: typeof stderr === 'string' ? stderr : dec.decode(stderrBytes),
    stdoutBytes,
    stderrBytes,
    timedOut: Boolean(w.timed_out),
    oomKilled: Boolean(w.oom_killed),
    durationMs: w.duration_ms ?? 0,
    stdoutTruncated: Boolean(w.stdout_truncated),
    stderrTruncated: Boolean(w.stderr_truncated),
  });
}

/** The exact bytes of an output chunk (`b64` when its text is not valid UTF-8). */
export function chunkBytes(w: Wire): Uint8Array {
  return exactBytes(w?.data, w?.b64);
}

export function toProcessInfo(w: Wire): ProcessInfo {
  const st = w.status ?? null;
  return {
    pid: w.pid,
    command: w.command ?? {},
    startedAt: w.started_at ?? 0,
    running: Boolean(w.running),
    exitCode: st ? nullable(st.exit_code) : null,
    signal: st ? nullable(st.signal) : null,
    status: st,
    error: nullable(w.error),
    stdoutDropped: w.stdout_dropped ?? 0,
    stderrDropped: w.stderr_dropped ?? 0,
  };
}

/** `[stdout, stderr]` of a process's logs. */
export function toLogs(w: Wire): [string, string] {
  return [w.stdout ?? '', w.stderr ?? ''];
}

export function toEntry(w: Wire): Entry {
  return { name: w.name, kind: w.kind, size: w.size };
}

export function toFileInfo(w: Wire): FileInfo {
  return {
    path: w.path,
    kind: w.kind,
    size: w.size,
    mode: w.mode,
    mtime: w.mtime,
    symlinkTarget: nullable(w.symlink_target),
  };
}

export function toContextInfo(w: Wire): ContextInfo {
  return {
    contextId: w.context_id,
    language: w.language,
    pid: w.pid,
    version: w.version,
    executionCount: w.execution_count ?? 0,
    busy: Boolean(w.busy),
    cwd: w.cwd,
    startupUs: w.startup_us ?? 0,
  };
}

export function toResult(w: Wire): Result {
  return new Result(Boolean(w.main), w.data ?? {});
}

export function toExecutionError(w: Wire): ExecutionError | null {
  if (!w) return null;
  return { name: w.name, value: w.value ?? '', traceback: w.traceback ?? [] };
}

/** Applies a `done` event (or the tail of a RunOutput) to an execution. */
export function applyRunDone(e: Execution, w: Wire): Execution {
  e.executionCount = w.execution_count ?? 0;
  e.timedOut = Boolean(w.timed_out);
  e.restarted = nullable(w.restarted);
  e.exitCode = nullable(w.exit_code);
  e.stdoutTruncated = Boolean(w.stdout_truncated);
  e.stderrTruncated = Boolean(w.stderr_truncated);
  e.durationMs = w.duration_ms ?? 0;
  return e;
}

export function toExecution(w: Wire): Execution {
  const e = new Execution();
  e.stdout = w.stdout ?? '';
  e.stderr = w.stderr ?? '';
  e.results = Array.isArray(w.results) ? w.results.map(toResult) : [];
  e.error = toExecutionError(w.error);
  return applyRunDone(e, w);
}

export function toLimits(w: Wire): Limits {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(w ?? {})) out[snakeToCamel(k)] = v;
  return out as Limits;
}

export function toPoolTemplate(w: Wire): PoolTemplate {
  const t: PoolTemplate = {};
  if (!w) return t;
  for (const [k, v] of Object.entries(w)) {
    if (k === 'limits') t.limits = toLimits(v);
    else (t as Record<string, unknown>)[snakeToCamel(k)] = v;
  }
  return t;
}

export function toPoolInfo(w: Wire): PoolInfo {
  return {
    name: w.name,
    size: w.size,
    max: nullable(w.max),
    reuse: w.reuse,
    template: toPoolTemplate(w.template),
    members: {
      warming: w.members?.warming ?? 0,
      warm: w.members?.warm ?? 0,
      running: w.members?.running ?? 0,
      waiting: w.members?.waiting ?? 0,
    },
    hits: w.hits ?? 0,
    misses: w.misses ?? 0,
  };
}

export function toKey(w: Wire): Key {
  return {
    id: w.id,
    name: w.name,
    admin: Boolean(w.admin),
    maxSandboxes: nullable(w.max_sandboxes),
    ratePerMinute: nullable(w.rate_per_minute),
    createdAt: w.created_at,
    revokedAt: nullable(w.revoked_at),
    secret: nullable(w.secret),
  };
}

export function toVersionInfo(w: Wire): VersionInfo {
  return {
    version: w.version,
    agentProtocol: w.agent_protocol,
    backends: w.backends ?? [],
    unavailableBackends: w.unavailable_backends ?? {},
  };
}

// ---------------------------------------------------------------------------------------------
// SDK -> wire

export function snakeToCamel(s: string): string {
  return s.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

export function camelToSnake(s: string): string {
  return s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** Limits as the API takes them: camelCase keys become snake_case, snake_case ones pass through. */
export function limitsToWire(limits: Limits | Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (limits === undefined) return undefined;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(limits)) if (v !== undefined) out[camelToSnake(k)] = v;
  return out;
}

/** A pool template or sandbox shape as the API takes it. */
export function templateToWire(t: PoolTemplate | Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (t === undefined) return undefined;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(t)) {
    if (v === undefined) continue;
    if (k === 'limits') out.limits = limitsToWire(v as Limits);
    else out[camelToSnake(k)] = v; // env and contexts are taken as they are
  }
  return out;
}

// The high-level API: a Sandbox with its commands, background processes, files and code
// contexts. Every method is one operation of the transport (transport.ts), its camelCase
// options mapped to the wire's snake_case arguments. The Python SDK has the same classes and
// methods (snake_case there).
import { type Hutch, defaultHutch } from './client.js';
import { ConflictError, NotFoundError } from './errors.js';
import {
  type CommandResult,
  type ContextInfo,
  type Entry,
  type Execution,
  type FileInfo,
  type Language,
  type Limits,
  type ProcessInfo,
  type SandboxInfo,
  type SandboxState,
  type StreamEvent,
  bytesToBase64,
  limitsToWire,
} from './models.js';
import { CommandStream, type ResultCallback, RunStream, type TextCallback } from './streams.js';
import type { Args } from './transport.js';

/** A command: a string is a script for `/bin/sh -c`, an array is an argv run without a shell. */
export type Command = string | string[];

export interface CommandOptions {
  /** added to the sandbox's environment */
  env?: Record<string, string>;
  /** working directory (default the sandbox's workdir) */
  cwd?: string;
  /** the command's time limit, capped at the sandbox's limit */
  timeoutMs?: number;
  /** standard input: text, or bytes */
  stdin?: string | Uint8Array;
}

export interface RunOptions extends CommandOptions {
  /** stdout text as it comes (the command then runs over the streaming endpoint) */
  onStdout?: TextCallback;
  /** stderr text as it comes */
  onStderr?: TextCallback;
}

export interface SandboxCreateOptions {
  /** `container` (default) or `process` (no isolation, admin only) */
  backend?: string;
  /** OCI runtime of the container backend: `crun` (default) or `runc` */
  runtime?: string;
  /** `host` (default): the host's /usr, /bin, /lib read-only */
  image?: string;
  /** a root filesystem directory on the daemon's host (admin only) */
  rootfs?: string;
  /** resource limits; camelCase (`memoryBytes`) or the API's snake_case (`memory_bytes`) */
  limits?: Limits | Record<string, number>;
  /** environment of every process */
  env?: Record<string, string>;
  /** labels to filter listings by */
  metadata?: Record<string, string>;
  /** seconds until the sandbox is stopped (default the daemon's `--default-ttl`; 0: never, admin only) */
  ttlSeconds?: number;
  /** take a warm sandbox from this pool (leave the shape options out) */
  pool?: string;
  /** code contexts to start with it: `python`, `javascript`, `bash` */
  contexts?: (Language | string)[];
  /** the daemon to use (default: `$HUTCH_URL`, else the local socket) */
  client?: Hutch;
}

export interface SandboxListOptions {
  state?: SandboxState;
  pool?: string;
  /** labels that must all match */
  metadata?: Record<string, string>;
  /** a backend key as in `Sandbox.backend`, e.g. `container:crun` */
  backend?: string;
  /** stopped sandboxes too */
  includeStopped?: boolean;
  /** at most this many (default 1000) */
  limit?: number;
  client?: Hutch;
}

/** hutch's default command time limit (`Limits.timeoutMs`). */
const DEFAULT_COMMAND_TIMEOUT_MS = 30_000;

function commandArgs(id: string, cmd: Command, o: CommandOptions): Args {
  const a: Args = { id, env: o.env, cwd: o.cwd, timeout_ms: o.timeoutMs };
  if (typeof cmd === 'string') a.shell = cmd;
  else if (Array.isArray(cmd)) {
    if (cmd.length === 0) throw new TypeError("the command's argv is empty");
    a.command = [...cmd];
  } else throw new TypeError('a command is a string (a shell script) or an array of strings (argv)');
  if (typeof o.stdin === 'string') a.stdin = o.stdin;
  else if (o.stdin instanceof Uint8Array) a.stdin_b64 = bytesToBase64(o.stdin);
  return a;
}

/** How long a command may run: its own limit, capped at the sandbox's. */
function commandLimitMs(sb: Sandbox, timeoutMs: number | undefined): number {
  const limits = (sb.info.spec as { limits?: { timeout_ms?: unknown } } | null)?.limits;
  const own = typeof limits?.timeout_ms === 'number' && limits.timeout_ms > 0 ? limits.timeout_ms : DEFAULT_COMMAND_TIMEOUT_MS;
  return timeoutMs ? Math.min(timeoutMs, own) : own;
}

/** Running commands in a sandbox: `run` to completion, `stream` the output, `start` in the background. */
export class Commands {
  constructor(private readonly sandbox: Sandbox) {}

  /**
   * Runs a command to completion. A non-zero exit, a timeout or a signal is a result, not an
   * error. With `onStdout`/`onStderr` the output is streamed to them (as text) while it runs.
   */
  async run(cmd: Command, options: RunOptions = {}): Promise<CommandResult> {
    const sb = this.sandbox;
    const args = commandArgs(sb.id, cmd, options);
    const commandTimeoutMs = commandLimitMs(sb, options.timeoutMs);
    if (!options.onStdout && !options.onStderr) {
      return sb.client.transport.call('sandbox.exec', args, { commandTimeoutMs });
    }
    const fold = new CommandStream(options.onStdout, options.onStderr);
    for await (const { event, data } of sb.client.transport.events('sandbox.exec_stream', args, { commandTimeoutMs })) {
      await fold.feed(event, data);
    }
    return fold.finish();
  }

  /**
   * Runs a command and yields `{kind: 'stdout' | 'stderr', data: bytes}` as they come, then
   * `{kind: 'exit', data: CommandResult}`. Leaving the loop early kills the command.
   */
  async *stream(cmd: Command, options: CommandOptions = {}): AsyncGenerator<StreamEvent> {
    const sb = this.sandbox;
    const args = commandArgs(sb.id, cmd, options);
    const fold = new CommandStream();
    const commandTimeoutMs = commandLimitMs(sb, options.timeoutMs);
    for await (const { event, data } of sb.client.transport.events('sandbox.exec_stream', args, { commandTimeoutMs })) {
      const ev = await fold.feed(event, data);
      if (ev) yield ev;
    }
    fold.finish();
  }

  /** Starts a background process; it outlives this call (its stdin stays open). */
  async start(cmd: Command, options: CommandOptions = {}): Promise<Process> {
    const info: ProcessInfo = await this.sandbox.client.transport.call(
      'processes.start',
      commandArgs(this.sandbox.id, cmd, options),
    );
    return new Process(this.sandbox, info);
  }

  /** A background process started earlier, by its pid. */
  async connect(pid: number): Promise<Process> {
    const info: ProcessInfo = await this.sandbox.client.transport.call('processes.get', { id: this.sandbox.id, pid });
    return new Process(this.sandbox, info);
  }

  /** Background processes, running and recently finished. */
  async list(): Promise<ProcessInfo[]> {
    return this.sandbox.client.transport.call('processes.list', { id: this.sandbox.id });
  }
}

/** A background process (`sb.commands.start`). */
export class Process {
  readonly sandbox: Sandbox;
  readonly pid: number;

  constructor(sandbox: Sandbox, info: ProcessInfo) {
    this.sandbox = sandbox;
    this.pid = info.pid;
  }

  #args(extra: Args = {}): Args {
    return { id: this.sandbox.id, pid: this.pid, ...extra };
  }

  /** Its current state (`running`, and `exitCode`/`signal` once it ended). */
  async info(): Promise<ProcessInfo> {
    return this.sandbox.client.transport.call('processes.get', this.#args());
  }

  /** Writes to its stdin (a string as UTF-8). */
  async sendStdin(data: string | Uint8Array): Promise<void> {
    await this.sandbox.client.transport.call('processes.write_stdin', this.#args({ data }));
  }

  /** Closes its stdin: it reads end of file. */
  async closeStdin(): Promise<void> {
    await this.sandbox.client.transport.call('processes.close_stdin', this.#args());
  }

  /** Sends `signal` (default 9, SIGKILL). False when it had exited already. */
  async kill(signal = 9): Promise<boolean> {
    try {
      await this.sandbox.client.transport.call('processes.signal', this.#args({ signal }));
      return true;
    } catch (e) {
      if (e instanceof ConflictError) return false;
      throw e;
    }
  }

  /** Its buffered `[stdout, stderr]` so far (the last 1 MiB of each by default). */
  async logs(): Promise<[string, string]> {
    return this.sandbox.client.transport.call('processes.logs', this.#args());
  }

  /**
   * Its output from the start (replayed), then live: `stdout`/`stderr` chunks, then `exit`
   * with the whole result. Leaving the loop does not stop it. Past `timeoutMs` a HutchError
   * with code `timeout` is thrown (the process keeps running).
   */
  async *stream(options: { timeoutMs?: number } = {}): AsyncGenerator<StreamEvent> {
    const fold = new CommandStream();
    for await (const { event, data } of this.sandbox.client.transport.events('processes.attach', this.#args(), {
      deadlineMs: options.timeoutMs,
    })) {
      const ev = await fold.feed(event, data);
      if (ev) yield ev;
    }
    fold.finish();
  }

  /**
   * Waits until it exits; its whole (buffered) output is in the result. Past `timeoutMs` a
   * HutchError with code `timeout` is thrown and it keeps running.
   */
  async wait(options: { timeoutMs?: number } = {}): Promise<CommandResult> {
    let result: CommandResult | undefined;
    for await (const ev of this.stream(options)) if (ev.kind === 'exit') result = ev.data;
    return result!; // stream() throws when the stream ends without an exit
  }
}

/**
 * Files in a sandbox, confined to its workdir and /tmp. Relative paths are relative to the
 * workdir (`/workspace`).
 */
export class Files {
  constructor(private readonly sandbox: Sandbox) {}

  #call<T>(op: string, args: Args): Promise<T> {
    return this.sandbox.client.transport.call(op, { id: this.sandbox.id, ...args });
  }

  /** Creates or replaces a file (a string is written as UTF-8). `mode`: `0o640` or `"640"`. */
  async write(path: string, data: string | Uint8Array, options: { mode?: number | string } = {}): Promise<void> {
    await this.#call('files.write', { path, data, mode: options.mode });
  }

  /** A file's bytes. */
  async read(path: string): Promise<Uint8Array> {
    return this.#call('files.read', { path });
  }

  /** A file's content as UTF-8 text. */
  async readText(path: string): Promise<string> {
    return new TextDecoder().decode(await this.read(path));
  }

  /** A directory's entries. */
  async list(path: string): Promise<Entry[]> {
    return this.#call('files.list', { path });
  }

  /** Metadata of a file, directory or symlink. */
  async stat(path: string): Promise<FileInfo> {
    return this.#call('files.stat', { path });
  }

  /** True when the path exists. */
  async exists(path: string): Promise<boolean> {
    try {
      await this.stat(path);
      return true;
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  /** Creates a directory; with `parents` (the default), missing parents too, and no error when it exists. */
  async makeDir(path: string, options: { parents?: boolean } = {}): Promise<void> {
    await this.#call('files.make_dir', { path, parents: options.parents ?? true });
  }

  /** Removes a file or directory; a non-empty directory needs `recursive`. */
  async remove(path: string, options: { recursive?: boolean } = {}): Promise<void> {
    await this.#call('files.remove', { path, recursive: options.recursive ?? false });
  }

  /** Moves or renames a file or directory. */
  async rename(src: string, dst: string): Promise<void> {
    await this.#call('files.rename', { src, dst });
  }
}

export interface CodeRunOptions {
  /** the snippet's time limit, capped at the sandbox's; past it the snippet is interrupted */
  timeoutMs?: number;
  /** stdout text as it comes (the snippet then runs over the streaming endpoint) */
  onStdout?: TextCallback;
  onStderr?: TextCallback;
  /** each rich result as it comes */
  onResult?: ResultCallback;
}

/** Code contexts: persistent `python`, `javascript` or `bash` interpreters. */
export class Contexts {
  constructor(private readonly sandbox: Sandbox) {}

  /** Starts an interpreter. */
  async create(language: Language | string, options: { cwd?: string; env?: Record<string, string> } = {}): Promise<Context> {
    const info: ContextInfo = await this.sandbox.client.transport.call('contexts.create', {
      id: this.sandbox.id,
      language,
      cwd: options.cwd,
      env: options.env,
    });
    return new Context(this.sandbox, info);
  }

  /** The sandbox's code contexts. */
  async list(): Promise<Context[]> {
    const infos: ContextInfo[] = await this.sandbox.client.transport.call('contexts.list', { id: this.sandbox.id });
    return infos.map((i) => new Context(this.sandbox, i));
  }
}

/** A persistent interpreter: variables, imports and functions survive between `run` calls. */
export class Context {
  readonly sandbox: Sandbox;
  /** its context id (`ctx-1`) */
  readonly id: string;
  readonly language: string;
  /** what the daemon said about it when it was created or restarted */
  info: ContextInfo;

  constructor(sandbox: Sandbox, info: ContextInfo) {
    this.sandbox = sandbox;
    this.id = info.contextId;
    this.language = info.language;
    this.info = info;
  }

  #args(extra: Args = {}): Args {
    return { id: this.sandbox.id, context_id: this.id, ...extra };
  }

  /**
   * Runs a snippet. An exception in it is `execution.error`, not thrown; `execution.text` is the
   * last expression's value. With callbacks, output and results arrive as they happen.
   */
  async run(code: string, options: CodeRunOptions = {}): Promise<Execution> {
    const args = this.#args({ code, timeout_ms: options.timeoutMs });
    const commandTimeoutMs = commandLimitMs(this.sandbox, options.timeoutMs);
    if (!options.onStdout && !options.onStderr && !options.onResult) {
      return this.sandbox.client.transport.call('contexts.run', args, { commandTimeoutMs });
    }
    const fold = new RunStream(options.onStdout, options.onStderr, options.onResult);
    for await (const { event, data } of this.sandbox.client.transport.events('contexts.run_stream', args, {
      commandTimeoutMs,
    })) {
      await fold.feed(event, data);
    }
    return fold.finish();
  }

  /** Replaces the interpreter with a fresh one (its state is lost). */
  async restart(): Promise<void> {
    this.info = await this.sandbox.client.transport.call('contexts.restart', this.#args());
  }

  /** Interrupts the running snippet. */
  async interrupt(): Promise<void> {
    await this.sandbox.client.transport.call('contexts.interrupt', this.#args());
  }

  /** Stops the interpreter. */
  async delete(): Promise<void> {
    await this.sandbox.client.transport.call('contexts.delete', this.#args());
  }
}

/**
 * A live sandbox. `Sandbox.create()` starts one (or takes a warm one from a pool),
 * `Sandbox.connect(id)` attaches to an existing one; `kill()` it when done, or let
 * `await using sb = await Sandbox.create()` do that.
 */
export class Sandbox implements AsyncDisposable {
  readonly client: Hutch;
  /** commands: to completion, streamed, or in the background */
  readonly commands: Commands;
  /** files in its workdir and /tmp */
  readonly files: Files;
  /** code contexts (persistent interpreters) */
  readonly contexts: Contexts;
  #info: SandboxInfo;

  constructor(info: SandboxInfo, client: Hutch) {
    this.client = client;
    this.#info = info;
    this.commands = new Commands(this);
    this.files = new Files(this);
    this.contexts = new Contexts(this);
  }

  /** Creates and starts a sandbox, ready for commands; or, with `pool`, takes a warm one. */
  static async create(options: SandboxCreateOptions = {}): Promise<Sandbox> {
    const client = options.client ?? defaultHutch();
    const info: SandboxInfo = await client.transport.call('sandboxes.create', {
      backend: options.backend,
      runtime: options.runtime,
      image: options.image,
      rootfs: options.rootfs,
      limits: limitsToWire(options.limits),
      env: options.env,
      contexts: options.contexts,
      metadata: options.metadata,
      ttl_seconds: options.ttlSeconds,
      pool: options.pool,
    });
    return new Sandbox(info, client);
  }

  /** An existing sandbox by its id (NotFoundError when there is none). */
  static async connect(id: string, options: { client?: Hutch } = {}): Promise<Sandbox> {
    const client = options.client ?? defaultHutch();
    return new Sandbox(await client.transport.call('sandboxes.get', { id }), client);
  }

  /** Live sandboxes, newest first; every `metadata` label must match. */
  static async list(options: SandboxListOptions = {}): Promise<Sandbox[]> {
    const client = options.client ?? defaultHutch();
    const infos: SandboxInfo[] = await client.transport.call('sandboxes.list', {
      state: options.state,
      pool: options.pool,
      backend: options.backend,
      metadata: options.metadata,
      include_stopped: options.includeStopped,
      limit: options.limit,
    });
    return infos.map((i) => new Sandbox(i, client));
  }

  /** What the daemon last said about it (refresh() asks again). */
  get info(): SandboxInfo {
    return this.#info;
  }
  get id(): string {
    return this.#info.id;
  }
  get state(): SandboxState {
    return this.#info.state;
  }
  /** `container:crun`, `container:runc` or `process` */
  get backend(): string {
    return this.#info.backend;
  }
  /** the pool it came from, or null */
  get pool(): string | null {
    return this.#info.pool;
  }
  get metadata(): Record<string, string> {
    return this.#info.metadata;
  }
  /** unix milliseconds, or null when it never expires */
  get expiresAt(): number | null {
    return this.#info.expiresAt;
  }

  /** Reloads state, TTL and metadata from the daemon. */
  async refresh(): Promise<this> {
    this.#info = await this.client.transport.call('sandboxes.get', { id: this.id });
    return this;
  }

  /** Stops the sandbox `seconds` from now (0: never, admin only). */
  async setTtl(seconds: number): Promise<void> {
    this.#info = await this.client.transport.call('sandboxes.set_ttl', { id: this.id, ttl_seconds: seconds });
  }

  /** Stops and destroys the sandbox (a recycling pool's member goes back to its pool). */
  async kill(): Promise<void> {
    await this.client.transport.call('sandboxes.delete', { id: this.id });
    this.#info = { ...this.#info, state: 'stopped' };
  }

  /** `await using sb = await Sandbox.create()` kills it when the block ends. */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.kill();
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
  }

  toJSON(): SandboxInfo {
    return this.#info;
  }
}

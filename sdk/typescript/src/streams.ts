// Folding the Server-Sent Events of the streaming endpoints into results: `exec/stream` and
// `attach` into StreamEvents and a CommandResult, `run/stream` into an Execution.
import { type HutchError, errorFromCode } from './errors.js';
import {
  type CommandResult,
  Execution,
  type ExecutionError,
  type Result,
  type StreamEvent,
  applyRunDone,
  chunkBytes,
  commandResult,
  toExecutionError,
  toResult,
} from './models.js';

/** Called with output text as it arrives; a returned promise is awaited before the next chunk. */
export type TextCallback = (text: string) => unknown;
/** Called with each rich result as it arrives; a returned promise is awaited. */
export type ResultCallback = (result: Result) => unknown;

/* eslint-disable @typescript-eslint/no-explicit-any */

/** A stream's failure: an `error` event `{code, message}`, or an end without its last event. */
function streamError(code: string | undefined, message: string | undefined, fallback: string): HutchError {
  return errorFromCode(code || 'sandbox_error', message || fallback);
}

/** Output bytes of one stream, decoded to text across chunk boundaries. */
class Output {
  readonly chunks: Uint8Array[] = [];
  readonly #decoder = new TextDecoder();

  push(bytes: Uint8Array): string {
    this.chunks.push(bytes);
    return this.#decoder.decode(bytes, { stream: true });
  }

  bytes(): Uint8Array {
    const out = new Uint8Array(this.chunks.reduce((n, c) => n + c.byteLength, 0));
    let at = 0;
    for (const c of this.chunks) {
      out.set(c, at);
      at += c.byteLength;
    }
    return out;
  }
}

/**
 * Folds the events of `exec/stream` and `attach`: output chunks become StreamEvents (and text
 * for the callbacks), `exit` the CommandResult with all the output seen, `error` a typed error.
 */
export class CommandStream {
  pid: number | null = null;
  result: CommandResult | null = null;
  /** live events this reader missed because it read too slowly (attach) */
  droppedEvents = 0;
  readonly #out = new Output();
  readonly #err = new Output();

  constructor(
    private readonly onStdout?: TextCallback,
    private readonly onStderr?: TextCallback,
  ) {}

  async feed(event: string, data: any): Promise<StreamEvent | null> {
    if (event === 'stdout' || event === 'stderr') {
      const bytes = chunkBytes(data);
      const text = (event === 'stdout' ? this.#out : this.#err).push(bytes);
      const cb = event === 'stdout' ? this.onStdout : this.onStderr;
      if (cb && text) await cb(text);
      return { kind: event, data: bytes };
    }
    if (event === 'exit') {
      this.result = commandResult(data, this.#out.bytes(), this.#err.bytes());
      return { kind: 'exit', data: this.result };
    }
    if (event === 'started') this.pid = data?.pid ?? null;
    else if (event === 'lagged') this.droppedEvents += Number(data?.dropped_events ?? 0);
    else if (event === 'error') throw streamError(data?.code, data?.message, 'the stream failed');
    return null; // an event this SDK does not know: newer daemons may add some
  }

  finish(): CommandResult {
    if (!this.result) throw streamError('sandbox_error', undefined, 'the output stream ended before the command exited');
    return this.result;
  }
}

/**
 * Folds the events of `run/stream` into an Execution. An `error` event is the snippet's
 * exception when `done` follows, and a failed run (its `name` an API error code) when it is last.
 */
export class RunStream {
  readonly #out = new Output();
  readonly #err = new Output();
  readonly #results: Result[] = [];
  #error: ExecutionError | null = null;
  #done: any = null;

  constructor(
    private readonly onStdout?: TextCallback,
    private readonly onStderr?: TextCallback,
    private readonly onResult?: ResultCallback,
  ) {}

  async feed(event: string, data: any): Promise<void> {
    if (event === 'stdout' || event === 'stderr') {
      const text = (event === 'stdout' ? this.#out : this.#err).push(chunkBytes(data));
      const cb = event === 'stdout' ? this.onStdout : this.onStderr;
      if (cb && text) await cb(text);
    } else if (event === 'result') {
      const r = toResult(data);
      this.#results.push(r);
      await this.onResult?.(r);
    } else if (event === 'error') {
      this.#error = toExecutionError(data);
    } else if (event === 'done') {
      this.#done = data;
    }
  }

  finish(): Execution {
    if (this.#done === null) {
      throw streamError(this.#error?.name, this.#error?.value, 'the run ended without a result');
    }
    const e = new Execution();
    const dec = new TextDecoder();
    e.stdout = dec.decode(this.#out.bytes());
    e.stderr = dec.decode(this.#err.bytes());
    e.results = this.#results;
    e.error = this.#error;
    return applyRunDone(e, this.#done);
  }
}

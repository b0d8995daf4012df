// A scripted stand-in for `hutch serve` on a Unix socket in a temporary directory, to test what
// the transport does with answers a real daemon rarely gives (retries, broken streams, timeouts).
import { mkdtempSync, rmSync } from 'node:fs';
import * as http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export type Handler = (req: Seen, res: http.ServerResponse) => void | Promise<void>;

export class FakeDaemon {
  readonly dir = mkdtempSync(join(tmpdir(), 'hutch-sdk-fake-'));
  readonly socket = join(this.dir, 'h.sock');
  readonly seen: Seen[] = [];
  /** connections closed by the client while their answer was still open */
  closedEarly = 0;
  handler: Handler = (_req, res) => json(res, 404, { code: 'not_found', message: 'no route' });
  readonly #server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) };
      this.seen.push(seen);
      res.on('close', () => {
        if (!res.writableEnded) this.closedEarly++;
      });
      void Promise.resolve(this.handler(seen, res)).catch((e) => {
        res.destroy(e as Error);
      });
    });
  });

  get url(): string {
    return `unix://${this.socket}`;
  }

  start(): Promise<this> {
    return new Promise((resolve) => this.#server.listen(this.socket, () => resolve(this)));
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.closeAllConnections();
      this.#server.close(() => {
        rmSync(this.dir, { recursive: true, force: true });
        resolve();
      });
    });
  }
}

export function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const data = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(data.length), ...headers });
  res.end(data);
}

export function noContent(res: http.ServerResponse): void {
  res.writeHead(204);
  res.end();
}

/** Starts an event stream; write raw SSE text with `res.write`. */
export function sse(res: http.ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.flushHeaders();
}

export const event = (name: string, data: unknown) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

export const sandboxJson = (id = 'hutch-0123456789ab') => ({
  id,
  state: 'waiting',
  backend: 'container:crun',
  metadata: {},
  created_at: 1,
  last_used_at: 1,
  expires_at: null,
  spec: { limits: { timeout_ms: 30000 } },
});

export const exitJson = (exitCode = 0) => ({
  exit_code: exitCode,
  signal: null,
  timed_out: false,
  oom_killed: false,
  stdout_truncated: false,
  stderr_truncated: false,
  stdout_bytes: 0,
  stderr_bytes: 0,
  duration_ms: 1.5,
});

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves when the client has gone (or the answer was sent). */
export const closed = (res: http.ServerResponse) => new Promise<void>((r) => res.once('close', () => r()));

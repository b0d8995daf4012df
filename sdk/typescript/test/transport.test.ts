// The transport against a scripted fake daemon on a Unix socket (no network, no root):
// configuration, headers, retries only where safe, Server-Sent Events folding, timeouts,
// and the errors a broken connection becomes.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';

import {
  CapacityError,
  DaemonUnavailableError,
  Hutch,
  HutchError,
  NotFoundError,
  RateLimitError,
  Sandbox,
  ServerError,
} from '@hutch/sdk';
import { FakeDaemon, closed, event, exitJson, json, noContent, sandboxJson, sleep, sse } from './fake-daemon.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
const ID = 'hutch-0123456789ab';

describe('configuration', () => {
  const saved = { url: process.env.HUTCH_URL, key: process.env.HUTCH_API_KEY };
  after(() => {
    restore('HUTCH_URL', saved.url);
    restore('HUTCH_API_KEY', saved.key);
  });

  it('defaults to the daemon socket, else HUTCH_URL, else the url option', () => {
    delete process.env.HUTCH_URL;
    assert.equal(new Hutch().url, 'unix:///run/hutch/hutch.sock');
    process.env.HUTCH_URL = 'http://127.0.0.1:7070';
    assert.equal(new Hutch().url, 'http://127.0.0.1:7070');
    assert.equal(new Hutch({ url: 'unix:///tmp/x.sock' }).url, 'unix:///tmp/x.sock');
    assert.equal(new Hutch({ url: '/tmp/y.sock' }).url, 'unix:///tmp/y.sock');
  });

  it('rejects URLs it cannot use, saying what to write', () => {
    for (const bad of ['unix://relative.sock', 'ftp://h:1', 'h:7070', 'http://h:1/api']) {
      assert.throws(() => new Hutch({ url: bad }), (e: any) => e instanceof HutchError && /unix:\/\/\/|no path|http/.test(e.message), bad);
    }
  });
});

describe('transport against a fake daemon', () => {
  const fake = new FakeDaemon();
  let client: Hutch;
  before(async () => {
    await fake.start();
  });
  after(() => fake.stop());
  beforeEach(() => {
    fake.seen.length = 0;
    fake.closedEarly = 0;
    client = new Hutch({ url: fake.url, apiKey: 'hutch_secret' });
  });

  it('sends JSON with the API key and decodes the sandbox', async () => {
    fake.handler = (req, res) => json(res, 201, { ...sandboxJson(), metadata: JSON.parse(req.body.toString()).metadata });
    const sb = await Sandbox.create({ client, limits: { memoryBytes: 1 << 28, timeout_ms: 5000 } as any, metadata: { a: 'b' }, ttlSeconds: 60 });
    assert.equal(sb.id, ID);
    assert.deepEqual(sb.metadata, { a: 'b' });
    const req = fake.seen[0]!;
    assert.equal(req.method, 'POST');
    assert.equal(req.url, '/v1/sandboxes');
    assert.equal(req.headers.authorization, 'Bearer hutch_secret');
    assert.equal(req.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(req.body.toString()), {
      limits: { memory_bytes: 1 << 28, timeout_ms: 5000 },
      metadata: { a: 'b' },
      ttl_seconds: 60,
    });
  });

  it('takes the API key from HUTCH_API_KEY', async () => {
    const saved = process.env.HUTCH_API_KEY;
    process.env.HUTCH_API_KEY = 'hutch_from_env';
    try {
      fake.handler = (_req, res) => json(res, 200, { status: 'ok' });
      await new Hutch({ url: fake.url }).health();
      assert.equal(fake.seen[0]!.headers.authorization, 'Bearer hutch_from_env');
    } finally {
      restore('HUTCH_API_KEY', saved);
    }
  });

  it('retries GET on 503 capacity_exceeded with Retry-After, at most twice', async () => {
    let n = 0;
    fake.handler = (_req, res) => {
      n++;
      if (n <= 2) return json(res, 503, { code: 'capacity_exceeded', message: 'full' }, { 'retry-after': '0' });
      return json(res, 200, sandboxJson());
    };
    const sb = await Sandbox.connect(ID, { client });
    assert.equal(sb.id, ID);
    assert.equal(fake.seen.length, 3);

    n = -10;
    await assert.rejects(Sandbox.connect(ID, { client }), CapacityError);
    assert.equal(fake.seen.length, 3 + 3, 'one try and two retries');
  });

  it('retries GET on 429 rate_limited, and gives up with RateLimitError', async () => {
    fake.handler = (_req, res) => json(res, 429, { code: 'rate_limited', message: 'slow down' }, { 'retry-after': '0' });
    await assert.rejects(Sandbox.list({ client }), (e: any) => e instanceof RateLimitError && e.message === 'slow down' && e.retryAfter === 0);
    assert.equal(fake.seen.length, 3);
  });

  it('never retries exec, nor a 503 that is not about capacity', async () => {
    fake.handler = (req, res) => {
      if (req.method === 'GET') return json(res, 200, sandboxJson());
      return json(res, 503, { code: 'capacity_exceeded', message: 'full' }, { 'retry-after': '0' });
    };
    const sb = await Sandbox.connect(ID, { client });
    fake.seen.length = 0;
    await assert.rejects(sb.commands.run('true'), CapacityError);
    await assert.rejects(sb.commands.run('true', { onStdout: () => {} }), CapacityError);
    await assert.rejects(sb.contexts.create('python'), CapacityError);
    assert.equal(fake.seen.length, 3, 'each POST sent once');

    fake.handler = (_req, res) => json(res, 503, { code: 'backend_unavailable', message: 'no crun' }, { 'retry-after': '0' });
    fake.seen.length = 0;
    await assert.rejects(Sandbox.connect(ID, { client }), { name: 'BackendUnavailableError', message: 'no crun' });
    assert.equal(fake.seen.length, 1);
  });

  it('sends GET again after a broken connection, but never an exec', async () => {
    let n = 0;
    fake.handler = (req, res) => {
      n++;
      if (n === 1 || req.method === 'POST') return void res.socket?.destroy(); // the daemon went away mid-request
      return json(res, 200, sandboxJson());
    };
    const sb = await Sandbox.connect(ID, { client });
    assert.equal(fake.seen.length, 2);
    fake.seen.length = 0;
    await assert.rejects(sb.commands.run('true'), (e: any) => e instanceof DaemonUnavailableError && /lost the connection/.test(e.message));
    assert.equal(fake.seen.length, 1, 'the exec was sent once');
  });

  it('streams output to callbacks, decoding characters split between chunks', async () => {
    const euro = Buffer.from('€'); // 3 bytes
    fake.handler = async (req, res) => {
      if (req.method === 'GET') return json(res, 200, sandboxJson());
      assert.deepEqual(JSON.parse(req.body.toString()), { command: ['python3', '-c', 'x'], stdin: 'in' });
      sse(res);
      res.write(': keep-alive\n\n');
      res.write(event('started', { pid: 5 }));
      res.write(`event: stdout\r\ndata: {"data":"a\\n"}\r\n\r\n`);
      // the server sends the exact bytes as b64 when a chunk is not valid UTF-8 on its own
      res.write(event('stdout', { data: '\ufffd', b64: euro.subarray(0, 2).toString('base64') }));
      await sleep(5);
      res.write(event('stdout', { data: '\ufffd', b64: euro.subarray(2).toString('base64') }));
      res.write('event: stderr\nda');
      await sleep(5);
      res.write('ta: {"data":"oops"}\n\n');
      res.end(event('exit', { ...exitJson(3), stdout_bytes: 5, stderr_bytes: 4 }));
    };
    const sb = await Sandbox.connect(ID, { client });
    const out: string[] = [];
    const err: string[] = [];
    const r = await sb.commands.run(['python3', '-c', 'x'], {
      stdin: 'in',
      onStdout: (t) => void out.push(t),
      onStderr: (t) => void err.push(t),
    });
    assert.deepEqual(out, ['a\n', '€']);
    assert.deepEqual(err, ['oops']);
    assert.equal(r.exitCode, 3);
    assert.equal(r.ok, false);
    assert.equal(r.stdout, 'a\n€');
    assert.deepEqual(Buffer.from(r.stdoutBytes), Buffer.concat([Buffer.from('a\n'), euro]));
    assert.equal(r.stderr, 'oops');
  });

  it('yields stream events, and leaving the loop closes the connection', async () => {
    fake.handler = async (req, res) => {
      if (req.method === 'GET') return json(res, 200, sandboxJson());
      sse(res);
      for (let i = 0; i < 1000 && !res.destroyed; i++) {
        res.write(event('stdout', { data: `${i}\n` }));
        await sleep(2);
      }
      res.end();
    };
    const sb = await Sandbox.connect(ID, { client });
    const seen: string[] = [];
    for await (const ev of sb.commands.stream('yes')) {
      assert.equal(ev.kind, 'stdout');
      seen.push(new TextDecoder().decode(ev.data as Uint8Array));
      if (seen.length === 3) break;
    }
    assert.deepEqual(seen, ['0\n', '1\n', '2\n']);
    await sleep(50);
    assert.equal(fake.closedEarly, 1, 'the daemon saw the client leave');
  });

  it('turns a stream error event, or a stream cut short, into typed errors', async () => {
    let body = '';
    fake.handler = (req, res) => {
      if (req.method === 'GET') return json(res, 200, sandboxJson());
      sse(res);
      res.end(body);
    };
    const sb = await Sandbox.connect(ID, { client });
    body = event('stdout', { data: 'x' }) + event('error', { code: 'sandbox_error', message: 'the agent died' });
    await assert.rejects(sb.commands.run('x', { onStdout: () => {} }), { name: 'ServerError', message: 'the agent died' });
    body = event('stdout', { data: 'x' });
    await assert.rejects(sb.commands.run('x', { onStdout: () => {} }), (e: any) => e instanceof ServerError && /ended before/.test(e.message));
    await assert.rejects(async () => {
      for await (const _ of sb.commands.stream('x')) {
        /* drain */
      }
    }, ServerError);
  });

  it('folds a code run stream; a last error event is a failed run', async () => {
    let body = '';
    fake.handler = (req, res) => {
      if (req.method === 'GET') return json(res, 200, sandboxJson());
      sse(res);
      res.end(body);
    };
    const sb = await Sandbox.connect(ID, { client });
    const ctx = new (await import('@hutch/sdk')).Context(sb, {
      contextId: 'ctx-1', language: 'python', pid: 1, version: '3', executionCount: 0, busy: false, cwd: '/', startupUs: 1,
    });
    const done = { execution_count: 4, timed_out: false, restarted: null, stdout_truncated: false, stderr_truncated: false, exit_code: null, duration_us: 5, duration_ms: 0.005 };
    body =
      event('stdout', { data: 'hi\n' }) +
      event('result', { main: false, data: { 'text/html': '<b>1</b>' } }) +
      event('error', { name: 'ValueError', value: 'bad', traceback: ['t'] }) +
      event('result', { main: true, data: { 'text/plain': '42' } }) +
      event('done', done);
    const results: string[] = [];
    const out: string[] = [];
    const ex = await ctx.run('x', { onStdout: (t) => void out.push(t), onResult: (r) => void results.push(r.formats[0]!) });
    assert.deepEqual(out, ['hi\n']);
    assert.deepEqual(results, ['text/html', 'text/plain']);
    assert.equal(ex.text, '42');
    assert.equal(ex.results[0]!.html, '<b>1</b>');
    assert.equal(ex.error?.name, 'ValueError');
    assert.equal(ex.executionCount, 4);
    assert.equal(ex.stdout, 'hi\n');

    body = event('error', { name: 'not_found', value: 'no context ctx-1', traceback: [] });
    await assert.rejects(ctx.run('x', { onStdout: () => {} }), (e: any) => e instanceof NotFoundError && e.message === 'no context ctx-1');
  });

  it('waits for a background process, with a deadline that leaves it running', async () => {
    fake.handler = async (req, res) => {
      if (req.url.endsWith('/processes')) return json(res, 201, { pid: 7, command: { shell: 's' }, started_at: 1, running: true, stdout_dropped: 0, stderr_dropped: 0 });
      if (req.url.endsWith('/signal')) return json(res, 409, { code: 'conflict', message: 'process 7 has exited' });
      if (req.url.endsWith('/stdin')) return noContent(res);
      if (req.url.endsWith('/attach')) {
        sse(res);
        res.write(event('stdout', { data: 'got x\n' }));
        if (fake.seen.filter((s) => s.url.endsWith('/attach')).length > 1) {
          await closed(res); // never exits: the client leaves
          return;
        }
        res.end(event('lagged', { dropped_events: 2 }) + event('exit', exitJson(0)));
        return;
      }
      return json(res, 200, sandboxJson());
    };
    const sb = await Sandbox.connect(ID, { client });
    const p = await sb.commands.start('s');
    assert.equal(p.pid, 7);
    await p.sendStdin(new Uint8Array([120, 10]));
    assert.deepEqual(fake.seen.at(-1)!.body, Buffer.from('x\n'));
    assert.equal(fake.seen.at(-1)!.headers['content-type'], 'application/octet-stream');
    const r = await p.wait();
    assert.equal(r.stdout, 'got x\n');
    assert.equal(r.exitCode, 0);
    assert.equal(await p.kill(), false, 'kill on an exited process is false');
    const t = Date.now();
    await assert.rejects(p.wait({ timeoutMs: 200 }), (e: any) => e instanceof HutchError && e.code === 'timeout');
    assert.ok(Date.now() - t < 5000);
  });

  it('gives up on a daemon that does not answer', async () => {
    fake.handler = (_req, res) => closed(res); // never answers
    const slow = new Hutch({ url: fake.url, timeoutMs: 150 });
    await assert.rejects(slow.health(), (e: any) => e instanceof DaemonUnavailableError && /did not answer GET \/v1\/health in time/.test(e.message));
  });

  it('kills the sandbox at the end of an `await using` block', async () => {
    fake.handler = (req, res) => (req.method === 'DELETE' ? noContent(res) : json(res, 201, sandboxJson()));
    {
      await using sb = await Sandbox.create({ client });
      assert.equal(sb.state, 'waiting');
    }
    assert.deepEqual(
      fake.seen.map((s) => `${s.method} ${s.url}`),
      ['POST /v1/sandboxes', `DELETE /v1/sandboxes/${ID}`],
    );
  });
});

describe('a daemon that is not there', () => {
  it('is DaemonUnavailableError naming the socket and how to start it', async () => {
    const client = new Hutch({ url: 'unix:///nonexistent/hutch-test/h.sock' });
    await assert.rejects(Sandbox.create({ client }), (e: any) => {
      assert.ok(e instanceof DaemonUnavailableError, String(e));
      assert.match(e.message, /\/nonexistent\/hutch-test\/h\.sock/);
      assert.match(e.message, /start it with: hutch serve --socket \/nonexistent\/hutch-test\/h\.sock/);
      assert.equal(e.status, null);
      return true;
    });
  });

  it('over TCP names the URL', async () => {
    const client = new Hutch({ url: 'http://127.0.0.1:9', maxRetries: 0 });
    await assert.rejects(client.health(), (e: any) => e instanceof DaemonUnavailableError && /127\.0\.0\.1:9/.test(e.message) && /start it with: hutch serve --tcp 127\.0\.0\.1:9/.test(e.message));
  });
});

function restore(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}

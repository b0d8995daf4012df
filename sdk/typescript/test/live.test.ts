// The SDK against a real daemon: `hutch serve` started by this file on a socket (and a TCP
// port) in a temporary directory, SIGTERM at the end. Needs root, the hutch binary ($HUTCH_BIN,
// else target/debug/hutch of this checkout) and its guest agent ($HUTCH_AGENT, else
// target/*/agent/hutch-agent from scripts/build-agent.sh); skipped with the reason otherwise.
// HUTCH_REQUIRE_LIVE=1 turns the skip into a failure (CI runs as root).
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import {
  AuthenticationError,
  ConflictError,
  DaemonUnavailableError,
  Hutch,
  InvalidRequestError,
  NotFoundError,
  PermissionDeniedError,
  Sandbox,
  SandboxStoppedError,
} from '@hutch/sdk';

/* eslint-disable @typescript-eslint/no-explicit-any */
const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const TARGET = process.env.CARGO_TARGET_DIR || join(REPO, 'target');
const BIN = process.env.HUTCH_BIN || join(TARGET, 'debug', 'hutch');
const AGENT =
  process.env.HUTCH_AGENT ||
  ['x86_64-unknown-linux-musl', 'x86_64-unknown-linux-gnu', 'aarch64-unknown-linux-musl']
    .map((triple) => join(TARGET, triple, 'agent', 'hutch-agent'))
    .find((p) => existsSync(p));
/** How long the daemon may take to answer its health check. */
const STARTUP_LIMIT_MS = 15_000;
/** How long it may take to destroy its sandboxes and exit after SIGTERM. */
const SHUTDOWN_LIMIT_MS = 30_000;
/** Every test is bounded, so a hang fails one test instead of the run. */
const TEST = { timeout: 60_000 };

function skipReason(): string | undefined {
  if (process.env.HUTCH_LIVE === '0') return 'HUTCH_LIVE=0';
  if (process.platform !== 'linux') return 'the daemon runs on Linux only';
  if (process.getuid?.() !== 0) return 'needs root (the daemon creates containers); run as root or in CI';
  if (!existsSync(BIN)) return `no hutch binary at ${BIN} (cargo build -p hutch-cli, or set HUTCH_BIN)`;
  if (!AGENT || !existsSync(AGENT)) return 'live tests need the guest agent: set HUTCH_AGENT=$(bash scripts/build-agent.sh)';
  return undefined;
}

const reason = skipReason();
if (reason) {
  console.log(`# live tests skipped: ${reason}`);
  if (process.env.HUTCH_REQUIRE_LIVE === '1') {
    it('live tests can run here (HUTCH_REQUIRE_LIVE=1)', () => assert.fail(`live tests cannot run: ${reason}`));
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** `hutch serve` in a temporary directory. */
class Daemon {
  readonly dir = mkdtempSync(join(tmpdir(), 'hutch-sdk-ts-'));
  readonly socket = join(this.dir, 'h.sock');
  readonly log = join(this.dir, 'daemon.log');
  tcpUrl = '';
  #child: ChildProcess | undefined;

  get url(): string {
    return `unix://${this.socket}`;
  }

  async start(): Promise<void> {
    const port = await freePort();
    this.tcpUrl = `http://127.0.0.1:${port}`;
    const env: NodeJS.ProcessEnv = { ...process.env, HUTCH_AGENT: AGENT };
    for (const k of ['HUTCH_URL', 'HUTCH_API_KEY', 'HUTCH_SOCKET', 'HUTCH_TCP', 'HUTCH_DB', 'HUTCH_STATE_DIR']) delete env[k];
    const args = ['serve', '--socket', this.socket, '--state-dir', join(this.dir, 'state'), '--db', join(this.dir, 'h.db'), '--log-format', 'text', '--tcp', `127.0.0.1:${port}`];
    const child = spawn(BIN, args, { env, stdio: ['ignore', 'ignore', openSync(this.log, 'w')] });
    this.#child = child;
    let exited: string | undefined;
    child.on('exit', (code, signal) => (exited = `exit code ${code}, signal ${signal}`));
    const client = new Hutch({ url: this.url, timeoutMs: 2000 });
    const t = Date.now();
    for (;;) {
      if (exited) throw new Error(`hutch serve ${exited}:\n${this.tail()}`);
      try {
        await client.health();
        return;
      } catch (e) {
        if (!(e instanceof DaemonUnavailableError)) throw e;
      }
      if (Date.now() - t > STARTUP_LIMIT_MS) throw new Error(`hutch serve did not answer /v1/health within ${STARTUP_LIMIT_MS} ms:\n${this.tail()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  tail(lines = 40): string {
    try {
      return readFileSync(this.log, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }

  /** SIGTERM, then wait; SIGKILL and fail if it does not exit in time. */
  async stop(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((r) => (timer = setTimeout(() => r('late'), SHUTDOWN_LIMIT_MS)));
    const how = await Promise.race([exited, late]);
    clearTimeout(timer);
    if (how === 'late') {
      child.kill('SIGKILL');
      await exited;
      throw new Error(`hutch serve did not exit within ${SHUTDOWN_LIMIT_MS} ms of SIGTERM`);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

describe('live: the SDK against hutch serve', { skip: reason ?? false }, () => {
  const daemon = new Daemon();
  let client: Hutch;
  let failed = false;

  before(async () => {
    await daemon.start();
    client = new Hutch({ url: daemon.url });
  });
  after(async () => {
    if (failed) console.log(`--- daemon log (last lines) ---\n${daemon.tail()}`);
    await daemon.stop();
  });

  /** A sandbox for one test, killed at its end. */
  async function withSandbox(fn: (sb: Sandbox) => Promise<void>): Promise<void> {
    await using sb = await Sandbox.create({ client, ttlSeconds: 300 });
    try {
      await fn(sb);
    } catch (e) {
      failed = true;
      throw e;
    }
  }

  it('creates, lists, connects to, re-times and kills a sandbox', TEST, async () => {
    const saved = process.env.HUTCH_URL;
    process.env.HUTCH_URL = daemon.url; // Sandbox.create without a client uses $HUTCH_URL
    let sb: Sandbox;
    try {
      sb = await Sandbox.create({ metadata: { suite: 'ts-live' }, ttlSeconds: 120, limits: { memoryBytes: 256 << 20 } });
    } finally {
      if (saved === undefined) delete process.env.HUTCH_URL;
      else process.env.HUTCH_URL = saved;
    }
    assert.match(sb.id, /^hutch-[0-9a-f]{12}$/);
    assert.equal(sb.state, 'waiting');
    assert.match(sb.backend, /^container:/);
    assert.equal((sb.info.spec as any).limits.memory_bytes, 256 << 20);
    assert.ok(sb.expiresAt! > Date.now() + 100_000 && sb.expiresAt! <= Date.now() + 120_000);
    assert.ok(sb.info.timings!.totalMs > 0);

    const listed = await Sandbox.list({ client, metadata: { suite: 'ts-live' } });
    assert.deepEqual(listed.map((s) => s.id), [sb.id]);
    assert.deepEqual(await Sandbox.list({ client, metadata: { suite: 'nobody' } }), []);

    const same = await Sandbox.connect(sb.id, { client });
    assert.equal(same.id, sb.id);
    assert.deepEqual(same.metadata, { suite: 'ts-live' });

    const before = sb.expiresAt!;
    await sb.setTtl(600);
    assert.ok(sb.expiresAt! > before + 400_000);
    assert.equal((await same.refresh()).expiresAt, sb.expiresAt);

    await sb.kill();
    assert.equal(sb.state, 'stopped');
    const gone = await Sandbox.connect(sb.id, { client });
    assert.equal(gone.state, 'stopped');
    assert.equal(gone.info.stopReason, 'deleted');
    await assert.rejects(sb.commands.run('true'), SandboxStoppedError);
    await sb.kill(); // idempotent on a stopped sandbox

    let id = '';
    {
      await using scoped = await Sandbox.create({ client });
      id = scoped.id;
    }
    assert.equal((await Sandbox.connect(id, { client })).state, 'stopped');
  });

  it('runs commands: exit codes, signals, stdin, env, cwd, timeouts, binary output', TEST, () =>
    withSandbox(async (sb) => {
      let r = await sb.commands.run("python3 -c 'print(1+1)'");
      assert.equal(r.stdout, '2\n');
      assert.equal(r.exitCode, 0);
      assert.ok(r.ok);
      assert.ok(r.durationMs > 0);

      r = await sb.commands.run('echo oops >&2; exit 3');
      assert.equal(r.exitCode, 3);
      assert.equal(r.stderr, 'oops\n');
      assert.equal(r.ok, false);

      r = await sb.commands.run(['sh', '-c', 'kill -9 $$']);
      assert.equal(r.exitCode, null);
      assert.equal(r.signal, 9);

      r = await sb.commands.run('cat', { stdin: 'hello' });
      assert.equal(r.stdout, 'hello');
      r = await sb.commands.run('wc -c', { stdin: new Uint8Array([0, 1, 2, 255]) });
      assert.equal(r.stdout.trim(), '4');

      r = await sb.commands.run('echo $K; pwd', { env: { K: 'V' }, cwd: '/tmp' });
      assert.equal(r.stdout, 'V\n/tmp\n');

      r = await sb.commands.run('sleep 5', { timeoutMs: 300 });
      assert.equal(r.timedOut, true);
      assert.ok(r.durationMs < 4000);

      r = await sb.commands.run("printf 'a\\377'");
      assert.deepEqual([...r.stdoutBytes], [97, 255]);
      assert.equal(r.stdout, 'a\ufffd');
    }),
  );

  it('streams output to callbacks as it comes, and as an async iterator', TEST, () =>
    withSandbox(async (sb) => {
      const chunks: [number, string][] = [];
      const err: string[] = [];
      const r = await sb.commands.run('for i in 1 2 3; do echo line$i; sleep 0.3; done; echo done >&2; exit 2', {
        onStdout: (t) => void chunks.push([Date.now(), t]),
        onStderr: (t) => void err.push(t),
      });
      const end = Date.now();
      assert.equal(chunks.map(([, t]) => t).join(''), 'line1\nline2\nline3\n');
      assert.ok(chunks.length >= 2, `output came in one piece: ${JSON.stringify(chunks)}`);
      assert.ok(end - chunks[0]![0] >= 500, 'the first line arrived while the command still ran');
      assert.equal(err.join(''), 'done\n');
      assert.equal(r.exitCode, 2);
      assert.equal(r.stdout, 'line1\nline2\nline3\n');

      const kinds: string[] = [];
      let out = '';
      for await (const ev of sb.commands.stream(['python3', '-u', '-c', 'import time\nfor i in range(3):\n print(i); time.sleep(0.1)'])) {
        kinds.push(ev.kind);
        if (ev.kind === 'stdout') out += new TextDecoder().decode(ev.data);
        if (ev.kind === 'exit') assert.equal(ev.data.exitCode, 0);
      }
      assert.equal(out, '0\n1\n2\n');
      assert.equal(kinds.at(-1), 'exit');
    }),
  );

  it('round-trips a 1 MiB binary file, and manages files and directories', TEST, () =>
    withSandbox(async (sb) => {
      const data = new Uint8Array(randomBytes(1 << 20));
      await sb.files.write('/workspace/blob.bin', data);
      const back = await sb.files.read('/workspace/blob.bin');
      assert.equal(back.byteLength, data.byteLength);
      assert.ok(Buffer.from(back).equals(Buffer.from(data)), 'the bytes came back unchanged');
      const sum = await sb.commands.run('sha256sum blob.bin');
      assert.equal(sum.stdout.split(' ')[0], createHash('sha256').update(data).digest('hex'));

      await sb.files.write('notes.txt', 'héllo\n', { mode: 0o600 });
      assert.equal(await sb.files.readText('notes.txt'), 'héllo\n');
      const st = await sb.files.stat('notes.txt');
      assert.equal(st.kind, 'file');
      assert.equal(st.size, 7);
      assert.equal(st.mode & 0o777, 0o600);
      assert.equal(st.path, '/workspace/notes.txt');

      await sb.files.makeDir('d/e');
      await sb.files.makeDir('d/e'); // parents: no error when it exists
      await sb.files.rename('notes.txt', 'd/notes.txt');
      const names = (await sb.files.list('d')).map((e) => `${e.name}:${e.kind}`).sort();
      assert.deepEqual(names, ['e:dir', 'notes.txt:file']);
      assert.equal(await sb.files.exists('notes.txt'), false);
      assert.equal(await sb.files.exists('d/notes.txt'), true);
      await assert.rejects(sb.files.remove('d'), ConflictError);
      await sb.files.remove('d', { recursive: true });
      assert.equal(await sb.files.exists('d'), false);
    }),
  );

  it('runs background processes with stdin, logs, wait and kill', TEST, () =>
    withSandbox(async (sb) => {
      const p = await sb.commands.start('read line; echo got $line; read rest; echo "rest=$rest"; echo bye >&2; exit 4');
      assert.ok(p.pid > 0);
      await p.sendStdin('hello\n');
      await p.closeStdin();
      const r = await p.wait();
      assert.equal(r.stdout, 'got hello\nrest=\n');
      assert.equal(r.stderr, 'bye\n');
      assert.equal(r.exitCode, 4);
      assert.deepEqual(await p.logs(), ['got hello\nrest=\n', 'bye\n']);
      const info = await p.info();
      assert.equal(info.running, false);
      assert.equal(info.exitCode, 4);
      assert.ok((await sb.commands.list()).some((i) => i.pid === p.pid));

      const sleeper = await sb.commands.start(['sleep', '30']);
      assert.equal((await sleeper.info()).running, true);
      await assert.rejects(sleeper.wait({ timeoutMs: 300 }), (e: any) => e.code === 'timeout');
      assert.equal((await sleeper.info()).running, true, 'a wait that timed out leaves it running');
      assert.equal(await sleeper.kill(), true);
      const killed = await sleeper.wait();
      assert.equal(killed.signal, 9);
      assert.equal(await sleeper.kill(), false, 'it has exited already');

      const again = await sb.commands.connect(p.pid);
      assert.equal((await again.info()).exitCode, 4);

      const talker = await sb.commands.start('echo a; sleep 0.3; echo b');
      const kinds: string[] = [];
      for await (const ev of talker.stream()) kinds.push(ev.kind);
      assert.deepEqual(kinds.filter((k) => k !== 'stdout').concat(), ['exit']);
    }),
  );

  it('keeps state in a python context, and reports what a snippet raised', TEST, () =>
    withSandbox(async (sb) => {
      const ctx = await sb.contexts.create('python');
      assert.equal(ctx.language, 'python');
      assert.match(ctx.id, /^ctx-/);
      await ctx.run('x = 41');
      const e = await ctx.run('x + 1');
      assert.equal(e.text, '42');
      assert.equal(e.error, null);
      assert.equal(e.executionCount, 2);

      const bad = await ctx.run('1/0');
      assert.equal(bad.error?.name, 'ZeroDivisionError');
      assert.equal(bad.error?.value, 'division by zero');
      assert.ok(bad.error!.traceback.length > 0);
      assert.equal(bad.text, null);

      const out: string[] = [];
      const results: string[] = [];
      const s = await ctx.run('for i in range(3): print(i)\n"done"', {
        onStdout: (t) => void out.push(t),
        onResult: (r) => void results.push(r.text ?? ''),
      });
      assert.equal(out.join(''), '0\n1\n2\n');
      assert.deepEqual(results, ["'done'"]);
      assert.equal(s.text, "'done'");
      assert.equal(s.stdout, '0\n1\n2\n');

      assert.deepEqual((await sb.contexts.list()).map((c) => c.id), [ctx.id]);
      await ctx.restart();
      const lost = await ctx.run('x');
      assert.equal(lost.error?.name, 'NameError');
      await ctx.delete();
      assert.deepEqual(await sb.contexts.list(), []);
      await assert.rejects(ctx.run('1'), NotFoundError);
    }),
  );

  it('starts contexts with the sandbox, speaks javascript and bash, interrupts a snippet', TEST, async () => {
    await using sb = await Sandbox.create({ client, contexts: ['python'] });
    assert.deepEqual(sb.info.contexts.map((c) => c.language), ['python']);
    const [py] = await sb.contexts.list();
    assert.equal(py!.id, sb.info.contexts[0]!.contextId);
    const running = py!.run('import time\ntime.sleep(20)');
    await new Promise((r) => setTimeout(r, 300));
    await py!.interrupt();
    const stopped = await running;
    assert.equal(stopped.error?.name, 'KeyboardInterrupt');
    assert.equal((await py!.run('6 * 7')).text, '42', 'the context still works');

    const js = await sb.contexts.create('javascript');
    assert.equal((await js.run('const a = 20; a + 22')).text, '42');
    const sh = await sb.contexts.create('bash', { env: { GREETING: 'hi' } });
    const e = await sh.run('echo $GREETING; false');
    assert.equal(e.stdout, 'hi\n');
    assert.equal(e.exitCode, 1);
  });

  it('takes a sandbox from a warm pool and gives it back', TEST, async () => {
    const name = `ts-live-${process.pid}`;
    const pool = await client.pools.create({ name, size: 1, reuse: 'recycle', template: { limits: { timeoutMs: 10_000 } } });
    assert.equal(pool.name, name);
    assert.equal(pool.reuse, 'recycle');
    assert.equal(pool.template.limits?.timeoutMs, 10_000);
    try {
      await assert.rejects(client.pools.create({ name, size: 1 }), ConflictError);
      const t = Date.now();
      while ((await client.pools.get(name)).members.warm < 1) {
        assert.ok(Date.now() - t < 30_000, 'the pool warmed a sandbox within 30 s');
        await new Promise((r) => setTimeout(r, 100));
      }
      const sb = await Sandbox.create({ client, pool: name });
      assert.equal(sb.pool, name);
      assert.equal((await sb.commands.run('echo pooled')).stdout, 'pooled\n');
      await sb.kill();
      const after = await client.pools.get(name);
      assert.ok(after.hits >= 1, `hits: ${after.hits}`);
      assert.ok((await client.pools.list()).some((p) => p.name === name));
    } finally {
      await client.pools.delete(name);
    }
    await assert.rejects(client.pools.get(name), NotFoundError);
  });

  it('throws the typed errors the server answers with', TEST, () =>
    withSandbox(async (sb) => {
      await assert.rejects(Sandbox.connect('hutch-000000000000', { client }), (e: any) => {
        assert.ok(e instanceof NotFoundError);
        assert.equal(e.message, 'no sandbox hutch-000000000000');
        assert.equal(e.code, 'not_found');
        assert.equal(e.status, 404);
        return true;
      });
      await assert.rejects(Sandbox.create({ client, limits: { bogus: 1 } as any }), (e: any) => {
        assert.ok(e instanceof InvalidRequestError);
        assert.equal(e.code, 'invalid_request');
        assert.match(e.message, /bogus/);
        return true;
      });
      await assert.rejects(sb.files.read('../x'), (e: any) => e instanceof InvalidRequestError && e.code === 'invalid_path');
      await assert.rejects(sb.files.read('/etc/passwd'), (e: any) => e instanceof PermissionDeniedError && e.code === 'path_forbidden');
      await assert.rejects(sb.files.read('missing.txt'), NotFoundError);
      await assert.rejects(sb.commands.connect(99999), NotFoundError);
      await assert.rejects(sb.commands.run(['no-such-command-here']), NotFoundError);
    }),
  );

  it('uses API keys over TCP', TEST, async () => {
    const key = await client.keys.create({ name: 'ts-live', maxSandboxes: 2 });
    assert.match(key.secret!, /^hutch_/);
    assert.match(key.id, /^key_/);
    assert.equal(key.maxSandboxes, 2);
    const tcp = new Hutch({ url: daemon.tcpUrl, apiKey: key.secret! });
    assert.equal((await tcp.version()).version, '0.1.0');
    {
      await using sb = await Sandbox.create({ client: tcp });
      assert.equal((await sb.commands.run('echo tcp')).stdout, 'tcp\n');
    }
    await assert.rejects(tcp.pools.list().then(() => tcp.pools.create({ name: 'nope', size: 0 })), PermissionDeniedError);
    await assert.rejects(new Hutch({ url: daemon.tcpUrl, apiKey: '' }).version(), AuthenticationError);
    const listed = await client.keys.list();
    assert.ok(listed.some((k) => k.id === key.id && k.secret === null));
    await client.keys.revoke(key.id);
    await assert.rejects(tcp.version(), AuthenticationError);
  });

  it('says the daemon is unavailable when nothing listens on the socket', TEST, async () => {
    const missing = join(daemon.dir, 'missing.sock');
    await assert.rejects(Sandbox.create({ client: new Hutch({ url: `unix://${missing}` }) }), (e: any) => {
      assert.ok(e instanceof DaemonUnavailableError);
      assert.ok(e.message.includes(missing), e.message);
      assert.ok(e.message.includes('start it with: hutch serve'), e.message);
      return true;
    });
  });
});

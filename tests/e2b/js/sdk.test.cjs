// The stock `e2b` npm package against `hutch serve --e2b`, started by scripts/test-e2b.sh, which
// also sets E2B_API_KEY, E2B_API_URL and E2B_SANDBOX_URL.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { randomUUID } = require('node:crypto')
const { Sandbox, CommandExitError, FileType } = require('e2b')

async function withSandbox(fn) {
  const sbx = await Sandbox.create({ metadata: { test: randomUUID() } })
  try {
    await fn(sbx)
  } finally {
    await sbx.kill()
  }
}

test('foreground command with streaming callbacks, as the template user', () =>
  withSandbox(async (sbx) => {
    const out = []
    const r = await sbx.commands.run('whoami; pwd; echo err >&2', {
      onStdout: (d) => out.push(d),
    })
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'user\n/home/user\n')
    assert.equal(r.stderr, 'err\n')
    assert.equal(out.join(''), r.stdout)
    await assert.rejects(sbx.commands.run('exit 4'), (e) => e instanceof CommandExitError && e.exitCode === 4)
  }))

test('background commands: list, stdin, kill', () =>
  withSandbox(async (sbx) => {
    const cat = await sbx.commands.run('cat', { background: true, stdin: true })
    await sbx.commands.sendStdin(cat.pid, 'from js\n')
    await sbx.commands.closeStdin(cat.pid)
    const r = await cat.wait()
    assert.equal(r.stdout, 'from js\n')
    const sleeper = await sbx.commands.run('sleep 60', { background: true })
    const pids = (await sbx.commands.list()).map((p) => p.pid)
    assert.ok(pids.includes(sleeper.pid))
    assert.equal(await sbx.commands.kill(sleeper.pid), true)
    await assert.rejects(sleeper.wait())
    assert.equal(await sbx.commands.kill(sleeper.pid), false)
  }))

test('files: write, read, list, exists, rename, make_dir, remove', () =>
  withSandbox(async (sbx) => {
    const info = await sbx.files.write('js/hello.txt', 'hello from js')
    assert.equal(info.path, '/home/user/js/hello.txt')
    assert.equal(await sbx.files.read('js/hello.txt'), 'hello from js')
    assert.equal(await sbx.files.makeDir('js/sub'), true)
    assert.equal(await sbx.files.makeDir('js/sub'), false)
    const entries = await sbx.files.list('js')
    assert.deepEqual(entries.map((e) => e.name).sort(), ['hello.txt', 'sub'])
    assert.equal(entries.find((e) => e.name === 'sub').type, FileType.DIR)
    await sbx.files.rename('js/hello.txt', 'js/moved.txt')
    assert.equal(await sbx.files.exists('js/hello.txt'), false)
    assert.equal(await sbx.files.read('js/moved.txt'), 'hello from js')
    await sbx.files.remove('js')
    assert.equal(await sbx.files.exists('js'), false)
  }))

test('watch a directory', () =>
  withSandbox(async (sbx) => {
    await sbx.files.makeDir('w')
    let resolve
    const seen = new Promise((r) => (resolve = r))
    const handle = await sbx.files.watchDir('w', (e) => {
      if (e.name === 'f.txt') resolve(e)
    })
    try {
      await sbx.files.write('w/f.txt', 'x')
      const e = await Promise.race([seen, new Promise((_, rej) => setTimeout(() => rej(new Error('no event')), 10000))])
      assert.equal(e.name, 'f.txt')
    } finally {
      await handle.stop()
    }
  }))

test('timeout, list, connect from a second client, kill', async () => {
  const tag = randomUUID()
  const sbx = await Sandbox.create({ metadata: { test: tag } })
  const before = (await sbx.getInfo()).endAt
  await sbx.setTimeout(600_000)
  assert.ok((await sbx.getInfo()).endAt > before)
  const listed = await Sandbox.list({ query: { metadata: { test: tag } } }).nextItems()
  assert.deepEqual(listed.map((s) => s.sandboxId), [sbx.sandboxId])
  const other = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await other.commands.run('echo hi')).stdout, 'hi\n')
  assert.equal(await Sandbox.kill(sbx.sandboxId), true)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  assert.equal(await sbx.isRunning(), false)
})

test('a PTY session: input, resize, output', () =>
  withSandbox(async (sbx) => {
    const chunks = []
    const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => chunks.push(Buffer.from(d)) })
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size\n'))
    // resize once the first size is out
    for (let i = 0; i < 100 && !Buffer.concat(chunks).toString().includes('24 80'); i++) {
      await new Promise((r) => setTimeout(r, 100))
    }
    await sbx.pty.resize(term.pid, { cols: 100, rows: 40 })
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size; exit 0\n'))
    const r = await term.wait()
    assert.equal(r.exitCode, 0)
    const text = Buffer.concat(chunks).toString()
    assert.match(text, /24 80/)
    assert.match(text, /40 100/)
  }))

test('an unsupported feature is a clear error', () =>
  withSandbox(async (sbx) => {
    await assert.rejects(sbx.commands.run('id', { user: 'root' }), /user 'root'/)
  }))

// hutch JavaScript runner: one persistent vm context per code context (see README.md).
// Started as `node -e <this file>`. Requests arrive on fd 3 as "run <seq> <nbytes>\n" +
// <nbytes> of UTF-8 code; events leave on fd 4 as one JSON object per line: ready (once),
// result*, error?, done (always last for a run). All console/process.stdout output is
// written synchronously to fd 1/2, so it precedes the events of its run. SIGINT interrupts
// the running snippet (or the await of its promise) and is ignored while idle.
'use strict';
const fs = require('fs'), net = require('net'), vm = require('vm'), util = require('util');
const { Writable } = require('stream'), Module = require('module');

const nap = new Int32Array(new SharedArrayBuffer(4));
function writeAll(fd, buf) {
  for (let off = 0; off < buf.length;) {
    try { off += fs.writeSync(fd, buf, off); }
    catch (e) { if (e.code !== 'EAGAIN') throw e; Atomics.wait(nap, 0, 0, 1); }
  }
}
function toBuffer(chunk, enc) {
  if (typeof chunk === 'string') return Buffer.from(chunk, typeof enc === 'string' ? enc : 'utf8');
  return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}
// Synchronous stand-ins for process.stdout/stderr (never creating Node's async pipe streams,
// which would also make fd 1/2 non-blocking for child processes).
function syncStream(fd) {
  const stream = new Writable();
  stream.write = (chunk, enc, cb) => {
    writeAll(fd, toBuffer(chunk, enc));
    const done = typeof enc === 'function' ? enc : cb;
    if (typeof done === 'function') process.nextTick(done);
    return true;
  };
  stream.fd = fd;
  stream.isTTY = false;
  return stream;
}
for (const [name, fd] of [['stdout', 1], ['stderr', 2]]) {
  Object.defineProperty(process, name, { value: syncStream(fd), configurable: true, enumerable: true });
}
const con = new console.Console({ stdout: process.stdout, stderr: process.stderr });
globalThis.console = con;

// Events wait in `held` while a run's last steps queue them, so the main result and `done`
// leave in one write (one wake-up of the agent instead of two).
let held = null;
function emit(ev) {
  const line = JSON.stringify(ev) + '\n';
  if (held) { held.push(line); return; }
  try { writeAll(4, Buffer.from(line)); } catch { process.exit(1); } // agent gone
}
function release() {
  const lines = held; held = null;
  if (lines && lines.length) try { writeAll(4, Buffer.from(lines.join(''))); } catch { process.exit(1); }
}
let count = 0, curSeq = 0, interruptWait = null;
// import() from snippets via the main context's loader (where this Node has it); no warning.
const importModuleDynamically = vm.constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER;
const emitWarning = process.emitWarning;
process.emitWarning = function (warning, ...rest) {
  if (!String(warning?.message ?? warning).includes('USE_MAIN_CONTEXT_DEFAULT_LOADER')) emitWarning.call(this, warning, ...rest);
};

function bundle(value) {
  const data = { 'text/plain': util.inspect(value, { depth: 4 }) };
  if (value !== null && typeof value === 'object') {
    const proto = Object.getPrototypeOf(value);
    if (Array.isArray(value) || proto === null || Object.getPrototypeOf(proto) === null) {
      try { data['application/json'] = JSON.parse(JSON.stringify(value)); } catch {}
    }
  }
  return data;
}
function display(...values) {
  for (const v of values) emit({ ev: 'result', seq: curSeq, main: false, data: bundle(v) });
}

// The persistent context: Node's globals (fetch, URL, Buffer, timers, ...) plus our own.
const sandbox = {};
const builtins = new Set(vm.runInNewContext('Object.getOwnPropertyNames(globalThis)'));
for (const name of Object.getOwnPropertyNames(globalThis)) {
  if (builtins.has(name)) continue;
  const d = Object.getOwnPropertyDescriptor(globalThis, name); // accessors run against the real global
  if (d.get) d.get = ((get) => () => get.call(globalThis))(d.get);
  if (d.set) d.set = ((set) => (v) => set.call(globalThis, v))(d.set);
  Object.defineProperty(sandbox, name, d);
}
const userRequire = (id) => Module.createRequire(process.cwd() + '/')(id); // relative to the current cwd
userRequire.resolve = (id, opts) => Module.createRequire(process.cwd() + '/').resolve(id, opts);
userRequire.cache = Module._cache;
Object.assign(sandbox, { console: con, require: userRequire, display });
const ctx = vm.createContext(sandbox);
vm.runInContext('globalThis.global = globalThis', ctx);

// Top-level await: compile `(async () => {<head>return (<tail>)})()` for split points after
// a `;` or newline, shortest tail first. The head must compile alone and the tail must not
// continue its last statement, so a split never changes the meaning. Names declared in the
// snippet are copied to globalThis before the return (the function's own bindings are local).
function asyncScript(code, filename) {
  const names = new Set([...code.matchAll(/\b(?:let|const|var|function\*?|class)\s+([\w$]+|\{[^}]*\}|\[[^\]]*\])/g)]
    .flatMap((m) => m[1].match(/[A-Za-z_$][\w$]*/g) || []));
  const hoist = [...names].map((n) => `try{globalThis.${n}=${n}}catch{}`)
    .filter((h) => compile(`(async () => {${h}})`, filename)).join('');
  const points = [];
  for (let p = code.length; p > 0 && points.length < 100; p--) if (/[;\n]/.test(code[p - 1])) points.push(p);
  for (const p of [...points, 0]) {
    const head = code.slice(0, p), tail = code.slice(p).replace(/[;\s]+$/, '');
    if (!tail.trim() || /^\s*([{]|(async\s+)?function\b|class\b)/.test(tail)) continue; // declarations, blocks
    if (head.endsWith(';') && compile(`(async () => {${head})\n})`, filename)) continue; // `;` inside a // comment
    if (/[^;\s]\s*$/.test(head) && /^\s*([-([`+*/%&|^<>=?:.,]|in\b|instanceof\b)/.test(tail)) continue;
    const script = compile(`(async () => {${head}${hoist}return (${tail}\n)})()`, filename);
    if (script && compile(`(async () => {${head}\n})`, filename)) return script;
  }
  return compile(`(async () => {${code}\n;${hoist}})()`, filename);
}

function compile(source, filename) {
  try { return new vm.Script(source, { filename, importModuleDynamically }); } catch { return null; }
}

function interruptible(promise) {
  return new Promise((resolve, reject) => {
    interruptWait = () => reject(Object.assign(new Error('Script execution was interrupted by `SIGINT`'),
      { code: 'ERR_SCRIPT_EXECUTION_INTERRUPTED' }));
    promise.then(resolve, reject);
  }).finally(() => { interruptWait = null; });
}

function emitError(seq, e) {
  let name = 'Uncaught', value, traceback = [];
  try {
    if (e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
      name = 'Interrupted'; value = String(e.message);
    } else if (util.types.isNativeError(e) || (e !== null && typeof e === 'object' && 'stack' in e)) {
      name = String(e.name || 'Error'); value = String(e.message ?? '');
      // Keep the message lines and the stack frames down to the last one in a cell.
      const lines = String(e.stack).split('\n'), isFrame = (l) => /^\s+at /.test(l);
      const last = lines.findLastIndex((l) => isFrame(l) && /\bcell-\d+\b/.test(l));
      traceback = lines.filter((l, i) => !isFrame(l) || i <= last);
    } else {
      value = util.inspect(e);
    }
  } catch (err) {
    value = 'unprintable error';
  }
  emit({ ev: 'error', seq, name, value, traceback });
}

// Runs one snippet. Synchronous unless the snippet's value is a promise (then it returns one):
// the common case costs no promise machinery.
function run(seq, code) {
  const n = ++count, filename = `cell-${n}`;
  curSeq = seq;
  let value;
  try {
    let script = compile(code, filename);
    // Top-level await: the snippet is no valid script, or it is one only because `await (x)`
    // parses as a call there (a class static block rejects `await` outside async functions).
    if (/\bawait\b/.test(code) && (!script || !compile(`(class { static {${code}\n} })`, filename))) {
      script = asyncScript(code, filename) || script;
    }
    script = script || new vm.Script(code, { filename }); // throws the SyntaxError
    // The SIGINT watchdog costs ~75 us per run; a snippet that calls, constructs, accesses a
    // property or loops can run unbounded and gets it, a bare expression like `1+1` cannot.
    // (If something slips through, the agent restarts the context at the deadline and says so.)
    const guard = /[(`.]|\bnew\b|\b(?:while|for|do)\b/.test(code);
    value = script.runInContext(ctx, guard ? { breakOnSigint: true } : undefined);
  } catch (e) {
    return finish(seq, n, false, undefined, e);
  }
  if (util.types.isPromise(value)) {
    return interruptible(value).then((v) => finish(seq, n, true, v), (e) => finish(seq, n, false, undefined, e));
  }
  return finish(seq, n, true, value);
}

function finish(seq, n, ok, value, error) {
  held = [];
  if (!ok) emitError(seq, error);
  else if (value !== undefined) {
    try { emit({ ev: 'result', seq, main: true, data: bundle(value) }); } catch (e) { emitError(seq, e); }
  }
  emit({ ev: 'done', seq, execution_count: n });
  release();
}

// User code's stray errors must not kill the runner: report them on stderr.
const stray = (e) => {
  try { writeAll(2, Buffer.from(`Uncaught ${util.types.isNativeError(e) ? e.stack : util.inspect(e)}\n`)); } catch {}
};
process.on('uncaughtException', stray);
process.on('unhandledRejection', stray);
process.on('SIGINT', () => { if (interruptWait) interruptWait(); });

let pending = Buffer.alloc(0), busy = false, ended = false;
const queue = [];
function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) {
    const pending = run(...queue.shift());
    if (pending) { // a promise-valued snippet: go on when it settles
      pending.then(() => { busy = false; pump(); });
      return;
    }
  }
  busy = false;
  if (ended) process.exit(0);
}
const input = new net.Socket({ fd: 3, readable: true, writable: false });
input.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  for (let nl; (nl = pending.indexOf(10)) >= 0;) {
    const [cmd, seq, nbytes] = pending.subarray(0, nl).toString().trim().split(/\s+/);
    const len = Number(nbytes), end = nl + 1 + len;
    if (!Number.isInteger(len) || len < 0) { pending = pending.subarray(nl + 1); continue; }
    if (pending.length < end) break;
    if (cmd === 'run') queue.push([Number(seq), pending.subarray(nl + 1, end).toString('utf8')]);
    pending = pending.subarray(end);
  }
  pump();
});
input.on('end', () => { ended = true; pump(); });
input.on('error', () => { ended = true; pump(); });
emit({ ev: 'ready', lang: 'javascript', version: process.versions.node, pid: process.pid });

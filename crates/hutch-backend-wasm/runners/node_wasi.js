// hutch JavaScript runner for the wasm backend: one resident QuickJS (WASI) instance per code
// context (see README.md). Started as `node --no-warnings -e <this file>`. WASI gives only
// fds 0-2: requests arrive on stdin, one JSON object per line; everything goes out on stdout
// as frames, "\x1e" + one JSON object + "\n": user output ({"t":"out"|"err","d":text}) and
// events (ready, result*, error?, done). The guest's writer (console, process.stdout/stderr,
// print) is replaced so user output is framed and never mixes with the events.
(function () {
  const H = globalThis.__hutchInternal;
  if (!H || typeof H.readLine !== 'function' || typeof H.setWriter !== 'function') {
    console.error('this qjs.wasm predates resident runners: rebuild the guests (scripts/build-wasm-guests.sh)');
    process.exit(70);
  }
  const util = require('util');
  const RUN = { seq: 0, count: 0, limit: 0, sent: [0, 0] };
  let raw = null;

  function frame(obj) {
    raw(1, '\x1e' + JSON.stringify(obj) + '\n');
  }

  // User output of stream k (0 stdout, 1 stderr). Past the snippet's limit nothing more is
  // sent: one UTF-16 unit more than the limit (at least as many bytes) tells the host to cut.
  function send(k, text) {
    const room = RUN.limit + 1 - RUN.sent[k];
    if (!text || room <= 0) return;
    if (text.length > room) text = text.slice(0, room);
    RUN.sent[k] += text.length;
    frame({ t: k ? 'err' : 'out', d: text });
  }
  raw = H.setWriter((fd, s) => send(fd === 2 ? 1 : 0, String(s)));

  function isPlain(v) {
    if (Array.isArray(v)) return true;
    if (v === null || typeof v !== 'object') return false;
    const p = Object.getPrototypeOf(v);
    return p === Object.prototype || p === null;
  }

  function bundle(v) {
    const data = { 'text/plain': util.inspect(v, { depth: 4 }) };
    if (isPlain(v)) {
      try {
        data['application/json'] = JSON.parse(JSON.stringify(v));
      } catch (e) { /* cycles, BigInt: text only */ }
    }
    return data;
  }

  globalThis.display = (...values) => {
    for (const v of values) frame({ t: 'result', seq: RUN.seq, main: false, data: bundle(v) });
  };

  function errorEvent(e) {
    if (!(e instanceof Error)) {
      return { name: 'Uncaught', value: util.inspect(e), traceback: [] };
    }
    const lines = String(e.stack || '').split('\n').filter((l) => l.trim() !== '');
    let last = -1;
    lines.forEach((l, i) => { if (l.includes('cell-')) last = i; });
    const stack = last >= 0 ? lines.slice(0, last + 1) : [];
    return { name: e.name || 'Error', value: String(e.message), traceback: [`${e.name}: ${e.message}`, ...stack] };
  }

  const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;

  // A snippet that only parses with top-level await runs as the body of an async function
  // whose last statement is returned: split points after ';' and newlines are tried from
  // the end, the first that compiles wins; without one, the snippet gives no value.
  function compileAwait(code) {
    const cuts = [0];
    for (let i = 0; i < code.length; i++) if (code[i] === ';' || code[i] === '\n') cuts.push(i + 1);
    for (const cut of cuts.reverse().slice(0, 64)) {
      const tail = code.slice(cut).trim().replace(/;$/, '');
      if (!tail) continue;
      try {
        return new AsyncFunction(code.slice(0, cut) + '\nreturn (' + tail + '\n);');
      } catch (e) { /* not an expression there */ }
    }
    return new AsyncFunction(code);
  }

  async function run(code) {
    RUN.count += 1;
    const name = `cell-${RUN.count}`;
    try {
      let value;
      try {
        value = H.evalScript(code, name);
      } catch (e) {
        if (!(e instanceof SyntaxError) || !/\bawait\b/.test(code)) throw e;
        let f;
        try {
          f = compileAwait(code);
        } catch (_) {
          throw e;
        }
        value = f();
      }
      if (value && typeof value.then === 'function') value = await value;
      if (value !== undefined) frame({ t: 'result', seq: RUN.seq, main: true, data: bundle(value) });
    } catch (e) {
      frame({ t: 'error', seq: RUN.seq, ...errorEvent(e) });
    }
  }

  function next() {
    const line = H.readLine();
    if (line === null) return; // end of requests: the instance ends
    let req;
    try {
      req = JSON.parse(line);
    } catch (e) {
      setTimeout(next, 0);
      return;
    }
    RUN.seq = Number(req.seq);
    RUN.limit = Number(req.limit);
    RUN.sent = [0, 0];
    run(String(req.code)).then(() => {
      frame({ t: 'done', seq: RUN.seq, execution_count: RUN.count });
      setTimeout(next, 0); // timers and jobs the snippet left run before the next request
    });
  }

  frame({ t: 'ready', lang: 'javascript', version: process.version });
  setTimeout(next, 0);
})();

// hutch QuickJS guest prelude: the Node-like globals (console, process,
// timers, a small require) on top of the natives main.c passes in.
// The file is one function expression; main.c calls it with the natives,
// possibly at build time (wizer snapshot): anything that depends on the
// instance (argv, env, clocks) is set by __hutchInternal.start at run time.
(function (native) {
  'use strict';
  const global = globalThis;

  // ---- inspect: Node's util.inspect output format, defaults only ----------
  const BREAK_LENGTH = 80;
  const MAX_DEPTH = 2;
  const MAX_ARRAY = 100;
  const MAX_STRING = 10000;
  const COMPACT = 3;
  const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

  function quote(s) {
    let q = "'";
    if (s.includes("'")) {
      if (!s.includes('"')) q = '"';
      else if (!s.includes('`') && !s.includes('${')) q = '`';
    }
    let out = q;
    for (let i = 0; i < s.length; i++) {
      const c = s[i];
      const code = s.charCodeAt(i);
      if (c === q || c === '\\') out += '\\' + c;
      else if (c === '\n') out += '\\n';
      else if (c === '\t') out += '\\t';
      else if (c === '\r') out += '\\r';
      else if (c === '\b') out += '\\b';
      else if (c === '\f') out += '\\f';
      else if (c === '\v') out += '\\x0B';
      else if (code < 0x20 || code === 0x7f) out += '\\x' + code.toString(16).toUpperCase().padStart(2, '0');
      else out += c;
    }
    return out + q;
  }

  function formatKey(key) {
    if (typeof key === 'symbol') return '[' + key.toString() + ']';
    return IDENT.test(key) ? key : quote(key);
  }

  function formatNumber(n) {
    return Object.is(n, -0) ? '-0' : String(n);
  }

  function formatPrimitive(v) {
    switch (typeof v) {
      case 'string':
        if (v.length > MAX_STRING) {
          return quote(v.slice(0, MAX_STRING)) + `... ${v.length - MAX_STRING} more character${v.length - MAX_STRING > 1 ? 's' : ''}`;
        }
        return quote(v);
      case 'number': return formatNumber(v);
      case 'bigint': return v + 'n';
      case 'boolean': return String(v);
      case 'undefined': return 'undefined';
      case 'symbol': return v.toString();
    }
    return String(v);
  }

  function constructorName(obj) {
    let o = obj;
    while (o !== null && o !== undefined) {
      const d = Object.getOwnPropertyDescriptor(o, 'constructor');
      if (d && typeof d.value === 'function' && d.value.name !== '') return d.value.name;
      o = Object.getPrototypeOf(o);
    }
    return null;
  }

  function functionBase(fn) {
    const src = Function.prototype.toString.call(fn);
    if (src.startsWith('class') && /^class\b/.test(src)) {
      let s = '[class ' + (fn.name || '(anonymous)');
      const proto = Object.getPrototypeOf(fn);
      if (proto && proto !== Function.prototype && proto.name) s += ' extends ' + proto.name;
      return s + ']';
    }
    let kind = 'Function';
    const ctor = constructorName(fn);
    if (ctor === 'AsyncFunction') kind = 'AsyncFunction';
    else if (ctor === 'GeneratorFunction') kind = 'GeneratorFunction';
    else if (ctor === 'AsyncGeneratorFunction') kind = 'AsyncGeneratorFunction';
    return `[${kind}${fn.name ? ': ' + fn.name : ' (anonymous)'}]`;
  }

  function errorText(err) {
    let name = 'Error', message = '';
    try { name = String(err.name); } catch (e) { /* keep default */ }
    try { message = err.message === undefined ? '' : String(err.message); } catch (e) { /* keep default */ }
    const head = message ? `${name}: ${message}` : name;
    const stack = typeof err.stack === 'string' ? err.stack.replace(/\s+$/, '') : '';
    return stack ? `${head}\n${stack}` : `[${head}]`;
  }

  function isBelowBreakLength(ctx, output, start, base) {
    let total = output.length + start;
    if (total + output.length > BREAK_LENGTH) return false;
    for (const s of output) {
      total += s.length;
      if (total > BREAK_LENGTH) return false;
    }
    return base === '' || !base.includes('\n');
  }

  // Lays long arrays of short items out in aligned columns, as Node does.
  function groupColumns(ctx, output, value) {
    let count = output.length;
    const hasMore = ctx.moreItems;
    if (hasMore) count--;
    const sep = 2;
    const widths = [];
    let total = 0, widest = 0;
    for (let i = 0; i < count; i++) {
      const w = output[i].length;
      widths.push(w);
      total += w + sep;
      if (w > widest) widest = w;
    }
    const cell = widest + sep;
    if (!(cell * 3 + ctx.indent < BREAK_LENGTH && (total / cell > 5 || widest <= 6))) return output;
    const bias = Math.sqrt(cell - total / output.length);
    const biased = Math.max(cell - 3 - bias, 1);
    const columns = Math.min(
      Math.round(Math.sqrt(2.5 * biased * count) / biased),
      Math.floor((BREAK_LENGTH - ctx.indent) / cell),
      COMPACT * 4,
      15);
    if (columns <= 1) return output;
    const colWidth = [];
    for (let c = 0; c < columns; c++) {
      let w = 0;
      for (let j = c; j < count; j += columns) if (widths[j] > w) w = widths[j];
      colWidth.push(w + sep);
    }
    let numeric = value !== undefined;
    if (numeric) {
      for (let i = 0; i < count; i++) {
        const t = typeof value[i];
        if (t !== 'number' && t !== 'bigint') { numeric = false; break; }
      }
    }
    const rows = [];
    for (let i = 0; i < count; i += columns) {
      const end = Math.min(i + columns, count);
      let line = '';
      let j = i;
      for (; j < end - 1; j++) {
        const cellText = output[j] + ', ';
        line += numeric ? cellText.padStart(colWidth[j - i]) : cellText.padEnd(colWidth[j - i]);
      }
      line += numeric ? output[j].padStart(colWidth[j - i] - sep) : output[j];
      rows.push(line);
    }
    if (hasMore) rows.push(output[count]);
    return rows;
  }

  function reduceToSingleString(ctx, output, base, braces, isArrayLike, depth) {
    const entries = output.length;
    if (isArrayLike && entries > 6) output = groupColumns(ctx, output, ctx.groupValue);
    if (ctx.currentDepth - depth < COMPACT && entries === output.length) {
      const start = output.length + ctx.indent + braces[0].length + base.length + 10;
      if (isBelowBreakLength(ctx, output, start, base)) {
        const joined = output.join(', ');
        if (!joined.includes('\n')) {
          return (base ? base + ' ' : '') + braces[0] + ' ' + joined + ' ' + braces[1];
        }
      }
    }
    const nl = '\n' + ' '.repeat(ctx.indent);
    return (base ? base + ' ' : '') + braces[0] + nl + '  ' + output.join(',' + nl + '  ') + nl + braces[1];
  }

  function formatProperty(ctx, obj, key, depth, arrayItem) {
    const desc = Object.getOwnPropertyDescriptor(obj, key) || { value: obj[key], enumerable: true };
    let str;
    if ('value' in desc) {
      ctx.indent += 2;
      str = formatValue(ctx, desc.value, depth + 1);
      ctx.indent -= 2;
    } else if (desc.get) {
      str = desc.set ? '[Getter/Setter]' : '[Getter]';
    } else {
      str = desc.set ? '[Setter]' : 'undefined';
    }
    if (arrayItem) return str;
    return formatKey(key) + ': ' + str;
  }

  function ownKeys(obj, skipIndices) {
    const keys = [];
    for (const k of Object.keys(obj)) {
      if (skipIndices && String(k >>> 0) === k && (k >>> 0) !== 4294967295) continue;
      keys.push(k);
    }
    for (const s of Object.getOwnPropertySymbols(obj)) {
      const d = Object.getOwnPropertyDescriptor(obj, s);
      if (d && d.enumerable) keys.push(s);
    }
    return keys;
  }

  function formatList(ctx, value, depth, length, getItem) {
    const out = [];
    const shown = Math.min(length, MAX_ARRAY);
    let holes = 0;
    const flushHoles = () => {
      if (holes > 0) { out.push(`<${holes} empty item${holes > 1 ? 's' : ''}>`); holes = 0; }
    };
    for (let i = 0; i < shown; i++) {
      const item = getItem(i);
      if (item === HOLE) { holes++; continue; }
      flushHoles();
      out.push(item);
    }
    flushHoles();
    ctx.moreItems = length > shown;
    if (length > shown) out.push(`... ${length - shown} more item${length - shown > 1 ? 's' : ''}`);
    return out;
  }
  const HOLE = {};

  function formatValue(ctx, value, depth) {
    if (value === null) return 'null';
    if (typeof value !== 'object' && typeof value !== 'function') return formatPrimitive(value);
    if (ctx.seen.includes(value)) {
      let idx = ctx.circular.get(value);
      if (idx === undefined) { idx = ctx.circular.size + 1; ctx.circular.set(value, idx); }
      return `[Circular *${idx}]`;
    }
    return formatRaw(ctx, value, depth);
  }

  function formatRaw(ctx, value, depth) {
    const ctor = constructorName(value);
    const proto = Object.getPrototypeOf(value);
    let base = '';
    let braces = ['{', '}'];
    let output = [];
    let keys;
    let isArrayLike = false;
    let prefix = '';

    if (typeof value === 'function') {
      base = functionBase(value);
      keys = ownKeys(value, false).filter((k) => k !== 'prototype');
      if (keys.length === 0) return base;
    } else if (Array.isArray(value)) {
      prefix = ctor === 'Array' ? '' : (ctor === null ? '[Array(' + value.length + '): null prototype] ' : ctor + '(' + value.length + ') ');
      braces = [prefix + '[', ']'];
      isArrayLike = true;
      keys = ownKeys(value, true);
      if (value.length === 0 && keys.length === 0) return braces[0] + ']';
    } else if (ArrayBuffer.isView(value) && !(value instanceof DataView)) {
      braces = [`${ctor}(${value.length}) [`, ']'];
      isArrayLike = true;
      keys = [];
      if (value.length === 0) return braces[0] + ']';
    } else if (value instanceof Map) {
      keys = ownKeys(value, false);
      braces = [`${ctor}(${value.size}) {`, '}'];
      if (value.size === 0 && keys.length === 0) return braces[0] + '}';
    } else if (value instanceof Set) {
      keys = ownKeys(value, false);
      braces = [`${ctor}(${value.size}) {`, '}'];
      if (value.size === 0 && keys.length === 0) return braces[0] + '}';
    } else if (value instanceof Error) {
      base = errorText(value);
      keys = ownKeys(value, false).filter((k) => k !== 'stack' && k !== 'message');
      if (keys.length === 0) return base;
    } else if (value instanceof RegExp) {
      base = RegExp.prototype.toString.call(value);
      keys = ownKeys(value, false).filter((k) => k !== 'lastIndex');
      if (keys.length === 0) return base;
    } else if (value instanceof Date) {
      base = isNaN(value.getTime()) ? 'Invalid Date' : value.toISOString();
      keys = ownKeys(value, false);
      if (keys.length === 0) return base;
    } else if (value instanceof Promise) {
      keys = ownKeys(value, false);
      braces = ['Promise {', '}'];
      output.push('<unknown>');
    } else if (value instanceof WeakMap || value instanceof WeakSet) {
      return `${ctor} { <items unknown> }`;
    } else if (value instanceof ArrayBuffer) {
      const bytes = new Uint8Array(value);
      const hex = [];
      for (let i = 0; i < Math.min(bytes.length, 50); i++) hex.push(bytes[i].toString(16).padStart(2, '0'));
      return `ArrayBuffer { [Uint8Contents]: <${hex.join(' ')}${bytes.length > 50 ? ` ... ${bytes.length - 50} more bytes` : ''}>, byteLength: ${bytes.length} }`;
    } else if (value instanceof Number || value instanceof String || value instanceof Boolean ||
               (typeof BigInt === 'function' && value instanceof BigInt) || value instanceof Symbol) {
      const prim = value.valueOf();
      const type = typeof prim === 'bigint' ? 'BigInt' : (typeof prim)[0].toUpperCase() + (typeof prim).slice(1);
      base = `[${type}: ${formatPrimitive(prim)}]`;
      keys = ownKeys(value, typeof prim === 'string');
      if (keys.length === 0) return base;
    } else {
      keys = ownKeys(value, false);
      if (proto === null) braces = ['[Object: null prototype] {', '}'];
      else if (ctor !== 'Object' && ctor !== null) braces = [ctor + ' {', '}'];
      const tag = value[Symbol.toStringTag];
      if (typeof tag === 'string' && tag !== '' && tag !== ctor) {
        braces[0] = (ctor === null ? '[Object: null prototype]' : ctor === 'Object' ? 'Object' : ctor) + ` [${tag}] {`;
      }
      if (keys.length === 0) {
        if (braces[0] === '{') return '{}';
        return braces[0] + '}';
      }
    }

    if (depth > MAX_DEPTH) {
      if (Array.isArray(value)) return '[Array]';
      return `[${ctor === null ? 'Object: null prototype' : ctor}]`;
    }

    ctx.seen.push(value);
    ctx.currentDepth = depth;
    if (Array.isArray(value)) {
      output = formatList(ctx, value, depth, value.length,
        (i) => (Object.prototype.hasOwnProperty.call(value, i) ? formatProperty(ctx, value, String(i), depth, true) : HOLE));
    } else if (isArrayLike) {
      output = formatList(ctx, value, depth, value.length, (i) => {
        const v = value[i];
        return typeof v === 'bigint' ? v + 'n' : formatNumber(v);
      });
    } else if (value instanceof Map) {
      ctx.indent += 2;
      for (const [k, v] of value) output.push(formatValue(ctx, k, depth + 1) + ' => ' + formatValue(ctx, v, depth + 1));
      ctx.indent -= 2;
    } else if (value instanceof Set) {
      ctx.indent += 2;
      for (const v of value) output.push(formatValue(ctx, v, depth + 1));
      ctx.indent -= 2;
    }
    const moreItems = ctx.moreItems;
    for (const k of keys) output.push(formatProperty(ctx, value, k, depth, false));
    ctx.seen.pop();

    const ref = ctx.circular.get(value);
    if (ref !== undefined) {
      const tagRef = `<ref *${ref}>`;
      base = base ? tagRef + ' ' + base : tagRef;
    }
    ctx.moreItems = moreItems;
    ctx.groupValue = isArrayLike ? value : undefined;
    const res = reduceToSingleString(ctx, output, base, braces, isArrayLike, depth);
    ctx.moreItems = false;
    return res;
  }

  function inspect(value, opts) {
    const ctx = { seen: [], circular: new Map(), indent: 0, currentDepth: 0, moreItems: false, groupValue: undefined };
    return formatValue(ctx, value, 0);
  }

  function format(...args) {
    if (args.length === 0) return '';
    const first = args[0];
    let out = '';
    let next = 1;
    if (typeof first === 'string') {
      if (args.length === 1) return first;
      let last = 0;
      for (let i = 0; i < first.length - 1; i++) {
        if (first[i] !== '%') continue;
        const c = first[i + 1];
        let piece;
        if (c === '%') { out += first.slice(last, i) + '%'; last = i + 2; i++; continue; }
        if (next >= args.length) continue;
        const a = args[next];
        switch (c) {
          case 's':
            piece = typeof a === 'string' ? a : typeof a === 'bigint' ? a + 'n'
              : (typeof a === 'object' && a !== null) ? inspect(a) : formatPrimitive(a);
            if (typeof a === 'symbol' || typeof a === 'number' || typeof a === 'boolean' || a === undefined) piece = typeof a === 'number' ? formatNumber(a) : String(a);
            break;
          case 'd': piece = typeof a === 'bigint' ? a + 'n' : (typeof a === 'symbol' ? 'NaN' : formatNumber(Number(a))); break;
          case 'i': piece = typeof a === 'bigint' ? a + 'n' : (typeof a === 'symbol' ? 'NaN' : formatNumber(parseInt(a))); break;
          case 'f': piece = typeof a === 'symbol' ? 'NaN' : formatNumber(parseFloat(a)); break;
          case 'j': try { piece = JSON.stringify(a); } catch (e) { piece = '[Circular]'; } break;
          case 'o': case 'O': piece = inspect(a); break;
          case 'c': piece = ''; break;
          default: continue;
        }
        out += first.slice(last, i) + piece;
        last = i + 2;
        i++;
        next++;
      }
      out += first.slice(last);
    } else {
      out = inspect(first);
    }
    for (; next < args.length; next++) {
      const a = args[next];
      out += ' ' + (typeof a === 'string' ? a : inspect(a));
    }
    return out;
  }

  // ---- console ----------------------------------------------------------
  // every write of console, process.stdout/stderr and print goes through `write`; a
  // resident runner replaces it (setWriter) to frame user output
  let write = native.write;
  let groupIndent = '';
  function emit(fd, args) {
    let text = format(...args);
    if (groupIndent) text = groupIndent + text.split('\n').join('\n' + groupIndent);
    write(fd, text + '\n');
  }
  const counts = new Map();
  const timers = new Map();
  const consoleObj = {
    log: (...a) => emit(1, a),
    info: (...a) => emit(1, a),
    debug: (...a) => emit(1, a),
    error: (...a) => emit(2, a),
    warn: (...a) => emit(2, a),
    trace: (...a) => {
      const e = new Error();
      emit(2, [['Trace' + (a.length ? ': ' + format(...a) : ''), String(e.stack || '').replace(/\s+$/, '')].filter(Boolean).join('\n')]);
    },
    dir: (v) => emit(1, [inspect(v)]),
    assert: (cond, ...a) => {
      if (!cond) emit(2, a.length ? ['Assertion failed: ' + format(...a)] : ['Assertion failed']);
    },
    count: (label = 'default') => {
      const n = (counts.get(label) || 0) + 1;
      counts.set(label, n);
      emit(1, [`${label}: ${n}`]);
    },
    countReset: (label = 'default') => counts.delete(label),
    time: (label = 'default') => timers.set(label, native.now()),
    timeLog: (label = 'default', ...a) => {
      const t = timers.get(label);
      if (t !== undefined) emit(1, [`${label}: ${(native.now() - t).toFixed(3)}ms`, ...a]);
    },
    timeEnd: (label = 'default') => {
      const t = timers.get(label);
      if (t !== undefined) { emit(1, [`${label}: ${(native.now() - t).toFixed(3)}ms`]); timers.delete(label); }
    },
    group: (...a) => { if (a.length) emit(1, a); groupIndent += '  '; },
    groupEnd: () => { groupIndent = groupIndent.slice(2); },
    table: (v) => emit(1, [v]),
  };
  consoleObj.groupCollapsed = consoleObj.group;

  // ---- process ----------------------------------------------------------
  const exitHandlers = [];
  const processObj = {
    argv: [],
    argv0: 'node',
    execPath: 'node',
    execArgv: [],
    env: {},
    exitCode: undefined,
    platform: 'wasi',
    arch: 'wasm32',
    pid: 1,
    ppid: 0,
    version: 'v0.0.0-quickjs-' + native.version,
    versions: { quickjs: native.version },
    release: { name: 'quickjs' },
    exit(code) {
      if (code === undefined) code = processObj.exitCode;
      const c = code === undefined ? 0 : Number(code) | 0;
      runExitHandlers(c);
      native.exit(c);
    },
    cwd: () => native.cwd(),
    chdir: (d) => native.chdir(String(d)),
    hrtime: Object.assign((prev) => {
      const ns = Math.round(native.now() * 1e6);
      let s = Math.floor(ns / 1e9), n = ns % 1e9;
      if (prev) { s -= prev[0]; n -= prev[1]; if (n < 0) { s--; n += 1e9; } }
      return [s, n];
    }, { bigint: () => BigInt(Math.round(native.now() * 1e6)) }),
    uptime: () => native.now() / 1e3,
    memoryUsage: () => ({ rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 }),
    nextTick: (fn, ...a) => { Promise.resolve().then(() => fn(...a)); },
    on(ev, fn) { if (ev === 'exit') exitHandlers.push(fn); return processObj; },
    once(ev, fn) { return processObj.on(ev, fn); },
    off() { return processObj; },
    emitWarning: (w) => emit(2, [`(node) Warning: ${w instanceof Error ? w.message : w}`]),
    stdout: { write: (s) => { write(1, String(s)); return true; }, isTTY: false, fd: 1 },
    stderr: { write: (s) => { write(2, String(s)); return true; }, isTTY: false, fd: 2 },
    stdin: null, // below
  };

  // process.stdin as a one-shot event source: the whole of stdin is read
  // (blocking) on the first turn of the loop after a listener is attached,
  // then delivered as one 'data' event and 'end'.
  function makeStdin() {
    const listeners = { data: [], end: [], close: [], readable: [] };
    let scheduled = false, done = false, buffered = null;
    function deliver() {
      if (buffered === null) buffered = native.readFile(0);
      done = true;
      if (buffered.length) for (const fn of listeners.data.slice()) fn(buffered);
      for (const fn of listeners.end.slice()) fn();
      for (const fn of listeners.close.slice()) fn();
    }
    const stdin = {
      fd: 0, isTTY: false,
      setEncoding() { return stdin; },
      resume() { return stdin; },
      pause() { return stdin; },
      on(ev, fn) {
        (listeners[ev] || (listeners[ev] = [])).push(fn);
        if (!scheduled && !done && (ev === 'data' || ev === 'end')) {
          scheduled = true;
          addTimer(deliver, 0, [], false);
        }
        return stdin;
      },
      once(ev, fn) { return stdin.on(ev, fn); },
      read() { if (buffered === null) buffered = native.readFile(0); const b = buffered; buffered = ''; return b || null; },
      [Symbol.asyncIterator]() {
        let given = false;
        return { next: async () => {
          if (given) return { done: true, value: undefined };
          given = true;
          const v = native.readFile(0);
          return v.length ? { done: false, value: v } : { done: true, value: undefined };
        } };
      },
    };
    stdin.addListener = stdin.on;
    return stdin;
  }
  processObj.stdin = makeStdin();

  // readline.createInterface over process.stdin: 'line' per line, then 'close';
  // also async iteration over lines.
  function createInterface(opts) {
    const input = (opts && opts.input) || processObj.stdin;
    const handlers = { line: [], close: [] };
    let text = null;
    const rl = {
      on(ev, fn) {
        (handlers[ev] || (handlers[ev] = [])).push(fn);
        if (ev === 'line' && text === null) {
          text = '';
          input.on('data', (d) => { text += d; });
          input.on('end', () => {
            const lines = text.split('\n');
            if (lines.length && lines[lines.length - 1] === '') lines.pop();
            for (const l of lines) for (const fn of handlers.line.slice()) fn(l.replace(/\r$/, ''));
            for (const fn of handlers.close.slice()) fn();
          });
        }
        return rl;
      },
      once(ev, fn) { return rl.on(ev, fn); },
      close() { for (const fn of handlers.close.splice(0)) fn(); },
      question(q, cb) {
        write(1, q);
        const all = native.readFile(0);
        cb(all.split('\n')[0].replace(/\r$/, ''));
      },
      [Symbol.asyncIterator]() {
        const lines = native.readFile(0).split('\n');
        if (lines.length && lines[lines.length - 1] === '') lines.pop();
        let i = 0;
        return { next: async () => (i < lines.length ? { done: false, value: lines[i++].replace(/\r$/, '') } : { done: true, value: undefined }) };
      },
    };
    return rl;
  }
  function runExitHandlers(code) {
    const handlers = exitHandlers.splice(0);
    for (const h of handlers) h(code);
  }

  // ---- timers -------------------------------------------------------------
  // Kept sorted by due time, then by creation order.
  let timerSeq = 0;
  const timerQueue = [];
  const activeTimers = new Map();
  function addTimer(fn, ms, args, repeat) {
    if (typeof fn !== 'function') throw new TypeError('The "callback" argument must be of type function');
    ms = Number(ms);
    if (!(ms >= 1 && ms <= 2147483647)) ms = 1;
    const t = { id: ++timerSeq, fn, args, ms, repeat, due: native.now() + ms };
    activeTimers.set(t.id, t);
    insertTimer(t);
    return t.id;
  }
  function insertTimer(t) {
    let i = timerQueue.length;
    while (i > 0 && timerQueue[i - 1].due > t.due) i--;
    timerQueue.splice(i, 0, t);
  }
  function clearTimer(id) {
    if (id && typeof id === 'object') id = id.id;
    const t = activeTimers.get(id);
    if (!t) return;
    activeTimers.delete(id);
    const i = timerQueue.indexOf(t);
    if (i >= 0) timerQueue.splice(i, 1);
  }
  function runNextTimer() {
    if (timerQueue.length === 0) return false;
    const t = timerQueue.shift();
    const wait = t.due - native.now();
    if (wait > 0) native.sleep(wait);
    if (t.repeat) {
      t.due = native.now() + t.ms;
      insertTimer(t);
    } else {
      activeTimers.delete(t.id);
    }
    t.fn(...t.args);
    return true;
  }

  // ---- a small require ----------------------------------------------------
  function toText(data) {
    if (typeof data === 'string') return data;
    if (data instanceof Uint8Array) {
      let s = '';
      for (let i = 0; i < data.length; i++) s += String.fromCharCode(data[i]);
      return decodeURIComponent(escape(s));
    }
    return String(data);
  }
  function statObject(path) {
    const s = native.stat(String(path));
    if (s === null) {
      const e = new Error(`ENOENT: no such file or directory, stat '${path}'`);
      e.code = 'ENOENT'; e.syscall = 'stat'; e.path = String(path);
      throw e;
    }
    return {
      size: s[1], mtimeMs: s[2], mtime: new Date(s[2]),
      isFile: () => s[0] === 'file', isDirectory: () => s[0] === 'dir', isSymbolicLink: () => false,
    };
  }
  const fs = {
    readFileSync(path, opts) {
      const p = (path === 0 || path === '/dev/stdin') ? 0 : String(path);
      return native.readFile(p);
    },
    writeFileSync(path, data) { native.writeFile(String(path), toText(data), false); },
    appendFileSync(path, data) { native.writeFile(String(path), toText(data), true); },
    existsSync(path) { return native.stat(String(path)) !== null; },
    readdirSync(path) { return native.readdir(String(path)); },
    statSync: statObject,
    lstatSync: statObject,
    mkdirSync(path, opts) {
      const p = String(path);
      if (opts && opts.recursive) {
        let cur = p.startsWith('/') ? '' : '.';
        for (const part of p.split('/').filter(Boolean)) {
          cur += '/' + part;
          if (native.stat(cur) === null) native.fsop('mkdir', cur);
        }
        return;
      }
      native.fsop('mkdir', p);
    },
    unlinkSync(path) { native.fsop('unlink', String(path)); },
    rmdirSync(path) { native.fsop('rmdir', String(path)); },
  };
  const promisify = (fn) => (...a) => new Promise((res, rej) => { try { res(fn(...a)); } catch (e) { rej(e); } });
  fs.promises = {};
  for (const k of ['readFileSync', 'writeFileSync', 'appendFileSync', 'readdirSync', 'statSync', 'mkdirSync', 'unlinkSync', 'rmdirSync']) {
    fs.promises[k.replace(/Sync$/, '')] = promisify(fs[k]);
  }
  const pathMod = {
    sep: '/',
    join: (...p) => pathMod.normalize(p.filter((s) => s !== '').join('/') || '.'),
    normalize(p) {
      const abs = p.startsWith('/');
      const out = [];
      for (const s of p.split('/')) {
        if (s === '' || s === '.') continue;
        if (s === '..') { if (out.length && out[out.length - 1] !== '..') out.pop(); else if (!abs) out.push('..'); } else out.push(s);
      }
      const r = (abs ? '/' : '') + out.join('/');
      return r || (abs ? '/' : '.');
    },
    resolve: (...p) => {
      let r = native.cwd();
      for (const s of p) r = s.startsWith('/') ? s : r + '/' + s;
      return pathMod.normalize(r);
    },
    basename: (p, ext) => { let b = p.replace(/\/+$/, '').split('/').pop(); if (ext && b.endsWith(ext)) b = b.slice(0, -ext.length); return b; },
    dirname: (p) => { const i = p.replace(/\/+$/, '').lastIndexOf('/'); return i < 0 ? '.' : i === 0 ? '/' : p.slice(0, i); },
    extname: (p) => { const b = pathMod.basename(p); const i = b.lastIndexOf('.'); return i <= 0 ? '' : b.slice(i); },
    isAbsolute: (p) => p.startsWith('/'),
  };
  const utilMod = { inspect, format, promisify, isDeepStrictEqual: (a, b) => JSON.stringify(a) === JSON.stringify(b) };
  const modules = {
    fs, path: pathMod, util: utilMod, process: processObj, console: consoleObj,
    readline: { createInterface },
    timers: { setTimeout: global.setTimeout, setInterval: global.setInterval },
  };
  function require(name) {
    const key = String(name).replace(/^node:/, '');
    if (key === 'timers') return { setTimeout, setInterval, clearTimeout, clearInterval, setImmediate };
    if (Object.prototype.hasOwnProperty.call(modules, key)) return modules[key];
    if (key.startsWith('.') || key.startsWith('/')) return loadCommonJs(key);
    const e = new Error(`Cannot find module '${name}'`);
    e.code = 'MODULE_NOT_FOUND';
    throw e;
  }
  const cjsCache = new Map();
  function loadCommonJs(spec) {
    let file = pathMod.resolve(spec);
    if (native.stat(file) === null && native.stat(file + '.js') !== null) file += '.js';
    if (native.stat(file) === null && native.stat(file + '.json') !== null) file += '.json';
    if (cjsCache.has(file)) return cjsCache.get(file).exports;
    const src = native.readFile(file);
    const module = { exports: {}, filename: file, id: file, loaded: false };
    cjsCache.set(file, module);
    if (file.endsWith('.json')) { module.exports = JSON.parse(src); return module.exports; }
    const wrapper = native.evalScript('(function (exports, require, module, __filename, __dirname) {' + src + '\n})', file);
    wrapper.call(module.exports, module.exports, require, module, file, pathMod.dirname(file));
    module.loaded = true;
    return module.exports;
  }

  // ---- install globals ---------------------------------------------------
  function define(name, value) {
    Object.defineProperty(global, name, { value, writable: true, configurable: true, enumerable: false });
  }
  define('console', consoleObj);
  define('process', processObj);
  define('print', (...a) => write(1, a.map((x) => String(x)).join(' ') + '\n'));
  define('setTimeout', (fn, ms, ...a) => addTimer(fn, ms, a, false));
  define('setInterval', (fn, ms, ...a) => addTimer(fn, ms, a, true));
  define('setImmediate', (fn, ...a) => addTimer(fn, 0, a, false));
  define('clearTimeout', clearTimer);
  define('clearInterval', clearTimer);
  define('clearImmediate', clearTimer);
  define('queueMicrotask', (fn) => { Promise.resolve().then(fn); });
  define('structuredClone', (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v))));
  define('require', require);

  // UTF-8 and base64 helpers Node and browsers share.
  class TextEncoder {
    get encoding() { return 'utf-8'; }
    encode(str = '') {
      const bin = unescape(encodeURIComponent(String(str)));
      const out = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
      return out;
    }
  }
  class TextDecoder {
    get encoding() { return 'utf-8'; }
    decode(bytes) {
      if (bytes === undefined) return '';
      const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes.buffer || bytes);
      let bin = '';
      for (let i = 0; i < u8.length; i += 8192) bin += String.fromCharCode.apply(null, u8.subarray(i, i + 8192));
      try { return decodeURIComponent(escape(bin)); } catch (e) { return bin; }
    }
  }
  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  function btoa(data) {
    const s = String(data);
    let out = '';
    for (let i = 0; i < s.length; i += 3) {
      const a = s.charCodeAt(i), b = s.charCodeAt(i + 1), c = s.charCodeAt(i + 2);
      if (a > 255 || b > 255 || c > 255) throw new Error('Invalid character');
      const n = (a << 16) | ((b || 0) << 8) | (c || 0);
      out += B64[n >> 18] + B64[(n >> 12) & 63] + (i + 1 < s.length ? B64[(n >> 6) & 63] : '=') + (i + 2 < s.length ? B64[n & 63] : '=');
    }
    return out;
  }
  function atob(data) {
    const s = String(data).replace(/[\t\n\f\r =]/g, '');
    let out = '', bits = 0, acc = 0;
    for (const ch of s) {
      const v = B64.indexOf(ch);
      if (v < 0) throw new Error('The string to be decoded is not correctly encoded.');
      acc = (acc << 6) | v;
      bits += 6;
      if (bits >= 8) { bits -= 8; out += String.fromCharCode((acc >> bits) & 255); }
    }
    return out;
  }
  define('TextEncoder', TextEncoder);
  define('TextDecoder', TextDecoder);
  define('btoa', btoa);
  define('atob', atob);
  define('module', { exports: {}, id: '.', loaded: false });
  define('exports', global.module.exports);
  let startTime = 0;
  const performanceObj = { now: () => native.now() - startTime, timeOrigin: 0 };
  define('performance', performanceObj);

  // ---- hooks for main.c --------------------------------------------------
  define('__hutchInternal', {
    start(argv, env) {
      processObj.argv = argv;
      processObj.argv0 = argv[0];
      processObj.execPath = argv[0];
      processObj.env = env;
      startTime = native.now();
      performanceObj.timeOrigin = Date.now();
    },
    reportUncaught(err) {
      let text;
      if (err instanceof Error) text = errorText(err).replace(/^\[(.*)\]$/s, '$1');
      else text = inspect(err);
      write(2, 'Uncaught ' + text + '\n');
    },
    printResult(v) { write(1, (typeof v === 'string' ? v : inspect(v)) + '\n'); },
    runNextTimer,
    // for hutch's resident runner: one line of stdin (null at its end), redirecting user
    // output (returns the raw writer), and evaluating a script whose top-level declarations
    // persist and whose completion value is returned
    readLine: () => native.readLine(),
    setWriter(fn) { write = fn; return native.write; },
    evalScript: (src, name) => native.evalScript(String(src), String(name)),
    finish() {
      const c = processObj.exitCode === undefined ? 0 : Number(processObj.exitCode) | 0;
      runExitHandlers(c);
      return processObj.exitCode === undefined ? c : Number(processObj.exitCode) | 0;
    },
  });
})

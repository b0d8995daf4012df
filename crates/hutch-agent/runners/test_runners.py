#!/usr/bin/env python3
"""Protocol tests for the hutch runners (python.py, node.js, bash.sh).

Starts each runner the way the agent does (fd 3 = requests, fd 4 = events, stdin =
/dev/null, stdout/stderr pipes, own session), drives it and checks the events.
Usage: python3 test_runners.py [python|node|bash ...]   (PYTHON=/path/to/python3 to pick
the interpreter under test, e.g. one with matplotlib installed).
"""
import base64, fcntl, json, os, select, signal, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = os.environ.get('PYTHON', 'python3')


def source(name):
    with open(os.path.join(HERE, name)) as f:
        return f.read()


COMMANDS = {
    'python': lambda: [PYTHON, '-I', '-u', '-c', source('python.py')],
    'node': lambda: ['node', '-e', source('node.js')],
    'bash': lambda: ['bash', '--noprofile', '--norc', '-c', source('bash.sh')],
}


class Runner:
    def __init__(self, lang):
        req_r, self.req_w = os.pipe()
        self.ev_r, ev_w = os.pipe()

        def map_fds():  # in the child: requests -> fd 3, events -> fd 4
            a, b = fcntl.fcntl(req_r, fcntl.F_DUPFD, 10), fcntl.fcntl(ev_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3), os.dup2(b, 4), os.close(a), os.close(b)

        self.proc = subprocess.Popen(COMMANDS[lang](), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True, close_fds=False,
                                     preexec_fn=map_fds)
        os.close(req_r), os.close(ev_w)
        self.bufs = {self.ev_r: b'', self.proc.stdout.fileno(): b'', self.proc.stderr.fileno(): b''}
        self.eof = set()
        self.seq = 100
        self.ready = self.next_event(10)

    def pump(self, timeout):
        """Read whatever the runner has written (at most `timeout` s of waiting)."""
        fds = [fd for fd in self.bufs if fd not in self.eof]
        if not fds:
            time.sleep(min(timeout, 0.05))
            return
        for fd in select.select(fds, [], [], timeout)[0]:
            data = os.read(fd, 1 << 16)
            if data:
                self.bufs[fd] += data
            else:
                self.eof.add(fd)

    def next_event(self, timeout):
        deadline = time.time() + timeout
        while b'\n' not in self.bufs[self.ev_r]:
            if time.time() > deadline or self.ev_r in self.eof:
                return None
            self.pump(max(0.0, deadline - time.time()))
        line, self.bufs[self.ev_r] = self.bufs[self.ev_r].split(b'\n', 1)
        return json.loads(line)

    def take(self, fd):
        data, self.bufs[fd] = self.bufs[fd], b''
        return data.decode('utf-8', 'replace')

    def send(self, code, seq=None):
        self.seq = seq if seq is not None else self.seq + 1
        body = code.encode()
        os.write(self.req_w, b'run %d %d\n' % (self.seq, len(body)))
        view = memoryview(body)
        while view:
            self.pump(0)  # keep the runner's pipes drained while writing a big request
            view = view[os.write(self.req_w, view[:1 << 16]):]
        return self.seq

    def run(self, code, timeout=15, interrupt_after=None):
        """Send a snippet; return (events of the run, stdout, stderr) once `done` arrives."""
        seq, events = self.send(code), []
        start = time.time()
        while True:
            if interrupt_after is not None and time.time() - start >= interrupt_after:
                os.killpg(self.proc.pid, signal.SIGINT)
                interrupt_after = None
            wait = 0.05 if interrupt_after is not None else max(0.0, start + timeout - time.time())
            ev = self.next_event(wait)
            if ev is None:
                if interrupt_after is not None:
                    continue
                raise AssertionError(f'no done for {code[:40]!r}; events so far {events}')
            assert ev.get('seq') == seq, f'event for another run: {ev}'
            events.append(ev)
            if ev['ev'] == 'done':
                break
        # Everything written to fd 1/2 before `done` is already in the pipes: drain them.
        for _ in range(5):
            self.pump(0.01)
        return events, self.take(self.proc.stdout.fileno()), self.take(self.proc.stderr.fileno())

    def close(self):
        os.close(self.req_w)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.ev_r)
        self.proc.stdout.close(), self.proc.stderr.close()


PASSED, FAILED = [], []


def check(name, cond, detail=''):
    (PASSED if cond else FAILED).append(name)
    if not cond:
        print(f'FAIL {name}: {detail}')


def parts(events):
    """(main result data, [other result data], error event, done event)"""
    main = [e['data'] for e in events if e['ev'] == 'result' and e['main']]
    rest = [e['data'] for e in events if e['ev'] == 'result' and not e['main']]
    errors = [e for e in events if e['ev'] == 'error']
    assert len(main) <= 1 and len(errors) <= 1 and events[-1]['ev'] == 'done', events
    return (main[0] if main else None), rest, (errors[0] if errors else None), events[-1]


def expect_value(r, lang, code, plain, **kw):
    events, out, err = r.run(code, **kw)
    main, _, error, _ = parts(events)
    check(f'{lang}: {code!r} -> {plain}', main is not None and main['text/plain'] == plain,
          f'events={events} stderr={err[-500:]!r}')
    return main


def common(r, lang, counts):
    check(f'{lang}: ready', r.ready and r.ready['ev'] == 'ready' and r.ready['pid'] == r.proc.pid
          and r.ready['lang'] == {'node': 'javascript'}.get(lang, lang) and r.ready['version'], r.ready)
    events, _, _ = r.run('')
    check(f'{lang}: empty snippet', [e['ev'] for e in events] == ['done'], events)
    counts.append(events[-1]['execution_count'])


def test_python(r):
    counts = []
    common(r, 'python', counts)
    expect_value(r, 'python', '1+1', '2')
    r.run('x = 41')
    expect_value(r, 'python', 'x+1', '42')
    r.run('def f(a):\n    return a * 2\n')
    expect_value(r, 'python', 'f(21)', '42')
    r.run('import math')
    expect_value(r, 'python', 'math.sqrt(16)', '4.0')
    expect_value(r, 'python', "s = 'héllo ✓'\ns", "'héllo ✓'")
    events, out, err = r.run("import sys\nprint('out1')\nprint('err1', file=sys.stderr)\nprint('out2', end='')")
    check('python: stdout/stderr before done', out == 'out1\nout2' and err == 'err1\n', (out, err))
    main, _, error, _ = parts(r.run('x = 1\n1/0')[0])
    check('python: ZeroDivisionError', error and error['name'] == 'ZeroDivisionError'
          and error['value'] == 'division by zero' and error['traceback'][-1] == 'ZeroDivisionError: division by zero'
          and any('<cell-' in l for l in error['traceback']) and not any('<string>' in l for l in error['traceback']),
          error)
    expect_value(r, 'python', 'x', '1')
    _, _, error, _ = parts(r.run('y = (')[0])
    check('python: SyntaxError', error and error['name'] == 'SyntaxError', error)
    t = time.time()
    _, _, error, _ = parts(r.run('while True: pass', interrupt_after=0.5)[0])
    check('python: interrupt -> KeyboardInterrupt', error and error['name'] == 'KeyboardInterrupt'
          and time.time() - t < 5, error)
    os.killpg(r.proc.pid, signal.SIGINT)  # while idle: ignored
    time.sleep(0.3)
    expect_value(r, 'python', 'x + 1', '2')
    _, _, error, _ = parts(r.run('import sys; sys.exit(3)')[0])
    check('python: SystemExit reported', error and error['name'] == 'SystemExit' and error['value'] == '3', error)
    expect_value(r, 'python', 'x', '1')
    html = "class H:\n    def _repr_html_(self):\n        return '<b>hi</b>'\n    def __repr__(self):\n        return 'H()'\n"
    main = expect_value(r, 'python', html + 'H()', 'H()')
    check('python: _repr_html_ -> text/html', main and main.get('text/html') == '<b>hi</b>', main)
    main, rest, _, _ = parts(r.run('display(H(), 5)\nNone')[0])
    check('python: display()', main is None and len(rest) == 2 and rest[0].get('text/html') == '<b>hi</b>'
          and rest[1] == {'text/plain': '5'}, rest)
    expect_value(r, 'python', 'import asyncio\nawait asyncio.sleep(0.01)\nawait asyncio.sleep(0, 5)', '5')
    events, out, _ = r.run("import os; os.system('ls /proc/$$/fd')")
    check('python: fds 3/4 not inherited', '0' in out.split() and not {'3', '4'} & set(out.split()), out)
    r.run("import tempfile; os.chdir(tempfile.mkdtemp()); open('hutch_mod.py', 'w').write('V = 3')")
    expect_value(r, 'python', 'import hutch_mod; hutch_mod.V', '3')
    events, out, _ = r.run("print('x' * 2_000_000)")
    check('python: 2 MB of output', len(out) == 2_000_001 and out.strip('x') == '\n', len(out))
    if subprocess.run([PYTHON, '-I', '-c', 'import matplotlib'], capture_output=True).returncode == 0:
        _, rest, error, _ = parts(r.run('import matplotlib.pyplot as plt\nplt.plot([1, 3, 2]);')[0])
        check('python: matplotlib figure -> image/png', not error and len(rest) == 1
              and base64.b64decode(rest[0].get('image/png', ''))[:4] == b'\x89PNG', (error, rest))
        _, rest, error, _ = parts(r.run("for i in range(2):\n    plt.plot([i]); plt.show()\nprint('end')")[0])
        check('python: plt.show() emits each figure', not error and len(rest) == 2
              and all('image/png' in d for d in rest), (error, rest))
    else:
        print(f'note: matplotlib not importable by {PYTHON}; plot test skipped')
    counts += [parts(r.run('pass')[0])[3]['execution_count'] for _ in range(2)]
    check('python: execution_count increments', counts[-1] == counts[-2] + 1 and counts[0] == 1, counts)


def test_node(r):
    counts = []
    common(r, 'node', counts)
    expect_value(r, 'node', '1+1', '2')
    r.run('var a = 1')
    expect_value(r, 'node', 'a+1', '2')
    r.run('let b = 2')
    expect_value(r, 'node', 'b', '2')
    r.run('function f(x) { return x * 2 }')
    expect_value(r, 'node', 'f(21)', '42')
    r.run("const path = require('path')")
    expect_value(r, 'node', "path.join('a', 'b')", "'a/b'")
    expect_value(r, 'node', "const s = 'héllo ✓'\ns", "'héllo ✓'")
    expect_value(r, 'node', 'globalThis.g1 = 5; g1 + a', '6')
    expect_value(r, 'node', '[typeof fetch, typeof URL, typeof structuredClone, typeof setTimeout, typeof Buffer]',
                 "[ 'function', 'function', 'function', 'function', 'function' ]")
    events, out, err = r.run("console.log('out1'); console.error('err1'); process.stdout.write('out2')")
    check('node: stdout/stderr before done', out == 'out1\nout2' and err == 'err1\n', (out, err))
    _, _, error, _ = parts(r.run('a = 7; null.x')[0])
    check('node: TypeError', error and error['name'] == 'TypeError' and 'null' in error['value']
          and any('cell-' in l for l in error['traceback']) and not any('[eval]' in l for l in error['traceback']),
          error)
    expect_value(r, 'node', 'a', '7')
    _, _, error, _ = parts(r.run('let = ;')[0])
    check('node: SyntaxError', error and error['name'] == 'SyntaxError', error)
    _, _, error, _ = parts(r.run('while (true) {}', interrupt_after=0.5)[0])
    check('node: interrupt -> Interrupted', error and error['name'] == 'Interrupted', error)
    _, _, error, _ = parts(r.run('await new Promise(() => {})', interrupt_after=0.5)[0])
    check('node: interrupt an await -> Interrupted', error and error['name'] == 'Interrupted', error)
    os.killpg(r.proc.pid, signal.SIGINT)  # while idle: ignored
    time.sleep(0.3)
    expect_value(r, 'node', 'a', '7')
    expect_value(r, 'node', 'Promise.resolve(5)', '5')
    expect_value(r, 'node', 'await Promise.resolve(7)', '7')
    expect_value(r, 'node', 'const v = await Promise.resolve(3)\nv * 2\n', '6')
    expect_value(r, 'node', '(async () => { throw 1 })().catch(() => 8)', '8')
    expect_value(r, 'node', 'await (async () => 5)()', '5')
    r.run("const {a: a1, b: [b1]} = await Promise.resolve({a: 1, b: [2]}); async function af() { return 3 }")
    expect_value(r, 'node', 'a1 + b1 + await af()', '6')
    expect_value(r, 'node', "const fsm = await import('fs'); typeof fsm.readFileSync", "'function'")
    events, out, _ = r.run("require('child_process').execSync('ls /proc/$$/fd', {stdio: 'inherit'}); 0")
    check('node: fds 3/4 not inherited', '0' in out.split() and not {'3', '4'} & set(out.split()), out)
    main = expect_value(r, 'node', '({a: 1, b: [1, 2]})', '{ a: 1, b: [ 1, 2 ] }')
    check('node: application/json', main and main.get('application/json') == {'a': 1, 'b': [1, 2]}, main)
    main, rest, _, _ = parts(r.run('display({x: 1}, "s")')[0])
    check('node: display()', main is None and len(rest) == 2 and rest[0]['application/json'] == {'x': 1}, rest)
    r.run("setTimeout(() => { throw new Error('late') }, 10); Promise.reject(new Error('nobody'))")
    time.sleep(0.3)
    expect_value(r, 'node', 'a', '7')
    events, out, _ = r.run("console.log('x'.repeat(2000000))")
    check('node: 2 MB of output', len(out) == 2_000_001, len(out))
    counts += [parts(r.run('1')[0])[3]['execution_count'] for _ in range(2)]
    check('node: execution_count increments', counts[-1] == counts[-2] + 1 and counts[0] == 1, counts)


def test_bash(r):
    counts = []
    common(r, 'bash', counts)
    r.run('x=41')
    events, out, _ = r.run('echo $((x+1))')
    check('bash: variable persists', out == '42\n', out)
    r.run('f() { echo "hi $1"; }; alias hey="echo alias-ok"')
    check('bash: function persists', r.run('f there')[1] == 'hi there\n')
    check('bash: alias persists', r.run('hey')[1] == 'alias-ok\n')
    r.run('cd /tmp')
    check('bash: cd persists', r.run('pwd')[1] == '/tmp\n')
    events, out, err = r.run('echo out1; echo err1 >&2; printf out2')
    check('bash: stdout/stderr before done', out == 'out1\nout2' and err == 'err1\n', (out, err))
    check('bash: utf-8 snippet', r.run('echo "héllo ✓"')[1] == 'héllo ✓\n')
    _, _, error, done = parts(r.run('false')[0])
    check('bash: false -> ExitCode', error and error['name'] == 'ExitCode' and error['value'] == 'exit status 1'
          and done['exit_code'] == 1, (error, done))
    _, _, error, done = parts(r.run('true')[0])
    check('bash: true -> no error', error is None and done['exit_code'] == 0, done)
    for code in ['sleep 100', 'for i in 1 2; do sleep 100; done; echo after',
                 'g() { sleep 100; echo after; }; g; echo after', 'while :; do :; done; echo after']:
        t = time.time()
        events, out, _ = r.run(code, interrupt_after=0.5)
        check(f'bash: interrupt {code!r}', time.time() - t < 5 and events[-1]['exit_code'] == 130
              and 'after' not in out, (events, out))
    os.killpg(r.proc.pid, signal.SIGINT)  # while idle: ignored
    time.sleep(0.3)
    check('bash: state after interrupts', r.run('echo $x')[1] == '41\n')
    fds = r.run("sh -c 'ls /proc/$$/fd'")[1].split()
    check('bash: fds 3/4 not inherited', '0' in fds and '3' not in fds and '4' not in fds, fds)
    events, out, _ = r.run("head -c 2000000 /dev/zero | tr '\\0' x")
    check('bash: 2 MB of output', len(out) == 2_000_000, len(out))
    counts += [parts(r.run(':')[0])[3]['execution_count'] for _ in range(2)]
    check('bash: execution_count increments', counts[-1] == counts[-2] + 1 and counts[0] == 1, counts)


def test_eof(lang):
    """A request announcing more bytes than arrive: the runner exits cleanly at EOF."""
    r = Runner(lang)
    os.write(r.req_w, b'run 1 100\nshort')
    os.close(r.req_w)
    try:
        code = r.proc.wait(5)
    except subprocess.TimeoutExpired:
        code = 'timeout'
        r.proc.kill()
    check(f'{lang}: EOF inside a request -> clean exit', code == 0, code)
    r.req_w = os.open('/dev/null', os.O_WRONLY)
    r.close()


def main():
    langs = sys.argv[1:] or ['python', 'node', 'bash']
    for lang in langs:
        r = Runner(lang)
        try:
            globals()['test_' + lang](r)
        except Exception as e:
            check(f'{lang}: harness', False, repr(e))
        finally:
            r.close()
        test_eof(lang)
    print(f'{len(PASSED)} passed, {len(FAILED)} failed')
    if FAILED:
        print('failed: ' + '; '.join(FAILED))
        sys.exit(1)


if __name__ == '__main__':
    main()

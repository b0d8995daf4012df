"""Runs the built language guests on a stock WASI host (wasmtime-py).

    python guests/test_guests.py [--guests DIR] [--bench N]    # plain runner
    pytest guests/test_guests.py                               # same tests

The guests directory is --guests, else $HUTCH_WASM_GUESTS, else the one
scripts/build-wasm-guests.sh prints (it builds what is missing). Needs the
`wasmtime` package (wasmtime-py 36 or newer for components).

qjs.wasm is a WASI preview 1 module run through `Linker.define_wasi`;
python.wasm is a WASI 0.2 component run through `component.Linker.add_wasip2`
and its `wasi:cli/run` export. Each test is a fresh instance with a temporary
workspace preopened at /workspace and PWD=/workspace.
"""

import hashlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import wasmtime
from wasmtime import Engine, Linker, Module, Store, WasiConfig
from wasmtime import component

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_EXPORT = "wasi:cli/run@0.2.0"  # found semver-compatibly in a 0.2.x export
_EXIT_RE = re.compile(r"Exited with i32 exit status (\d+)")


def guests_dir():
    d = os.environ.get("HUTCH_WASM_GUESTS_TEST_DIR") or os.environ.get("HUTCH_WASM_GUESTS")
    if d and os.path.isfile(os.path.join(d, "qjs.wasm")) and os.path.isfile(os.path.join(d, "python.wasm")):
        return d
    out = subprocess.run(
        [os.path.join(ROOT, "scripts", "build-wasm-guests.sh")] + (["--out", d] if d else []),
        check=True, stdout=subprocess.PIPE, text=True,
    ).stdout
    return out.strip().splitlines()[-1]


class Host:
    """One engine, the guests compiled once (and cached on disk), a fresh
    store and instance per run."""

    def __init__(self, directory):
        self.dir = directory
        self.engine = Engine()
        self.qjs = self._load(Module, "qjs.wasm")
        self.python = self._load(component.Component, "python.wasm")
        self.module_linker = Linker(self.engine)
        self.module_linker.define_wasi()
        self.component_linker = component.Linker(self.engine)
        self.component_linker.add_wasip2()

    def _load(self, cls, name):
        path = os.path.join(self.dir, name)
        blob = open(path, "rb").read()
        key = hashlib.sha256(blob).hexdigest()[:16]
        cache_dir = os.path.join(self.dir, ".cache", "wasmtime-py")
        os.makedirs(cache_dir, exist_ok=True)
        cached = os.path.join(cache_dir, "%s-%s.cwasm" % (name, key))
        if os.path.exists(cached):
            try:
                return cls.deserialize_file(self.engine, cached)
            except Exception:
                pass
        start = time.perf_counter()
        compiled = cls(self.engine, blob)
        sys.stderr.write("compiled %s in %.1f s\n" % (name, time.perf_counter() - start))
        for old in os.listdir(cache_dir):  # artefacts of earlier builds
            if old.startswith(name + "-") and old.endswith(".cwasm"):
                os.remove(os.path.join(cache_dir, old))
        tmp = cached + ".tmp"
        with open(tmp, "wb") as f:
            f.write(compiled.serialize())
        os.replace(tmp, cached)
        return compiled

    def _wasi(self, argv, stdin, workspace, env, out, err):
        w = WasiConfig()
        w.argv = argv
        w.env = [("PWD", "/workspace")] + list((env or {}).items())
        w.preopen_dir(workspace, "/workspace")
        inp = os.path.join(out + ".stdin")
        with open(inp, "wb") as f:
            f.write(stdin)
        w.stdin_file = inp
        w.stdout_file = out
        w.stderr_file = err
        return w

    def run(self, guest, argv, stdin=b"", files=None, env=None):
        """Runs a guest; returns (exit_code, stdout, stderr)."""
        with tempfile.TemporaryDirectory() as tmp:
            workspace = os.path.join(tmp, "ws")
            os.mkdir(workspace)
            for name, data in (files or {}).items():
                with open(os.path.join(workspace, name), "wb" if isinstance(data, bytes) else "w") as f:
                    f.write(data)
            out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
            store = Store(self.engine)
            store.set_wasi(self._wasi(argv, stdin, workspace, env, out, err))
            code = self._call(guest, store)
            return code, open(out, "rb").read().decode(), open(err, "rb").read().decode()

    def _call(self, guest, store):
        if guest == "qjs":
            inst = self.module_linker.instantiate(store, self.qjs)
            try:
                inst.exports(store)["_start"](store)
                return 0
            except wasmtime.ExitTrap as e:
                return e.code
        inst = self.component_linker.instantiate(store, self.python)
        run_index = inst.get_export_index(store, RUN_EXPORT)
        run = inst.get_func(store, inst.get_export_index(store, "run", run_index))
        try:
            result = run(store)
        except wasmtime.WasmtimeError as e:
            m = _EXIT_RE.search(str(e))
            if m:
                return int(m.group(1))
            raise
        return 0 if getattr(result, "tag", "ok") == "ok" else 1


_HOST = None


def host():
    global _HOST
    if _HOST is None:
        _HOST = Host(guests_dir())
    return _HOST


def py(*args, **kw):
    return host().run("python", ["python3"] + list(args), **kw)


def js(*args, **kw):
    return host().run("qjs", ["node"] + list(args), **kw)


# ---- Python guest ------------------------------------------------------------

def test_python_print():
    assert py("-c", "print(1)") == (0, "1\n", "")


def test_python_argv():
    code, out, _ = py("-c", "import sys; print(sys.argv)", "a", "b c")
    assert (code, out) == (0, "['-c', 'a', 'b c']\n")


def test_python_exit_codes():
    assert py("-c", "import sys; sys.exit(3)")[0] == 3
    assert py("-c", "raise SystemExit(0)")[0] == 0
    assert py("-c", "import sys; sys.exit(256 + 7)")[0] == 7
    assert py("-c", "import os; print('x', flush=True); os._exit(5)")[:2] == (5, "x\n")
    code, _, err = py("-c", "import sys; sys.exit('bye')")
    assert (code, err) == (1, "bye\n")


def test_python_exception():
    code, out, err = py("-c", "print('before')\n1/0")
    assert code == 1 and out == "before\n"
    assert err.startswith("Traceback (most recent call last):\n  File \"<string>\", line 2, in <module>\n")
    assert err.endswith("ZeroDivisionError: division by zero\n")
    assert "hutch_python" not in err


def test_python_script_file_and_args():
    files = {"s.py": "import sys\nprint(sys.argv)\nprint(open('data.txt').read().strip())\n", "data.txt": "hello\n"}
    code, out, _ = py("s.py", "x", files=files)
    assert (code, out) == (0, "['s.py', 'x']\nhello\n")


def test_python_imports_local_module():
    files = {"main.py": "import helper\nprint(helper.twice(21))\n", "helper.py": "def twice(x):\n    return 2 * x\n"}
    assert py("main.py", files=files)[:2] == (0, "42\n")


def test_python_writes_workspace():
    with tempfile.TemporaryDirectory():
        code, out, _ = py("-c", "open('o.txt','w').write('x'); import os; print(sorted(os.listdir('.')))")
        assert (code, out) == (0, "['o.txt']\n")


def test_python_stdin_program():
    assert py(stdin=b"print(6*7)\n")[:2] == (0, "42\n")
    assert py("-", "a", stdin=b"import sys; print(sys.argv)\n")[:2] == (0, "['-', 'a']\n")


def test_python_stdin_data():
    assert py("-c", "import sys; print(sys.stdin.read().upper())", stdin=b"abc")[:2] == (0, "ABC\n")


def test_python_json_and_stdlib():
    code, out, _ = py("-c", "import json, decimal, email.message, xml.dom.minidom, sqlite3, zoneinfo\n"
                            "print(json.dumps({'a': [1, 2]}, sort_keys=True), decimal.Decimal(1) / 4)")
    assert (code, out) == (0, '{"a": [1, 2]} 0.25\n')


def test_python_loop():
    assert py("-c", "t = 0\nfor i in range(100):\n    t += i\nprint(t)") == (0, "4950\n", "")


def test_python_module_mode():
    code, out, _ = py("-m", "json.tool", "in.json", files={"in.json": '{"b": 1}'})
    assert (code, out) == (0, '{\n    "b": 1\n}\n')


def test_python_env_and_randomness():
    code, out, _ = py("-c", "import os, random; print(os.environ['GREETING'], random.random())", env={"GREETING": "hi"})
    code2, out2, _ = py("-c", "import os, random; print(os.environ['GREETING'], random.random())", env={"GREETING": "hi"})
    assert code == code2 == 0 and out.startswith("hi ") and out != out2


def test_python_version_and_bad_option():
    code, out, _ = py("-V")
    assert code == 0 and re.match(r"Python 3\.\d+\.\d+\n", out)
    assert py("--bogus")[0] == 2


def test_python_missing_script():
    code, _, err = py("nope.py")
    assert code == 2 and "can't open file" in err


# ---- JavaScript guest ----------------------------------------------------------

def test_js_print():
    assert js("-e", "console.log(1)") == (0, "1\n", "")
    assert js("-e", "print(1, 'a')") == (0, "1 a\n", "")


def test_js_argv():
    assert js("-e", "console.log(process.argv.slice(1))", "a", "b")[:2] == (0, "[ 'a', 'b' ]\n")
    code, out, _ = js("s.js", "x", files={"s.js": "console.log(process.argv.slice(1))"})
    assert (code, out) == (0, "[ 's.js', 'x' ]\n")


def test_js_exit_codes():
    assert js("-e", "process.exit(7)")[0] == 7
    assert js("-e", "process.exitCode = 4")[0] == 4
    assert js("-e", "1")[0] == 0


def test_js_exception():
    code, out, err = js("-e", "console.log('before'); null.x")
    assert code == 1 and out == "before\n"
    assert err.startswith("Uncaught TypeError: ")
    code, _, err = js("-e", "throw new RangeError('bad')")
    assert code == 1 and err.startswith("Uncaught RangeError: bad\n    at ")


def test_js_unhandled_rejection():
    code, _, err = js("-e", "Promise.reject(new Error('nope'))")
    assert code == 1 and err.startswith("Uncaught Error: nope")


def test_js_console_formatting():
    code, out, err = js("-e", "console.log({a: 1, b: 'x', c: [1, 2, {d: null}]}, [], {}, 'str', -0, 10n);"
                              "console.error(new Map([['k', 1]]), new Set([1]), undefined)")
    assert code == 0
    assert out == "{ a: 1, b: 'x', c: [ 1, 2, { d: null } ] } [] {} str -0 10n\n"
    assert err == "Map(1) { 'k' => 1 } Set(1) { 1 } undefined\n"


def test_js_print_flag():
    assert js("-p", "[1, 'a']")[:2] == (0, "[ 1, 'a' ]\n")
    assert js("-p", "'raw'")[:2] == (0, "raw\n")


def test_js_bigint_arrow_promises():
    code, out, _ = js("-e", "const sq = (x) => x * x;"
                            "Promise.resolve(2n ** 64n).then((v) => console.log(String(v), sq(12)));"
                            "(async () => { await null; console.log('async'); })();"
                            "setTimeout(() => console.log('timer'), 1); console.log('sync')")
    assert (code, out) == (0, "sync\n18446744073709551616 144\nasync\ntimer\n")


def test_js_reads_file():
    code, out, _ = js("-e", "const fs = require('fs'); console.log(fs.readFileSync('data.txt', 'utf8').trim())",
                      files={"data.txt": "hello\n"})
    assert (code, out) == (0, "hello\n")


def test_js_json_and_loop():
    assert js("-e", "console.log(JSON.stringify(JSON.parse('{\"a\":[1,2]}')))")[:2] == (0, '{"a":[1,2]}\n')
    assert js("-e", "let t = 0; for (let i = 0; i < 100; i++) t += i; console.log(t)")[:2] == (0, "4950\n")


def test_js_stdin_program():
    assert js(stdin=b"console.log(6 * 7)")[:2] == (0, "42\n")


def test_js_stdin_data():
    prog = ("const rl = require('readline').createInterface({ input: process.stdin });"
            "const lines = []; rl.on('line', (l) => lines.push(l)); rl.on('close', () => console.log(lines));")
    assert js("-e", prog, stdin=b"a\nb\n")[:2] == (0, "[ 'a', 'b' ]\n")
    prog = "let s = ''; process.stdin.on('data', (d) => s += d); process.stdin.on('end', () => console.log(s.toUpperCase()))"
    assert js("-e", prog, stdin=b"abc")[:2] == (0, "ABC\n")
    assert js("-e", "console.log(require('fs').readFileSync(0, 'utf8').length)", stdin=b"12345")[:2] == (0, "5\n")


def test_js_env():
    assert js("-e", "console.log(process.env.GREETING)", env={"GREETING": "hi"})[:2] == (0, "hi\n")


# ---- timing ----------------------------------------------------------------------

def bench(n):
    """Wall and CPU time of a fresh store + instance running print(1) /
    console.log(1). CPU time (this thread) leaves out preemption, which on a
    shared machine dominates the wall-clock median."""
    h = host()
    results = {}
    for guest, argv in (("python", ["python3", "-c", "print(1)"]), ("qjs", ["node", "-e", "console.log(1)"])):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            samples, cpu = [], []
            for _ in range(n):
                start = time.perf_counter()
                start_cpu = time.thread_time()
                store = Store(h.engine)
                w = WasiConfig()
                w.argv = argv
                w.stdout_file = out
                w.preopen_dir(tmp, "/workspace")
                store.set_wasi(w)
                code = h._call(guest, store)
                samples.append(time.perf_counter() - start)
                cpu.append(time.thread_time() - start_cpu)
                assert code == 0 and open(out).read() == "1\n"
            samples.sort()
            results[guest] = {
                "wall_median_ms": statistics.median(samples) * 1e3,
                "wall_p25_ms": samples[len(samples) // 4] * 1e3,
                "wall_min_ms": samples[0] * 1e3,
                "cpu_median_ms": statistics.median(cpu) * 1e3,
            }
    return results


def _main(argv):
    if "--guests" in argv:
        os.environ["HUTCH_WASM_GUESTS_TEST_DIR"] = argv[argv.index("--guests") + 1]
    n_bench = int(argv[argv.index("--bench") + 1]) if "--bench" in argv else 0
    tests = [(k, v) for k, v in sorted(globals().items()) if k.startswith("test_") and callable(v)]
    passed = failed = 0
    for name, fn in tests:
        try:
            fn()
            passed += 1
            print("ok    " + name)
        except Exception as e:  # report and go on
            failed += 1
            print("FAIL  %s: %r" % (name, e))
    if n_bench:
        load = os.getloadavg()[0]
        for guest, r in bench(n_bench).items():
            print("bench %-6s fresh instance + hello (n=%d, load %.1f): wall median %.2f ms, p25 %.2f ms, min %.2f ms; "
                  "cpu median %.2f ms" % (guest, n_bench, load, r["wall_median_ms"], r["wall_p25_ms"], r["wall_min_ms"],
                                          r["cpu_median_ms"]))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

# hutch Python runner for the wasm backend: one resident CPython (WASI) instance per code
# context (see README.md). Started as `python3 -I -c <this file>`. WASI gives only fds 0-2:
# requests arrive on stdin, one JSON object per line; everything goes out on stdout as frames,
# "\x1e" + one JSON object + "\n": user output ({"t":"out"|"err","d":text}) and events
# (ready, result*, error?, done). sys.stdout/sys.stderr are replaced so user output is framed
# and never mixes with the events; bytes written to fd 1 directly reach the host unframed and
# are shown as stdout.
import ast, asyncio, base64, builtins, inspect, io, json, linecache, os, sys, traceback

REQUESTS = sys.stdin.buffer
RUN = {'seq': 0, 'count': 0, 'loop': None, 'limit': 0, 'sent': [0, 0]}
G = {'__name__': '__main__', '__doc__': None, '__builtins__': builtins}
MIMES = [('_repr_html_', 'text/html'), ('_repr_markdown_', 'text/markdown'), ('_repr_svg_', 'image/svg+xml'),
         ('_repr_png_', 'image/png'), ('_repr_jpeg_', 'image/jpeg'), ('_repr_json_', 'application/json'),
         ('_repr_latex_', 'text/latex')]


def frame(obj):
    data = ('\x1e' + json.dumps(obj, default=repr) + '\n').encode()
    while data:
        data = data[os.write(1, data):]


def send(k, text):
    """User output of stream k (0 stdout, 1 stderr). Past the snippet's limit nothing more is
    sent: one character more than the limit tells the host to cut and mark."""
    room = RUN['limit'] + 1 - RUN['sent'][k]
    if not text or room <= 0:
        return
    text = text[:room]
    RUN['sent'][k] += len(text)
    frame({'t': 'err' if k else 'out', 'd': text})


class ByteStream(io.RawIOBase):
    def __init__(self, k):
        self.k = k

    def writable(self):
        return True

    def write(self, b):
        b = bytes(b)
        send(self.k, b.decode('utf-8', 'replace'))
        return len(b)


class TextStream(io.TextIOBase):
    encoding = 'utf-8'
    errors = 'strict'

    def __init__(self, k):
        self.k = k
        self.buffer = ByteStream(k)

    def writable(self):
        return True

    def isatty(self):
        return False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError(f'write() argument must be str, not {type(s).__name__}')
        send(self.k, s)
        return len(s)


def bundle(obj):
    data = {'text/plain': repr(obj)}
    if isinstance(obj, type):
        return data
    for meth, mime in MIMES:
        try:
            value = getattr(obj, meth, None)
            value = value() if callable(value) else None
            if isinstance(value, tuple):  # IPython allows (data, metadata)
                value = value[0]
            if isinstance(value, bytes):
                value = base64.b64encode(value).decode() if mime.startswith('image/') else value.decode()
            if value is not None and (isinstance(value, str) or mime == 'application/json'):
                data[mime] = value
        except Exception:
            pass
    return data


def display(*objs, **_ignored):
    for obj in objs:
        frame({'t': 'result', 'seq': RUN['seq'], 'main': False, 'data': bundle(obj)})


def execute(code):
    value = eval(code, G)
    if code.co_flags & inspect.CO_COROUTINE:  # top-level await
        loop = RUN['loop'] = RUN['loop'] or asyncio.new_event_loop()
        task = loop.create_task(value)
        try:
            value = loop.run_until_complete(task)
        finally:
            task.cancel()
    return value


def error(exc):
    tb = exc.__traceback__
    while tb and not tb.tb_frame.f_code.co_filename.startswith('<cell-'):
        tb = tb.tb_next  # drop the runner's own frames
    te = traceback.TracebackException(type(exc), exc, tb)
    lines = ''.join(te.format()).rstrip('\n').split('\n')
    try:
        value = str(exc)
    except Exception:
        value = '<unprintable>'
    frame({'t': 'error', 'seq': RUN['seq'], 'name': type(exc).__name__, 'value': value, 'traceback': lines})


def run(code):
    RUN['count'] += 1
    name = f"<cell-{RUN['count']}>"
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    try:
        tree = ast.parse(code, name)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        execute(compile(tree, name, 'exec', flags=flags))
        if last:
            value = execute(compile(ast.Expression(last.value), name, 'eval', flags=flags))
            if value is not None:
                frame({'t': 'result', 'seq': RUN['seq'], 'main': True, 'data': bundle(value)})
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code
        frame({'t': 'error', 'seq': RUN['seq'], 'name': 'SystemExit', 'value': str(code), 'traceback': []})
    except BaseException as exc:
        error(exc)


def main():
    frame({'t': 'ready', 'lang': 'python', 'version': sys.version.split()[0]})
    while True:
        line = REQUESTS.readline()
        if not line:
            break
        try:
            req = json.loads(line)
            RUN['seq'], RUN['limit'], code = int(req['seq']), int(req['limit']), str(req['code'])
        except (ValueError, KeyError, TypeError):
            continue
        RUN['sent'] = [0, 0]
        try:
            run(code)
        except BaseException as exc:  # the runner's own failure, never fatal
            try:
                error(exc)
            except Exception:
                pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        frame({'t': 'done', 'seq': RUN['seq'], 'execution_count': RUN['count']})


sys.stdout, sys.stderr = TextStream(0), TextStream(1)
sys.stdin = io.StringIO()  # user code must not read the requests: input() sees end of file
sys.path.insert(0, '')  # like the interactive interpreter (-I removed it): import from the cwd
G['display'] = display
builtins.exit = builtins.quit = sys.exit
main()

# hutch Python runner: one persistent interpreter per code context (see README.md).
# Started as `python3 -I -u -c <this file>`. Requests arrive on fd 3 as
# "run <seq> <nbytes>\n" + <nbytes> of UTF-8 code; events leave on fd 4 as one JSON
# object per line: ready (once), result*, error?, done (always last for a run).
# User output goes straight to fd 1/2 and is flushed before every event. SIGINT
# raises KeyboardInterrupt in a running snippet and is ignored while idle.
import ast, asyncio, base64, builtins, importlib.util, inspect, io, json, linecache, os, signal, sys, traceback

RUN = {'active': False, 'seq': 0, 'count': 0, 'loop': None}


def on_sigint(signum, frame):
    if RUN['active']:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, on_sigint)
# Private, non-inheritable copies of the protocol fds: subprocesses never see them
# and user code is free to use fds 3 and 4.
REQ, EVT = os.dup(3), os.dup(4)
os.close(3), os.close(4)
requests = os.fdopen(REQ, 'rb')
G = {'__name__': '__main__', '__doc__': None, '__builtins__': builtins}
MIMES = [('_repr_html_', 'text/html'), ('_repr_markdown_', 'text/markdown'), ('_repr_svg_', 'image/svg+xml'),
         ('_repr_png_', 'image/png'), ('_repr_jpeg_', 'image/jpeg'), ('_repr_json_', 'application/json'),
         ('_repr_latex_', 'text/latex')]


def flush():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass


def emit(**ev):
    flush()
    data = (json.dumps(ev, default=repr) + '\n').encode()
    while data:
        data = data[os.write(EVT, data):]


def fig_png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format='png', bbox_inches='tight')
    plt = sys.modules.get('matplotlib.pyplot')
    if plt:
        plt.close(fig)  # shown once: not again by show_figures()
    return base64.b64encode(buf.getvalue()).decode()


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
    figure = sys.modules.get('matplotlib.figure')
    if figure and isinstance(obj, figure.Figure):
        data['image/png'] = fig_png(obj)
    return data


def display(*objs, **_ignored):
    for obj in objs:
        emit(ev='result', seq=RUN['seq'], main=False, data=bundle(obj))


def show_figures(*_args, **_kwargs):
    """Emit every open pyplot figure and close it (also installed as plt.show)."""
    plt = sys.modules.get('matplotlib.pyplot')
    if plt:
        for num in plt.get_fignums():
            display(plt.figure(num))
        plt.close('all')


class PyplotHook:
    """Import hook: headless backend and plt.show = show_figures as soon as pyplot loads."""

    def find_spec(self, name, path=None, target=None):
        if name != 'matplotlib.pyplot':
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec and hasattr(spec.loader, 'exec_module'):
            exec_module = spec.loader.exec_module

            def patched(module):
                if not os.environ.get('MPLBACKEND'):
                    sys.modules['matplotlib'].rcParams['backend'] = 'agg'
                exec_module(module)
                module.show = show_figures
            spec.loader.exec_module = patched
        return spec


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


def error(seq, exc):
    tb = exc.__traceback__
    while tb and not tb.tb_frame.f_code.co_filename.startswith('<cell-'):
        tb = tb.tb_next  # drop the runner's own frames
    te = traceback.TracebackException(type(exc), exc, tb)
    if te.stack and te.stack[-1].name == on_sigint.__name__:
        te.stack.pop()  # KeyboardInterrupt raised by our handler
    lines = ''.join(te.format()).rstrip('\n').split('\n')
    try:
        value = str(exc)
    except Exception:
        value = '<unprintable>'
    emit(ev='error', seq=seq, name=type(exc).__name__, value=value, traceback=lines)


def run(seq, code):
    RUN['count'] += 1
    RUN['seq'] = seq
    name = f"<cell-{RUN['count']}>"
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    try:
        try:
            RUN['active'] = True
            tree = ast.parse(code, name)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            execute(compile(tree, name, 'exec', flags=flags))
            if last:
                value = execute(compile(ast.Expression(last.value), name, 'eval', flags=flags))
                if value is not None:
                    emit(ev='result', seq=seq, main=True, data=bundle(value))
            show_figures()
        finally:
            RUN['active'] = False
    except SystemExit as exc:
        emit(ev='error', seq=seq, name='SystemExit', value=str(0 if exc.code is None else exc.code), traceback=[])
    except BaseException as exc:
        error(seq, exc)


RUNNER_PID = os.getpid()


def main():
    emit(ev='ready', lang='python', version=sys.version.split()[0], pid=RUNNER_PID)
    while True:
        try:
            header = requests.readline()
            if not header:
                break
            try:
                cmd, seq, nbytes = header.split()
                seq, nbytes = int(seq), int(nbytes)
            except ValueError:
                continue
            code = requests.read(nbytes) if nbytes > 0 else b''
            if len(code) < nbytes:  # EOF inside a request
                break
            if cmd != b'run':
                continue
            try:
                run(seq, code.decode('utf-8', 'replace'))
                if os.getpid() != RUNNER_PID:
                    os._exit(0)  # a copy made by os.fork() in user code must not serve requests
            except BaseException as exc:  # the runner's own failure, never fatal
                if os.getpid() != RUNNER_PID:
                    os._exit(1)
                RUN['active'] = False
                try:
                    error(seq, exc)
                except Exception:
                    pass
            emit(ev='done', seq=seq, execution_count=RUN['count'])
        except KeyboardInterrupt:
            continue
        except OSError:  # the agent went away
            break
    flush()


sys.path.insert(0, '')  # like the interactive interpreter (-I removed it): import from the cwd
sys.meta_path.insert(0, PyplotHook())
G['display'] = display
builtins.exit = builtins.quit = sys.exit  # site's versions would close stdin (fd 0)
main()

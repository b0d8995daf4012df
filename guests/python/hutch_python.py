"""hutch Python guest: a `python3`-like command line inside a WASI 0.2 component.

componentize-py runs this module's top level once, at build time, and snapshots
the interpreter (pre-initialisation). The top level therefore:

* imports the commonly used standard library modules, so they are already in
  `sys.modules` when a guest starts;
* reads every other pure-Python standard library module into a compressed
  in-memory table and installs an import finder serving it, so the component
  needs no directory from the host at run time.

At run time the host calls `wasi:cli/run.run`; `Run.run` parses `sys.argv`
like CPython's command line and runs the program.
"""

import sys
import os
import zlib

# ---- build time: embed the standard library --------------------------------

# Directories of the standard library that cannot work in a WASI guest or are
# only tests and tools.
_SKIP_DIRS = {
    "test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip", "venv",
    "site-packages", "pydoc_data", "__pycache__", "_pyrepl", "curses", "dbm",
    "lib2to3", "__phello__",
}
_SKIP_PREFIXES = ("config-",)


def _stdlib_root():
    for entry in sys.path:
        if os.path.isfile(os.path.join(entry, "os.py")) and os.path.isdir(os.path.join(entry, "json")):
            return entry
    raise RuntimeError("standard library not found on sys.path %r" % (sys.path,))


def _collect_stdlib(root):
    table = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames
            if d not in _SKIP_DIRS and not d.startswith(_SKIP_PREFIXES) and "-" not in d and "." not in d
        )
        rel = os.path.relpath(dirpath, root)
        package = "" if rel == "." else rel.replace(os.sep, ".")
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            stem = name[:-3]
            if package and stem == "__init__":
                modname, is_pkg = package, True
            elif not package and stem == "__init__":
                continue
            else:
                modname, is_pkg = (package + "." + stem if package else stem), False
            with open(os.path.join(dirpath, name), "rb") as f:
                source = f.read()
            relpath = os.path.join(rel, name) if package else name
            table[modname] = (is_pkg, relpath, zlib.compress(source, 9))
    return table


_STDLIB_PREFIX = "/usr/lib/python%d.%d" % sys.version_info[:2]
_STDLIB = _collect_stdlib(_stdlib_root())

import importlib.abc  # noqa: E402
import importlib.machinery  # noqa: E402


class EmbeddedStdlib(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
    """Serves standard library modules from the table built at build time."""

    def find_spec(self, fullname, path=None, target=None):
        entry = _STDLIB.get(fullname)
        if entry is None:
            return None
        is_pkg, relpath, _ = entry
        origin = _STDLIB_PREFIX + "/" + relpath
        spec = importlib.machinery.ModuleSpec(fullname, self, origin=origin, is_package=is_pkg)
        spec.has_location = True
        if is_pkg:
            spec.submodule_search_locations = [os.path.dirname(origin)]
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        code = self.get_code(module.__name__)
        exec(code, module.__dict__)

    def is_package(self, fullname):
        entry = _STDLIB.get(fullname)
        if entry is None:
            raise ImportError("no embedded module named %r" % fullname, name=fullname)
        return entry[0]

    def get_source(self, fullname):
        entry = _STDLIB.get(fullname)
        if entry is None:
            raise ImportError("no embedded module named %r" % fullname, name=fullname)
        return importlib.util.decode_source(zlib.decompress(entry[2]))

    def get_code(self, fullname):
        entry = _STDLIB.get(fullname)
        if entry is None:
            raise ImportError("no embedded module named %r" % fullname, name=fullname)
        return compile(zlib.decompress(entry[2]), _STDLIB_PREFIX + "/" + entry[1], "exec", dont_inherit=True)


import importlib.util  # noqa: E402

# Modules most programs touch: importing them now puts them in the snapshot,
# so `import json` at run time costs nothing.
_PRELOAD = [
    "abc", "argparse", "array", "ast", "base64", "bisect", "calendar", "collections",
    "collections.abc", "contextlib", "copy", "csv", "dataclasses", "datetime", "decimal",
    "difflib", "enum", "fnmatch", "fractions", "functools", "glob", "hashlib", "heapq",
    "io", "itertools", "json", "linecache", "locale", "math", "numbers", "operator",
    "pathlib", "pprint", "random", "re", "runpy", "shlex", "shutil", "statistics",
    "string", "struct", "tempfile", "textwrap", "time", "traceback", "types", "typing",
    "unicodedata", "uuid", "warnings", "weakref", "zlib",
]

_FINDER = EmbeddedStdlib()
sys.meta_path.append(_FINDER)
for _name in _PRELOAD:
    __import__(_name)

import atexit  # noqa: E402
import linecache  # noqa: E402
import random  # noqa: E402
import runpy  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402
import warnings  # noqa: E402

from wit_world import exports  # noqa: E402
from wit_world.imports import exit as wasi_exit  # noqa: E402



def _os_exit(status):
    """os._exit with the full status: libc's _Exit only tells ok from err."""
    wasi_exit.exit_with_code(int(status) & 0xFF)


os._exit = _os_exit

# The build machine's paths are meaningless at run time.
_BUILD_PATH = list(sys.path)
sys.path[:] = []
sys.dont_write_bytecode = True


# ---- run time ---------------------------------------------------------------

USAGE = """\
usage: python3 [option] ... [-c cmd | -m mod | file | -] [arg] ...
Options (hutch WebAssembly guest, CPython {version}):
-c cmd : program passed in as string (terminates option list)
-m mod : run library module as a script (terminates option list)
-      : program read from stdin (default without a file)
-u     : unbuffered stdout and stderr
-E, -I : ignore PYTHON* environment variables (-I also implies -s, -P)
-P     : don't prepend a potentially unsafe path to sys.path
-W arg : warning control
-B, -b, -d, -O, -OO, -q, -s, -S, -v, -X opt : accepted, no effect here
-V     : print the Python version number and exit (also --version)
-h     : print this help message and exit (also --help)
file   : program read from script file
arg ...: arguments passed to program in sys.argv[1:]
"""

_NO_ARG_FLAGS = set("bBdEhiIOPqsSuvVx")


class UsageError(Exception):
    pass


def parse_args(args):
    """Splits CPython-style arguments into (options, mode, target, rest)."""
    opts = {"unbuffered": False, "ignore_env": False, "safe_path": False, "warnings": []}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if arg == "--version":
            return opts, "version", None, []
        if arg == "--help":
            return opts, "help", None, []
        if not arg.startswith("-") or arg == "-":
            break
        if arg.startswith("--"):
            raise UsageError("unknown option %s" % arg)
        j = 1
        while j < len(arg):
            ch = arg[j]
            if ch in "cmWX":
                value = arg[j + 1:]
                if not value:
                    i += 1
                    if i >= len(args):
                        raise UsageError("Argument expected for the -%s option" % ch)
                    value = args[i]
                if ch == "c":
                    return opts, "command", value, args[i + 1:]
                if ch == "m":
                    return opts, "module", value, args[i + 1:]
                if ch == "W":
                    opts["warnings"].append(value)
                break
            if ch not in _NO_ARG_FLAGS:
                raise UsageError("Unknown option: -%s" % ch)
            if ch == "V":
                return opts, "version", None, []
            if ch == "h":
                return opts, "help", None, []
            if ch == "u":
                opts["unbuffered"] = True
            elif ch == "E":
                opts["ignore_env"] = True
            elif ch == "I":
                opts["ignore_env"] = True
                opts["safe_path"] = True
            elif ch == "P":
                opts["safe_path"] = True
            j += 1
        i += 1
    rest = args[i:]
    if not rest:
        return opts, "stdin", None, []
    if rest[0] == "-":
        return opts, "stdin", "-", rest[1:]
    return opts, "file", rest[0], rest[1:]


def _strip_own_frames(tb):
    """Drops the launcher's frames (this file, runpy) from a traceback."""
    own = {_execute.__code__.co_filename, runpy.run_module.__code__.co_filename}
    while tb is not None and tb.tb_frame.f_code.co_filename in own:
        tb = tb.tb_next
    return tb


def _exit_code(exc):
    """Maps a SystemExit to an exit code the way CPython does."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _run_main_code(code_obj, filename, main_globals):
    exec(code_obj, main_globals)


def _new_main(filename):
    main = types.ModuleType("__main__")
    main.__file__ = filename
    main.__builtins__ = __builtins__
    main.__spec__ = None
    main.__loader__ = None
    sys.modules["__main__"] = main
    return main.__dict__


def _execute(mode, target, rest, opts):
    if mode == "command":
        sys.argv[:] = ["-c"] + rest
        source = target
        filename = "<string>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        main = _new_main(filename)
        del main["__file__"]
        if not opts["safe_path"]:
            sys.path.insert(0, "")
        exec(compile(source, filename, "exec", dont_inherit=True), main)
    elif mode == "module":
        sys.argv[:] = [target] + rest
        if not opts["safe_path"]:
            sys.path.insert(0, os.getcwd())
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    elif mode == "stdin":
        sys.argv[:] = ["-" if target == "-" else ""] + rest
        source = sys.stdin.read()
        filename = "<stdin>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        main = _new_main(filename)
        del main["__file__"]
        if not opts["safe_path"]:
            sys.path.insert(0, "")
        exec(compile(source, filename, "exec", dont_inherit=True), main)
    else:
        sys.argv[:] = [target] + rest
        path = os.path.abspath(target)
        try:
            with open(path, "rb") as f:
                source = f.read()
        except OSError as e:
            print("python3: can't open file %r: [Errno %d] %s" % (path, e.errno, e.strerror), file=sys.stderr)
            return 2
        if not opts["safe_path"]:
            sys.path.insert(0, os.path.dirname(path))
        main = _new_main(path)
        exec(compile(source, path, "exec", dont_inherit=True), main)
    return 0


def main(argv):
    try:
        opts, mode, target, rest = parse_args(argv[1:])
    except UsageError as e:
        print(str(e), file=sys.stderr)
        print("usage: python3 [option] ... [-c cmd | -m mod | file | -] [arg] ...", file=sys.stderr)
        print("Try `python -h' for more information.", file=sys.stderr)
        return 2
    if mode == "version":
        print("Python %d.%d.%d" % sys.version_info[:3])
        return 0
    if mode == "help":
        print(USAGE.format(version="%d.%d.%d" % sys.version_info[:3]), end="")
        return 0

    env = {} if opts["ignore_env"] else os.environ
    if env.get("PYTHONPATH"):
        sys.path[:0] = [p for p in env["PYTHONPATH"].split(":") if p]
    if opts["unbuffered"] or env.get("PYTHONUNBUFFERED"):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.reconfigure(write_through=True)
            except Exception:
                pass
    if env.get("PYTHONWARNINGS"):
        opts["warnings"] = env["PYTHONWARNINGS"].split(",") + opts["warnings"]
    if opts["warnings"]:
        sys.warnoptions[:] = opts["warnings"]
        warnings._processoptions(sys.warnoptions)

    try:
        return _execute(mode, target, rest, opts)
    except SystemExit as e:
        return _exit_code(e)
    except BaseException as e:
        _flush()
        tb = _strip_own_frames(e.__traceback__)
        e.__traceback__ = tb
        try:
            sys.excepthook(type(e), e, tb)
        except Exception:
            traceback.print_exception(type(e), e, tb)
        return 1


def _finish(code):
    """Runs atexit handlers, flushes, and reports the exit code to the host."""
    try:
        atexit._run_exitfuncs()
    except Exception:
        pass
    _flush()
    if code != 0:
        wasi_exit.exit_with_code(code & 0xFF)


class Run(exports.Run):
    def run(self) -> None:
        # Fresh randomness per instance: the snapshot holds the build's seed.
        random.seed()
        sys.path[:] = []
        # WASI has no inherited working directory: a host that preopens the
        # workspace somewhere other than "/" names it in PWD.
        pwd = os.environ.get("PWD")
        if pwd:
            try:
                os.chdir(pwd)
            except OSError:
                pass
        try:
            code = main(list(sys.argv))
        except SystemExit as e:
            code = _exit_code(e)
        except BaseException:
            traceback.print_exc()
            code = 1
        _finish(code)

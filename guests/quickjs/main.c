/*
 * hutch QuickJS guest: a `node`-like command line around the QuickJS engine,
 * built for wasm32-wasi (WASI preview 1).
 *
 *   qjs.wasm [options] [script.js | -e CODE | -p CODE | -] [args...]
 *
 * The JavaScript side of the runtime (console, util.inspect-style formatting,
 * process, timers, a small `require`) lives in prelude.js, which the build
 * script turns into prelude.inc. This file holds the native functions the
 * prelude needs and the event loop.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "quickjs.h"

/* from wasi.patch */
void JS_ReseedRandom(JSContext *ctx);

#ifndef HUTCH_QJS_VERSION
#define HUTCH_QJS_VERSION "unknown"
#endif

static const char prelude_src[] = {
#include "prelude.inc"
    , 0};

extern char **environ;

/* ---- small helpers ------------------------------------------------------ */

static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        buf += n;
        len -= (size_t)n;
    }
}

static char *read_stream(FILE *f, size_t *plen)
{
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        return NULL;
    for (;;) {
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
        if (len == cap) {
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
    }
    buf[len] = '\0';
    *plen = len;
    return buf;
}

static char *read_file(const char *path, size_t *plen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = read_stream(f, plen);
    int saved = errno;
    fclose(f);
    errno = saved;
    return buf;
}

/* Throws an Error shaped like Node's fs errors: "ENOENT: no such file or
   directory, open 'x'" with .code, .errno, .syscall and .path. */
static JSValue throw_errno(JSContext *ctx, int err, const char *syscall, const char *path)
{
    const char *code;
    switch (err) {
    case ENOENT: code = "ENOENT"; break;
    case EACCES: code = "EACCES"; break;
    case EPERM: code = "EPERM"; break;
    case EEXIST: code = "EEXIST"; break;
    case EISDIR: code = "EISDIR"; break;
    case ENOTDIR: code = "ENOTDIR"; break;
    case ENOTEMPTY: code = "ENOTEMPTY"; break;
    case EBADF: code = "EBADF"; break;
#ifdef ENOTCAPABLE
    case ENOTCAPABLE: code = "ENOTCAPABLE"; break;
#endif
    default: code = "EIO"; break;
    }
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: %s, %s '%s'", code, strerror(err), syscall, path);
    JSValue e = JS_NewError(ctx);
    JS_SetPropertyStr(ctx, e, "message", JS_NewString(ctx, msg));
    JS_SetPropertyStr(ctx, e, "code", JS_NewString(ctx, code));
    JS_SetPropertyStr(ctx, e, "errno", JS_NewInt32(ctx, -err));
    JS_SetPropertyStr(ctx, e, "syscall", JS_NewString(ctx, syscall));
    JS_SetPropertyStr(ctx, e, "path", JS_NewString(ctx, path));
    return JS_Throw(ctx, e);
}

/* ---- native functions exposed to the prelude as `__hutch.*` -------------- */

static JSValue n_write(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    int fd;
    size_t len;
    if (JS_ToInt32(ctx, &fd, argv[0]))
        return JS_EXCEPTION;
    const char *s = JS_ToCStringLen(ctx, &len, argv[1]);
    if (!s)
        return JS_EXCEPTION;
    write_all(fd == 2 ? 2 : 1, s, len);
    JS_FreeCString(ctx, s);
    return JS_UNDEFINED;
}

static JSValue n_read_file(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    size_t len;
    char *buf;
    const char *path = NULL;
    if (JS_IsNumber(argv[0])) { /* fd 0: all of stdin */
        buf = read_stream(stdin, &len);
        if (!buf)
            return throw_errno(ctx, errno, "read", "<stdin>");
    } else {
        path = JS_ToCString(ctx, argv[0]);
        if (!path)
            return JS_EXCEPTION;
        buf = read_file(path, &len);
        if (!buf) {
            JSValue r = throw_errno(ctx, errno, "open", path);
            JS_FreeCString(ctx, path);
            return r;
        }
        JS_FreeCString(ctx, path);
    }
    JSValue r = JS_NewStringLen(ctx, buf, len);
    free(buf);
    return r;
}

/* readLine() -> the next line of stdin without its '\n', or null at end of input. Blocks
   for that line only (readFile(0) waits for the end): a resident runner reads its
   requests with it. */
static JSValue n_read_line(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        int err = errno;
        free(line);
        if (ferror(stdin))
            return throw_errno(ctx, err, "read", "<stdin>");
        return JS_NULL;
    }
    if (n > 0 && line[n - 1] == '\n')
        n--;
    JSValue r = JS_NewStringLen(ctx, line, (size_t)n);
    free(line);
    return r;
}

static JSValue n_write_file(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    size_t len;
    const char *path = JS_ToCString(ctx, argv[0]);
    if (!path)
        return JS_EXCEPTION;
    const char *data = JS_ToCStringLen(ctx, &len, argv[1]);
    if (!data) {
        JS_FreeCString(ctx, path);
        return JS_EXCEPTION;
    }
    FILE *f = fopen(path, JS_ToBool(ctx, argv[2]) ? "ab" : "wb");
    JSValue r = JS_UNDEFINED;
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
        r = throw_errno(ctx, errno, "open", path);
    JS_FreeCString(ctx, data);
    JS_FreeCString(ctx, path);
    return r;
}

/* stat(path) -> [kind, size, mtime_ms] or null when it does not exist */
static JSValue n_stat(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    struct stat st;
    const char *path = JS_ToCString(ctx, argv[0]);
    if (!path)
        return JS_EXCEPTION;
    int rc = stat(path, &st);
    JS_FreeCString(ctx, path);
    if (rc != 0)
        return JS_NULL;
    JSValue a = JS_NewArray(ctx);
    const char *kind = S_ISDIR(st.st_mode) ? "dir" : S_ISREG(st.st_mode) ? "file" : "other";
    JS_SetPropertyUint32(ctx, a, 0, JS_NewString(ctx, kind));
    JS_SetPropertyUint32(ctx, a, 1, JS_NewFloat64(ctx, (double)st.st_size));
    JS_SetPropertyUint32(ctx, a, 2, JS_NewFloat64(ctx, st.st_mtim.tv_sec * 1e3 + st.st_mtim.tv_nsec / 1e6));
    return a;
}

static JSValue n_readdir(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *path = JS_ToCString(ctx, argv[0]);
    if (!path)
        return JS_EXCEPTION;
    DIR *d = opendir(path);
    if (!d) {
        JSValue r = throw_errno(ctx, errno, "scandir", path);
        JS_FreeCString(ctx, path);
        return r;
    }
    JSValue a = JS_NewArray(ctx);
    uint32_t i = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        JS_SetPropertyUint32(ctx, a, i++, JS_NewString(ctx, e->d_name));
    }
    closedir(d);
    JS_FreeCString(ctx, path);
    return a;
}

/* fsop(op, path): "mkdir", "unlink", "rmdir" */
static JSValue n_fsop(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *op = JS_ToCString(ctx, argv[0]);
    const char *path = JS_ToCString(ctx, argv[1]);
    JSValue r = JS_UNDEFINED;
    if (!op || !path) {
        r = JS_EXCEPTION;
    } else {
        int rc = -1;
        if (!strcmp(op, "mkdir"))
            rc = mkdir(path, 0777);
        else if (!strcmp(op, "unlink"))
            rc = unlink(path);
        else if (!strcmp(op, "rmdir"))
            rc = rmdir(path);
        else
            errno = EINVAL;
        if (rc != 0)
            r = throw_errno(ctx, errno, op, path);
    }
    JS_FreeCString(ctx, op);
    JS_FreeCString(ctx, path);
    return r;
}

static JSValue n_cwd(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    char buf[4096];
    if (!getcwd(buf, sizeof buf))
        return JS_NewString(ctx, "/");
    return JS_NewString(ctx, buf);
}

static JSValue n_chdir(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *path = JS_ToCString(ctx, argv[0]);
    if (!path)
        return JS_EXCEPTION;
    JSValue r = JS_UNDEFINED;
    if (chdir(path) != 0)
        r = throw_errno(ctx, errno, "chdir", path);
    JS_FreeCString(ctx, path);
    return r;
}

static JSValue n_now(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return JS_NewFloat64(ctx, ts.tv_sec * 1e3 + ts.tv_nsec / 1e6);
}

static JSValue n_sleep(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    double ms;
    if (JS_ToFloat64(ctx, &ms, argv[0]))
        return JS_EXCEPTION;
    if (ms > 0) {
        struct timespec ts = {(time_t)(ms / 1e3), (long)((ms - (time_t)(ms / 1e3) * 1e3) * 1e6)};
        nanosleep(&ts, NULL);
    }
    return JS_UNDEFINED;
}

static JSValue n_exit(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    int code = 0;
    if (argc > 0)
        JS_ToInt32(ctx, &code, argv[0]);
    fflush(stdout);
    fflush(stderr);
    _Exit(code & 0xff);
}

static JSValue n_eval_script(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    size_t len;
    const char *src = JS_ToCStringLen(ctx, &len, argv[0]);
    if (!src)
        return JS_EXCEPTION;
    const char *name = JS_ToCString(ctx, argv[1]);
    if (!name) {
        JS_FreeCString(ctx, src);
        return JS_EXCEPTION;
    }
    JSValue r = JS_Eval(ctx, src, len, name, JS_EVAL_TYPE_GLOBAL);
    JS_FreeCString(ctx, name);
    JS_FreeCString(ctx, src);
    return r;
}

static const JSCFunctionListEntry hutch_funcs[] = {
    JS_CFUNC_DEF("write", 2, n_write),
    JS_CFUNC_DEF("readFile", 1, n_read_file),
    JS_CFUNC_DEF("readLine", 0, n_read_line),
    JS_CFUNC_DEF("writeFile", 3, n_write_file),
    JS_CFUNC_DEF("stat", 1, n_stat),
    JS_CFUNC_DEF("readdir", 1, n_readdir),
    JS_CFUNC_DEF("fsop", 2, n_fsop),
    JS_CFUNC_DEF("cwd", 0, n_cwd),
    JS_CFUNC_DEF("chdir", 1, n_chdir),
    JS_CFUNC_DEF("now", 0, n_now),
    JS_CFUNC_DEF("sleep", 1, n_sleep),
    JS_CFUNC_DEF("exit", 1, n_exit),
    JS_CFUNC_DEF("evalScript", 2, n_eval_script),
};

/* ---- unhandled promise rejections --------------------------------------- */

typedef struct {
    JSValue promise;
    JSValue reason;
} Rejection;

static Rejection *rejections;
static size_t n_rejections, cap_rejections;

static void track_rejection(JSContext *ctx, JSValueConst promise, JSValueConst reason,
                            JS_BOOL is_handled, void *opaque)
{
    if (is_handled) {
        for (size_t i = 0; i < n_rejections; i++) {
            if (JS_VALUE_GET_PTR(rejections[i].promise) == JS_VALUE_GET_PTR(promise)) {
                JS_FreeValue(ctx, rejections[i].promise);
                JS_FreeValue(ctx, rejections[i].reason);
                rejections[i] = rejections[--n_rejections];
                return;
            }
        }
        return;
    }
    if (n_rejections == cap_rejections) {
        size_t cap = cap_rejections ? cap_rejections * 2 : 8;
        Rejection *r = realloc(rejections, cap * sizeof *r);
        if (!r)
            return;
        rejections = r;
        cap_rejections = cap;
    }
    rejections[n_rejections].promise = JS_DupValue(ctx, promise);
    rejections[n_rejections].reason = JS_DupValue(ctx, reason);
    n_rejections++;
}

/* ---- ES modules (for .mjs scripts) -------------------------------------- */

static JSModuleDef *load_module(JSContext *ctx, const char *name, void *opaque)
{
    size_t len;
    char *buf = read_file(name, &len);
    if (!buf) {
        JS_ThrowReferenceError(ctx, "could not load module '%s'", name);
        return NULL;
    }
    JSValue fn = JS_Eval(ctx, buf, len, name, JS_EVAL_TYPE_MODULE | JS_EVAL_FLAG_COMPILE_ONLY);
    free(buf);
    if (JS_IsException(fn))
        return NULL;
    JSModuleDef *m = JS_VALUE_GET_PTR(fn);
    JS_FreeValue(ctx, fn);
    return m;
}

/* ---- error reporting and the event loop --------------------------------- */

static JSValue prelude_fn(JSContext *ctx, const char *name)
{
    JSValue global = JS_GetGlobalObject(ctx);
    JSValue h = JS_GetPropertyStr(ctx, global, "__hutchInternal");
    JSValue f = JS_GetPropertyStr(ctx, h, name);
    JS_FreeValue(ctx, h);
    JS_FreeValue(ctx, global);
    return f;
}

/* Prints "Uncaught <Name>: <message>" and the stack; falls back to C when
   the prelude itself is broken. */
static void report_uncaught(JSContext *ctx, JSValueConst err)
{
    JSValue f = prelude_fn(ctx, "reportUncaught");
    if (JS_IsFunction(ctx, f)) {
        JSValue r = JS_Call(ctx, f, JS_UNDEFINED, 1, &err);
        JS_FreeValue(ctx, f);
        if (!JS_IsException(r)) {
            JS_FreeValue(ctx, r);
            return;
        }
        JS_FreeValue(ctx, JS_GetException(ctx));
    } else {
        JS_FreeValue(ctx, f);
    }
    const char *s = JS_ToCString(ctx, err);
    fprintf(stderr, "Uncaught %s\n", s ? s : "exception");
    JS_FreeCString(ctx, s);
}

static void die_uncaught(JSContext *ctx)
{
    JSValue e = JS_GetException(ctx);
    report_uncaught(ctx, e);
    JS_FreeValue(ctx, e);
    fflush(stdout);
    fflush(stderr);
    _Exit(1);
}

static void drain_jobs(JSRuntime *rt, JSContext *ctx)
{
    JSContext *jctx;
    for (;;) {
        int r = JS_ExecutePendingJob(rt, &jctx);
        if (r == 0)
            break;
        if (r < 0)
            die_uncaught(jctx);
    }
    if (n_rejections > 0) {
        report_uncaught(ctx, rejections[0].reason);
        fflush(stdout);
        fflush(stderr);
        _Exit(1);
    }
}

/* Runs microtasks and timers until nothing is left to do. */
static void run_loop(JSRuntime *rt, JSContext *ctx)
{
    JSValue tick = prelude_fn(ctx, "runNextTimer");
    for (;;) {
        drain_jobs(rt, ctx);
        if (!JS_IsFunction(ctx, tick))
            break;
        JSValue r = JS_Call(ctx, tick, JS_UNDEFINED, 0, NULL);
        if (JS_IsException(r))
            die_uncaught(ctx);
        int more = JS_ToBool(ctx, r);
        JS_FreeValue(ctx, r);
        if (!more)
            break;
    }
    JS_FreeValue(ctx, tick);
}

/* ---- engine setup (at start, or once at build time when pre-initialised) -- */

static JSRuntime *rt;
static JSContext *ctx;
static int engine_ready;

/* Creates the runtime and context and runs the prelude. Nothing here may
   depend on the instance's arguments, environment or files: with
   HUTCH_PREINIT it runs inside wizer and its result is the snapshot. */
static int init_engine(void)
{
    rt = JS_NewRuntime();
    if (!rt) {
        fprintf(stderr, "node: cannot allocate the JS runtime\n");
        return -1;
    }
    ctx = JS_NewContext(rt);
    if (!ctx) {
        fprintf(stderr, "node: cannot allocate the JS context\n");
        return -1;
    }
    JS_SetHostPromiseRejectionTracker(rt, track_rejection, NULL);
    JS_SetModuleLoaderFunc(rt, NULL, load_module, NULL);

    /* The prelude is a function expression taking the native bindings. */
    JSValue natives = JS_NewObject(ctx);
    JS_SetPropertyFunctionList(ctx, natives, hutch_funcs, sizeof hutch_funcs / sizeof hutch_funcs[0]);
    JS_SetPropertyStr(ctx, natives, "version", JS_NewString(ctx, HUTCH_QJS_VERSION));
    JSValue setup = JS_Eval(ctx, prelude_src, sizeof prelude_src - 1, "<hutch prelude>", JS_EVAL_TYPE_GLOBAL);
    if (JS_IsException(setup))
        die_uncaught(ctx);
    JSValue global = JS_GetGlobalObject(ctx);
    JSValue r = JS_Call(ctx, setup, global, 1, &natives);
    if (JS_IsException(r))
        die_uncaught(ctx);
    JS_FreeValue(ctx, r);
    JS_FreeValue(ctx, global);
    JS_FreeValue(ctx, setup);
    JS_FreeValue(ctx, natives);
    engine_ready = 1;
    return 0;
}

#ifdef HUTCH_PREINIT
/* wizer calls this once at build time and snapshots the memory; `_start`
   then finds the engine ready. libc constructors are not run here: `_start`
   runs them at run time as usual. */
__attribute__((export_name("wizer-initialize"))) void hutch_preinit(void)
{
    if (init_engine() != 0)
        abort();
}
#endif

/* ---- main ---------------------------------------------------------------- */

static void usage(void)
{
    printf("Usage: node [options] [ script.js | -e \"script\" | -p \"script\" | - ] [arguments]\n"
           "\n"
           "QuickJS %s for WASI, with a Node-like command line (hutch guest).\n"
           "\n"
           "Options:\n"
           "  -e, --eval CODE    evaluate CODE\n"
           "  -p, --print CODE   evaluate CODE and print the result\n"
           "  -                  read the script from stdin (also the default without a script)\n"
           "  -v, --version      print the version\n"
           "  -h, --help         print this help\n"
           "  --                 end of options\n",
           HUTCH_QJS_VERSION);
}

int main(int argc, char **argv)
{
    const char *eval_code = NULL;
    int print_result = 0;
    int i = 1;

    /* WASI has no inherited working directory: a host that preopens the
       workspace somewhere other than "/" names it in PWD. */
    const char *pwd = getenv("PWD");
    if (pwd && *pwd)
        (void)chdir(pwd);

    for (; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !strcmp(a, "-"))
            break;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "-e") || !strcmp(a, "--eval") || !strcmp(a, "-p") || !strcmp(a, "--print")) {
            print_result = a[1] == 'p' || a[2] == 'p';
            if (i + 1 >= argc) {
                fprintf(stderr, "node: %s requires an argument\n", a);
                return 9;
            }
            eval_code = argv[++i];
            i++;
            break;
        }
        if (!strncmp(a, "--eval=", 7) || !strncmp(a, "--print=", 8)) {
            print_result = a[2] == 'p';
            eval_code = strchr(a, '=') + 1;
            i++;
            break;
        }
        if (!strcmp(a, "-v") || !strcmp(a, "--version")) {
            printf("v%s-quickjs\n", HUTCH_QJS_VERSION);
            return 0;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        /* harmless Node flags that change nothing here */
        if (!strcmp(a, "--no-warnings") || !strcmp(a, "--no-deprecation") ||
            !strncmp(a, "--stack-size=", 13) || !strncmp(a, "--max-old-space-size=", 21) ||
            !strcmp(a, "--use-strict") || !strncmp(a, "--input-type=", 13))
            continue;
        fprintf(stderr, "node: bad option: %s\n", a);
        return 9;
    }

    /* What is left: [script] [args...] (script absent with -e/-p). */
    const char *script = NULL;
    int args_from = i;
    if (!eval_code && i < argc) {
        script = argv[i];
        args_from = i + 1;
    }

    if (!engine_ready) {
        if (init_engine() != 0)
            return 70;
    } else {
        JS_ReseedRandom(ctx);
    }

    /* process.argv: [argv0, script?, args...], and process.env */
    JSValue args = JS_NewArray(ctx);
    uint32_t n = 0;
    JS_SetPropertyUint32(ctx, args, n++, JS_NewString(ctx, argc > 0 ? argv[0] : "node"));
    if (script)
        JS_SetPropertyUint32(ctx, args, n++, JS_NewString(ctx, script));
    for (int k = args_from; k < argc; k++)
        JS_SetPropertyUint32(ctx, args, n++, JS_NewString(ctx, argv[k]));
    JSValue env = JS_NewObject(ctx);
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        JSAtom key = JS_NewAtomLen(ctx, *e, (size_t)(eq - *e));
        JS_SetProperty(ctx, env, key, JS_NewString(ctx, eq + 1));
        JS_FreeAtom(ctx, key);
    }
    JSValue start = prelude_fn(ctx, "start");
    JSValue start_args[2] = {args, env};
    JSValue sr = JS_Call(ctx, start, JS_UNDEFINED, 2, start_args);
    if (JS_IsException(sr))
        die_uncaught(ctx);
    JS_FreeValue(ctx, sr);
    JS_FreeValue(ctx, start);
    JS_FreeValue(ctx, args);
    JS_FreeValue(ctx, env);

    /* Load the user's code. */
    char *src = NULL;
    size_t len = 0;
    const char *filename;
    if (eval_code) {
        src = strdup(eval_code);
        len = strlen(eval_code);
        filename = "[eval]";
    } else if (script && strcmp(script, "-") != 0) {
        src = read_file(script, &len);
        if (!src) {
            fprintf(stderr, "node: cannot open '%s': %s\n", script, strerror(errno));
            return 1;
        }
        filename = script;
    } else {
        src = read_stream(stdin, &len);
        filename = "[stdin]";
    }
    if (!src) {
        fprintf(stderr, "node: out of memory reading the script\n");
        return 70;
    }
    /* a "#!" line is a comment for Node too */
    if (len >= 2 && src[0] == '#' && src[1] == '!')
        src[0] = src[1] = '/';

    size_t flen = strlen(filename);
    int as_module = flen > 4 && !strcmp(filename + flen - 4, ".mjs");
    JSValue result = JS_Eval(ctx, src, len, filename, as_module ? JS_EVAL_TYPE_MODULE : JS_EVAL_TYPE_GLOBAL);
    free(src);
    if (JS_IsException(result))
        die_uncaught(ctx);
    if (print_result) {
        JSValue p = prelude_fn(ctx, "printResult");
        JSValue pr = JS_Call(ctx, p, JS_UNDEFINED, 1, &result);
        if (JS_IsException(pr))
            die_uncaught(ctx);
        JS_FreeValue(ctx, pr);
        JS_FreeValue(ctx, p);
    }
    JS_FreeValue(ctx, result);

    run_loop(rt, ctx);

    /* process.on('exit') handlers and process.exitCode */
    JSValue fin = prelude_fn(ctx, "finish");
    JSValue code = JS_Call(ctx, fin, JS_UNDEFINED, 0, NULL);
    if (JS_IsException(code))
        die_uncaught(ctx);
    int exit_code = 0;
    JS_ToInt32(ctx, &exit_code, code);
    JS_FreeValue(ctx, code);
    JS_FreeValue(ctx, fin);
    fflush(stdout);
    fflush(stderr);
    /* The runtime is not torn down: the instance ends here anyway. */
    return exit_code & 0xff;
}

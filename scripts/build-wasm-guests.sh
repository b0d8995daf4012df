#!/usr/bin/env bash
# Builds hutch's WebAssembly language guests from registry packages:
#   qjs.wasm     QuickJS (PyPI `quickjs` sdist) + guests/quickjs, a WASI preview 1 module,
#                pre-initialised with wizer (npm @bytecodealliance/wizer) when npm is there
#   python.wasm  CPython via componentize-py (PyPI) + guests/python, a WASI 0.2 component
# and writes them with a manifest.json to the output directory.
#
#   scripts/build-wasm-guests.sh [--out DIR] [--only qjs|python] [--force]
#
# Output dir: --out, else $HUTCH_WASM_GUESTS, else /var/lib/hutch/wasm-guests.
# A guest is rebuilt only when the hash of its inputs (sources, pinned versions,
# flags, this script) differs from the one in manifest.json. Logs go to stderr;
# the last line on stdout is the output directory.
set -euo pipefail

QUICKJS_PYPI_VERSION=1.19.4
COMPONENTIZE_PY_VERSION=0.25.1
WIZER_NPM_VERSION=11.0.3
QJS_CFLAGS="-O2 -D_GNU_SOURCE -DCONFIG_BIGNUM -D_WASI_EMULATED_SIGNAL"
QJS_LDFLAGS="-Wl,--stack-first -Wl,-z,stack-size=1048576 -lwasi-emulated-signal"
APT_PACKAGES="clang lld wasi-libc libclang-rt-14-dev-wasm32 patch"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${HUTCH_WASM_GUESTS:-/var/lib/hutch/wasm-guests}
ONLY=""
FORCE=0

log() { echo "build-wasm-guests: $*" >&2; }
die() { log "error: $*"; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --out) [ $# -ge 2 ] || die "--out needs a directory"; OUT=$2; shift 2 ;;
        --out=*) OUT=${1#--out=}; shift ;;
        --only) [ $# -ge 2 ] || die "--only needs qjs or python"; ONLY=$2; shift 2 ;;
        --force) FORCE=1; shift ;;
        -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
        *) die "unknown argument: $1" ;;
    esac
done
case "$ONLY" in ""|qjs|python) ;; *) die "--only takes qjs or python, not $ONLY" ;; esac

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
VENV="$OUT/.venv"
CACHE="$OUT/.cache"
MANIFEST="$OUT/manifest.json"
mkdir -p "$CACHE"

# ---- inputs and their hashes ------------------------------------------------

hash_inputs() { # name -> sha256 of everything that decides the guest's bytes
    local name=$1
    {
        echo "script:$(sha256sum "$ROOT/scripts/build-wasm-guests.sh" | cut -d' ' -f1)"
        case "$name" in
            qjs)
                echo "quickjs:$QUICKJS_PYPI_VERSION cflags:$QJS_CFLAGS ldflags:$QJS_LDFLAGS wizer:$WIZER_NPM_VERSION"
                command -v npm >/dev/null && echo "npm:yes" || echo "npm:no"
                (cd "$ROOT/guests/quickjs" && find . -type f ! -name '*.md' | LC_ALL=C sort | xargs sha256sum)
                ;;
            python)
                echo "componentize-py:$COMPONENTIZE_PY_VERSION"
                (cd "$ROOT/guests/python" && find . -type f ! -path '*__pycache__*' ! -name '*.md' | LC_ALL=C sort | xargs sha256sum)
                ;;
        esac
    } | sha256sum | cut -d' ' -f1
}

manifest_hash() { # name -> input hash recorded in manifest.json, if the artefact is intact
    local name=$1 file=$2
    [ -f "$MANIFEST" ] && [ -f "$OUT/$file" ] || return 0
    python3 - "$MANIFEST" "$name" "$OUT/$file" <<'EOF'
import hashlib, json, sys
manifest, name, path = sys.argv[1:]
try:
    entry = json.load(open(manifest))["guests"][name]
except (OSError, ValueError, KeyError):
    sys.exit(0)
if hashlib.sha256(open(path, "rb").read()).hexdigest() == entry.get("sha256"):
    print(entry.get("inputs_sha256", ""))
EOF
}

# ---- tools ----------------------------------------------------------------

ensure_apt() {
    local rt
    rt=$(ls /usr/lib/llvm-14/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a 2>/dev/null | head -n1 || true)
    if command -v clang >/dev/null && command -v wasm-ld >/dev/null && command -v patch >/dev/null &&
        [ -f /usr/include/wasm32-wasi/stdio.h ] && [ -n "$rt" ]; then
        return
    fi
    [ "$(id -u)" = 0 ] || die "need root to install: $APT_PACKAGES"
    log "installing $APT_PACKAGES"
    apt-get update -o DPkg::Lock::Timeout=600 -qq >&2
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 $APT_PACKAGES >&2
}

ensure_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating $VENV"
        python3 -m venv "$VENV" >&2
    fi
    if ! "$VENV/bin/python" -m pip show componentize-py 2>/dev/null | grep -qx "Version: $COMPONENTIZE_PY_VERSION"; then
        log "installing componentize-py $COMPONENTIZE_PY_VERSION"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check "componentize-py==$COMPONENTIZE_PY_VERSION" >&2
    fi
}

# wizer ships as a Linux binary inside the npm package; without npm the
# QuickJS guest is built without pre-initialisation.
ensure_wizer() {
    WIZER="$OUT/.npm/node_modules/@bytecodealliance/wizer-linux-x64/wizer"
    if [ -x "$WIZER" ] && [ "$(cat "$OUT/.npm/.wizer-version" 2>/dev/null)" = "$WIZER_NPM_VERSION" ]; then
        return 0
    fi
    if ! command -v npm >/dev/null; then
        log "npm not found: qjs.wasm is built without wizer pre-initialisation"
        WIZER=""
        return 0
    fi
    log "installing wizer $WIZER_NPM_VERSION from npm"
    mkdir -p "$OUT/.npm"
    npm install --silent --no-audit --no-fund --prefix "$OUT/.npm" "@bytecodealliance/wizer@$WIZER_NPM_VERSION" >&2
    [ -x "$WIZER" ] || die "wizer binary missing after npm install: $WIZER"
    echo "$WIZER_NPM_VERSION" > "$OUT/.npm/.wizer-version"
}

# ---- the guests -------------------------------------------------------------

BUILD=""
cleanup() { [ -z "$BUILD" ] || rm -rf "$BUILD"; }
trap cleanup EXIT

build_qjs() {
    ensure_apt
    ensure_venv
    local sdist="$CACHE/quickjs-$QUICKJS_PYPI_VERSION.tar.gz"
    if [ ! -f "$sdist" ]; then
        log "downloading the quickjs $QUICKJS_PYPI_VERSION sdist from PyPI"
        "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
            "quickjs==$QUICKJS_PYPI_VERSION" -d "$CACHE" >&2
    fi
    local dir="$BUILD/qjs"
    mkdir -p "$dir"
    tar -xzf "$sdist" -C "$dir"
    local src="$dir/quickjs-$QUICKJS_PYPI_VERSION/upstream-quickjs"
    local upstream_version
    upstream_version=$(tr -d '[:space:]' < "$src/VERSION")
    (cd "$src" && patch -p1 --quiet < "$ROOT/guests/quickjs/wasi.patch") >&2
    cp "$ROOT/guests/quickjs/main.c" "$src/"
    python3 - "$ROOT/guests/quickjs/prelude.js" "$src/prelude.inc" <<'EOF'
import sys
data = open(sys.argv[1], "rb").read()
rows = (", ".join("0x%02x" % b for b in data[i:i + 16]) for i in range(0, len(data), 16))
open(sys.argv[2], "w").write(",\n".join(rows) + "\n")
EOF
    ensure_wizer
    local preinit=""
    [ -z "$WIZER" ] || preinit="-DHUTCH_PREINIT"
    log "compiling QuickJS $upstream_version for wasm32-wasi"
    local start=$SECONDS
    # shellcheck disable=SC2086
    (cd "$src" && clang --target=wasm32-wasi $QJS_CFLAGS $preinit \
        -DCONFIG_VERSION="\"$upstream_version\"" -DHUTCH_QJS_VERSION="\"$upstream_version\"" \
        -Wno-implicit-const-int-float-conversion \
        -o "$dir/qjs.wasm" main.c quickjs.c libregexp.c libunicode.c cutils.c libbf.c $QJS_LDFLAGS) >&2
    if [ -n "$WIZER" ]; then
        # --allow-wasi: creating the context reads the clock (Math.random's
        # seed, re-seeded at run time by main.c).
        "$WIZER" --allow-wasi -o "$dir/qjs.pre.wasm" "$dir/qjs.wasm" >&2
        mv "$dir/qjs.pre.wasm" "$dir/qjs.wasm"
        QJS_PREINIT=true
    else
        QJS_PREINIT=false
    fi
    log "qjs.wasm built in $((SECONDS - start)) s (pre-initialised: $QJS_PREINIT)"
    mv "$dir/qjs.wasm" "$OUT/qjs.wasm.tmp"
    mv "$OUT/qjs.wasm.tmp" "$OUT/qjs.wasm"
    QJS_SOURCE_SHA=$(sha256sum "$sdist" | cut -d' ' -f1)
    QJS_UPSTREAM=$upstream_version
}

build_python() {
    ensure_venv
    local dir="$BUILD/python"
    mkdir -p "$dir/app" "$dir/env/lib/site-packages"
    # Copy the app: componentize-py writes __pycache__ next to it.
    cp -r "$ROOT/guests/python/hutch_python.py" "$ROOT/guests/python/wit" "$dir/app/"
    log "componentizing the Python guest (componentize-py $COMPONENTIZE_PY_VERSION)"
    local start=$SECONDS
    # VIRTUAL_ENV points at an empty environment so that no site-packages of
    # the build machine ends up on the guest's path.
    (cd "$dir" && VIRTUAL_ENV="$dir/env" "$VENV/bin/componentize-py" \
        -d app/wit -w python-command componentize -p app hutch_python -o "$dir/python.wasm") >&2
    log "python.wasm built in $((SECONDS - start)) s"
    mv "$dir/python.wasm" "$OUT/python.wasm.tmp"
    mv "$OUT/python.wasm.tmp" "$OUT/python.wasm"
}

write_manifest() { # name file kind input_hash source_json flags
    python3 - "$MANIFEST" "$@" <<'EOF'
import datetime, hashlib, json, os, sys
manifest, name, file, kind, inputs, source, flags = sys.argv[1:]
try:
    data = json.load(open(manifest))
except (OSError, ValueError):
    data = {}
data.setdefault("guests", {})
path = os.path.join(os.path.dirname(manifest), file)
blob = open(path, "rb").read()
data["guests"][name] = {
    "name": name,
    "file": file,
    "kind": kind,
    "sha256": hashlib.sha256(blob).hexdigest(),
    "size": len(blob),
    "inputs_sha256": inputs,
    "source": json.loads(source),
    "build_flags": flags,
    "built_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
}
data["format"] = 1
tmp = manifest + ".tmp"
with open(tmp, "w") as f:
    json.dump(data, f, indent=2, sort_keys=True)
    f.write("\n")
os.replace(tmp, manifest)
EOF
}

BUILD=$(mktemp -d "$OUT/.build.XXXXXX")

if [ -z "$ONLY" ] || [ "$ONLY" = qjs ]; then
    want=$(hash_inputs qjs)
    have=$(manifest_hash qjs qjs.wasm)
    if [ "$FORCE" = 0 ] && [ "$want" = "$have" ]; then
        log "qjs.wasm is up to date"
    else
        build_qjs
        write_manifest qjs qjs.wasm module "$want" \
            "{\"package\": \"pypi:quickjs\", \"version\": \"$QUICKJS_PYPI_VERSION\", \"sdist_sha256\": \"$QJS_SOURCE_SHA\", \"engine\": \"QuickJS $QJS_UPSTREAM\", \"toolchain\": \"$(clang --version | head -n1)\", \"wasi_libc\": \"$(dpkg-query -W -f '${Version}' wasi-libc 2>/dev/null)\", \"preinitialized\": $QJS_PREINIT, \"wizer\": \"npm:@bytecodealliance/wizer@$WIZER_NPM_VERSION\"}" \
            "clang --target=wasm32-wasi $QJS_CFLAGS -DCONFIG_VERSION=\"$QJS_UPSTREAM\" $QJS_LDFLAGS$([ "$QJS_PREINIT" = true ] && echo ' -DHUTCH_PREINIT; wizer --allow-wasi'); patch guests/quickjs/wasi.patch"
    fi
fi

if [ -z "$ONLY" ] || [ "$ONLY" = python ]; then
    want=$(hash_inputs python)
    have=$(manifest_hash python python.wasm)
    if [ "$FORCE" = 0 ] && [ "$want" = "$have" ]; then
        log "python.wasm is up to date"
    else
        build_python
        write_manifest python python.wasm component "$want" \
            "{\"package\": \"pypi:componentize-py\", \"version\": \"$COMPONENTIZE_PY_VERSION\", \"engine\": \"CPython (bundled by componentize-py)\", \"world\": \"hutch:python/python-command\", \"exports\": [\"wasi:cli/run@0.2.12\"]}" \
            "componentize-py -d guests/python/wit -w python-command componentize hutch_python"
    fi
fi

echo "$OUT"

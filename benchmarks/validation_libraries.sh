#!/usr/bin/env bash
# Which library should compute the data-validation step's per-partition statistics and drift
# (docs/validation-libraries.md): the project's own pyarrow/numpy code, duckdb SQL, evidently,
# whylogs, pandera and TFDV, measured on one real window.
#   bash benchmarks/validation_libraries.sh [WINDOW_MANIFEST]
# Per library, under $OUT_DIR (default /tmp/vlibs):
#   <lib>/      a fresh venv, `pip install <pkg>` capped at $INSTALL_TIMEOUT s (default 600): its
#               site-packages bytes minus an empty venv's, the packages pulled in, the upper-bound
#               pins of its dependency tree (numpy<2, protobuf<5, ...), whether it imports;
#   <lib>-uv/   only when pip ran past the cap: the same install by uv (a resolver that does not
#               backtrack for minutes), so the library can still be sized and timed;
#               a module it then fails to import for want of is added and recorded;
#   lock-*.log  `pip install --dry-run --ignore-installed -c requirements/trainer.lock <pkg>`: does it
#               resolve with the trainer's exact pins? On a conflict the pin pip names is dropped from
#               a filtered copy of the lock (<lib>/constraints.txt) and the dry run repeated, so every
#               conflicting pin is listed, not only the first;
#   <lib>-run/  where the library is timed when it resolves with the lock: its runnable install
#               (extras the drift needs, pandas/pyarrow to read the parquet) at the trainer's pins,
#               less the pins pip says conflict (recorded).
# pyarrow and duckdb are timed in the project's .venv (they are in the trainer lock already).
# Timings (benchmarks/validation_libraries_timing.py): statistics of every partition of the window,
# and a drift comparison of the eval day against the training days where the library offers one;
# median of $REPEATS (default 5) after one warm-up, OMP_NUM_THREADS=1, duckdb on 1 thread.
# The window's partitions are first copied to $OUT_DIR/window (each checked against the manifest's
# sha256): another job may rebuild the window while this runs.
# Writes $FIGURES (default docs/figures/validation-libraries-2026-12-06.json); logs stay in $OUT_DIR.
# A rerun keeps the libraries it leaves out and moves the rerun ones' previous medians to their
# "earlier_runs" (delete the file for a clean slate).
# Venvs installed by an earlier run are reused (FRESH=1 rebuilds them). Nothing is installed into
# .venv or .venv-airflow. LIBRARIES="pyarrow duckdb" and STAGES="install" | "timing" run a part.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
MANIFEST="${1:-/tmp/ws/syn0/windows/2026-12-07_20d/manifest.json}"
OUT_DIR="${OUT_DIR:-/tmp/vlibs}"
FIGURES="${FIGURES:-$repo/docs/figures/validation-libraries-2026-12-06.json}"
REPEATS="${REPEATS:-5}"
INSTALL_TIMEOUT="${INSTALL_TIMEOUT:-600}"
RESOLVE_TIMEOUT="${RESOLVE_TIMEOUT:-240}"
LIBRARIES="${LIBRARIES:-pyarrow duckdb evidently whylogs pandera tfdv}"
STAGES="${STAGES:-install timing}"
PY="${PYTHON:-python3}"
PROJECT_PY="$repo/.venv/bin/python"
LOCK="$repo/requirements/trainer.lock"
HELPER="$repo/benchmarks/validation_libraries_timing.py"
[ -f "$MANIFEST" ] || { echo "no window manifest at $MANIFEST" >&2; exit 2; }
[ -x "$PROJECT_PY" ] || { echo "no project venv at $PROJECT_PY (make setup)" >&2; exit 2; }
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
MANIFEST="$(cd "$(dirname "$MANIFEST")" && pwd)/$(basename "$MANIFEST")"
LOAD_AT_START="$(cut -d' ' -f1 /proc/loadavg)"
export OMP_NUM_THREADS=1 DUCKDB_THREADS=1 PIP_DISABLE_PIP_VERSION_CHECK=1
log() { echo ">> $(date +%H:%M:%S) $*" >&2; }

# library -> the distribution pip installs | the module it imports | the runnable install's extras
pkg_of() {
  case "$1" in
    pyarrow) echo pyarrow ;;
    duckdb) echo duckdb ;;
    evidently) echo evidently ;;
    whylogs) echo whylogs ;;
    pandera) echo pandera ;;
    tfdv) echo tensorflow-data-validation ;;
    *) echo "unknown library $1" >&2; return 2 ;;
  esac
}
module_of() {
  case "$1" in
    tfdv) echo tensorflow_data_validation ;;
    *) echo "$1" ;;
  esac
}
# what the timing needs beyond `pip install <pkg>` ($2: the version the plain install got)
run_spec_of() {
  case "$1" in
    evidently) echo "evidently==$2" ;;  # pulls pandas[parquet]
    # the drift lives in the viz extra; whylogs calls np.unicode_, gone in numpy 2 (logging a frame
    # fails with AttributeError): numpy<2, and so pyarrow<26 (26 refuses numpy 1 at import), which
    # the trainer's numpy and pyarrow pins then have to give way to
    whylogs) echo "whylogs[viz]==$2 pandas pyarrow<26 numpy<2" ;;
    pandera) echo "pandera[pandas]==$2 pyarrow" ;;
    tfdv) echo "tensorflow-data-validation==$2" ;;
  esac
}
version_in() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("version") or "")' "$1"; }
installed_ok() { grep -q '"installed": true' "$1" 2>/dev/null; }

# the empty venv every size is measured against
empty="$OUT_DIR/empty"
if [ "${FRESH:-0}" = 1 ] || [ ! -f "$empty/.done" ]; then
  rm -rf "$empty"
  "$PY" -m venv "$empty"
  touch "$empty/.done"
fi

inspect() {  # $1 venv $2 pkg $3 lib $4 rc $5 seconds $6 installer $7 added modules
  "$1/bin/python" "$HELPER" --inspect "$2" --module "$(module_of "$3")" --empty "$empty" --lock "$LOCK" \
    --install-rc "$4" --install-seconds "$5" --install-log "$1/install.log" --installer "$6" \
    --added "${7:-}" >"$1/install.json"
}

install_one() {  # $1 library: fresh venv + `pip install <pkg>`
  local lib="$1" pkg venv rc=0 start seconds
  pkg="$(pkg_of "$lib")"
  venv="$OUT_DIR/$lib"
  if [ "${FRESH:-0}" != 1 ] && [ -f "$venv/install.json" ]; then
    log "$lib: reusing $venv"
    return 0
  fi
  rm -rf "$venv"
  "$PY" -m venv "$venv"
  log "$lib: pip install $pkg (cap ${INSTALL_TIMEOUT}s)"
  start=$(date +%s)
  timeout "$INSTALL_TIMEOUT" "$venv/bin/python" -m pip install "$pkg" >"$venv/install.log" 2>&1 || rc=$?
  seconds=$(( $(date +%s) - start ))
  inspect "$venv" "$pkg" "$lib" "$rc" "$seconds" pip
  log "$lib: pip install rc=$rc in ${seconds}s"
}

install_uv() {  # $1 library whose pip install ran past the cap: the same install by uv
  local lib="$1" pkg venv rc=0 start seconds added="" missing try
  pkg="$(pkg_of "$lib")"
  venv="$OUT_DIR/$lib-uv"
  if [ "${FRESH:-0}" != 1 ] && [ -f "$venv/install.json" ]; then
    log "$lib: reusing $venv"
    return 0
  fi
  if [ ! -x "$OUT_DIR/uv-tool/bin/uv" ]; then
    rm -rf "$OUT_DIR/uv-tool"
    "$PY" -m venv "$OUT_DIR/uv-tool"
    "$OUT_DIR/uv-tool/bin/python" -m pip install -q uv >"$OUT_DIR/uv-tool.log" 2>&1
  fi
  rm -rf "$venv"
  "$PY" -m venv "$venv"
  log "$lib: pip ran past ${INSTALL_TIMEOUT}s: uv pip install $pkg"
  start=$(date +%s)
  timeout "$INSTALL_TIMEOUT" "$OUT_DIR/uv-tool/bin/uv" pip install --python "$venv/bin/python" "$pkg" \
    >"$venv/install.log" 2>&1 || rc=$?
  seconds=$(( $(date +%s) - start ))
  # a module the library imports but its dependency tree no longer brings (recorded)
  for try in 1 2 3; do
    [ "$rc" = 0 ] || break
    missing=$("$venv/bin/python" -c "import $(module_of "$lib")" 2>&1 | sed -n "s/^ModuleNotFoundError: No module named '\([A-Za-z0-9_]*\)'.*/\1/p" | tail -1) || true
    [ -n "$missing" ] || break
    log "$lib: import needs $missing, which the install did not bring: adding it (try $try)"
    "$OUT_DIR/uv-tool/bin/uv" pip install --python "$venv/bin/python" "$missing" >>"$venv/install.log" 2>&1 || rc=$?
    added="$added $missing"
  done
  inspect "$venv" "$pkg" "$lib" "$rc" "$seconds" uv "$added"
  log "$lib: uv install rc=$rc in ${seconds}s (added:${added:- none})"
}

# pip's dry run with $2 as constraints, on conflict the named pin dropped and again: the pins dropped
resolve_dropping() {  # $1 name of the logs (in $3's folder) $2 constraints file to filter $3... packages
  local name="$1" cons="$2" rc try pins
  shift 2
  for try in 1 2 3 4 5 6 7 8; do
    rc=0
    timeout "$RESOLVE_TIMEOUT" "$empty/bin/python" -m pip install --dry-run --ignore-installed -c "$cons" "$@" \
      --report "$(dirname "$cons")/$name-$try.report.json" >"$(dirname "$cons")/$name-$try.log" 2>&1 || rc=$?
    [ "$rc" = 0 ] && break
    pins=$(sed -n 's/.*The user requested (constraint) \([A-Za-z0-9_.-]*\)[=<>!~ ].*/\1/p' "$(dirname "$cons")/$name-$try.log" | sort -u)
    [ -n "$pins" ] || break
    for p in $pins; do
      log "  conflicts with the lock's $(grep -i "^$p==" "$cons" || echo "$p"): dropped, resolving again"
      grep -vi "^$p==" "$cons" >"$cons.tmp" && mv "$cons.tmp" "$cons"
    done
  done
  echo "$rc" >"$(dirname "$cons")/$name.rc"
}

resolve_one() {  # $1 library: dry-run resolve against the trainer lock
  local lib="$1" pkg dir
  pkg="$(pkg_of "$lib")"
  dir="$OUT_DIR/$lib"
  mkdir -p "$dir"
  rm -f "$dir"/lock-*.log "$dir"/lock-*.report.json
  cp "$LOCK" "$dir/constraints.txt"
  log "$lib: dry-run resolve of $pkg against $LOCK"
  resolve_dropping lock "$dir/constraints.txt" "$pkg"
  "$PY" "$HELPER" --resolve-summary "$dir" --lock "$LOCK" >"$dir/lock.json"
}

run_venv() {  # $1 library (resolves with the lock): its runnable install at the trainer's pins
  local lib="$1" venv spec rc=0 version
  venv="$OUT_DIR/$lib-run"
  if [ "${FRESH:-0}" != 1 ] && [ -f "$venv/.done" ]; then
    return 0
  fi
  version="$(version_in "$OUT_DIR/$lib/install.json")"
  spec="$(run_spec_of "$lib" "$version")"
  rm -rf "$venv"
  "$PY" -m venv "$venv"
  cp "$LOCK" "$venv/constraints.txt"
  log "$lib: timing venv: pip install $spec, the trainer's pins as constraints"
  # shellcheck disable=SC2086
  resolve_dropping run "$venv/constraints.txt" $spec
  # shellcheck disable=SC2086
  timeout "$INSTALL_TIMEOUT" "$venv/bin/python" -m pip install -c "$venv/constraints.txt" $spec \
    >"$venv/install.log" 2>&1 || rc=$?
  "$venv/bin/python" "$HELPER" --run-summary "$venv" --lock "$LOCK" --spec "$spec" --install-rc "$rc" \
    >"$venv/run.json"
  [ "$rc" = 0 ] && touch "$venv/.done"
  log "$lib: timing venv rc=$rc"
}

timing_python() {  # $1 library: the interpreter its timing runs with
  case "$1" in
    pyarrow | duckdb) echo "$PROJECT_PY" ;;
    *)
      if [ -f "$OUT_DIR/$1-run/.done" ]; then echo "$OUT_DIR/$1-run/bin/python"
      elif installed_ok "$OUT_DIR/$1-uv/install.json"; then echo "$OUT_DIR/$1-uv/bin/python"
      elif installed_ok "$OUT_DIR/$1/install.json"; then echo "$OUT_DIR/$1/bin/python"
      fi ;;
  esac
}

time_one() {  # $1 library: one JSON line in $OUT_DIR/$1/timing.json
  local lib="$1" python rc=0
  python="$(timing_python "$lib")"
  if [ -z "$python" ]; then
    "$PY" "$HELPER" --failed-timing "$lib" --log "$OUT_DIR/$lib/install.log" --reason "not installed" \
      >"$OUT_DIR/$lib/timing.json"
    return 0
  fi
  log "$lib: timing ($REPEATS repeats after 1 warm-up) with $python"
  (cd "$repo" && PYTHONPATH="$repo" timeout 1800 "$python" "$HELPER" --library "$lib" \
    --manifest "$MANIFEST" --repeats "$REPEATS") >"$OUT_DIR/$lib/timing.json" 2>"$OUT_DIR/$lib/timing.log" || rc=$?
  if [ "$rc" != 0 ]; then
    log "$lib: timing failed (rc=$rc), see $OUT_DIR/$lib/timing.log"
    "$PY" "$HELPER" --failed-timing "$lib" --log "$OUT_DIR/$lib/timing.log" --rc "$rc" >"$OUT_DIR/$lib/timing.json"
  fi
  "$PY" -c 'import json, sys; d = json.loads(open(sys.argv[1]).read()); print(">>  ", d.get("stats_seconds_median"), d.get("drift_seconds_median"), d.get("error", ""))' \
    "$OUT_DIR/$lib/timing.json" >&2
}

# a private copy of the window: another job may rebuild it (new partitions) while this runs
rm -rf "$OUT_DIR/window"
mkdir -p "$OUT_DIR/window"
"$PY" "$HELPER" --snapshot "$MANIFEST" --output "$OUT_DIR/window/manifest.json" >"$OUT_DIR/window/snapshot.json"
MANIFEST="$OUT_DIR/window/manifest.json"
log "window copied to $OUT_DIR/window ($(cat "$OUT_DIR/window/snapshot.json"))"

for lib in $LIBRARIES; do
  case " $STAGES " in *" install "*) ;; *) continue ;; esac
  install_one "$lib"
  if grep -q '"install_timed_out": true' "$OUT_DIR/$lib/install.json"; then
    install_uv "$lib"
  fi
  resolve_one "$lib"
  if [ "$lib" != pyarrow ] && [ "$lib" != duckdb ] && [ "$(cat "$OUT_DIR/$lib/lock.rc")" = 0 ] \
    && [ "$(ls "$OUT_DIR/$lib"/lock-*.log | wc -l)" = 1 ]; then
    run_venv "$lib"
  fi
done
for lib in $LIBRARIES; do
  case " $STAGES " in *" timing "*) time_one "$lib" ;; esac
done
# the machine the numbers come from
{
  echo "cores=$(nproc --all)"  # --all: plain nproc reads OMP_NUM_THREADS
  echo "load_1min_at_start=$LOAD_AT_START"
  echo "memory_kib=$(awk '/MemTotal/ {print $2}' /proc/meminfo)"
  echo "load_1min_at_end=$(cut -d' ' -f1 /proc/loadavg)"
  echo "python=$("$PY" -c 'import platform; print(platform.python_version())')"
  echo "glibc=$(ldd --version | head -1 | awk '{print $NF}')"
  echo "gpu=$(command -v nvidia-smi >/dev/null && nvidia-smi -L | head -1 || echo none)"
} >"$OUT_DIR/machine.txt"
mkdir -p "$(dirname "$FIGURES")"
"$PY" "$HELPER" --assemble "$OUT_DIR" --libraries "$LIBRARIES" --manifest "$MANIFEST" \
  --repeats "$REPEATS" --lock "$LOCK" --output "$FIGURES"
log "wrote $FIGURES"

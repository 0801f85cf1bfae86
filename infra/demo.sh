#!/usr/bin/env bash
# `make demo`: the shipped recipe end to end, through Airflow itself, on a small synthetic workspace.
#
#   1. a 42-day synthetic home-feed workspace in var/demo (source parquet + Feast registry)
#   2. a fresh Airflow home in var/airflow (SQLite metadata DB, the `training` pool)
#   3. `airflow dags test ranker_pretrain`: the base model, trained from scratch on the 20 days
#      before the first daily window (the registry's `base` alias)
#   4. `airflow dags test ranker_retrain` for two consecutive days with the shipped defaults
#      (`ranker config show`: F,J warm-started from the base): the first run has no champion
#      (absolute gate checks only) and promotes; the second is gated against the first's champion
#   5. per run: the recipe that ran, every gate check with value and threshold, the outcome and
#      why (infra/demo_summary.py, also as var/demo-logs/demo.json), the champion and its history
#
# Assumes `make setup` ran (the Makefile's demo target does it). Every run starts from scratch.
# Sizes can be overridden: DEMO_DAYS, DEMO_USERS, DEMO_PINS, DEMO_REQUESTS_PER_DAY, DEMO_START;
# DEMO_EPOCHS (unset: the recipe's own) is passed to the retrain as the `epochs` Param.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

DEMO_START="${DEMO_START:-2026-01-01}"
DEMO_DAYS="${DEMO_DAYS:-42}"
DEMO_USERS="${DEMO_USERS:-1000}"
DEMO_PINS="${DEMO_PINS:-3000}"
DEMO_REQUESTS_PER_DAY="${DEMO_REQUESTS_PER_DAY:-400}"
DEMO_EPOCHS="${DEMO_EPOCHS:-}"
WINDOW_DAYS=20 # the shipped window.days; the base model's range is as long (pretrain.days unset)

for value in "$DEMO_DAYS" "$DEMO_USERS" "$DEMO_PINS" "$DEMO_REQUESTS_PER_DAY" ${DEMO_EPOCHS:+"$DEMO_EPOCHS"}; do
  [[ "$value" =~ ^[1-9][0-9]{0,7}$ ]] || { echo "demo: sizes must be positive integers, got '$value'" >&2; exit 2; }
done
[[ "$DEMO_START" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] && [[ "$(date -u -d "$DEMO_START" +%F 2>/dev/null)" == "$DEMO_START" ]] ||
  { echo "demo: DEMO_START must be a date YYYY-MM-DD, got '$DEMO_START'" >&2; exit 2; }
if (( DEMO_DAYS < 2 * WINDOW_DAYS + 2 )); then
  echo "demo: DEMO_DAYS must be >= $((2 * WINDOW_DAYS + 2)) (the base's ${WINDOW_DAYS} days + a ${WINDOW_DAYS}-day window + two eval days)" >&2
  exit 2
fi

RANKER="$REPO/.venv/bin/ranker"
AIRFLOW="$REPO/.venv-airflow/bin/airflow"
for exe in "$RANKER" "$AIRFLOW"; do
  [[ -x "$exe" ]] || { echo "demo: $exe is missing: run 'make setup' first" >&2; exit 2; }
done

DEMO_DIR="${DEMO_DIR:-$REPO/var}" # the demo's folders: demo (workspace), airflow, demo-logs
[[ "$DEMO_DIR" == /* ]] || { echo "demo: DEMO_DIR must be an absolute path, got '$DEMO_DIR'" >&2; exit 2; }
export RANKER_HOME="$DEMO_DIR/demo"
export RANKER_BIN="$RANKER"
export AIRFLOW_HOME="$DEMO_DIR/airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$REPO/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="sqlite:///$AIRFLOW_HOME/airflow.db"
export RANKER_TASK_RETRIES=0 # a demo should fail fast, not back off for minutes

day_after() { date -u -d "$1 + $2 days" +%F; }
DAY1="$(day_after "$DEMO_START" $((DEMO_DAYS - 2)))"
DAY2="$(day_after "$DEMO_START" $((DEMO_DAYS - 1)))"
LOG_DIR="$DEMO_DIR/demo-logs"
started=$(date +%s)
step() { printf '\n== [%4ss] %s\n' "$(($(date +%s) - started))" "$*"; }

step "fresh workspace $RANKER_HOME and Airflow home $AIRFLOW_HOME"
rm -rf "$RANKER_HOME" "$AIRFLOW_HOME" "$LOG_DIR"
mkdir -p "$RANKER_HOME" "$AIRFLOW_HOME" "$LOG_DIR"

step "synthetic home feed: $DEMO_DAYS days from $DEMO_START ($DEMO_USERS users, $DEMO_PINS pins, $DEMO_REQUESTS_PER_DAY requests/day)"
"$RANKER" data synth --start "$DEMO_START" --days "$DEMO_DAYS" --users "$DEMO_USERS" --pins "$DEMO_PINS" \
  --requests-per-day "$DEMO_REQUESTS_PER_DAY" --seed 7 --json >"$LOG_DIR/synth.json"
cat "$LOG_DIR/synth.json"

step "Feast: apply the feature repository"
"$RANKER" features apply --json >"$LOG_DIR/features-apply.json"
cat "$LOG_DIR/features-apply.json"

step "Airflow: migrate the metadata DB (SQLite), create the training pool"
"$AIRFLOW" db migrate >"$LOG_DIR/airflow-db.log" 2>&1
"$AIRFLOW" pools set training 1 "ranker training jobs" >>"$LOG_DIR/airflow-db.log" 2>&1
# the DagBag the DAG processor would build: no import errors allowed (Airflow logs to stdout too,
# so the verdict is written to a file of its own)
"$REPO/.venv-airflow/bin/python" - "$REPO/dags" "$LOG_DIR/dagbag.txt" <<'PY' >>"$LOG_DIR/airflow-db.log" 2>&1 ||
import sys
from airflow.dag_processing.dagbag import BundleDagBag

bag = BundleDagBag(dag_folder=sys.argv[1], bundle_path=sys.argv[1], bundle_name="dags-folder")
with open(sys.argv[2], "w") as out:
    if bag.import_errors:
        out.write("the DAG files have import errors:\n" + "\n".join(bag.import_errors.values()) + "\n")
        sys.exit(1)
    out.write("DAGs parsed without import errors: " + ", ".join(sorted(bag.dag_ids)) + "\n")
PY
  { echo "demo: $(cat "$LOG_DIR/dagbag.txt" 2>/dev/null || echo "the DagBag check failed: see $LOG_DIR/airflow-db.log")" >&2; exit 1; }
cat "$LOG_DIR/dagbag.txt"
"$AIRFLOW" dags report 2>/dev/null | grep -E "^(file|ranker_)" || true

step "the recipe that ships (ranker config show: built-in defaults, no ranker.toml in $RANKER_HOME)"
"$RANKER" config show --json >"$LOG_DIR/config.json"
"$REPO/.venv/bin/python" "$REPO/infra/demo_summary.py" recipe "$LOG_DIR/config.json"

# airflow dags test DAG DAY CONF: the full log goes to a file, the terminal gets one line per finished task
dag_test() {
  local dag="$1" day="$2" conf="$3" log="$4" logical
  logical="$(day_after "$day" 1)T06:00:00+00:00"
  set +e
  "$AIRFLOW" dags test "$dag" "$logical" -c "$conf" 2>&1 |
    tee "$log" | grep --line-buffered -E "\[DAG TEST\] end task" |
    while IFS= read -r line; do
      task="$(sed -E 's/.*task_id=([a-z_]+).*/\1/' <<<"$line")"
      printf '  [%4ss] finished %s\n' "$(($(date +%s) - started))" "$task"
    done
  local rc="${PIPESTATUS[0]}"
  set -e
  if [[ "$rc" != 0 ]]; then
    echo "demo: the $dag run for $day failed (exit $rc); the last lines of its log:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
}

step "airflow dags test ranker_pretrain (window_end=$DAY1): the base model — log: $LOG_DIR/pretrain.log"
dag_test ranker_pretrain "$DAY1" "{\"window_end\": \"$DAY1\", \"reason\": \"make demo: the base for $DAY1\"}" \
  "$LOG_DIR/pretrain.log"

run_day() {
  local day="$1" conf="{\"window_end\": \"$1\"${DEMO_EPOCHS:+, \"epochs\": $DEMO_EPOCHS}}"
  step "airflow dags test ranker_retrain $conf — log: $LOG_DIR/retrain-$day.log"
  dag_test ranker_retrain "$day" "$conf" "$LOG_DIR/retrain-$day.log"
}

run_day "$DAY1"
run_day "$DAY2"

step "results"
echo "Airflow runs of ranker_retrain (task states from the metadata DB):"
"$REPO/.venv-airflow/bin/python" - <<'PY' 2>/dev/null
from airflow.models.dagrun import DagRun
from airflow.utils.session import create_session

with create_session() as session:
    runs = session.query(DagRun).filter(DagRun.dag_id == "ranker_retrain").order_by(DagRun.id).all()
    for run in runs:
        print(f"  {run.run_id}: window_end={(run.conf or {}).get('window_end')} state={run.state}")
        states = {ti.task_id: ti.state for ti in run.get_task_instances(session=session)}
        print("    " + ", ".join(f"{task}={state}" for task, state in states.items()))
PY
echo
echo "what ran and why the gate decided (also in $LOG_DIR/demo.json):"
"$REPO/.venv/bin/python" "$REPO/infra/demo_summary.py" runs "$RANKER_HOME" "$LOG_DIR/demo.json"
echo
"$RANKER" models list
echo
echo "metrics (Prometheus textfile): $RANKER_HOME/metrics/ranker.prom"
grep -E "^ranker_(last_run_status|last_run_promoted|gate_passed|promotions_total|rejections_total|eval_save_hit_at_3_ratio)" \
  "$RANKER_HOME/metrics/ranker.prom" 2>/dev/null | head -n 12 || true
echo "training curves and run reports (version, run, window, eval day; the champion's line; the gate table):"
find "$RANKER_HOME/runs" \( -name curve.png -o -name report.md \) -printf '  %p\n' 2>/dev/null | sort
echo "step summaries: $RANKER_HOME/pipeline/<run id>/<step>.json; Airflow logs: $LOG_DIR, $AIRFLOW_HOME/logs"
step "demo finished"

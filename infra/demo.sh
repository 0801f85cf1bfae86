#!/usr/bin/env bash
# `make demo`: the daily retrain end to end, through Airflow itself, on a small synthetic workspace.
#
#   1. a ~25-day synthetic home-feed workspace in var/demo (source parquet + Feast registry)
#   2. a fresh Airflow home in var/airflow (SQLite metadata DB, the `training` pool)
#   3. `airflow dags test ranker_retrain` for two consecutive days: the first run has no champion
#      (absolute gate checks only) and promotes; the second has a champion to beat
#   4. the gate decisions, the champion and its history, where the metrics and plots are
#
# Assumes `make setup` ran (the Makefile's demo target does it). Every run starts from scratch.
# Sizes can be overridden: DEMO_DAYS, DEMO_USERS, DEMO_PINS, DEMO_REQUESTS_PER_DAY, DEMO_EPOCHS, DEMO_START.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

DEMO_START="${DEMO_START:-2026-01-01}"
DEMO_DAYS="${DEMO_DAYS:-25}"
DEMO_USERS="${DEMO_USERS:-1000}"
DEMO_PINS="${DEMO_PINS:-3000}"
DEMO_REQUESTS_PER_DAY="${DEMO_REQUESTS_PER_DAY:-400}"
DEMO_EPOCHS="${DEMO_EPOCHS:-3}"
WINDOW_DAYS=20

for value in "$DEMO_DAYS" "$DEMO_USERS" "$DEMO_PINS" "$DEMO_REQUESTS_PER_DAY" "$DEMO_EPOCHS"; do
  [[ "$value" =~ ^[1-9][0-9]{0,7}$ ]] || { echo "demo: sizes must be positive integers, got '$value'" >&2; exit 2; }
done
[[ "$DEMO_START" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || { echo "demo: DEMO_START must be YYYY-MM-DD" >&2; exit 2; }
if (( DEMO_DAYS < WINDOW_DAYS + 2 )); then
  echo "demo: DEMO_DAYS must be >= $((WINDOW_DAYS + 2)) (a ${WINDOW_DAYS}-day window + two eval days)" >&2
  exit 2
fi

RANKER="$REPO/.venv/bin/ranker"
AIRFLOW="$REPO/.venv-airflow/bin/airflow"
for exe in "$RANKER" "$AIRFLOW"; do
  [[ -x "$exe" ]] || { echo "demo: $exe is missing: run 'make setup' first" >&2; exit 2; }
done

export RANKER_HOME="$REPO/var/demo"
export RANKER_BIN="$RANKER"
export AIRFLOW_HOME="$REPO/var/airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$REPO/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="sqlite:///$AIRFLOW_HOME/airflow.db"
export RANKER_TASK_RETRIES=0 # a demo should fail fast, not back off for minutes

day_after() { date -u -d "$1 + $2 days" +%F; }
DAY1="$(day_after "$DEMO_START" $((DEMO_DAYS - 2)))"
DAY2="$(day_after "$DEMO_START" $((DEMO_DAYS - 1)))"
LOG_DIR="$REPO/var/demo-logs"
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

run_day() {
  local day="$1" logical log="$LOG_DIR/retrain-$1.log"
  logical="$(day_after "$day" 1)T06:00:00+00:00"
  step "airflow dags test ranker_retrain (window_end=$day, ${WINDOW_DAYS}-day window, $DEMO_EPOCHS epochs) — log: $log"
  # the full log goes to the file; the terminal gets one line per finished task
  set +e
  "$AIRFLOW" dags test ranker_retrain "$logical" \
    -c "{\"window_end\": \"$day\", \"window_days\": $WINDOW_DAYS, \"epochs\": $DEMO_EPOCHS}" 2>&1 |
    tee "$log" | grep --line-buffered -E "\[DAG TEST\] end task" |
    while IFS= read -r line; do
      task="$(sed -E 's/.*task_id=([a-z_]+).*/\1/' <<<"$line")"
      printf '  [%4ss] finished %s\n' "$(($(date +%s) - started))" "$task"
    done
  local rc="${PIPESTATUS[0]}"
  set -e
  if [[ "$rc" != 0 ]]; then
    echo "demo: the ranker_retrain run for $day failed (exit $rc); the last lines of its log:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
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
"$REPO/.venv/bin/python" - "$RANKER_HOME" "$DAY1" "$DAY2" <<'PY'
import json, sys
from pathlib import Path

home, days = Path(sys.argv[1]), sys.argv[2:]
runs = sorted((p for p in (home / "pipeline").iterdir() if (p / "gate.json").is_file()), key=lambda p: (p / "gate.json").stat().st_mtime)
for run in runs:
    gate = json.loads((run / "gate.json").read_text())
    cand = gate.get("candidate") or {}
    champ = gate.get("champion") or {}
    outcome = "promoted" if (run / "promote.json").is_file() else "rejected" if (run / "reject.json").is_file() else "kept champion"
    print(f"run {run.name}: eval day {gate.get('eval_date')}")
    def hit(model):
        value = model.get("save_hit_at_3")
        return "?" if value is None else f"{value:.4f}"

    print(f"  gate {gate.get('decision')}: candidate {cand.get('version')} save HIT@3 {hit(cand)}"
          f" vs champion {champ.get('version') or '(none: first run, absolute checks only)'}"
          + (f" {hit(champ)}" if champ else "")
          + (f", relative change {gate['relative_change']:+.4f}" if gate.get("relative_change") is not None else ""))
    for check in gate.get("checks", []):
        print(f"    [{'ok' if check['passed'] else 'FAIL'}] {check['name']}: {check['detail']}")
    print(f"  -> {outcome}")
PY
echo
"$RANKER" models list
echo
echo "metrics (Prometheus textfile): $RANKER_HOME/metrics/ranker.prom"
grep -E "^ranker_(last_run_status|last_run_promoted|gate_passed|promotions_total|rejections_total|eval_save_hit_at_3_ratio)" \
  "$RANKER_HOME/metrics/ranker.prom" 2>/dev/null | head -n 12 || true
echo "training curves:"
find "$RANKER_HOME/runs" -name curve.png -printf '  %p\n' 2>/dev/null | sort
echo "step summaries: $RANKER_HOME/pipeline/<run id>/<step>.json; Airflow logs: $LOG_DIR, $AIRFLOW_HOME/logs"
step "demo finished"

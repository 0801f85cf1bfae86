#!/usr/bin/env bash
# The CUDA path in one prepared run, for a GPU machine (docs/training.md "GPU run"):
#   1. make setup DEVICE=cuda (skip with GPU_SETUP=0 when .venv already holds CUDA torch + fbgemm-gpu)
#   2. the CUDA tests (pytest -m gpu: CUDA-event timing on torchrec's streams, TrainPipelineSemiSync
#      as shipped on nccl, frozen epochs, ranker train on the GPU)
#   3. ranker train --pipeline sync vs semisync on one GPU (nccl) on the same synthetic window:
#      samples/s by epoch, lookup and exposed shares by phase, peak GPU memory
#   4. where a step's time goes (benchmarks/gpu_profile.py, batch GPU_PROFILE_BATCH): sync vs semisync,
#      fed inline vs by the input pipeline; device busy share, input wait share, top host operators
#   5. the plain-PyTorch baseline on the GPU (benchmarks/baseline.py --device cuda)
# Everything lands in $OUT (default var/gpu-run): gpu.json (the summary), the raw JSON of each
# step, pytest's junit XML and the logs. Every step has a time cap (setup 240 s, tests 180 s, each
# train 90 s, baseline 90 s: at most 11.5 min, typically a few minutes) and a step that fails or
# times out is recorded in gpu.json ("exit_codes") instead of ending the run. GPU_ROWS, GPU_REPEATS
# size it. Bad environment: one line on stderr, exit 2.
# Setup needs PyPI (PyPI's CUDA torch 2.13.0 and fbgemm-gpu 1.8.0, several GB). A GPU machine
# without network (this project's lent H200: torch 2.11 preinstalled, no torchrec/fbgemm, and a
# 64 MiB limit on what travels) cannot run it: prepare .venv on a networked GPU image, GPU_SETUP=0.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-var/gpu-run}"
ROWS="${GPU_ROWS:-2000000}"
REPEATS="${GPU_REPEATS:-3}"
BATCH="${GPU_BATCH:-4096}"
PROFILE_BATCH="${GPU_PROFILE_BATCH:-32768}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export PYTHONPATH="$PWD" OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}" RANKER_LOG_LEVEL=WARNING
start=$(date +%s)
step() { echo ">> [$(( $(date +%s) - start )) s] $*" | tee -a "$OUT/steps.log"; }

if [ "${GPU_SETUP:-1}" = 1 ]; then
  step "make setup DEVICE=cuda"
  timeout 240 make setup-trainer DEVICE=cuda > "$OUT/setup.log" 2>&1 || {
    echo "gpu.sh: make setup-trainer DEVICE=cuda failed or timed out (it needs PyPI; see $OUT/setup.log)" >&2
    exit 2
  }
fi
PY=.venv/bin/python
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "gpu.sh: no CUDA device visible to $PY (torch.cuda.is_available() is false)" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/nvidia-smi.txt" 2>&1 || true
if ! "$PY" -c 'import json, torch, fbgemm_gpu, torchrec; print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0), "torchrec": torchrec.__version__}))' > "$OUT/versions.json" 2> "$OUT/versions.log"; then
  echo "gpu.sh: torch, fbgemm_gpu or torchrec does not import in $PY (see $OUT/versions.log)" >&2
  exit 2
fi
declare -A rc
# run NAME CAP CMD...: the step's exit code goes to gpu.json; a failure does not end the run
run() {
  local name=$1 cap=$2
  shift 2
  set +e
  timeout "$cap" "$@"
  rc[$name]=$?
  set -e
}

step "CUDA tests (pytest -m gpu)"
run gpu_tests 180 "$PY" -m pytest tests/trainer -m gpu -q -p no:cacheprovider --junitxml="$OUT/gpu-tests.xml" > "$OUT/gpu-tests.log" 2>&1
tail -3 "$OUT/gpu-tests.log"

step "synthetic window: $ROWS rows over 4 days"
HOME_DIR="$OUT/home"
rm -rf "$HOME_DIR"
"$PY" - "$HOME_DIR" "$ROWS" <<'EOF'
import sys
from pathlib import Path
from benchmarks.train import END
from ranking.trainer.models.config import default_model_config
from features.windowgen import write_window
home, rows = Path(sys.argv[1]), int(sys.argv[2])
manifest = write_window(home, END, 4, rows // 4, seed=3, row_group_size=50_000, eval_rows=5000)
(home / "model_config.json").write_text(default_model_config(embedding_dim=32).to_json())
(home / "manifest.path").write_text(str(manifest))
EOF
MANIFEST=$(cat "$HOME_DIR/manifest.path")
END_DATE=$("$PY" -c 'from benchmarks.train import END; print(END.isoformat())')

for pipeline in sync semisync; do
  step "ranker train --pipeline $pipeline (F,J,J, batch $BATCH, one GPU, nccl)"
  run "train_$pipeline" 90 .venv/bin/ranker train --home "$HOME_DIR" --end "$END_DATE" --days 4 --schedule F,J,J \
    --pipeline "$pipeline" --batch-size "$BATCH" --warm-start none --no-register --no-progress \
    --no-eval-each-epoch --model-config "$HOME_DIR/model_config.json" --out "$HOME_DIR/run-$pipeline" \
    --json > "$OUT/train-$pipeline.json" 2> "$OUT/train-$pipeline.log"
done

step "profile: sync vs semisync, inline input vs the input pipeline (batch $PROFILE_BATCH)"
run profile 120 "$PY" -m benchmarks.gpu_profile --manifest "$MANIFEST" \
  --model-config "$HOME_DIR/model_config.json" --batch-size "$PROFILE_BATCH" --json-out "$OUT/profile.json" \
  > "$OUT/profile.log" 2>&1
tail -4 "$OUT/profile.log"

step "plain-PyTorch baseline on the GPU"
run baseline 90 "$PY" -m benchmarks.baseline --device cuda --nproc 1 --rows "$ROWS" --batch-size "$BATCH" \
  --repeats "$REPEATS" --json-out "$OUT/baseline.json" > "$OUT/baseline.log" 2>&1

step "summary"
codes=$(for k in "${!rc[@]}"; do printf '%s=%s ' "$k" "${rc[$k]}"; done)
# shellcheck disable=SC2086
"$PY" - "$OUT" $codes <<'EOF'
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
codes = {k: int(v) for k, v in (a.split("=") for a in sys.argv[2:])}
summary = {"versions": json.loads((out / "versions.json").read_text()), "exit_codes": codes}


def load(name):
    try:
        return json.loads((out / name).read_text())
    except (OSError, ValueError):  # the step failed or timed out: its exit code says which
        return None


for p in ("sync", "semisync"):
    s = load(f"train-{p}.json")
    if s is None or "epochs" not in s:
        summary[p] = None
        continue
    summary[p] = {
        "device": s["device"],
        "world_size": s["world_size"],
        "sharding": s["sharding"],
        "samples_per_second_by_epoch": [e["samples_per_second"] for e in s["epochs"]],
        "lookup_ratio_by_phase": s["lookup_ratio_by_phase"],
        "exposed_lookup_ratio_by_phase": s["exposed_lookup_ratio_by_phase"],
        "peak_gpu_memory_bytes": max(e.get("peak_gpu_memory_bytes", 0) for e in s["epochs"]),
    }
if summary["sync"] and summary["semisync"]:
    joint = {p: statistics.median(summary[p]["samples_per_second_by_epoch"][1:]) for p in ("sync", "semisync")}
    summary["semisync_over_sync_joint"] = joint["semisync"] / joint["sync"]
summary["baseline"] = load("baseline.json")
summary["profile"] = load("profile.json")
# issue 21's targets on one GPU, read off this run (None: the step that measures it did not finish)
prof = summary["profile"] or {}
runs = prof.get("runs", {})
best = max((r["samples_per_second"] for r in runs.values()), default=None)
busy = [r["device_busy_ratio"] for r in runs.values() if r.get("device_busy_ratio") is not None]
ratio = prof.get("semisync_over_sync", {}).get("pipeline")
summary["targets"] = {
    "joint_samples_per_second_at_profile_batch": best,
    "joint_4M_samples_per_second": None if best is None else best >= 4e6,
    "semisync_over_sync_with_input_pipeline": ratio,
    "semisync_at_least_1_05x_sync": None if ratio is None else ratio >= 1.05,
    "device_busy_ratio_best": max(busy) if busy else None,
    "device_busy_at_least_half": max(busy) >= 0.5 if busy else None,
}
(out / "gpu.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
for p in ("sync", "semisync"):
    e = summary[p]
    if e:
        print(p, "samples/s", [round(x) for x in e["samples_per_second_by_epoch"]], "lookup",
              e["lookup_ratio_by_phase"], "exposed", e["exposed_lookup_ratio_by_phase"],
              "peak GPU MiB", e["peak_gpu_memory_bytes"] // 2**20)
print("semisync/sync joint", summary.get("semisync_over_sync_joint"), "| exit codes", codes)
print("targets", json.dumps(summary["targets"]))
EOF
step "done: $OUT/gpu.json"
# the run's status: the first step that failed (0 when all passed)
for k in gpu_tests train_sync train_semisync profile baseline; do
  [ "${rc[$k]:-0}" = 0 ] || exit "${rc[$k]}"
done

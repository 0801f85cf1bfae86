#!/usr/bin/env bash
# The CUDA path in one prepared run, for a GPU machine (docs/training.md "GPU run"):
#   1. make setup DEVICE=cuda (skip with GPU_SETUP=0 when .venv already holds CUDA torch + fbgemm-gpu)
#   2. the CUDA tests (pytest -m gpu: CUDA-event timing on torchrec's streams, TrainPipelineSemiSync
#      as shipped on nccl, frozen epochs, ranker train on the GPU)
#   3. ranker train --pipeline sync vs semisync on one GPU (nccl) on the same synthetic window:
#      samples/s by epoch, lookup and exposed shares by phase, peak GPU memory
#   4. the plain-PyTorch baseline on the GPU (benchmarks/baseline.py --device cuda)
# Everything lands in $OUT (default var/gpu-run): gpu.json (the summary), the raw JSON of each
# step, pytest's junit XML and the logs. Sized to finish well under 10 minutes after setup
# (GPU_ROWS, GPU_REPEATS to change it). Bad environment: one line on stderr, exit 2.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-var/gpu-run}"
ROWS="${GPU_ROWS:-400000}"
REPEATS="${GPU_REPEATS:-3}"
BATCH="${GPU_BATCH:-4096}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export PYTHONPATH="$PWD" OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}" RANKER_LOG_LEVEL=WARNING
start=$(date +%s)
step() { echo ">> [$(( $(date +%s) - start )) s] $*" | tee -a "$OUT/steps.log"; }

if [ "${GPU_SETUP:-1}" = 1 ]; then
  step "make setup DEVICE=cuda"
  make setup DEVICE=cuda > "$OUT/setup.log" 2>&1 || { echo "gpu.sh: make setup DEVICE=cuda failed (see $OUT/setup.log)" >&2; exit 2; }
fi
PY=.venv/bin/python
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "gpu.sh: no CUDA device visible to $PY (torch.cuda.is_available() is false)" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/nvidia-smi.txt" 2>&1 || true
"$PY" -c 'import json, torch, fbgemm_gpu, torchrec; print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0), "torchrec": torchrec.__version__}))' > "$OUT/versions.json"

step "CUDA tests (pytest -m gpu)"
set +e
timeout 300 "$PY" -m pytest tests/trainer -m gpu -q -p no:cacheprovider --junitxml="$OUT/gpu-tests.xml" > "$OUT/gpu-tests.log" 2>&1
tests_rc=$?
set -e
tail -3 "$OUT/gpu-tests.log"

step "synthetic window: $ROWS rows over 4 days"
HOME_DIR="$OUT/home"
rm -rf "$HOME_DIR"
"$PY" - "$HOME_DIR" "$ROWS" <<'EOF'
import sys
from pathlib import Path
from benchmarks.train import END
from ranking.trainer.config import default_model_config
from tests.trainer.windowgen import write_window
home, rows = Path(sys.argv[1]), int(sys.argv[2])
write_window(home, END, 4, rows // 4, seed=3, row_group_size=50_000, eval_rows=5000)
(home / "model_config.json").write_text(default_model_config(embedding_dim=32).to_json())
print(END.isoformat())
EOF
END_DATE=$("$PY" -c 'from benchmarks.train import END; print(END.isoformat())')

for pipeline in sync semisync; do
  step "ranker train --pipeline $pipeline (F,J,J, batch $BATCH, one GPU, nccl)"
  timeout 240 .venv/bin/ranker train --home "$HOME_DIR" --end "$END_DATE" --days 4 --schedule F,J,J \
    --pipeline "$pipeline" --batch-size "$BATCH" --warm-start none --no-register --no-progress \
    --no-eval-each-epoch --model-config "$HOME_DIR/model_config.json" --out "$HOME_DIR/run-$pipeline" \
    --json > "$OUT/train-$pipeline.json" 2> "$OUT/train-$pipeline.log"
done

step "plain-PyTorch baseline on the GPU"
timeout 240 "$PY" -m benchmarks.baseline --device cuda --nproc 1 --rows "$ROWS" --batch-size "$BATCH" \
  --repeats "$REPEATS" --json-out "$OUT/baseline.json" > "$OUT/baseline.log" 2>&1

step "summary"
"$PY" - "$OUT" "$tests_rc" <<'EOF'
import json, statistics, sys
from pathlib import Path
out, tests_rc = Path(sys.argv[1]), int(sys.argv[2])
summary = {"versions": json.loads((out / "versions.json").read_text()), "gpu_tests_exit_code": tests_rc}
for p in ("sync", "semisync"):
    s = json.loads((out / f"train-{p}.json").read_text())
    summary[p] = {
        "device": s["device"],
        "world_size": s["world_size"],
        "sharding": s["sharding"],
        "samples_per_second_by_epoch": [e["samples_per_second"] for e in s["epochs"]],
        "lookup_ratio_by_phase": s["lookup_ratio_by_phase"],
        "exposed_lookup_ratio_by_phase": s["exposed_lookup_ratio_by_phase"],
        "peak_gpu_memory_bytes": max(e.get("peak_gpu_memory_bytes", 0) for e in s["epochs"]),
    }
joint = {p: statistics.median(summary[p]["samples_per_second_by_epoch"][1:]) for p in ("sync", "semisync")}
summary["semisync_over_sync_joint"] = joint["semisync"] / joint["sync"]
summary["baseline"] = json.loads((out / "baseline.json").read_text())
(out / "gpu.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
for p in ("sync", "semisync"):
    e = summary[p]
    print(p, "samples/s", [round(x) for x in e["samples_per_second_by_epoch"]], "lookup", e["lookup_ratio_by_phase"],
          "exposed", e["exposed_lookup_ratio_by_phase"], "peak GPU MiB", e["peak_gpu_memory_bytes"] // 2**20)
print("semisync/sync joint", round(summary["semisync_over_sync_joint"], 3), "| gpu tests rc", tests_rc)
EOF
step "done: $OUT/gpu.json"
exit "$tests_rc"

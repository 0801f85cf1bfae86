#!/usr/bin/env bash
# `make study`: the schedule study on the default synthetic workspace (docs/study.md).
# Builds the workspace once (42 days x 1,000 requests x 25 pins = 1.05M impressions), then runs
# `ranker study`; finished runs are reused on a re-run. Override with STUDY_HOME / STUDY_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
home=${STUDY_HOME:-var/study}
ranker=.venv/bin/ranker
if [ ! -f "$home/feast/feature_store.yaml" ]; then
  "$ranker" data synth --home "$home" --start 2026-10-01 --days 42 --requests-per-day 1000 --seed 0 --json
  "$ranker" features apply --home "$home" --json
  "$ranker" features materialize --home "$home" --json
fi
# shellcheck disable=SC2086
exec "$ranker" study --home "$home" --end 2026-11-11 --windows 10,20 --epochs 1,2,3,4 --seeds 3 ${STUDY_ARGS:-}

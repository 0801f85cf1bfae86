#!/usr/bin/env bash
# `make backtest`: replay the daily retrain, naive vs default, on the default synthetic workspace
# (docs/backtest.md). Builds the workspace once (54 days x 1,000 requests x 25 pins, the one
# `make study` uses), then runs `ranker backtest`; finished days are reused on a re-run with the
# same code. Override with BACKTEST_HOME, BACKTEST_START, BACKTEST_DAYS, BACKTEST_PARALLEL, BACKTEST_REPORT_DIR,
# BACKTEST_ARGS (e.g. more --recipe NAME=FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
home=${BACKTEST_HOME:-var/backtest}
start=${BACKTEST_START:-2026-11-10}   # the first eval day with a base range and a 20-day window before it
days=${BACKTEST_DAYS:-14}
ranker=.venv/bin/ranker
if [ ! -f "$home/feast/feature_store.yaml" ]; then
  "$ranker" data synth --home "$home" --start 2026-10-01 --days 54 --requests-per-day 1000 --seed 0 --json
  "$ranker" features apply --home "$home" --json
  "$ranker" features materialize --home "$home" --json
fi
# shellcheck disable=SC2086
exec "$ranker" backtest --home "$home" --start "$start" --days "$days" \
  --recipe naive --recipe default --baseline naive --parallel "${BACKTEST_PARALLEL:-2}" \
  --report-dir "${BACKTEST_REPORT_DIR:-docs/backtest/naive-vs-default}" ${BACKTEST_ARGS:-}

#!/usr/bin/env bash
# Issue 34's backtest: naive and default, each with and without the user x pin / user x category
# history features, and the delayed update's own share (base + F,J vs base + J) with and without
# them, on one world (docs/study.md "History features"):
#
#   infra/history_backtest.sh default     # the default synthetic world (make backtest's)
#   infra/history_backtest.sh returns     # the same world where users come back to pins they saved
#   infra/history_backtest.sh movielens   # MovieLens-100K from the recbole==1.2.1 wheel, converted at
#                                         # run time (never committed), genre as the pin's category
#
# Builds the workspace once under $HISTORY_HOME/<world> (default var/history), replays the six
# recipes with `ranker backtest` (finished days are reused on a re-run), copies the report to
# docs/backtest/history/<world>/ and writes there pairs.json: the paired bootstrap of each with/without
# pair and of each F,J/J pair (infra/backtest_pool.py, the statistics the report uses).
# Override HISTORY_DAYS (14), HISTORY_PARALLEL (2), RETURN_ARGS (the synth flags of the returns world).
set -euo pipefail
cd "$(dirname "$0")/.."
world=${1:?usage: infra/history_backtest.sh default|returns|movielens}
root=${HISTORY_HOME:-var/history}
home="$root/$world"
days=${HISTORY_DAYS:-14}
ranker=.venv/bin/ranker
python=.venv/bin/python
report="docs/backtest/history/$world"
return_args=${RETURN_ARGS:---return-share 0.2 --return-affinity 1}

case "$world" in
  default | returns)
    start=2026-11-10 # the first eval day with a base range and a 20-day window before it
    if [ ! -f "$home/feast/feature_store.yaml" ]; then
      extra=()
      # shellcheck disable=SC2206
      [ "$world" = returns ] && extra=($return_args)
      "$ranker" data synth --home "$home" --start 2026-10-01 --days 54 --requests-per-day 1000 --seed 0 \
        "${extra[@]}" --json
      "$ranker" features apply --home "$home" --json
    fi
    ;;
  movielens)
    start=1998-04-08 # the 14 eval days before the log's last one (as benchmarks/validation_real_log)
    if [ ! -f "$home/feast/feature_store.yaml" ]; then
      "$python" infra/movielens.py --out "$root/movielens-data"
      "$ranker" data import --home "$home" --events "$root/movielens-data/ml-100k.csv" --item-col item_id \
        --rating-col rating --label-threshold 4 --item-attribute-col genre --json
      "$ranker" features apply --home "$home" --json
    fi
    ;;
  *)
    echo "unknown world $world: default | returns | movielens" >&2
    exit 2
    ;;
esac

"$ranker" backtest --home "$home" --start "$start" --days "$days" \
  --recipe naive --recipe naive-history --recipe default --recipe default-history \
  --recipe base-j --recipe base-j-history --baseline naive --parallel "${HISTORY_PARALLEL:-2}" \
  --name history --report-dir "$report"

folder="$home/backtests/history"
{
  echo "["
  first=1
  for pair in "naive naive-history" "default default-history" "base-j base-j-history" \
    "base-j default" "base-j-history default-history"; do
    # shellcheck disable=SC2086
    [ $first = 1 ] || echo ","
    first=0
    "$python" infra/backtest_pool.py $pair "$folder"
  done
  echo "]"
} >"$report/pairs.json.tmp"
mv "$report/pairs.json.tmp" "$report/pairs.json"
echo "wrote $report/backtest.md and $report/pairs.json"

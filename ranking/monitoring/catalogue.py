"""The metric catalogue: every series ``ranker metrics publish`` can emit, with its type, help
text and label names, and the bounded sets of label values.

Naming follows Prometheus: prefix ``ranker_``, base units, ``_ratio`` for 0–1, ``_total`` for
counters, ``_timestamp_seconds`` for times. No run or version id is ever a label (a new series a day).
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "ranker_"
STATUSES = ("success", "failed")
PHASES = ("frozen", "joint")
MODELS = ("candidate", "champion", "heuristic")  # heuristic: the non-learned ranker (issue 31)
# the eval day's slices ([slices]): bounded by the config (2 user + 3 pin slices, then at most
# top_values + 1 per categorical column); a summary with more is refused
MAX_SLICES = 64
# Steps a failure can be attributed to; anything else is counted as "other" (bounded label values).
KNOWN_STEPS = (
    "freshness",
    "window",
    "validate",
    "train",
    "evaluate",
    "gate",
    "promote",
    "reject",
    "materialize",
    "metrics",
    "run",  # `ranker run` failed between steps
    "other",
)
# the data validation (ranker features validate): what an anomaly did, and what a drift score compares
VALIDATION_POLICIES = ("fail", "warn", "accepted")
DRIFT_COMPARISONS = ("drift", "skew")
# the weekly recipe review (ranker review): its outcome, and which lift a recipe's series is
REVIEW_STATUSES = ("ok", "too_few_days", "failed")
REVIEW_MODELS = ("served", "candidate")
# ranker gc's disk use by kind (ranking/monitoring/disk.py: the workspace's folders)
DISK_KINDS = (
    "checkpoints",
    "runs",
    "registry",
    "windows",
    "backtests",
    "reviews",
    "feature_store",
    "source",
    "other",
)
DURATION_HISTORY = 7  # previous runs the duration baseline (median) is taken over


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: str  # gauge | counter
    help: str
    labels: tuple[str, ...] = ()


def _g(name: str, help_: str, *labels: str) -> MetricSpec:
    return MetricSpec(PREFIX + name, "gauge", help_, labels)


def _c(name: str, help_: str, *labels: str) -> MetricSpec:
    return MetricSpec(PREFIX + name, "counter", help_, labels)


CATALOGUE: dict[str, MetricSpec] = {
    s.name: s
    for s in (
        # run status and history
        _g("last_run_timestamp_seconds", "When the last pipeline run published its metrics."),
        _g("last_success_timestamp_seconds", "When the last successful pipeline run published."),
        _g("last_failure_timestamp_seconds", "When the last failed pipeline run published."),
        _g("last_run_status", "1 for the status of the last run, 0 for the others.", "status"),
        _g("last_run_promoted", "1 if the last run promoted its candidate to champion, else 0."),
        _g("run_duration_seconds", "Wall time of the last run (its 'run' summary, else the sum of stages)."),
        _c("runs_total", "Pipeline runs published, by final status.", "status"),
        _c("run_failures_total", "Failed pipeline runs, by the step that failed.", "step"),
        # stages
        _g("stage_duration_seconds", "Wall time of each stage in the last run.", "stage"),
        _g(
            "stage_duration_baseline_seconds",
            f"Median stage wall time over the previous {DURATION_HISTORY} runs that ran the stage.",
            "stage",
        ),
        # training
        _g("train_info", "Training configuration of the last run (value 1).", "schedule", "pipeline"),
        _g("train_epochs", "Epochs trained in the last run."),
        _g("train_samples_per_second", "Training throughput of the last run over all epochs."),
        _g("train_epoch_samples_per_second", "Training throughput by epoch.", "epoch", "phase"),
        _g("train_epoch_loss", "Mean training loss by epoch.", "epoch", "phase"),
        _g("train_epoch_duration_seconds", "Wall time by epoch.", "epoch", "phase"),
        _g(
            "embedding_lookup_ratio",
            "Share of step time in which embedding-lookup work ran (forward, backward, input/output "
            "distribution, including asynchronous all-to-alls from issue to completion), by phase.",
            "phase",
        ),
        _g(
            "embedding_lookup_exposed_ratio",
            "Share of step time the training thread (CPU) or training stream (CUDA) was busy with or "
            "blocked on embedding lookups (measured, not derived; equals the lookup share when "
            "nothing of the lookup ran asynchronously, e.g. --pipeline sync), by phase.",
            "phase",
        ),
        # offline evaluation and gate
        _g("eval_save_hit_at_3_ratio", "Save HIT@3 on the eval day.", "model"),
        _g("eval_auc_ratio", "ROC AUC on the eval day.", "model"),
        _g("eval_normalized_entropy", "Normalized entropy on the eval day (lower is better).", "model"),
        _g(
            "heuristic_relative_change",
            "A model's save HIT@3 over the non-learned heuristic's on the eval day, minus 1 (candidate:"
            " the gate's candidate; champion: the served model).",
            "model",
        ),
        _g(
            "heuristic_relative_change_ci_lower",
            "Lower bound of the candidate's lift over the heuristic (paired bootstrap).",
        ),
        _g(
            "slice_save_hit_at_3_ratio",
            "Save HIT@3 of a slice's saved pins on the eval day (user:first_seen, pin:tail,"
            " user_stats__country:<top value>|other, ...), by model.",
            "slice",
            "model",
        ),
        _g("slice_requests_with_save", "Requests with a saved pin in the slice on the eval day.", "slice"),
        _g(
            "slice_relative_change",
            "The candidate's save HIT@3 change vs the champion in the slice.",
            "slice",
        ),
        _g(
            "slice_relative_change_ci_lower",
            "Lower bound of the slice's change (paired bootstrap at the gate's level).",
            "slice",
        ),
        _g(
            "slice_relative_change_ci_upper",
            "Upper bound of the slice's change (paired bootstrap at the gate's level).",
            "slice",
        ),
        _g("gate_passed", "1 if the last gate passed the candidate, 0 if it rejected it."),
        _g("gate_check_passed", "1 if the gate check passed in the last gate, else 0.", "check"),
        _g("gate_check_value", "The value a gate check measured.", "check"),
        _g("gate_check_threshold", "The threshold a gate check compared against.", "check"),
        _g(
            "gate_check_warning",
            "1 if the gate check passed with a warning in the last gate (a lift above max_lift that the"
            " data validation and the lineage cleared), else 0.",
            "check",
        ),
        _g("gate_relative_change", "Candidate vs champion relative change in save HIT@3."),
        _g("gate_relative_change_ci_lower", "Lower bound of the bootstrap interval of the relative change."),
        _g("gate_relative_change_ci_upper", "Upper bound of the bootstrap interval of the relative change."),
        _g("gate_consecutive_rejections", "Gate rejections since the last passing gate."),
        _c("promotions_total", "Candidates promoted to champion (forced: promoted with --force).", "forced"),
        _c("rejections_total", "Candidates rejected by the gate."),
        _g("last_promotion_timestamp_seconds", "When the champion last moved."),
        # data
        _g("window_rows", "Examples in the last run's window, by split.", "split"),
        _g("window_length_days", "Training days of the last run's window."),
        _g("window_days", "Window day partitions built or reused by the last run.", "state"),
        _g("window_label_rate_ratio", "Save (label) rate of the last run's training window."),
        _g("window_end_timestamp_seconds", "Exclusive end of the last run's window (its eval day)."),
        _g("feature_freshness_lag_seconds", "Lag of the newest source data when the run checked it."),
        _g(
            "feature_source_end_timestamp_seconds",
            "End of the newest complete day of source data (its next midnight, UTC).",
        ),
        _g("materialize_end_timestamp_seconds", "End of the last online-store materialization."),
        # data validation (features/validation): kinds and features are bounded (the anomaly kinds,
        # the feature service's columns)
        _g(
            "validation_passed", "1 if the last run's data validation let the window through, 0 if it failed."
        ),
        _g(
            "validation_anomalies", "Anomalies the last data validation found, by effective policy.", "policy"
        ),
        _g(
            "validation_anomalies_by_kind",
            "Anomalies the last data validation found that fail or warn, by kind (accepted ones left out).",
            "kind",
        ),
        _g(
            "validation_drift_score",
            "A feature's distance above sampling noise (Jensen-Shannon bits or L-infinity): drift = the"
            " newest training day vs its history, skew = the eval day vs the training window.",
            "feature",
            "comparison",
        ),
        # the weekly recipe review (ranker review; job ranker_recipe_review). The recipe label takes
        # the configured recipes' names ([review] recipes: a handful, bounded by the config)
        _g("review_timestamp_seconds", "When the last recipe review finished."),
        _g("review_status", "1 for the outcome of the last recipe review, 0 for the others.", "status"),
        _g("review_days", "Paired eval days the last review's lifts are measured over."),
        _g(
            "review_relative_change",
            "A recipe's save HIT@3 relative to the baseline recipe's over the review's days (the"
            " baseline's own is 0): served = the models its replay served, candidate = its fresh candidates.",
            "recipe",
            "model",
        ),
        _g(
            "review_relative_change_ci_lower",
            "Lower bound of the bootstrap CI of the review's relative change.",
            "recipe",
            "model",
        ),
        _g(
            "review_relative_change_ci_upper",
            "Upper bound of the bootstrap CI of the review's relative change.",
            "recipe",
            "model",
        ),
        _g(
            "review_train_seconds_per_day",
            "A recipe's training (and base pretraining) seconds per replayed day.",
            "recipe",
        ),
        _g(
            "review_minimum_detectable_effect",
            "The smallest true lift over the baseline the review's days resolve 4 times in 5 (its CI's width).",
            "recipe",
            "model",
        ),
        _g(
            "review_heuristic_relative_change",
            "A recipe's save HIT@3 relative to the non-learned heuristic's ([heuristic]) over the review's days.",
            "recipe",
            "model",
        ),
        _g(
            "review_heuristic_relative_change_ci_lower",
            "Lower bound of the bootstrap CI of the lift over the heuristic.",
            "recipe",
            "model",
        ),
        _g(
            "review_delayed_update_relative_change",
            "The delayed update's own share: a recipe with a frozen first epoch vs the reference recipe"
            " that differs only in it (save HIT@3 relative change).",
            "recipe",
            "reference",
            "model",
        ),
        _g(
            "review_delayed_update_relative_change_ci_lower",
            "Lower bound of the bootstrap CI of the delayed update's share.",
            "recipe",
            "reference",
            "model",
        ),
        _g(
            "review_delayed_update_relative_change_ci_upper",
            "Upper bound of the bootstrap CI of the delayed update's share.",
            "recipe",
            "reference",
            "model",
        ),
        _g(
            "review_decided_on_candidates",
            "1 when the last review's recommendation was decided on the candidates' lifts (no served lift resolved).",
        ),
        _g("review_recommended", "1 for the recipe the last review recommends, 0 for the others.", "recipe"),
        _g(
            "review_running",
            "1 for the recipe the daily run trains (as configured, or as the review chose), 0 for the others.",
            "recipe",
        ),
        # ranker gc (job ranker_gc): the workspace's disk after [retention] pruned it
        _g(
            "disk_usage_bytes",
            "Bytes of the workspace's files by kind (checkpoints, runs, registry, windows, backtests,"
            " reviews, feature_store, source, other) after the last ranker gc.",
            "kind",
        ),
        _g("disk_free_bytes", "Bytes available on the workspace's filesystem after the last ranker gc."),
        _g("disk_size_bytes", "Size of the workspace's filesystem in bytes."),
        _g("gc_timestamp_seconds", "When the last ranker gc measured the disk."),
        _g("gc_freed_bytes", "Bytes the last ranker gc removed."),
        _g("gc_failed_leftovers", "What the last ranker gc found to remove but could not."),
        # delivery
        _c("metrics_push_failures_total", "Publishes whose Pushgateway push failed after all retries."),
    )
}

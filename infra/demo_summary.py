"""What `make demo` ran and what the gate decided, from the workspace's step summaries.

    python infra/demo_summary.py recipe CONFIG.json   # `ranker config show --json`: the recipe that ships
    python infra/demo_summary.py runs HOME OUT.json

`runs` prints, per run (the base model's pretrain, then each retrain day), the recipe that ran (schedule,
epochs, warm start), the candidate against the champion, every gate check with its value and
threshold, and the outcome with its reason; writes the same as JSON (tests/dags/test_demo.py
checks docs/orchestration.md against it). Runs in either environment: standard library only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _read(path: Path) -> dict[str, Any] | None:
    return dict(json.loads(path.read_text())) if path.is_file() else None


def summarize(home: Path) -> dict[str, Any]:
    """The demo's runs in the order they ran (by their first step summary's time)."""
    runs = sorted(
        (p for p in (home / "pipeline").iterdir() if p.is_dir()),
        key=lambda p: min(f.stat().st_mtime for f in p.glob("*.json")) if any(p.glob("*.json")) else 0.0,
    )
    out: dict[str, Any] = {"base": None, "days": []}
    for run in runs:
        pretrain = _read(run / "pretrain.json")
        if pretrain is not None:
            out["base"] = {
                "run_id": run.name,
                "version": pretrain.get("version"),
                "range": pretrain.get("base_range"),
                "days": pretrain.get("days"),
                "schedule": pretrain.get("schedule"),
                "epochs": pretrain.get("epochs"),
                "save_hit_at_3": (pretrain.get("eval") or {}).get("save_hit_at_3"),
            }
            continue
        train, gate = _read(run / "train.json"), _read(run / "gate.json")
        if train is None or gate is None:
            continue
        decide = _read(run / "decide.json") or {}
        outcome = (
            "promoted"
            if (run / "promote.json").is_file()
            else "rejected"
            if (run / "reject.json").is_file()
            else "kept the champion"
        )
        champion = gate.get("champion") or {}
        out["days"].append(
            {
                "run_id": run.name,
                "eval_date": gate.get("eval_date"),
                "candidate": train.get("version"),
                "recipe": {
                    "schedule": train.get("schedule"),
                    "epochs": len(train.get("epochs") or []),
                    "pipeline": train.get("pipeline"),
                    "warm_start": (train.get("warm_start") or {}).get("source"),
                },
                "rows_train": (train.get("window") or {}).get("rows_train"),
                "champion": champion.get("version"),
                "decision": gate.get("decision"),
                "failed_checks": list(gate.get("failed_checks") or []),
                "candidate_save_hit_at_3": (gate.get("candidate") or {}).get("save_hit_at_3"),
                "champion_save_hit_at_3": champion.get("save_hit_at_3"),
                "relative_change": gate.get("relative_change"),
                "checks": [
                    {k: c.get(k) for k in ("name", "passed", "value", "threshold", "detail")}
                    for c in gate.get("checks") or []
                ],
                "outcome": outcome,
                "reason": decide.get("reason"),
                "report": str(Path(str(train.get("run_dir"))) / "report.md"),
            }
        )
    return out


def _num(value: Any) -> str:
    if isinstance(value, float):
        # every float keeps a decimal point (the docs check masks those as measured)
        return f"{value:.4f}" if value == 0 or abs(value) >= 1e-3 else f"{value:.1e}"
    return "-" if value is None else str(value)


def render(summary: dict[str, Any]) -> str:
    lines = []
    base = summary.get("base")
    if base:
        lines.append(
            f"base model {base['version']} (ranker_pretrain): trained from scratch on "
            f"[{base['range'][0]}, {base['range'][1]}), {base['days']} days, schedule {base['schedule']}, "
            f"{base['epochs']} epoch(s); save HIT@3 {_num(base['save_hit_at_3'])} on its own eval day"
        )
    else:
        lines.append("base model: none (no ranker_pretrain run): the recipe trains from scratch")
    for day in summary["days"]:
        recipe = day["recipe"]
        lines.append("")
        lines.append(
            f"eval day {day['eval_date']}: candidate {day['candidate']} trained with schedule {recipe['schedule']} "
            f"({recipe['epochs']} epochs, {recipe['pipeline']}), warm start {recipe['warm_start']}"
        )
        champion = day["champion"] or "none (first run: only the absolute checks apply)"
        change = day["relative_change"]
        lines.append(
            f"  gate {day['decision']}: save HIT@3 {_num(day['candidate_save_hit_at_3'])} vs champion {champion}"
            + (f" {_num(day['champion_save_hit_at_3'])}" if day["champion"] else "")
            + (f" ({change:+.2%})" if change is not None else "")
        )
        for check in day["checks"]:
            lines.append(
                f"    [{'ok' if check['passed'] else 'FAIL'}] {check['name']}: value {_num(check['value'])},"
                f" threshold {_num(check['threshold'])}: {check['detail']}"
            )
        why = "failed " + ", ".join(day["failed_checks"]) if day["failed_checks"] else "every check passed"
        lines.append(f"  -> {day['outcome']} ({why}); decide: {day['reason']}")
        lines.append(f"  report: {day['report']}")
    return "\n".join(lines)


def render_recipe(config: dict[str, Any]) -> str:
    """The recipe and gate a run without Params trains with (`ranker config show --json`)."""
    c = config["config"]
    r, g, p = c["recipe"], c["gate"], c["pretrain"]
    return (
        f"  recipe: schedule {r['schedule']} x {r['epochs']} epochs, warm start {r['warm_start']} "
        f"(scope {r['warm_start_scope']}), pipeline {r['pipeline']}, window {c['window']['days']} days;"
        f" base model: schedule {p['schedule']}, from scratch\n"
        f"  gate: rule {g['rule']} ({g['ci_level']:.0%} CI, {g['bootstrap_samples']} resamples), tolerance "
        f"{g['tolerance']}, max AUC drop {g['max_auc_drop']}, max NE rise {g['max_ne_rise']}, max lift "
        f"{g['max_lift']}, window at most {g['max_window_lag_days']} days old; reference: the mean of the last "
        f"{g['reference_champions']} champions (tolerance {g['reference_tolerance']}); trend: the champion of "
        f"{g['trend_days']}+ days ago (tolerance {g['trend_tolerance']})"
    )


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "recipe":
        print(render_recipe(json.loads(Path(argv[1]).read_text())))
        return 0
    if len(argv) == 3 and argv[0] == "runs":
        summary = summarize(Path(argv[1]))
        Path(argv[2]).write_text(json.dumps(summary, indent=2) + "\n")
        print(render(summary))
        return 0
    print("usage: demo_summary.py recipe CONFIG.json | runs HOME OUT.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

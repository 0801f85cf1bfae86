"""The typed step summaries (issue 22, ranking/core/summaries.py): the committed JSON Schema and
the docs' "Step summaries" section equal a fresh export (infra/summaries_doc.py); a producer that adds an undeclared
field fails where it makes the summary; the summaries of a real small pipeline run validate."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pydantic import ValidationError
from repo_scripts import load_script

from ranking.core import summaries as s

REPO = Path(__file__).resolve().parents[2]


def _doc_tool() -> ModuleType:
    """infra/summaries_doc.py, the generator `make schema` runs (a script, imported by path)."""
    return load_script("infra/summaries_doc.py")


def test_the_committed_schema_and_docs_equal_a_fresh_export() -> None:
    """`make schema` (infra/summaries_doc.py) rewrites both; run it after changing a model."""
    tool = _doc_tool()
    assert tool.stale_outputs() == [], "stale: run `make schema`"
    schema = json.loads(tool.SCHEMA_PATH.read_text())
    steps = {
        d["properties"]["step"].get("const") for d in schema["$defs"].values() if "step" in d["properties"]
    }
    assert set(s.STEP_MODELS) <= steps


def test_make_schema_runs_the_generator_as_a_script() -> None:
    """What `make schema` runs, with --check: from the repository root, ranking importable."""
    out = subprocess.run(
        [sys.executable, "infra/summaries_doc.py", "--check"], capture_output=True, text=True, cwd=REPO
    )
    assert out.returncode == 0, out.stderr


def test_the_docs_name_every_field_of_every_model() -> None:
    tool = _doc_tool()
    doc = tool.DOC_PATH.read_text()
    section = doc[doc.index(tool.DOC_BEGIN) : doc.index(tool.DOC_END)]
    for model in (*s.SUMMARY_MODELS, s.StepSummary):
        for name in model.model_fields:
            assert f"| `{name}` |" in section, (model.__name__, name)


def test_the_models_import_without_torch_or_feast() -> None:
    code = (
        "import sys, ranking.core.summaries; "
        "print(sorted(m for m in ('torch', 'feast', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


PROMOTE = {"version": "v0001", "previous": None, "reason": "r", "forced": False, "noop": False, "seq": 1}


def test_an_undeclared_field_is_refused_where_the_summary_is_made() -> None:
    with pytest.raises(ValidationError, match="surprise"):
        s.PromoteSummary(**PROMOTE, surprise=1)  # type: ignore[call-arg]
    # nested parts too: an epoch record with a field the model does not declare
    epoch = {
        "epoch": 1,
        "phase": "joint",
        "loss": 0.1,
        "samples": 10,
        "steps": 1,
        "samples_per_second": 5.0,
        "lookup_ratio": None,
        "exposed_lookup_ratio": None,
        "duration_seconds": 2.0,
    }
    s.EpochSummary.model_validate(epoch)
    with pytest.raises(ValidationError, match="gpu_seconds"):
        s.EpochSummary.model_validate({**epoch, "gpu_seconds": 1.0})
    with pytest.raises(ValidationError, match="phase"):
        s.EpochSummary.model_validate({**epoch, "phase": "warm"})


def test_a_producer_that_adds_a_field_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """window_step copies WINDOW_SUMMARY_FIELDS from the manifest: one more (a manifest field the
    contract does not have) fails in the producer, not in a reader days later."""
    from features import window
    from ranking.core.workspace import Workspace

    manifest: dict[str, Any] = {
        "window_id": "abc",
        "end": "2026-01-06",
        "days": 4,
        "rows_train": 10,
        "rows_eval": 5,
        "label_rate": 0.1,
        "days_built": 5,
        "days_reused": 0,
        "days_repaired": {},
        "missing_days": [],
        "feature_version": "f",
        "duration_seconds": 0.5,
        "created_at": "2026-01-06T00:00:00+00:00",
    }
    monkeypatch.setattr(window, "build_window", lambda *a, **k: manifest)
    request = window.WindowRequest(Workspace.resolve(tmp_path), dt.date(2026, 1, 6), 4)
    body = window.window_step(request).body()
    assert s.parse_summary({**body, "step": "window"}, strict=True).model_dump()["rows_train"] == 10
    monkeypatch.setattr(window, "WINDOW_SUMMARY_FIELDS", (*window.WINDOW_SUMMARY_FIELDS, "created_at"))
    with pytest.raises(ValidationError, match="created_at"):
        window.window_step(request)


def test_readers_ignore_unknown_fields_unless_strict_and_failed_steps_are_errors() -> None:
    recorded = {**PROMOTE, "step": "promote", "exit_code": 0, "newer_field": 1}
    assert isinstance(s.parse_summary(recorded), s.PromoteSummary)
    with pytest.raises(ValidationError, match="newer_field"):
        s.parse_summary(recorded, strict=True)
    failed = s.parse_summary({"step": "train", "exit_code": 2, "error": "loss is NaN", "run_id": "r"})
    assert isinstance(failed, s.StepError) and failed.error == "loss is NaN"
    other = s.parse_summary({"step": "apply", "exit_code": 0, "feature_version": "x"})
    assert type(other) is s.StepSummary and other.model_extra == {"feature_version": "x"}


def _ranker(*argv: str) -> int:
    from ranking.cli.main import main

    return main(list(argv))


@pytest.mark.slow
def test_the_summaries_of_a_real_small_run_validate(tmp_path: Path) -> None:
    """A tiny workspace through the real CLI: freshness, materialize, `ranker run` promoting day 1,
    rejecting day 2, a dry-run decide, a run that fails at its window; every summary written
    validates against its model with undeclared fields refused."""
    from features import feast_repo
    from features.testing import make_tiny_workspace
    from ranking.core.workspace import Workspace

    home = tmp_path / "home"
    make_tiny_workspace(home, start=dt.date(2026, 1, 1), days=7, build=False)
    feast_repo.apply(Workspace.resolve(home))
    (home / "ranker.toml").write_text('[recipe]\nwarm_start = "champion"\nepochs = 2\n')
    common = ["--home", str(home), "--json"]
    assert _ranker("features", "freshness", "--end", "2026-01-06", "--run-id", "d1", *common) == 0
    assert _ranker("features", "materialize", "--end", "2026-01-06", "--run-id", "d1", *common) == 0
    run = ["run", "--days", "4", "--epochs", "2", *common]
    assert _ranker(*run, "--end", "2026-01-06", "--run-id", "d1", "--force-promote", "--reason", "first") == 0
    assert _ranker(*run, "--end", "2026-01-07", "--run-id", "d2", "--min-hit", "0.99") == 1
    decide = ["decide", "--candidate", "v0002", "--end", "2026-01-07", "--dry-run", "--run-id", "x"]
    assert _ranker(*decide, *common) == 0
    assert _ranker(*run, "--end", "2026-01-30", "--run-id", "bad") == 2

    seen: dict[str, set[str]] = {}
    for path in sorted((home / "pipeline").glob("*/*.json")):
        data = json.loads(path.read_text())
        model = s.parse_summary(data, path.stem, strict=True)
        seen.setdefault(type(model).__name__, set()).add(path.stem)
    expected = {
        "FreshnessSummary",
        "MaterializeSummary",
        "WindowSummary",
        "ValidationSummary",
        "TrainSummary",
        "GateSummary",
        "PromoteSummary",
        "RejectSummary",
        "DecideSummary",
        "MetricsSummary",
        "TrackSummary",
        "RunSummary",
        "StepError",
    }
    assert set(seen) == expected, seen
    assert seen["StepError"] == {"window"}

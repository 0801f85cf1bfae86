"""Faults in the champion's history: a rollback racing a promotion, the rollback's refusal, a
deleted history event, control characters in the text an event stores (reason, actor). Each was a
wrong result or a traceback (issue 25)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from registry_fixtures import RunFactory, bless

from ranking.cli.main import main
from ranking.core.errors import RegistryError
from ranking.registry import Registry
from ranking.registry.aliases import rollback_target
from ranking.registry.records import AliasEvent


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _three_champions(reg: Registry, make_run: RunFactory) -> list[str]:
    versions = [reg.register(make_run()) for _ in range(4)]
    for v in versions[:3]:
        reg.promote(v, reason=f"ship {v}", force=True)
    return versions


def promote_during_verify(
    reg: Registry, monkeypatch: pytest.MonkeyPatch, landing: Callable[[], None]
) -> list[str]:
    """Run ``landing`` (another client's move) inside the rollback's verify, the slow part between
    choosing the target and the compare-and-swap (a download on a remote registry)."""
    verified: list[str] = []
    original = Registry.verify

    def slow_verify(self: Registry, version: str) -> object:
        verified.append(version)
        if len(verified) == 1:
            landing()
        return original(self, version)

    monkeypatch.setattr(Registry, "verify", slow_verify)
    return verified


def assert_rollback_refused_when_a_promotion_lands(
    url: str, make_run: RunFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = Registry(url)
    _, v2, v3, v4 = _three_champions(reg, make_run)
    bless(reg, v4, champion=v3)
    other = Registry(url)  # another operator's client
    verified = promote_during_verify(reg, monkeypatch, lambda: other.promote(v4, reason="gate passed"))
    with pytest.raises(RegistryError, match=r"it moved while this rollback was checking v0002") as exc:
        reg.rollback(reason="v3 hurts saves")
    assert "event #3" in str(exc.value) and "v0004 at event #4" in str(exc.value)
    assert verified[0] == v2  # the target chosen before the promotion landed
    # the promotion stands and nothing was rolled back over it
    assert reg.champion() == v4
    history = reg.history()
    assert [(e.seq, e.action, e.from_version, e.to_version) for e in history[3:]] == [(4, "promote", v3, v4)]
    # run again, the rollback now undoes the move it can see: v4 back to v3
    monkeypatch.undo()
    event = reg.rollback(reason="v4 too")
    assert (event.from_version, event.to_version) == (v4, v3)


def test_rollback_refuses_when_a_promotion_lands_during_its_verify(
    registry_url: str, make_run: RunFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_rollback_refused_when_a_promotion_lands(registry_url, make_run, monkeypatch)


def test_rollback_to_a_named_version_is_refused_too_when_the_champion_moved(
    tmp_path: Path, make_run: RunFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = str(tmp_path / "registry")
    reg = Registry(url)
    v1, v2, v3, v4 = _three_champions(reg, make_run)
    other = Registry(url)
    promote_during_verify(reg, monkeypatch, lambda: other.promote(v4, reason="forced", force=True))
    code = main(
        ["rollback", "--to", v1, "--reason", "back to v1", "--registry", url, "--home", str(tmp_path)]
    )
    assert code == 2
    assert [e.to_version for e in Registry(url).history()] == [v1, v2, v3, v4]


def _event(seq: int, src: str | None, dst: str, action: str = "promote") -> AliasEvent:
    return AliasEvent(seq, "champion", src, dst, action, "2026-01-01T00:00:00+00:00", None, "r", "who")


def test_the_rollback_refusal_names_the_champions_that_were_rolled_back_from() -> None:
    walked_back = [
        _event(1, None, "v0001"),
        _event(2, "v0001", "v0002"),
        _event(3, "v0002", "v0003"),
        _event(4, "v0003", "v0002", "rollback"),
        _event(5, "v0002", "v0001", "rollback"),
    ]
    with pytest.raises(RegistryError) as exc:
        rollback_target(walked_back)
    assert "only version" not in str(exc.value)
    assert "every earlier champion (v0002, v0003) was rolled back from" in str(exc.value)
    with pytest.raises(RegistryError, match="v0001 is the only version that has been champion"):
        rollback_target([_event(1, None, "v0001")])


@pytest.mark.parametrize("deleted", ["00000001.json", "00000002.json"])
def test_a_deleted_history_event_is_noticed(
    tmp_path: Path, make_run: RunFactory, capsys: pytest.CaptureFixture[str], deleted: str
) -> None:
    root = tmp_path / "registry"
    reg = Registry(str(root))
    _three_champions(reg, make_run)
    (root / "aliases" / "champion" / deleted).unlink()
    home = ["--home", str(tmp_path), "--registry", str(root)]
    assert main(["models", "list", *home]) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"aliases/champion/{deleted} is missing" in line, line
    assert main(["rollback", "--reason", "bad", *home]) == 2
    assert f"aliases/champion/{deleted} is missing" in _one_line(capsys.readouterr().err)
    assert sorted(p.name for p in (root / "aliases" / "champion").iterdir()) == sorted(
        {"00000001.json", "00000002.json", "00000003.json"} - {deleted}
    )


FORGED = "fine\n  #9 2026-01-01T00:00:00+00:00 promote: v0001 -> v0004  by ceo  run=-  reason: approved"


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["promote", "v0004", "--force", "--reason", FORGED], {}),
        (["rollback", "--reason", FORGED], {}),
        (["reject", "v0004", "--reason", FORGED], {}),
        (["promote", "v0004", "--force", "--reason", "ok", "--who", "eve\rmallory"], {}),
        (["promote", "v0004", "--force", "--reason", "ok"], {"RANKER_ACTOR": "eve\u202e"}),
        (["rollback", "--reason", "ok"], {"RANKER_ACTOR": "eve\nmallory"}),
    ],
)
def test_control_characters_in_stored_text_are_refused_in_one_line(
    tmp_path: Path,
    make_run: RunFactory,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    env: dict[str, str],
) -> None:
    root = tmp_path / "registry"
    reg = Registry(str(root))
    _three_champions(reg, make_run)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main([*argv, "--home", str(tmp_path), "--registry", str(root)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "must be one line of printable text" in line, line
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_registering_with_a_bad_actor_writes_nothing(
    tmp_path: Path, make_run: RunFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = Registry(str(tmp_path / "registry"))
    run = make_run()
    monkeypatch.setenv("RANKER_ACTOR", "eve\n#4 forged")
    with pytest.raises(RegistryError, match=r"\$RANKER_ACTOR must be one line"):
        reg.register(run)
    assert reg.version_ids() == []


def test_models_list_prints_each_stored_event_on_one_line(
    tmp_path: Path, make_run: RunFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "registry"
    reg = Registry(str(root))
    _three_champions(reg, make_run)
    # an event written before the check (or by hand) with a newline in its reason and actor
    path = root / "aliases" / "champion" / "00000003.json"
    event = json.loads(path.read_text())
    event.update(reason=FORGED, who="eve\nmallory")
    path.write_text(json.dumps(event))
    assert main(["models", "list", "--home", str(tmp_path), "--registry", str(root)]) == 0
    out = capsys.readouterr().out
    history = out.split("history (champion):\n", 1)[1].splitlines()
    assert [line.split()[0] for line in history] == ["#1", "#2", "#3"], out
    assert FORGED.replace("\n", "\\n") in history[2] and "by eve\\nmallory" in history[2]

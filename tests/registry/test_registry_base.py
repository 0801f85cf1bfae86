"""The base alias (ranker pretrain): its own append-only history and rollback, apart from the champion."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ranking.core.errors import RegistryError
from ranking.registry import BASE, Registry
from ranking.registry.operations import ListRequest, RollbackRequest, list_models, rollback

RunFactory = Callable[..., Path]


def test_the_base_moves_without_a_gate_and_never_touches_the_champion(
    registry_url: str, make_run: RunFactory
) -> None:
    reg = Registry(registry_url)
    v1, v2 = reg.register(make_run()), reg.register(make_run())
    with pytest.raises(RegistryError, match="needs a reason"):
        reg.set_base(v1, reason=" ")
    event, previous = reg.set_base(v1, reason="pretrained", run_id="pt-1", who="airflow")
    assert event is not None and previous is None and event.alias == BASE
    assert reg.base() == v1 and reg.champion() is None
    again, previous = reg.set_base(v1, reason="rerun")
    assert again is None and previous == v1  # a rerun is a no-op, not a second event
    reg.set_base(v2, reason="weekly")
    assert [(e.from_version, e.to_version) for e in reg.history(BASE)] == [(None, v1), (v1, v2)]
    assert reg.history() == []  # the champion's history is its own


def test_the_base_rolls_back_like_the_champion(registry_url: str, make_run: RunFactory) -> None:
    reg = Registry(registry_url)
    v1, v2 = reg.register(make_run()), reg.register(make_run())
    with pytest.raises(RegistryError, match="no base"):
        rollback(RollbackRequest(registry=registry_url, reason="none yet", alias=BASE))
    reg.set_base(v1, reason="a")
    reg.set_base(v2, reason="b")
    reg.promote(v2, reason="ship", force=True)
    out = rollback(RollbackRequest(registry=registry_url, reason="bad base", alias=BASE))
    assert (out.previous, out.version, out.alias) == (v2, v1, BASE)
    assert reg.base() == v1 and reg.champion() == v2
    assert reg.history(BASE)[-1].action == "rollback"


def test_models_list_shows_the_base_and_its_history(registry_url: str, make_run: RunFactory) -> None:
    reg = Registry(registry_url)
    v1 = reg.register(make_run())
    reg.set_base(v1, reason="pretrained")
    listing = list_models(ListRequest(registry=registry_url))
    assert listing.base == v1 and [r.base for r in listing.versions] == [True]
    assert [e["to"] for e in listing.base_history] == [v1] and listing.history == []


def test_an_unknown_alias_is_refused(registry_url: str) -> None:
    with pytest.raises(RegistryError, match="unknown alias"):
        Registry(registry_url).alias_named("serving")

"""Synthetic home-feed log: requests with slates of pins, saves from a hidden ground-truth model.

The ground truth is built so that ID embeddings matter and can memorise (the setting of the
"one-epoch phenomenon", Zhang et al. 2022): per-user and per-pin offsets that no feature
explains (``id_effect_scale``), power-law user activity and pin popularity so that most IDs
have only a few impressions (``user_exponent``, ``pin_exponent``, ``users``, ``pins``), and
Bernoulli labels on top of extra logit noise (``label_noise``). A second pass over the same
impressions lets the tables fit that noise. Taste (latent user x pin affinity grouped by pin
category and user country) and position bias are the generalisable part.

Worlds where ID tables have little to learn (a real log where most of a day's users are new):
``returning_user_share`` (share of a day's requests made by the recurring user population; the
rest come from users seen that day for the first and only time), ``catalogue_churn`` (share of
the first day's catalogue that arrives new every day) and ``id_effect_scale`` (how much the ID
drives the label). Left at ``None`` the first two change nothing: the data is bit-identical to
the generator's before they existed (a test pins it).

A world where users come back to pins they saved, as shoppers rebuy (issue 34): a recurring
user's slate holds on average ``return_share`` of its slots filled with pins that user saved in
the last ``return_days`` days (when it has saved any), and a pin the user saved in those days
gets ``return_affinity`` extra logit, however it came into the slate. Both draw from their own
random stream: left at ``None`` nothing changes, and at 0 the world is the same byte for byte.

Deterministic by seed: the catalogue comes from ``seed``, each day from ``(seed, day index)``.
Streams day by day: only one day of impressions is in memory at a time.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from features import sources
from features.derive import SnapshotBuilder, day_start, write_snapshots
from features.schema import IMPRESSION_SCHEMA
from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace

# what one process holds: a day's impressions (peak ~140 bytes each, measured at 1M a day: about
# 1.4 GB at the limit) and every user and pin with its vector and daily snapshot row; beyond
# these a run would exhaust memory (100e9 requests asked numpy for 745 GiB) after writing part
# of the source, so they are refused before anything is written
MAX_IMPRESSIONS_PER_DAY = 10_000_000
MAX_ENTITIES = 10_000_000
# how far back a user comes back to its saves: the features' longest horizon (features/derive.py);
# it also bounds the remembered saves to that many days of a day's impressions
MAX_RETURN_DAYS = 28
# the extra logit of a pin saved before, either way: beyond this the label is saturated
MAX_RETURN_AFFINITY = 10.0


@dataclass(frozen=True)
class SynthConfig:
    start: dt.date
    days: int
    users: int = 20_000
    pins: int = 20_000  # catalogue on the first day; more arrive every day
    new_pins_per_day: int | None = None  # default: pins // 20
    requests_per_day: int = 4_000
    slate_size: int = 25
    seed: int = 0
    latent_dim: int = 8
    countries: int = 12
    categories: int = 24
    affinity_scale: float = 1.0  # weight of the generalisable user x pin taste
    id_effect_scale: float = 0.8  # std of per-user and per-pin logit offsets (memorisable)
    user_exponent: float = 1.0  # power law of user activity (higher: more long-tail users)
    pin_exponent: float = 1.1  # power law of pin popularity
    pin_half_life_days: float = 7.0  # popularity of a pin halves every this many days
    position_decay: float = 0.35  # logit drop per log2(1 + position)
    label_noise: float = 0.5  # std of per-impression logit noise
    base_logit: float = -4.0  # sets the save rate (a few %)
    # None: every request from the recurring population; s: a share 1 - s of each day's requests
    # from first-seen users (a new ID each, never seen again)
    returning_user_share: float | None = None
    # None: new_pins_per_day; c: round(c * pins) new pins a day
    catalogue_churn: float | None = None
    # None (all three): no returns. s: each slot of a recurring user's slate is, with probability s,
    # one of the pins that user saved in the last return_days days (default 28; as many as it has)
    return_share: float | None = None
    # a: extra logit of an impression of a pin its user saved in the last return_days days
    return_affinity: float | None = None
    return_days: int | None = None

    @property
    def returns(self) -> bool:
        """Whether users come back to their saves (the generator then remembers them)."""
        return self.return_share is not None or self.return_affinity is not None

    @property
    def return_horizon(self) -> int:
        return MAX_RETURN_DAYS if self.return_days is None else self.return_days

    def validate(self) -> None:
        """Refuse a config the generator cannot run, before it allocates or writes anything."""
        positive = (
            "days",
            "users",
            "pins",
            "requests_per_day",
            "slate_size",
            "latent_dim",
            "countries",
            "categories",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise RankerError(f"synth: {name} must be > 0, got {getattr(self, name)}")
        if self.slate_size > self.pins:
            raise RankerError(f"synth: slate size {self.slate_size} exceeds the catalogue ({self.pins} pins)")
        for name in ("id_effect_scale", "label_noise", "pin_half_life_days", "position_decay"):
            if getattr(self, name) < 0:
                raise RankerError(f"synth: {name} must be >= 0, got {getattr(self, name)}")
        if self.new_pins_per_day is not None and self.new_pins_per_day < 0:
            raise RankerError(f"synth: new_pins_per_day must be >= 0, got {self.new_pins_per_day}")
        for name in ("returning_user_share", "catalogue_churn", "return_share"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1:
                raise RankerError(f"synth: {name} must be in [0, 1], got {value}")
        self._validate_returns()
        if self.seed < 0:
            raise RankerError(f"synth: seed must be >= 0, got {self.seed}")
        for what, count, limit, knobs in self.sizes():
            if count > limit:
                raise RankerError(
                    f"synth: {count:,} {what} exceed the generator's limit of {limit:,}"
                    f" (held in memory): lower {knobs}"
                )

    def _validate_returns(self) -> None:
        if self.return_affinity is not None and not abs(self.return_affinity) <= MAX_RETURN_AFFINITY:
            raise RankerError(
                f"synth: return_affinity must be in [-{MAX_RETURN_AFFINITY:g}, {MAX_RETURN_AFFINITY:g}],"
                f" got {self.return_affinity}"
            )
        if self.return_days is not None:
            if not 1 <= self.return_days <= MAX_RETURN_DAYS:
                raise RankerError(
                    f"synth: return_days must be in [1, {MAX_RETURN_DAYS}], got {self.return_days}"
                )
            if not self.returns:
                raise RankerError(
                    "synth: return_days needs return_share or return_affinity (alone it does nothing)"
                )

    def sizes(self) -> tuple[tuple[str, int, int, str], ...]:
        """(what, how many, limit, the knobs that set it) of what the generator holds in memory:
        one day's impressions, and the users and pins of the whole run."""
        first_seen = (
            0
            if self.returning_user_share is None
            else round((1 - self.returning_user_share) * self.requests_per_day) * self.days
        )
        return (
            (
                "impressions a day",
                self.requests_per_day * self.slate_size,
                MAX_IMPRESSIONS_PER_DAY,
                "--requests-per-day or --slate-size",
            ),
            ("users", self.users + first_seen, MAX_ENTITIES, "--users (or --returning-user-share)"),
            (
                "pins",
                self.pins + self.daily_new_pins * (self.days - 1),
                MAX_ENTITIES,
                "--pins, --new-pins-per-day/--catalogue-churn or --days",
            ),
        )

    @property
    def daily_new_pins(self) -> int:
        if self.catalogue_churn is not None:
            return round(self.catalogue_churn * self.pins)
        return self.pins // 20 if self.new_pins_per_day is None else self.new_pins_per_day


def _power_law(rng: np.random.Generator, n: int, exponent: float) -> np.ndarray:
    """Weights rank^-exponent over a random permutation of n items (sums to 1)."""
    w = np.arange(1, n + 1, dtype=np.float64) ** -exponent
    return rng.permutation(w / w.sum())


class _World:
    """The hidden state: users, a growing pin catalogue and the ground-truth parameters."""

    def __init__(self, cfg: SynthConfig) -> None:
        self.cfg = cfg
        rng = np.random.default_rng([cfg.seed, 0xC0FFEE])
        d = cfg.latent_dim
        self._rng = rng
        self.category_centroids = rng.normal(0, 1, (cfg.categories, d)) / np.sqrt(d)
        country_centroids = rng.normal(0, 1, (cfg.countries, d)) / np.sqrt(d)
        self.user_country = rng.choice(cfg.countries, cfg.users, p=_power_law(rng, cfg.countries, 1.0))
        self.user_taste = 0.7 * country_centroids[self.user_country] + rng.normal(
            0, 1, (cfg.users, d)
        ) / np.sqrt(d)
        self.user_bias = rng.normal(0, cfg.id_effect_scale, cfg.users)
        self.user_activity = _power_law(rng, cfg.users, cfg.user_exponent)
        self._country_centroids = country_centroids
        self.user_created = np.full(cfg.users, np.datetime64(cfg.start), dtype="datetime64[s]")
        self.first_seen_today = np.empty(0, dtype=np.int64)
        self.pin_category = np.empty(0, dtype=np.int64)
        self.pin_vec = np.empty((0, d))
        self.pin_bias = np.empty(0)
        self.pin_base = np.empty(0)
        self.pin_created = np.empty(0, dtype="datetime64[s]")
        # the recurring users' saves of the last return_days days: user * _PAIR_SPAN + pin, sorted
        # and distinct, with the day index of the latest save (only with returns on)
        self._saved_pairs = np.empty(0, dtype=np.int64)
        self._saved_day = np.empty(0, dtype=np.int64)
        self.reshown = self.reshown_saves = 0
        # the first day's catalogue already has ages of up to four half-lives
        ages = rng.uniform(0, 4 * cfg.pin_half_life_days, cfg.pins)
        created = np.datetime64(cfg.start) - (ages * 86400).astype("timedelta64[s]")
        self._add_pins(cfg.pins, created)

    def _add_pins(self, n: int, created: np.ndarray) -> None:
        cfg, rng = self.cfg, self._rng
        cat = rng.integers(0, cfg.categories, n)
        vec = self.category_centroids[cat] + 0.6 * rng.normal(0, 1, (n, cfg.latent_dim)) / np.sqrt(
            cfg.latent_dim
        )
        self.pin_category = np.concatenate([self.pin_category, cat])
        self.pin_vec = np.concatenate([self.pin_vec, vec])
        self.pin_bias = np.concatenate([self.pin_bias, rng.normal(0, cfg.id_effect_scale, n)])
        base = np.arange(1, n + 1, dtype=np.float64) ** -cfg.pin_exponent
        self.pin_base = np.concatenate([self.pin_base, rng.permutation(base)])
        self.pin_created = np.concatenate([self.pin_created, created.astype("datetime64[s]")])

    def new_day(self, day_index: int, day: dt.date) -> None:
        if day_index > 0 and self.cfg.daily_new_pins:
            n = self.cfg.daily_new_pins
            self._add_pins(n, np.full(n, np.datetime64(day), dtype="datetime64[s]"))
        share = self.cfg.returning_user_share
        first_seen = 0 if share is None else round((1 - share) * self.cfg.requests_per_day)
        # made before the day's entity snapshot, so that their features exist when they appear
        self.first_seen_today = self._first_seen_users(day_index, day, first_seen)

    def _first_seen_users(self, day_index: int, day: dt.date, n: int) -> np.ndarray:
        """``n`` users who appear today for the first time (ids after every earlier user's); their
        own random stream, so the recurring population's draws are the same with or without them."""
        cfg = self.cfg
        if n == 0:
            return np.empty(0, dtype=np.int64)
        rng = np.random.default_rng([cfg.seed, day_index + 1, 0x5EE])
        d = cfg.latent_dim
        country = rng.choice(cfg.countries, n, p=_power_law(rng, cfg.countries, 1.0))
        taste = 0.7 * self._country_centroids[country] + rng.normal(0, 1, (n, d)) / np.sqrt(d)
        first = len(self.user_country)
        self.user_country = np.concatenate([self.user_country, country])
        self.user_taste = np.concatenate([self.user_taste, taste])
        self.user_bias = np.concatenate([self.user_bias, rng.normal(0, cfg.id_effect_scale, n)])
        self.user_created = np.concatenate(
            [self.user_created, np.full(n, np.datetime64(day), dtype="datetime64[s]")]
        )
        return np.arange(first, first + n)

    def users_frame(self) -> pd.DataFrame:
        n = len(self.user_country)
        if n == self.cfg.users:
            created = day_start(self.cfg.start)
        else:
            created = pd.to_datetime(self.user_created).tz_localize("UTC")
        return pd.DataFrame(
            {
                "user_id": np.arange(1, n + 1, dtype=np.int64),
                "country": np.array([f"c{c:02d}" for c in range(self.cfg.countries)])[self.user_country],
                "created_timestamp": created,
            }
        )

    def pins_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "pin_id": np.arange(1, len(self.pin_base) + 1, dtype=np.int64),
                "category": np.array([f"k{c:02d}" for c in range(self.cfg.categories)])[self.pin_category],
                "created_timestamp": pd.to_datetime(self.pin_created).tz_localize("UTC"),
            }
        )

    def impressions(self, day_index: int, day: dt.date) -> pa.Table:
        cfg = self.cfg
        rng = np.random.default_rng([cfg.seed, day_index + 1])
        r, k = cfg.requests_per_day, cfg.slate_size
        users = rng.choice(cfg.users, r, p=self.user_activity)
        if len(self.first_seen_today):
            # the last requests of the day's draw go to first-seen users (request times are
            # drawn independently of the user, so which ones does not matter)
            users[r - len(self.first_seen_today) :] = self.first_seen_today
        age_days = (np.datetime64(day) - self.pin_created).astype("timedelta64[s]").astype(np.float64) / 86400
        alive = age_days >= 0
        weight = np.where(
            alive, self.pin_base * 0.5 ** (np.maximum(age_days, 0) / cfg.pin_half_life_days), 0.0
        )
        weight /= weight.sum()
        if np.count_nonzero(weight) < k:
            raise RankerError(f"synth: fewer than {k} pins available on {day}")
        slates = _distinct_slates(rng, weight, r, k)
        if cfg.return_share:
            slates = self._come_back(day_index, cfg.return_share, users, slates)
        affinity = np.einsum("rd,rkd->rk", self.user_taste[users], self.pin_vec[slates])
        # the previous ranker orders the slate by a noisy view of the affinity (positions 0..k-1)
        order = np.argsort(-(affinity + rng.gumbel(0, 0.5, (r, k))), axis=1)
        slates = np.take_along_axis(slates, order, axis=1)
        affinity = np.take_along_axis(affinity, order, axis=1)
        position = np.broadcast_to(np.arange(k), (r, k))
        logit = (
            cfg.base_logit
            + cfg.affinity_scale * affinity * np.sqrt(cfg.latent_dim)
            + self.user_bias[users][:, None]
            + self.pin_bias[slates]
            - cfg.position_decay * np.log2(1 + position)
            + cfg.label_noise * rng.normal(0, 1, (r, k))
        )
        if cfg.returns:
            before = self._saved_before(users, slates)
            # added last, so that an affinity of 0 leaves every logit's bits as they were
            logit = logit + (cfg.return_affinity or 0.0) * before
        saved = (rng.random((r, k)) < 1 / (1 + np.exp(-logit))).astype(np.int8)
        if cfg.returns:
            self.reshown += int(before.sum())
            self.reshown_saves += int(saved[before].sum())
            self._remember(day_index, users, slates, saved)
        seconds = np.sort(rng.integers(0, 86400, r))
        ts = (np.datetime64(day).astype("datetime64[us]") + seconds.astype("timedelta64[s]")).astype("int64")
        request_ids = np.char.add(f"{day:%Y%m%d}-", np.char.zfill(np.arange(r).astype(str), 7))
        return pa.table(
            {
                "request_id": np.repeat(request_ids, k),
                "user_id": np.repeat(users + 1, k).astype(np.int64),
                "pin_id": (slates + 1).reshape(-1).astype(np.int64),
                "event_timestamp": pa.array(np.repeat(ts, k), pa.timestamp("us", tz="UTC")),
                "position": position.reshape(-1).astype(np.int32),
                "saved": saved.reshape(-1),
            },
            schema=IMPRESSION_SCHEMA,
        )

    def _come_back(self, day_index: int, share: float, users: np.ndarray, slates: np.ndarray) -> np.ndarray:
        """Each slot of a request's slate, with probability ``share``, becomes one of the pins
        its user saved in the last ``return_days`` days (drawn without replacement, as many as the
        user has); the popularity draws fill the rest, in their order, skipping those pins."""
        # a stream of its own: the day's other draws are the same with or without returns
        rng = np.random.default_rng([self.cfg.seed, day_index + 1, 0x4E7])
        r, k = slates.shape
        wanted = rng.binomial(k, share, r)
        first = np.searchsorted(self._saved_pairs, users * _PAIR_SPAN)
        have = np.searchsorted(self._saved_pairs, (users + 1) * _PAIR_SPAN) - first
        take = np.minimum(wanted, have)
        slates = slates.copy()
        for i in np.flatnonzero(take):
            picked = rng.choice(have[i], take[i], replace=False)
            pins = self._saved_pairs[first[i] + picked] % _PAIR_SPAN
            rest = slates[i][~np.isin(slates[i], pins)][: k - take[i]]
            slates[i] = np.concatenate([pins, rest])
        return slates

    def _saved_before(self, users: np.ndarray, slates: np.ndarray) -> np.ndarray:
        """(requests, slate) bool: the pin is one its user saved in the last ``return_days`` days."""
        if not len(self._saved_pairs):
            return np.zeros(slates.shape, dtype=bool)
        pairs = users[:, None] * _PAIR_SPAN + slates
        at = np.minimum(np.searchsorted(self._saved_pairs, pairs), len(self._saved_pairs) - 1)
        return self._saved_pairs[at] == pairs

    def _remember(self, day_index: int, users: np.ndarray, slates: np.ndarray, saved: np.ndarray) -> None:
        """Add the day's saves by recurring users (first-seen ones never come back) and forget
        those older than ``return_days`` days: memory holds at most that many days of saves."""
        rows, cols = np.nonzero(saved)
        recurring = users[rows] < self.cfg.users
        new = users[rows][recurring] * _PAIR_SPAN + slates[rows, cols][recurring]
        # today's first, so that np.unique's first occurrence keeps a pair's latest day
        pairs = np.concatenate([new, self._saved_pairs])
        days = np.concatenate([np.full(len(new), day_index, dtype=np.int64), self._saved_day])
        pairs, first = np.unique(pairs, return_index=True)
        days = days[first]
        recent = days > day_index - self.cfg.return_horizon
        self._saved_pairs, self._saved_day = pairs[recent], days[recent]


# user and pin indices are below MAX_ENTITIES (validated), so a pair fits one int64
_PAIR_SPAN = MAX_ENTITIES + 1


def _distinct_slates(rng: np.random.Generator, weight: np.ndarray, r: int, k: int) -> np.ndarray:
    """r slates of k distinct pins, each drawn by popularity (redraw duplicates until none)."""
    slates = rng.choice(len(weight), (r, k), p=weight)
    for _ in range(1000):
        order = np.argsort(slates, axis=1, kind="stable")
        ordered = np.take_along_axis(slates, order, axis=1)
        dup_sorted = np.zeros_like(ordered, dtype=bool)
        dup_sorted[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
        if not dup_sorted.any():
            return slates
        dup = np.zeros_like(dup_sorted)
        np.put_along_axis(dup, order, dup_sorted, axis=1)
        slates[dup] = rng.choice(len(weight), int(dup.sum()), p=weight)
    raise RankerError("synth: could not draw distinct slates; lower --slate-size or the pin exponent")


class SynthSummary(BaseModel):
    """``ranker data synth``: the days written, their impressions and the knobs they came from."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    start: dt.date
    end: dt.date
    days: int
    impressions: int
    saves: int
    save_rate: float
    users: int
    pins: int
    """the catalogue after the last day"""
    reshown: int | None = None
    """impressions of a pin its user saved in the last ``return_days`` days (None: returns off)"""
    reshown_saves: int | None = None
    """saves among them"""
    config: dict[str, str | int | float | None]
    """the :class:`SynthConfig` (its start as ISO text)"""
    source: str
    duration_seconds: float


def generate(ws: Workspace, cfg: SynthConfig) -> SynthSummary:
    """Write ``cfg.days`` days of impressions and their feature snapshots into the workspace."""
    cfg.validate()
    started = time.perf_counter()
    world = _World(cfg)
    builder = SnapshotBuilder(world.users_frame(), world.pins_frame())
    rows = saves = 0
    day = cfg.start
    for i in range(cfg.days):
        day = cfg.start + dt.timedelta(days=i)
        world.new_day(i, day)
        builder.set_entities(world.users_frame(), world.pins_frame())
        write_snapshots(ws, builder, day)
        table = world.impressions(i, day)
        sources.write_day(ws, sources.IMPRESSIONS, day, table)
        frame = table.select(["user_id", "pin_id", "saved"]).to_pandas()
        builder.add_day(day, frame)
        rows += table.num_rows
        saves += int(frame["saved"].sum())
    # the features as of the end of the last day (what serving reads after materialize)
    write_snapshots(ws, builder, day + dt.timedelta(days=1))
    sources.write_table_file(
        sources.entities_path(ws, sources.USERS), pa.Table.from_pandas(world.users_frame())
    )
    sources.write_table_file(
        sources.entities_path(ws, sources.PINS), pa.Table.from_pandas(world.pins_frame())
    )
    return SynthSummary(
        start=cfg.start,
        end=day,
        days=cfg.days,
        impressions=rows,
        saves=saves,
        save_rate=saves / rows if rows else 0.0,
        users=cfg.users,
        pins=len(world.pin_base),
        reshown=world.reshown if cfg.returns else None,
        reshown_saves=world.reshown_saves if cfg.returns else None,
        config={k: (v.isoformat() if isinstance(v, dt.date) else v) for k, v in asdict(cfg).items()},
        source=str(ws.source),
        duration_seconds=round(time.perf_counter() - started, 3),
    )

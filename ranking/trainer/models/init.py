"""Initial table weights as a function of the seed alone, filled shard by shard.

The model is built with its tables on the meta device (nothing allocated) and
DistributedModelParallel materialises only each rank's shards. fbgemm fills a new shard from the
process's random stream, which depends on how the table was cut; instead every table row block
draws from a generator seeded by (seed, table, block), so a shard covering rows [a, b) and
columns [c, d) gets the same values whatever the world size and sharding type, and no process
ever holds more than its shards plus one block.

The distribution is torchrec's default for a table: uniform in ±sqrt(1 / num_embeddings).
"""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Any

from ranking.core.errors import RankerError
from ranking.trainer.models.config import ModelConfig, TableConfig

if TYPE_CHECKING:
    import torch

BLOCK_ROWS = 8192  # rows drawn per generator; a shard boundary never changes a row's values
DMP_TABLE_PREFIX = "model.sparse_arch.embedding_bags."  # DMP(TrainTask) keys of the tables
TABLE_SUFFIX = ".weight"


def _block_seed(seed: int, table: str, block: int) -> int:
    digest = hashlib.sha256(f"{seed}:{table}:{block}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def _blocks(table: TableConfig, seed: int, start: int, stop: int) -> Any:
    """(first row, values) of every block overlapping rows [start, stop), clipped to them."""
    import torch

    bound = math.sqrt(1.0 / table.num_embeddings)
    block = start // BLOCK_ROWS
    while block * BLOCK_ROWS < stop:
        lo = block * BLOCK_ROWS
        hi = min(lo + BLOCK_ROWS, table.num_embeddings)
        gen = torch.Generator().manual_seed(_block_seed(seed, table.name, block))
        values = torch.empty((hi - lo, table.embedding_dim), dtype=torch.float32)
        values.uniform_(-bound, bound, generator=gen)
        a, b = max(lo, start), min(hi, stop)
        yield a, values[a - lo : b - lo]
        block += 1


def table_rows(table: TableConfig, seed: int, rows: slice, cols: slice | None = None) -> torch.Tensor:
    """Initial values of ``table``'s rows ``rows`` (and columns ``cols``), float32."""
    import torch

    start, stop = rows.start or 0, min(rows.stop, table.num_embeddings)
    cols = cols or slice(0, table.embedding_dim)
    out = torch.empty((max(stop - start, 0), cols.stop - cols.start), dtype=torch.float32)
    fill_rows(out, table, seed, start, cols)
    return out


def fill_rows(target: torch.Tensor, table: TableConfig, seed: int, start: int, cols: slice) -> None:
    """Write the initial values of rows [start, start + len(target)) and columns ``cols`` into
    ``target`` in place, one block at a time (no shard-sized temporary)."""
    stop = min(start + int(target.shape[0]), table.num_embeddings)
    for first, values in _blocks(table, seed, start, stop):
        target[first - start : first - start + values.shape[0]] = values[:, cols].to(target.device)


def seed_tables(cfg: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    """Whole tables under ``seed`` ({"sparse_arch.embedding_bags.<name>.weight": tensor}): for
    small models and tests; training fills shards with :func:`init_table_shards`."""
    return {
        f"sparse_arch.embedding_bags.{t.name}{TABLE_SUFFIX}": table_rows(t, seed, slice(0, t.num_embeddings))
        for t in cfg.tables
    }


def _fill(target: Any, table: TableConfig, seed: int) -> None:
    import torch

    with torch.no_grad():
        if not hasattr(target, "local_shards"):
            target.copy_(table_rows(table, seed, slice(0, table.num_embeddings)))
            return
        for shard in target.local_shards():
            (r0, c0), (_, nc) = shard.metadata.shard_offsets, shard.metadata.shard_sizes
            fill_rows(shard.tensor, table, seed, r0, slice(c0, c0 + nc))


def init_table_shards(dmp: Any, cfg: ModelConfig, seed: int) -> None:
    """Fill this rank's table shards of ``dmp`` with the seed's initial values (no collective)."""
    live = {
        key[len(DMP_TABLE_PREFIX) : -len(TABLE_SUFFIX)]: value
        for key, value in dmp.state_dict().items()
        if key.startswith(DMP_TABLE_PREFIX) and key.endswith(TABLE_SUFFIX)
    }
    by_name = {t.name: t for t in cfg.tables}
    if set(live) != set(by_name):
        raise RankerError(f"tables of the model do not match its config: {sorted(set(live) ^ set(by_name))}")
    for name, target in live.items():
        _fill(target, by_name[name], seed)

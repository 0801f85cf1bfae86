"""Rewrite a sharded epoch checkpoint as written by this launch's world size (no training).

``python -m torch.distributed.run --nproc-per-node N tests/trainer/checkpointing/reshard_worker.py SRC DST
MODEL_CONFIG SEED``: every rank builds the sharded model, loads SRC into its shards (DCP reads the
overlapping parts of the old shards) and writes its shards to DST. Used by test_reshard to make
the state of one run appear as written by another world size, with the trainer's own functions.
With SRC ``init`` nothing is loaded: DST holds the model as built (the seed's initial weights).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(src: Path, dst: Path, model_config: Path, seed: int) -> None:
    from ranking.trainer.checkpointing.state import restore_epoch, save_epoch
    from ranking.trainer.distributed import setup as distributed
    from ranking.trainer.loop import build_sharded
    from ranking.trainer.models.config import ModelConfig

    distributed.quiet_library_noise()
    ctx = distributed.init_distributed()
    try:
        stack = build_sharded(ModelConfig.from_dict(json.loads(model_config.read_text())), seed, ctx)
        meta: dict[str, object] = {"epoch": 0}
        if str(src) != "init":
            meta = restore_epoch(src, stack.dmp, stack.optimizer)
            meta = {k: v for k, v in meta.items() if k not in ("dense_param_groups", "world_size")}
        save_epoch(dst, stack.dmp, stack.optimizer, meta)
    finally:
        distributed.shutdown(ctx)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))

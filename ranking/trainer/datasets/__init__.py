"""ranking.trainer.datasets: the input: `window` (streaming window reader), `input` (the batch pipeline and its cache)."""

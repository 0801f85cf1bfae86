"""ranking.trainer.evaluation: scoring a checkpoint: `scoring`, `evaluate` (`EvaluateJob`)."""

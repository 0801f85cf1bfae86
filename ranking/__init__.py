"""ranker-retrain: the training, gating, registry and monitoring side of the pipeline."""

__version__ = "0.1.0"

"""ranking.trainer.models: the model: `config` (ModelConfig, TrainConfig), `model` (torchrec EmbeddingBagCollection + dense tower), `init` (the seed's table values)."""

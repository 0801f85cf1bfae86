"""``ranker review``: the weekly recipe review — the configured recipes replayed over the last
eval days with the backtest engine, the recommendation rule, and ``review.recipe = "auto"``."""

"""`ranker backtest`: replay the daily retrain over past days per recipe, and compare recipes."""

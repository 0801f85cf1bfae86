"""ranker-retrain data side: synthetic/imported events, the Feast repository, window builder."""

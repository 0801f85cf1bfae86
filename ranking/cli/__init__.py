"""The ``ranker`` command line: ``ranker X`` lives in ``ranking/cli/X.py``; ``main.py`` is the entry point."""

"""``python -m ranking.cli`` = ``ranker``."""

import sys

from ranking.cli.main import entry

sys.exit(entry())

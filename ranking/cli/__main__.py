"""``python -m ranking.cli`` = ``ranker``."""

import sys

from ranking.cli.main import main

sys.exit(main())

"""One torchrun worker of a launched ``ranker train`` job: ``python -m ranking.trainer.worker JOB``
reads the job the launcher serialized into the run folder (``ranking.trainer.job.WORKER_JOB``)
and runs it; rank 0 writes the summary to the job's ``summary_file``. A user error is one line
on stderr and exit 2, as from ``ranker``; anything else a traceback and exit 70."""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path

from ranking.core import noise
from ranking.core.errors import EXIT_CRASH, as_user_error


def main(argv: list[str]) -> int:
    from ranking.trainer.job import job_from_json, run_train_job

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    noise.install()  # the torch FX note every forward logs: not the worker log's business
    if len(argv) != 1:
        print("usage: python -m ranking.trainer.worker JOB_FILE", file=sys.stderr)
        return 2
    try:
        run_train_job(job_from_json(Path(argv[0]).read_text()))
    except Exception as exc:
        user_error = as_user_error(exc)
        if user_error is None:
            traceback.print_exc()
            return EXIT_CRASH
        print(f"ranker train (worker): error: {user_error}", file=sys.stderr)
        return user_error.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

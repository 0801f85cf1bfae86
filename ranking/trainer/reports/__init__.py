"""ranking.trainer.reports: what a run shows: `progress`, `plots`, `run_report`."""

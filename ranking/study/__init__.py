"""The schedule study (docs/study.md): does the delayed embedding update beat one epoch on our data?

``spec`` (what to train: spec, cells, folder), ``stats`` (pure: changes vs the 1-epoch joint
baseline, spread over seeds, verdicts), ``runner`` (``ranker train`` subprocesses, reuse of finished
cells), ``report`` (Markdown + PNG + JSON), ``run`` (``ranker study``: runner then report).
"""

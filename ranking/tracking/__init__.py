"""MLflow tracking: each run, backtest and review as an MLflow run, the champion as a registered
model's alias (docs/tracking.md).

``records`` (what a run sends: :class:`TrackingRecord`), ``settings`` (the ``[tracking]`` config as
:class:`TrackingSettings`), ``client`` (one record sent to MLflow), ``registry`` (the champion
mirrored as the ``champion`` alias of a registered model; gc's deletions), ``queue`` (the on-disk
queue), ``outbox`` (:func:`track`, :func:`mirror_champion`, :func:`prune`, :func:`replay`: send,
or queue when MLflow is down, in order), ``builders`` and ``hooks`` (records from the step
summaries of a run; the backtest's, the review's and the pipeline's own live beside them).
MLflow is imported only when something is sent: a step that tracks nothing never pays for it.
"""

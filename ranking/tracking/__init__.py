"""MLflow tracking: each run, backtest and review as an MLflow run, the champion as a registered
model's alias (docs/tracking.md).

``records`` (what a run sends: :class:`TrackingRecord`), ``settings`` (the ``[tracking]`` config as
:class:`TrackingSettings`), ``client`` (:func:`track`: send a record, or queue it when MLflow is
down), ``queue`` (the on-disk queue and its replay), ``registry`` (the champion mirrored as the
``champion`` alias of a registered model), ``prune`` (``ranker gc``'s deletions).
MLflow is imported only when something is sent: a step that tracks nothing never pays for it.
"""

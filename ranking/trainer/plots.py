"""Training curve: loss and the eval metric per epoch, one PNG beside the run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ranking.core.atomic import atomic_path


def plot_curve(path: Path, epochs: Sequence[dict[str, Any]], metric: str = "save_hit_at_3") -> None:
    """Left axis: train loss per epoch (markers F/J by phase); right axis: eval ``metric``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [e["epoch"] for e in epochs]
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
    ax.plot(xs, [e["loss"] for e in epochs], "o-", color="tab:blue", label="train loss")
    for e in epochs:
        ax.annotate(
            "F" if e["phase"] == "frozen" else "J",
            (e["epoch"], e["loss"]),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=8,
        )
    ax.set_xlabel("epoch")
    ax.set_ylabel("train loss (BCE)", color="tab:blue")
    ax.set_xticks(xs)
    values = [(e["epoch"], e["eval"][metric]) for e in epochs if e.get("eval") and metric in e["eval"]]
    if values:
        ax2 = ax.twinx()
        ax2.plot(
            [v[0] for v in values], [v[1] for v in values], "s--", color="tab:red", label=f"eval {metric}"
        )
        ax2.set_ylabel(f"eval {metric}", color="tab:red")
    ax.set_title("training curve (F = frozen tables, J = joint)")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)

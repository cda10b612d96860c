"""The algorithm-trajectory figure: SPD of the trained model against each algorithm over training."""

from __future__ import annotations

import matplotlib.pyplot as plt

from icldyn.config import RunConfig
from icldyn.papers.akyurek.results import TrajectoryPoint
from icldyn import plots
from icldyn.plots import save, series

LABELS = {"gd": "L-step GD (A_ℓ = η_ℓ I)", "pgd": "L-step preconditioned GD (A_ℓ = η_ℓ Σ⁻¹)", "ols": "OLS",
          "gd1": "1-step GD", "pgd1": "1-step preconditioned GD", "ridge": "ridge"}
STYLE = {"gd": ("C0", "-"), "pgd": ("C3", "-"), "ols": ("k", "--"), "gd1": ("C0", ":"), "pgd1": ("C3", ":"),
         "ridge": ("C2", "--")}


def trajectory(cfg: RunConfig, points: list[TrajectoryPoint], rows: dict[str, list], rd) -> str:
    """One panel per grid point: SPD(model, g) over training for every algorithm g (mean over seeds, min–max band),
    the held-out loss dashed grey."""
    fig, axes = plt.subplots(1, len(points), figsize=(5.4 * len(points), 4.2), squeeze=False)
    for ax, p in zip(axes[0], points):
        for alg in p.algorithms:
            x, m, lo, hi = series(rows, p.point, f"spd_{alg}")
            color, style = STYLE.get(alg, (None, "-"))
            (line,) = ax.plot(x, m, style, color=color, label=f"SPD to {LABELS.get(alg, alg)}")
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.15)
        x, m, _, _ = series(rows, p.point, "test_loss")
        ax.plot(x, m, "--", color="0.6", label="held-out loss E[(ŷ − y)²]")
        ax.set(yscale="log", xlabel="step", ylabel="squared prediction difference (log scale)",
               title=plots.readable(p.point) or f"{p.model}, {p.layers} layers")
    plots.legend(axes[0][-1], fontsize=7)
    d = cfg.data
    fig.suptitle(f"{cfg.experiment}: which algorithm is the model running?\nd={d.d}, n={d.n}, Σ={d.covariance}, "
                 f"{cfg.seeds} seed(s), {cfg.train.steps} steps", fontsize=9)
    return save(fig, rd, "trajectory")

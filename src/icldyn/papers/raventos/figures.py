"""The task-diversity figure: the trained model's distance to dMMSE and to ridge against the pool size M, and its
losses beside the two estimators'."""

from __future__ import annotations

import matplotlib.pyplot as plt

from icldyn.config import RunConfig
from icldyn.papers.raventos.results import DiversityPoint
from icldyn import plots
from icldyn.plots import save


def diversity(cfg: RunConfig, points: list[DiversityPoint], transition: float | None, rd) -> str:
    pts = sorted(points, key=lambda p: p.pool_size)
    M = [p.pool_size for p in pts]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    a.plot(M, [p.spd_dmmse for p in pts], "o-", color="C1", label="SPD(model, dMMSE)")
    a.plot(M, [p.spd_ridge for p in pts], "s-", color="C0", label="SPD(model, ridge)")
    if transition is not None:
        a.axvline(2**transition, color="k", ls=":", label=f"transition M* ≈ 2^{transition:.2f}")
    a.set(xscale="log", yscale="log", xlabel="pool size M (log scale)", ylabel="SPD on true-prior prompts (log scale)",
          title="distance to the two Bayes estimators")
    a.set_xscale("log", base=2)
    plots.legend(a)
    b.plot(M, [p.test_loss for p in pts], "o-", color="C2", label="model, true-prior tasks")
    b.plot(M, [p.pool_loss for p in pts], "o--", color="C2", label="model, pool tasks")
    b.plot(M, [p.ridge_true_loss for p in pts], "s-", color="C0", alpha=0.6, label="ridge, true-prior tasks")
    b.plot(M, [p.dmmse_true_loss for p in pts], "^-", color="C1", alpha=0.6, label="dMMSE, true-prior tasks")
    b.plot(M, [p.dmmse_pool_loss for p in pts], "^--", color="C1", alpha=0.6, label="dMMSE, pool tasks")
    b.set(xscale="log", yscale="log", xlabel="pool size M (log scale)", ylabel="held-out loss E[(ŷ − y)²] (log scale)", title="losses")
    b.set_xscale("log", base=2)
    plots.legend(b, fontsize=7)
    d, m = cfg.data, cfg.model
    layers = m.dims()[1] if hasattr(m, "dims") else m.layers
    fig.suptitle(f"{cfg.experiment}: {m.kind}, L = {layers}, d={d.d}, n={d.n}, σ={d.noise_std:g}, "
                 f"{cfg.seeds} seed(s), {cfg.train.steps} steps", fontsize=9)
    return save(fig, rd, "diversity")

"""The official LinearTransformer code's training set-up on Gaussian prompts (the experiments of arXiv 2306.00297
and the notebooks of arXiv 2310.01082), as config overrides for recipes, and the quick sizes that stand in for it
on a laptop CPU."""

# the official code: AdamW(0.99, 0.9), each d×d block's gradient clipped to 0.01, the rate halved on a step
# schedule, 20 000 prompts a step; its law: d = 5, n = 20, the official Σ, w ~ N(0, Σ⁻¹), a fresh batch every 100 steps
OFFICIAL_TRAIN = {"optimizer": "adamw", "b1": 0.99, "b2": 0.9, "clip": 0.01, "clip_mode": "per_matrix",
                  "schedule": "step", "batch": 20_000, "log_every": 200}
OFFICIAL_DATA = {"kind": "prompts", "d": 5, "n": 20, "covariance": "official", "w_prior": "inverse_covariance",
                 "resample_every": 100}
# Quick sizes (under a minute on 2 CPU cores): fresh small batches, Adam with a cosine schedule and
# global clipping converge these small models much faster per second than the official set-up.
QUICK_TRAIN = {"optimizer": "adam", "b1": 0.9, "b2": 0.999, "clip": 1.0, "clip_mode": "global",
               "schedule": "cosine", "lr": 0.05, "steps": 3000, "batch": 500, "log_every": 100}
QUICK_DATA = {"resample_every": 1, "test_size": 20_000}

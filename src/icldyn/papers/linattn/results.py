"""Typed results of the companion paper's recipes (arXiv 2310.01082)."""

from __future__ import annotations

from icldyn.recipe import Point, Result, Seed


class LawSeed(Seed):
    test_loss: float


class LawPoint(Point):
    test_loss: float  # final, mean over finished seeds
    test_loss_std: float
    seeds: list[LawSeed]


class LawResult(Result):
    points: list[LawPoint]


class NoiseSeed(Seed):
    median: float
    q999_over_median: float
    hill_tail_index: float
    kurtosis: float


class NoisePoint(Point):
    samples: int  # stochastic gradients drawn
    batch: int
    median: float  # of ‖g_B − ∇f‖
    q999_over_median: float  # the 99.9th percentile over the median
    gaussian_q999_over_median: float  # the same for Gaussian noise of the same covariance (the fit)
    hill_tail_index: float  # Hill estimator α over the top √m norms (a Gaussian's norm has no power tail: α → ∞)
    gaussian_hill_tail_index: float
    kurtosis: float  # excess kurtosis of the norms
    gaussian_kurtosis: float
    seeds: list[NoiseSeed]


class NoiseResult(Result):
    points: list[NoisePoint]

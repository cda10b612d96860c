"""Typed results of Garg et al.'s recipes (arXiv 2208.01066): error against the number of in-context examples."""

from __future__ import annotations

from icldyn.recipe import Point, Result, Seed


class CurveSeed(Seed):
    error: float  # final held-out error, mean over positions (normalised)
    error_last: float  # at the last position


class CurvePoint(Point):
    """The error-vs-k curves of one configuration: the transformer (mean over seeds and its standard error over
    seeds × prompts) and each baseline on the same held-out prompts. k = examples seen before the prediction."""

    function_class: str
    d: int
    normaliser: float  # errors are squared error / this (E f(x)²; d for linear regression), or 0-1 errors
    metric: str  # "squared error / d"-style label of the errors
    k: list[int]
    model: list[float]
    model_se: list[float]
    baselines: dict[str, list[float]]
    baselines_se: dict[str, list[float]]
    seeds: list[CurveSeed]
    bayes: str | None = None  # the Bayes predictor's name among the baselines (icldyn.components.bayes)
    bayes_mc_se: list[float] | None = None  # its own Monte-Carlo standard error at each k (None: exact)
    bayes_risk: list[float] | None = None  # its exact expected error at each k, where a closed form exists
    gap: list[float] | None = None  # transformer − Bayes at each k, on the prompts both were evaluated on
    gap_se: list[float] | None = None  # its standard error over those prompts (paired; Monte-Carlo s.e. added)
    bayes_minus: dict[str, list[float]] = {}  # Bayes − each baseline at each k, on the prompts both were evaluated on
    bayes_minus_se: dict[str, list[float]] = {}  # and its paired standard error


class CurveResult(Result):
    points: list[CurvePoint]

"""A finished run's trained models on shifted prompts (``icldyn eval``, :func:`icldyn.evaluate`).

For every grid point and seed of the run, the model (its ``params.npz`` entries, through the model's
:meth:`~icldyn.config.ModelSection.predictor`) and the in-context baselines are measured on the same prompts of each
named shift (:mod:`icldyn.components.shifts`) at every prompt length k = 1 … n (longer for ``longer``). The error-vs-k
curves are rows of the run's ``shifts.parquet`` (run_id, point, seed, shift, k, method, error, se; the ``shifts``
view of ``icldyn query``), drawn in ``figures/shifts.png``; both are written atomically and recorded in the run's
manifest, so ``icldyn check`` holds them as it holds the run's own files. Evaluating a shift again replaces its rows.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from icldyn.components import shifts as suite
from icldyn.config import ConfigError, RunConfig, build, load_toml

FIGURE = "shifts"


def shift_names(shifts: list[str] | None) -> list[str]:
    """The named shifts, validated (an unknown name is one line listing the allowed ones); None or []: all."""
    names = list(shifts or suite.SHIFTS)
    for name in names:
        suite.get(name)
    return list(dict.fromkeys(names))


def _params(arrays: dict[str, np.ndarray], label: str, seed: int) -> dict[str, np.ndarray]:
    """One seed's parameters from params.npz (``<label>/seed<seed>/<name>``; a name holding ``/`` is a nested
    pytree's path: nested again, :func:`icldyn.recipe.nest_params`)."""
    from icldyn.recipe import nest_params

    prefix = f"{label}/seed{seed}/" if label else f"seed{seed}/"
    return nest_params({k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)})


def _readable(pcfg: RunConfig, shifts: list[str], skipped: set[str] | None) -> list[str]:
    """``shifts`` whose prompts the model reads (:meth:`~icldyn.config.ModelSection.longest_prompt`); those beyond
    it are added to ``skipped``, or, with ``skipped`` None, refused in one line (ConfigError)."""
    longest = pcfg.model.longest_prompt(pcfg)
    if longest is None:
        return shifts
    beyond = [s for s in shifts if max(suite.get(s).lengths(pcfg.data.n, getattr(pcfg.data, "d", 0))) + 1 > longest]
    if beyond and skipped is None:
        raise ConfigError(f"shift {beyond[0]!r} is not allowed for model.kind = {pcfg.model.kind!r}: its prompts hold "
                          f"more than the {longest} points the model reads; allowed: "
                          + ", ".join(s for s in suite.SHIFTS if s not in beyond))
    if len(beyond) == len(shifts):
        raise ConfigError(f"no shift left to evaluate: every one needs prompts longer than {longest} points")
    if beyond:
        skipped.update(beyond)
    return [s for s in shifts if s not in beyond]


def measure(cfg: RunConfig, arrays: dict[str, np.ndarray], shifts: list[str], *, run_id: str = "",
            prompts: int = 2000, key: int = 0, skip_beyond: bool = False, skipped: set[str] | None = None,
            dtype: str | None = None) -> list[dict]:
    """Rows (run_id, point, seed, shift, k, method, error, se) for every grid point and seed of a run of ``cfg``
    whose parameters are ``arrays`` (params.npz's entries): :func:`icldyn.components.shifts.curves` on the seed's own
    training law, prompts from ``fold_in(PRNGKey(key), seed)``. A model without a predictor, a law without a shift
    suite, a seed without parameters or a shift whose prompts are longer than the model reads
    (:meth:`~icldyn.config.ModelSection.longest_prompt`) is one line (ConfigError), before any work; with
    ``skip_beyond`` those shifts are left out instead, their names added to ``skipped``. The model runs in ``dtype``
    (None: the run's ``train.dtype``), a causal one (:meth:`~icldyn.config.ModelSection.prefix_predictor`) compiled
    once for every prompt length."""
    from icldyn import plugins, runner

    skipped = set() if skipped is None else skipped
    out = []
    for label, pcfg in runner.points(plugins.get(cfg.experiment), cfg):
        predict = pcfg.model.predictor(pcfg)
        if predict is None:
            raise ConfigError(f"model.kind = {pcfg.model.kind!r} has no predictor (ModelSection.predictor), so its "
                              "runs cannot be evaluated on shifted prompts")
        shifts = _readable(pcfg, shifts, skipped if skip_beyond else None)
        for seed in range(pcfg.seed, pcfg.seed + pcfg.seeds):
            params = _params(arrays, label, seed)
            if not params:
                raise ConfigError(f"params.npz holds no parameters of {'point ' + repr(label) + ', ' if label else ''}"
                                  f"seed {seed}")
            law = suite.base_law(pcfg, seed)
            try:
                rows = suite.curves(predict, params, law, shifts, n=pcfg.data.n, batch=prompts,
                                    key=jax.random.fold_in(jax.random.PRNGKey(key), seed), steps=suite.gd_steps(pcfg),
                                    prefix=pcfg.model.prefix_predictor(pcfg), dtype=dtype or pcfg.train.dtype)
            except KeyError as err:
                raise ConfigError(f"params.npz of seed {seed} lacks the model's parameter {err.args[0]!r}") from None
            out += [{"run_id": run_id, "point": label, "seed": seed, **r} for r in rows]
    return out


def evaluate_run(path: Path, shifts: list[str] | None = None, *, prompts: int = 2000, key: int = 0,
                 skipped: set[str] | None = None, dtype: str | None = None) -> list[dict]:
    """Evaluate the finished run at ``path`` on ``shifts`` (None: every shift the model can read; those it cannot,
    e.g. ``longer`` for a GPT, are added to ``skipped``), write its rows into the run's ``shifts.parquet``
    (replacing those shifts' earlier rows) and redraw ``figures/shifts.png``; returns the new rows. A run that is
    unfinished, damaged or without params.npz is one line (StoreError)."""
    from icldyn import store

    names = shift_names(shifts)
    if prompts < 2:
        raise ConfigError(f"prompts = {prompts} is not allowed: must be an integer ≥ 2 (the standard error needs two)")
    found = store.problems(path)
    if found:
        raise store.RunDamaged(path.name, *found[0])
    if not (path / "summary.json").is_file():
        raise store.StoreError(f"run {path.name} is {store.run_status(path)}, not finished: eval reads a finished "
                               "run's params.npz")
    if not (path / "params.npz").is_file():
        raise store.StoreError(f"run {path.name} has no params.npz: its recipe trains no model to evaluate")
    cfg = build(load_toml(str(path / "config.toml")))
    npz = store.verified(path, "params.npz")
    with np.load(npz, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    rows = measure(cfg, arrays, names, run_id=path.name, prompts=prompts, key=key, skip_beyond=not shifts,
                   skipped=skipped, dtype=dtype)
    with store.locked(path):
        every = store.write_shift_rows(path, rows, set(names))
        figures = draw(every, path)
        store.add_to_manifest(path, [store.SHIFTS_FILE, *figures])
    return rows


class _Figures:
    """What :func:`icldyn.plots.save` needs of a run directory: where a figure goes."""

    def __init__(self, path: Path):
        self.path = path

    def figure(self, name: str) -> Path:
        return self.path / "figures" / f"{name}.png"


STYLE = {"model": ("k", "-", "trained model"), "ols": ("C0", "--", "least squares"), "ridge": ("C1", ":", "ridge"),
         "gd": ("C2", "-.", "GD (tuned η)"), "pgd": ("C3", "-.", "PGD Σ⁻¹ (tuned η)"), "zero": ("0.6", ":", "ŷ = 0")}


def draw(rows: list[dict], path: Path | None) -> list[str]:
    """One panel per shift: each method's error against the prompt length k, the mean over seeds (one line per grid
    point for the model), drawn down to 10⁻³ of the zero predictor's error; returns the written files (PNG and PDF,
    relative to the run), or the Figure when ``path`` is None."""
    import matplotlib.pyplot as plt

    from icldyn.plots import save

    names = list(dict.fromkeys(r["shift"] for r in rows))
    cols = min(4, len(names))
    fig, axes = plt.subplots(-(-len(names) // cols), cols, figsize=(3.2 * cols, 2.6 * -(-len(names) // cols)),
                             squeeze=False)
    points = list(dict.fromkeys(r["point"] for r in rows))
    for ax, name in zip(axes.flat, names):
        for point in points:
            for method, (color, ls, text) in STYLE.items():
                if method != "model" and point != points[0]:
                    continue
                sel = [r for r in rows if r["shift"] == name and r["method"] == method and r["point"] == point]
                ks = sorted({r["k"] for r in sel})
                err = [np.mean([r["error"] for r in sel if r["k"] == k]) for k in ks]
                lab = text + (f" ({point})" if method == "model" and len(points) > 1 else "")
                ax.plot(ks, err, color=color if len(points) == 1 or method != "model" else None, ls=ls, label=lab)
        zero = [r["error"] for r in rows if r["shift"] == name and r["method"] == "zero"]
        if zero:  # noiseless least squares is exact from k = d on: show errors down to 10⁻³ E[y_q²]
            ax.set_ylim(bottom=1e-3 * float(np.mean(zero)))
        ax.set(yscale="log", title=name, xlabel="in-context examples k")
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    axes[0, 0].set_ylabel("E[(ŷ − y_q)²]")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=8, bbox_to_anchor=(0.5, -0.04))
    png = save(fig, None if path is None else _Figures(path), FIGURE)
    return png if path is None else [png, str(Path(png).with_suffix(".pdf"))]

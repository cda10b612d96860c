"""The training loop: ``lax.scan`` over the steps of a chunk with every seed advancing in lockstep,
one compiled program per problem shape. Metrics come back once per chunk (no host callbacks inside
the loop): the training loss and gradient norm from the chunk's
program, the held-out metrics from the evaluation's own, compiled once per run (step 0's) rather than again inside
every chunk.

How seeds are mapped is the problem's choice (:attr:`Problem.seed_map`): ``vmap`` where its
computations batch well (the fused C kernel takes every seed in one call), ``map`` (``lax.map``, a
loop inside the program) where they don't: on XLA's CPU backend, vmapping the JAX moment form's
per-seed weight products turns them into batched contractions far slower than a loop over seeds
(measured in docs/performance.md); ``map_slots`` loops over the learning-rate copies as well (the GPT on a
CPU: its products are already large, and batching seeds or rates only spills the caches, docs/performance.md §10)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from icldyn.runtime import jit_once
from icldyn.train.optimizers import is_learning_rate

PyTree = Any


class Problem(NamedTuple):
    """What the trainer needs of a paper's setting; all functions are pure and per seed.

    ``task`` is the seed's data law (a pytree), ``test`` its fixed held-out set.
    """

    init: Callable[[PyTree, jax.Array], PyTree]  # (task, key) -> params
    sample: Callable[[PyTree, jax.Array], PyTree]  # (task, key) -> prepared training batch
    loss: Callable[[PyTree, PyTree], jax.Array]  # (params, batch) -> scalar
    evaluate: Callable[[PyTree, PyTree, PyTree], dict[str, jax.Array]]  # (params, task, test) -> metrics
    seed_map: str = "map"  # "vmap", "map" (lax.map over seeds) or "map_slots" (over seeds and learning-rate copies)
    # optional, logged with evaluate's metrics after every chunk (not at step 0): metrics of the chunk's last
    # optimiser step, (params before it, its update = params after − params before, task, test) -> metrics
    evaluate_step: Callable[[PyTree, PyTree, PyTree, PyTree], dict[str, jax.Array]] | None = None
    # a data schedule (a curriculum): sample is called as (task, key, step), step the optimiser step (int32 scalar,
    # traced in the training chunk: one program for every stage)
    stepped: bool = False


def cast_floats(tree: PyTree, dtype) -> PyTree:
    """Every floating leaf of ``tree`` in ``dtype`` (integer and key leaves as they are)."""
    def cast(a):
        return a.astype(dtype) if jnp.issubdtype(jnp.result_type(a), jnp.floating) else a

    return jax.tree.map(cast, tree)


def in_dtype(problem: Problem, dtype) -> Problem:
    """``problem`` with its parameters and training batches cast to ``dtype`` (``train.dtype``): whatever a plug-in's
    ``init`` and ``sample`` return (with x64 on, ``jax.random.normal`` draws float64), it trains in the configured
    precision."""
    return problem._replace(init=lambda task, key: cast_floats(problem.init(task, key), dtype),
                            sample=lambda *args: cast_floats(problem.sample(*args), dtype))


class TrainState(NamedTuple):
    params: PyTree
    opt_state: PyTree
    batch: PyTree  # current training batch (redrawn every ``resample_every`` steps; zeros before step 0's draw)
    key: jax.Array
    step: jax.Array


@dataclass
class History:
    """Per-seed metric rows and status, filled chunk by chunk."""

    steps: list[int] = field(default_factory=list)
    metrics: list[dict[str, np.ndarray]] = field(default_factory=list)  # each value: (seeds,)
    diverged_at: dict[int, int] = field(default_factory=dict)  # seed index -> step
    spikes: dict[int, list[int]] = field(default_factory=dict)  # seed index -> steps of a held-out spike


def _above(history: History, s: int, max_loss: float) -> int:
    """How many of slot ``s``'s last logs in a row had a training loss above ``max_loss``."""
    n = 0
    for m in reversed(history.metrics):
        if "train_loss" not in m or not float(m["train_loss"][s]) > max_loss:
            break
        n += 1
    return n


def over_seeds(f: Callable, how: str = "map") -> Callable:
    """``f`` applied to every seed (leading axis of each argument) inside one compiled program."""
    if how == "vmap":
        return jax.vmap(f)
    return lambda *args: jax.lax.map(lambda a: f(*a), args)  # "map", "map_slots"


def over_slots(f: Callable, how: str, copies: int) -> Callable:
    """``f(params, opt_state, *shared)`` over every slot: the first two arguments have ``copies × seeds``
    rows (copy-major), the others ``seeds`` rows shared by every copy (its data, task and held-out set)."""
    inner = over_seeds(f, how)
    if copies == 1:
        return inner

    def outer(params, opt_state, *shared):
        split = lambda t: jax.tree.map(lambda a: a.reshape((copies, -1) + a.shape[1:]), t)  # noqa: E731
        if how == "map_slots":
            out = jax.lax.map(lambda a: inner(a[0], a[1], *shared), (split(params), split(opt_state)))
        else:
            out = jax.vmap(inner, in_axes=(0, 0) + (None,) * len(shared))(split(params), split(opt_state), *shared)
        return jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), out)

    return outer


def evaluate_slots(problem: Problem, copies: int = 1) -> Callable:
    """(params of every slot, tasks, tests) -> held-out metrics of every slot."""
    f = over_slots(lambda params, _, task, test: problem.evaluate(params, task, test), problem.seed_map, copies)
    return lambda params, tasks, tests: f(params, (), tasks, tests)


Optimizer = optax.GradientTransformation | Callable[[PyTree], optax.GradientTransformation]


def _opt_for(opt: Optimizer, task: PyTree) -> optax.GradientTransformation:
    """The optimiser of one seed: fixed, or built from the seed's task (a per-seed learning rate, a preconditioner
    from the seed's sample)."""
    return opt if isinstance(opt, optax.GradientTransformation) else opt(task)


def _sampler(problem: Problem, step: jax.Array | np.ndarray) -> Callable[[PyTree, jax.Array], PyTree]:
    """(task, key) -> batch at ``step`` (the step matters to a :attr:`Problem.stepped` problem only)."""
    return (lambda task, key: problem.sample(task, key, step)) if problem.stepped else problem.sample


def make_chunk(problem: Problem, opt: Optimizer, length: int, resample_every: int, copies: int = 1,
               evaluate: bool = True):
    """(states, tasks, tests) -> (states, metrics): ``length`` optimiser steps of every slot (``copies`` ×
    seeds; the copies of a seed share its batches), and the held-out metrics of the last (``evaluate`` False: the
    training metrics alone, the held-out ones left to a program of their own, :func:`evaluate_slots`)."""
    seeds = lambda f: over_seeds(f, problem.seed_map)  # noqa: E731
    slots = lambda f: over_slots(f, problem.seed_map, copies)  # noqa: E731

    def grad_step(params, opt_state, batch, task):
        loss, grads = jax.value_and_grad(problem.loss)(params, batch)
        updates, opt_state = _opt_for(opt, task).update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, optax.tree.norm(grads), updates

    def one_step(state: TrainState, tasks: PyTree):
        keys = jax.vmap(jax.random.split)(state.key)  # (seeds, 2, key)
        # seeds run in lockstep, so one scalar decides: a real branch, not a per-seed select
        batch = jax.lax.cond(state.step[0] % resample_every == 0,
                             lambda: seeds(_sampler(problem, state.step[0]))(tasks, keys[:, 1]), lambda: state.batch)
        params, opt_state, loss, gnorm, updates = slots(grad_step)(state.params, state.opt_state, batch, tasks)
        new = TrainState(params, opt_state, batch, keys[:, 0], state.step + 1)
        return new, (loss, gnorm), (state.params, updates)

    step_metrics = problem.evaluate_step is not None

    def chunk(state: TrainState, tasks: PyTree, tests: PyTree):
        def body(carry, _):  # the carry keeps the last step's (params before, update) where they are evaluated
            new, out, last = one_step(carry[0], tasks)
            return (new, last if step_metrics else None), out

        (state, last), (losses, gnorms) = jax.lax.scan(
            body, (state, (state.params, state.params) if step_metrics else None), None, length=length)
        metrics = evaluate_slots(problem, copies)(state.params, tasks, tests) if evaluate else {}
        if step_metrics:
            metrics |= over_slots(problem.evaluate_step, problem.seed_map, copies)(*last, tasks, tests)
        metrics = {"train_loss": losses[-1], "grad_norm": gnorms[-1], **metrics}
        return state, metrics

    return chunk


def set_learning_rates(opt_state: PyTree, lrs: jax.Array) -> PyTree:
    """``opt_state`` (slots leading) with the peak learning rate (:func:`~icldyn.train.optimizers.learning_rate`'s
    injected hyperparameter) set to ``lrs``."""
    found = []

    def put(node):
        if is_learning_rate(node):
            found.append(node)
            rate = node.hyperparams["step_size"]
            return node._replace(hyperparams={"step_size": jnp.asarray(lrs, rate.dtype)})
        return node

    opt_state = jax.tree.map(put, opt_state, is_leaf=is_learning_rate)
    if not found:
        raise ValueError("a learning-rate axis needs an optimiser that keeps its rate in the state "
                         "(icldyn.train.optimizers.learning_rate)")
    return opt_state


def learning_rates(opt_state: PyTree) -> list[jax.Array]:
    """The peak learning rates an optimiser state holds (one array per :func:`~icldyn.train.optimizers.learning_rate`
    in its chain)."""
    nodes = jax.tree.leaves(opt_state, is_leaf=is_learning_rate)
    return [n.hyperparams["step_size"] for n in nodes if is_learning_rate(n)]


def init_states(problem: Problem, opt: Optimizer, tasks: PyTree, keys: jax.Array,
                lrs: list[float] | None = None, slot_lrs: list[float] | None = None,
                init_keys: jax.Array | None = None) -> TrainState:
    """Every seed's initial state; with ``lrs``, params and optimiser state repeated once per learning rate
    (slot ``g · seeds + s``), the rate written into the optimiser state; with ``slot_lrs``, one rate per seed
    written into its state. ``init_keys``: the initial parameters' keys, apart from the data's ``keys`` (the
    parameters are drawn from ``init_keys`` as they would be from ``keys``)."""
    def init(task, key, init_key):
        _, _, k_loop = jax.random.split(key, 3)
        params = problem.init(task, jax.random.split(init_key, 3)[0])  # init_key = key: split(key, 3)[0]
        return params, _opt_for(opt, task).init(params), k_loop

    args = (tasks, keys, keys if init_keys is None else init_keys)
    params, opt_state, k_loop = jit_once(over_seeds(init, problem.seed_map))(*args)  # it runs once
    # the batch slot holds zeros of the sampler's shapes: step 0 always draws (step % resample_every == 0), so no
    # first batch is drawn, and nothing is compiled for it; the shapes come from tracing alone, the zeros from the
    # host (jnp.asarray would compile a copy per shape)
    shapes = jax.eval_shape(over_seeds(_sampler(problem, np.zeros((), np.int32)), problem.seed_map), tasks, keys)
    batch = jax.tree.map(lambda s: jax.device_put(np.zeros(s.shape, s.dtype)), shapes)
    state = TrainState(params, opt_state, batch, k_loop, jax.device_put(np.zeros(len(keys), np.int32)))
    if slot_lrs is not None:
        return state._replace(opt_state=set_learning_rates(state.opt_state, np.asarray(slot_lrs)))
    if lrs is None:
        return state
    tile = lambda t: jax.tree.map(lambda a: jnp.concatenate([a] * len(lrs)), t)  # noqa: E731
    opt_state = set_learning_rates(tile(state.opt_state), np.repeat(np.asarray(lrs), len(keys)))
    return state._replace(params=tile(state.params), opt_state=opt_state)


_MATERIALISED = ("dot_general", "conv_general_dilated", "ffi_call")  # outputs XLA always keeps as buffers


def _largest_product(jaxpr) -> tuple[int, str]:
    """(bytes, shape) of the largest array a matrix product (or a C kernel's custom call) of ``jaxpr`` returns, its
    sub-programs included. Those outputs are buffers XLA materialises; elementwise results may be fused away, so
    they are not counted, and the estimate stays a lower bound."""
    from jax.extend.core import subjaxprs

    best = max(((v.aval.size * v.aval.dtype.itemsize, f"{v.aval.str_short()}") for e in jaxpr.eqns
                if e.primitive.name in _MATERIALISED for v in e.outvars), default=(0, ""))
    return max([best, *(_largest_product(sub) for sub in subjaxprs(jaxpr))])


def footprint(problem: Problem, opt: Optimizer, tasks: PyTree, tests: PyTree, keys: jax.Array,
              copies: int = 1) -> dict[str, Any]:
    """A lower bound on the memory one training chunk needs, from shapes alone (``jax.eval_shape`` and
    ``jax.make_jaxpr``: nothing allocated or compiled), in bytes: ``state`` — params and optimiser state of every
    slot and every seed's batch (its learning-rate copies share it), twice (the chunk's input and the loop's carry:
    XLA keeps both); ``data`` — the tasks and held-out sets; ``activations`` — the largest array a matrix product of
    one slot's step computes (drawing a batch, the loss and its gradient, or the held-out evaluation), times the
    slots computing it at once (every slot where seeds are vmapped, a seed's learning-rate copies where seeds are
    ``lax.map``-ed, one where slots are); ``total`` — their sum. ``largest`` names that array (dtype and shape),
    ``at_once`` its count, ``slots`` the program's slots. A C kernel's own scratch memory (inside its custom
    call) is not seen."""
    size = lambda tree: sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree))
    one = lambda tree: jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), tree)
    state = jax.eval_shape(lambda t, k: init_states(problem, opt, t, k), tasks, keys)
    params, batch, task, test, key = one(state.params), one(state.batch), one(tasks), one(tests), one(keys)
    at_once = {"vmap": copies * len(keys), "map": copies}.get(problem.seed_map, 1)
    draw = lambda task, key, step: _sampler(problem, step)(task, key)
    step = jax.ShapeDtypeStruct((), jnp.int32)
    parts = [(draw, (task, key, step), len(keys) if problem.seed_map == "vmap" else 1),
             (jax.value_and_grad(problem.loss), (params, batch), at_once),
             (problem.evaluate, (params, task, test), at_once)]
    largest, shape, times = 0, "", 1
    for f, args, n in parts:
        got, what = _largest_product(jax.make_jaxpr(f)(*args).jaxpr)
        if got * n > largest * times:
            largest, shape, times = got, what, n
    own = copies * size((state.params, state.opt_state)) + size((state.batch, state.key, state.step))
    out = {"state": 2 * own, "data": size(tasks) + size(tests), "activations": largest * times,
           "largest": shape, "slots": copies * len(keys), "at_once": times}
    return {**out, "total": out["state"] + out["data"] + out["activations"]}


def _check_fits(problem: Problem, opt: Optimizer, tasks: PyTree, tests: PyTree, keys: jax.Array, copies: int) -> None:
    """Refuse, before anything compiles, a program whose :func:`footprint` does not fit in the memory available
    (:func:`icldyn.runtime.check_fits`), in one line with the estimate, its parts and the limit."""
    from icldyn.runtime import check_fits

    f = footprint(problem, opt, tasks, tests, keys, copies)
    gib = lambda b: f"{b / 2**30:.3g} GiB"
    check_fits(f"training {f['slots']} slot(s) (state {gib(f['state'])}, tasks and held-out sets {gib(f['data'])}, "
               f"activations {gib(f['activations'])}: {f['at_once']} × {f['largest'] or 'no product'})", f["total"],
               "lower train.batch, data.n, data.test_size or seeds (or train on a larger machine)")


def local_devices(wanted: str | int = "all") -> int:
    """How many local devices ``train.devices`` asks for: every one (``"all"``) or ``wanted``; more than this
    machine has is one line (ValueError)."""
    have = jax.local_device_count()
    if wanted == "all":
        return have
    if wanted > have:
        raise ValueError(f"train.devices = {wanted} is not allowed: this machine has {have} local device(s) "
                         f"({jax.default_backend()}); allowed: \"all\" or 1…{have}")
    return int(wanted)


def _pad_seeds(tree: PyTree, seeds: int, padded: int) -> PyTree:
    """Every leaf with a leading seed axis of ``seeds`` extended to ``padded`` with copies of its last seed."""
    def pad(a):
        if getattr(a, "ndim", 0) == 0 or a.shape[0] != seeds or padded == seeds:
            return a
        return jnp.concatenate([a, jnp.repeat(a[-1:], padded - seeds, axis=0)])

    return None if tree is None else jax.tree.map(pad, tree)


def per_device(fn: Callable, devices: int, copies: int, state_in: bool = True) -> Callable:
    """``fn(state, tasks, tests) -> (state, metrics)`` (or, ``state_in`` False, ``fn(params, tasks, tests) ->
    metrics``) run on ``devices`` local devices at once (``jax.shard_map`` over a one-axis mesh): each device its
    block of the seeds — their tasks, held-out sets, batches, keys — and the slots of those seeds at every learning
    rate (slots are rate-major, ``g · seeds + s``, so they are split along the seed axis of (copies, seeds)).
    Independent programs, no collectives (a C kernel's custom call runs on each device's own thread)."""
    from jax.sharding import Mesh, PartitionSpec

    mesh = Mesh(np.array(jax.local_devices()[:devices]), ("seeds",))
    S, C = PartitionSpec("seeds"), PartitionSpec(None, "seeds")
    split = lambda t: jax.tree.map(lambda a: a.reshape(copies, -1, *a.shape[1:]), t)  # noqa: E731
    join = lambda t: jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), t)  # noqa: E731
    if not state_in:
        inner = jax.shard_map(lambda p, tasks, tests: split(fn(join(p), tasks, tests)), mesh=mesh,
                              in_specs=(C, S, S), out_specs=C, check_vma=False)
        return lambda params, tasks, tests: join(inner(split(params), tasks, tests))

    def local(params, opt_state, batch, key, step, tasks, tests):
        new, metrics = fn(TrainState(join(params), join(opt_state), batch, key, step), tasks, tests)
        return split(new.params), split(new.opt_state), new.batch, new.key, new.step, split(metrics)

    inner = jax.shard_map(local, mesh=mesh, in_specs=(C, C, S, S, S, S, S), out_specs=(C, C, S, S, S, C),
                          check_vma=False)

    def run(state: TrainState, tasks, tests):
        p, o, b, k, st, m = inner(split(state.params), split(state.opt_state), state.batch, state.key, state.step,
                                  tasks, tests)
        return TrainState(join(p), join(o), b, k, st), join(m)

    return run


def train(problem: Problem, opt: Optimizer, tasks: PyTree, tests: PyTree, keys: jax.Array, *,
          steps: int, log_every: int, resample_every: int = 1, max_loss: float = 1e6, diverge_after: int = 1,
          on_chunk: Callable[[int, dict[str, np.ndarray]], None] | None = None,
          snapshot: Callable[[dict[str, Any]], None] | None = None,
          restore: dict[str, Any] | None = None, lrs: list[float] | None = None,
          slot_lrs: list[float] | None = None, losses: tuple[str, ...] = (),
          dtype: str | None = None, init_keys: jax.Array | None = None,
          devices: int = 1) -> tuple[PyTree, History]:
    """Train every seed (leading axis of ``tasks``, ``tests``, ``keys``) in one compiled program.

    ``lrs``: a learning-rate axis — every seed trained at each rate in the same program, the rates sharing
    the seed's batches (exactly the data an ungrouped run at that rate sees); params and metrics then have
    ``len(lrs) × seeds`` slots, rate-major (:func:`take_slots`). ``slot_lrs``: instead, one rate per seed
    (runs that differ in their seeds or data law as well, stacked on the seed axis). The optimiser must hold
    its rate in its state (:func:`~icldyn.train.optimizers.learning_rate`, as every ``build_optimizer`` does).

    Metrics are logged at step 0 and every ``log_every`` steps. A seed is marked diverged at the step where its
    training loss or gradient norm is non-finite, or its training loss has been above ``max_loss`` for
    ``diverge_after`` logs in a row; its later rows are dropped and its parameters are kept from its last finite
    chunk. The declared held-out ``losses`` (a recipe's :attr:`~icldyn.recipe.Recipe.losses`) stop nothing: a
    non-finite value or one above ``max_loss`` is recorded as a spike (``History.spikes``).
    ``snapshot`` is called after every chunk with what resuming needs (the state's and the last finite
    parameters' leaves, the history, the steps done); ``restore`` is such a snapshot to continue from:
    the remaining chunks are the same programs on the same state, so the result is bit-identical to an
    uninterrupted run. ``dtype``: the training precision (``train.dtype``): parameters, batches, tasks and held-out
    sets are cast to it (:func:`in_dtype`). ``init_keys``: the initial parameters' keys when they are not the
    data's (:func:`init_states`). ``devices``: the local devices the slots are split over (``jax.sharding``, a
    one-axis mesh); the seeds are padded to a multiple of it with copies of the last seed, trained and discarded
    (metrics, history and parameters are of the real seeds alone). Returns (final params, history).
    """
    if dtype is not None:
        problem, tasks, tests = in_dtype(problem, dtype), cast_floats(tasks, dtype), cast_floats(tests, dtype)
    copies = 1 if lrs is None else len(lrs)
    seeds = len(keys)
    n_slots = copies * seeds
    _check_fits(problem, opt, tasks, tests, keys, copies)
    padded = -(-seeds // devices) * devices
    real = np.array([g * padded + i for g in range(copies) for i in range(seeds)])  # the real slots' indices
    if devices > 1:
        tasks, tests, keys, init_keys = (_pad_seeds(t, seeds, padded) for t in (tasks, tests, keys, init_keys))
        if slot_lrs is not None:
            slot_lrs = list(slot_lrs) + [slot_lrs[-1]] * (padded - seeds)
    state = init_states(problem, opt, tasks, keys, lrs, slot_lrs, init_keys)
    spread = (lambda f, state_in=True: per_device(f, devices, copies, state_in)) if devices > 1 else \
        (lambda f, state_in=True: f)
    evaluate = jax.jit(spread(evaluate_slots(problem, copies), state_in=False))
    history = History()

    def log(step: int, metrics: dict[str, jax.Array]) -> np.ndarray:
        m = {k: np.asarray(v)[real] if devices > 1 else np.asarray(v) for k, v in metrics.items()}
        history.steps.append(step)
        history.metrics.append(m)
        for s in range(n_slots):
            if s in history.diverged_at:
                continue
            finite = all(np.isfinite(m[k][s]) for k in ("train_loss", "grad_norm") if k in m)
            if not finite or _above(history, s, max_loss) >= diverge_after:
                history.diverged_at[s] = step
            elif any(not float(m[k][s]) <= max_loss for k in losses if k in m):  # NaN too
                history.spikes.setdefault(s, []).append(step)
        if on_chunk is not None:
            on_chunk(step, m)
        alive = np.ones(copies * padded, bool)  # a padding slot is never watched
        alive[real] = [s not in history.diverged_at for s in range(n_slots)]
        return alive

    good_params, done = state.params, 0
    if restore is not None:
        if [np.shape(x) for x in restore["state"]] != [np.shape(x) for x in jax.tree.leaves(state)]:
            raise ValueError(f"the checkpoint holds {len(real)} seed slot(s) padded for another device count: resume "
                             "with the train.devices it was written with")
        state = jax.tree.unflatten(jax.tree.structure(state), [jax.device_put(x) for x in restore["state"]])
        good_params = jax.tree.unflatten(jax.tree.structure(good_params), [jax.device_put(x) for x in restore["good"]])
        history, done = restore["history"], restore["done"]
    else:
        log(0, evaluate(state.params, tasks, tests))  # step 0: held-out metrics only
    chunks = {}
    while done < steps and len(history.diverged_at) < n_slots:
        length = min(log_every, steps - done)
        if length not in chunks:
            chunks[length] = jax.jit(spread(make_chunk(problem, opt, length, resample_every, copies, evaluate=False)))
        state, metrics = chunks[length](state, tasks, tests)
        # the held-out metrics by step 0's program: compiled once per run, not again inside every chunk length
        # (names sorted, as a program's dict output comes back: the rows keep their order)
        metrics = dict(sorted({**evaluate(state.params, tasks, tests), **metrics}.items()))
        done += length
        alive = log(done, metrics)
        good_params = state.params if alive.all() else jax.tree.map(  # a diverged seed keeps its last finite params
            lambda new, old: jnp.where(alive.reshape((-1,) + (1,) * (new.ndim - 1)), new, old),
            state.params, good_params)
        if snapshot is not None:
            snapshot({"state": jax.tree.leaves(state), "good": jax.tree.leaves(good_params), "history": history,
                      "done": done, "final": done >= steps or len(history.diverged_at) == n_slots})
    if devices > 1:
        good_params = jax.tree.map(lambda a: jax.device_put(a[real], jax.local_devices()[0]), good_params)
    return good_params, history


def take_slots(params: PyTree, history: History, rows: slice) -> tuple[PyTree, History]:
    """The params and history of the slots ``rows`` (a run's share of a job; slots renumbered from 0)."""
    return jax.tree.map(lambda a: a[rows], params), history_slots(history, rows)


def history_slots(history: History, rows: slice) -> History:
    """The history of the slots ``rows`` (start and stop given), renumbered from 0."""
    inside = lambda d: {i - rows.start: s for i, s in d.items() if rows.start <= i < rows.stop}  # noqa: E731
    return History(list(history.steps), [{k: v[rows] for k, v in m.items()} for m in history.metrics],
                   inside(history.diverged_at), inside(history.spikes))

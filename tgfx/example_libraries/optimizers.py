"""`tgfx.example_libraries.optimizers`: JAX's `jax.example_libraries.optimizers`, the optimisers of JAX's own
examples (`mnist_classifier.py`, `mnist_vae.py`, ...), with their names and calling convention, so that those
programs port by spelling.

An optimiser is a triple of functions, `opt_init, opt_update, get_params = adam(step_size)`:

>>> import numpy as np, tgfx as tg
>>> from tgfx.example_libraries import optimizers
>>> opt_init, opt_update, get_params = optimizers.momentum(0.1, mass=0.9)
>>> state = opt_init({"w": tg.asarray(np.ones(3, np.float32))})
>>> state = opt_update(0, {"w": tg.asarray(np.ones(3, np.float32))}, state)   # step 0's gradient
>>> get_params(state)["w"].tolist()
[0.8999999761581543, 0.8999999761581543, 0.8999999761581543]

`opt_init(params)` takes any pytree of arrays and gives an `OptimizerState` (itself a pytree: it passes through
`tg.jit`); `opt_update(i, grads, state)` takes the step number `i` (a Python int or a traced int: a schedule reads
it), a gradient pytree of the parameters' structure, and the state; `get_params(state)` gives the parameters back.
A step size is a number or a schedule `i -> step size` (`constant`, `exponential_decay`, `inverse_time_decay`,
`polynomial_decay`, `piecewise_constant`). `@optimizer` lifts a maker of single-array (init, update, get_params)
to pytrees, as JAX's does. `unpack_optimizer_state`/`pack_optimizer_state` turn a state into nested Python
containers of arrays (for saving) and back.

tgfx's own optimisers, in optax's style, are `tgfx.optim`.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import tgfx.numpy as tnp
from tgfx.transforms.jit import jit
from tgfx.tree_util import register_pytree_node, tree_flatten, tree_map, tree_unflatten

Schedule = Callable[[Any], Any]


class Optimizer(NamedTuple):
    """The three functions of an optimiser; unpacks as `opt_init, opt_update, get_params`."""
    init_fn: Callable[..., Any]
    update_fn: Callable[..., Any]
    params_fn: Callable[..., Any]


class OptimizerState(NamedTuple):
    """Each parameter's optimiser state, flattened (`packed_state`: one list of arrays a parameter), with the
    parameters' tree structure and each state's own (`subtree_defs`). A pytree whose leaves are the arrays."""
    packed_state: list
    tree_def: Any
    subtree_defs: tuple


register_pytree_node(OptimizerState,
                     lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
                     lambda aux, children: OptimizerState(children[0], aux[0], aux[1]))


def optimizer(opt_maker: Callable[..., tuple[Callable, Callable, Callable]]) -> Callable[..., Optimizer]:
    """Lift `opt_maker`, whose (init, update, get_params) work on one array and its state (any pytree), to
    functions of pytrees of parameters (`OptimizerState`)."""

    @functools.wraps(opt_maker)
    def make(*args: Any, **kwargs: Any) -> Optimizer:
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree: Any) -> OptimizerState:
            x0_flat, tree = tree_flatten(x0_tree)
            flat_states = [tree_flatten(init(x0)) for x0 in x0_flat]
            return OptimizerState([leaves for leaves, _ in flat_states], tree, tuple(d for _, d in flat_states))

        @functools.wraps(update)
        def tree_update(i: Any, grad_tree: Any, opt_state: OptimizerState) -> OptimizerState:
            packed, tree, subtrees = opt_state
            grad_flat, grad_tree_def = tree_flatten(grad_tree)
            if grad_tree_def != tree:
                raise TypeError(f"optimizer update: the gradient tree {grad_tree_def} does not match the parameter "
                                f"tree {tree} the optimizer was initialised with; pass gradients of the parameters "
                                f"given to opt_init (grad(loss)(get_params(state), ...))")
            states = [tree_unflatten(d, leaves) for d, leaves in zip(subtrees, packed, strict=True)]
            new_flat = [tree_flatten(update(i, g, s)) for g, s in zip(grad_flat, states, strict=True)]
            for k, (old, (_, new)) in enumerate(zip(subtrees, new_flat, strict=True)):
                if new != old:
                    raise TypeError(f"optimizer update: the update of parameter {k} gave a state of structure {new}, "
                                    f"not its input's {old}; an optimizer's update must keep its state's structure")
            return OptimizerState([leaves for leaves, _ in new_flat], tree, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state: OptimizerState) -> Any:
            packed, tree, subtrees = opt_state
            params = [get_params(tree_unflatten(d, leaves)) for d, leaves in zip(subtrees, packed, strict=True)]
            return tree_unflatten(tree, params)

        return Optimizer(tree_init, tree_update, tree_get_params)

    return make


# ---- step sizes ----
def constant(step_size: Any) -> Schedule:
    def schedule(i: Any) -> Any:
        return step_size
    return schedule


def exponential_decay(step_size: float, decay_steps: float, decay_rate: float) -> Schedule:
    def schedule(i: Any) -> Any:
        return step_size * decay_rate ** (i / decay_steps)
    return schedule


def inverse_time_decay(step_size: float, decay_steps: float, decay_rate: float, staircase: bool = False) -> Schedule:
    def schedule(i: Any) -> Any:
        steps = tnp.floor(i / decay_steps) if staircase else i / decay_steps
        return step_size / (1 + decay_rate * steps)
    return schedule


def polynomial_decay(step_size: float, decay_steps: int, final_step_size: float, power: float = 1.0) -> Schedule:
    def schedule(step_num: Any) -> Any:
        step_num = tnp.minimum(step_num, decay_steps)
        step_mult = (1 - step_num / decay_steps) ** power
        return step_mult * (step_size - final_step_size) + final_step_size
    return jit(schedule)   # (one replay between steps, not its eager ops: tgfx.optim's schedules' note)


def piecewise_constant(boundaries: Any, values: Any) -> Schedule:
    """`values[k]` for steps past `k` of the `boundaries` (len(values) == len(boundaries) + 1)."""
    boundaries, values = tnp.array(boundaries), tnp.array(values)
    if values.ndim != 1 or boundaries.ndim != 1 or values.shape[0] != boundaries.shape[0] + 1:
        raise ValueError(f"piecewise_constant: values must be one longer than boundaries, both 1-D; got values of "
                         f"shape {values.shape} and boundaries of shape {boundaries.shape}")

    def schedule(i: Any) -> Any:
        return values[tnp.sum(i > boundaries)]
    return jit(schedule)


def make_schedule(scalar_or_schedule: float | Schedule) -> Schedule:
    """A schedule: `scalar_or_schedule` itself when callable, else the constant one."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if tnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(f"a step size must be a scalar or a schedule (a function of the step number), got "
                    f"{type(scalar_or_schedule).__name__} of shape {tnp.shape(scalar_or_schedule)}")


# ---- the optimisers (one array's state each; `@optimizer` maps them over pytrees) ----
def _with_zeros(n: int) -> Callable[[Any], tuple]:
    """An optimiser's init: the parameter and `n` arrays of zeros of its shape (velocities, moments)."""
    def init(x0: Any) -> tuple:
        return (x0, *(tnp.zeros_like(x0) for _ in range(n)))
    return init


def _params(state: tuple) -> Any:
    """An optimiser's get_params where the parameter is its state's first item."""
    return state[0]


@optimizer
def sgd(step_size: float | Schedule) -> tuple[Callable, Callable, Callable]:
    """Stochastic gradient descent: x -= step_size(i) * g."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0

    def update(i: Any, g: Any, x: Any) -> Any:
        return x - step_size(i) * g

    def get_params(x: Any) -> Any:
        return x
    return init, update, get_params


@optimizer
def momentum(step_size: float | Schedule, mass: float) -> tuple[Callable, Callable, Callable]:
    """Heavy-ball momentum: v = mass * v + g; x -= step_size(i) * v."""
    step_size = make_schedule(step_size)

    init = _with_zeros(1)

    def update(i: Any, g: Any, state: Any) -> Any:
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * velocity, velocity
    return init, update, _params


@optimizer
def nesterov(step_size: float | Schedule, mass: float) -> tuple[Callable, Callable, Callable]:
    """Nesterov momentum: v = mass * v + g; x -= step_size(i) * (mass * v + g)."""
    step_size = make_schedule(step_size)

    init = _with_zeros(1)

    def update(i: Any, g: Any, state: Any) -> Any:
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g), velocity
    return init, update, _params


@optimizer
def adagrad(step_size: float | Schedule, momentum: float = 0.9) -> tuple[Callable, Callable, Callable]:
    """Adagrad (Duchi et al. 2011) with momentum on the scaled gradient."""
    step_size = make_schedule(step_size)

    init = _with_zeros(2)

    def update(i: Any, g: Any, state: Any) -> Any:
        x, g_sq, m = state
        g_sq = g_sq + tnp.square(g)
        g_sq_inv_sqrt = tnp.where(g_sq > 0, 1.0 / tnp.sqrt(g_sq), 0.0)
        m = (1.0 - momentum) * (g * g_sq_inv_sqrt) + momentum * m
        return x - step_size(i) * m, g_sq, m
    return init, update, _params


@optimizer
def rmsprop(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8) -> tuple[Callable, Callable, Callable]:
    """RMSProp: a decaying mean of squared gradients scales each step."""
    step_size = make_schedule(step_size)

    init = _with_zeros(1)

    def update(i: Any, g: Any, state: Any) -> Any:
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + tnp.square(g) * (1.0 - gamma)
        return x - step_size(i) * g / tnp.sqrt(avg_sq_grad + eps), avg_sq_grad
    return init, update, _params


@optimizer
def rmsprop_momentum(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8,
                     momentum: float = 0.9) -> tuple[Callable, Callable, Callable]:
    """RMSProp with momentum on the scaled step."""
    step_size = make_schedule(step_size)

    init = _with_zeros(2)

    def update(i: Any, g: Any, state: Any) -> Any:
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + tnp.square(g) * (1.0 - gamma)
        mom = momentum * mom + step_size(i) * g / tnp.sqrt(avg_sq_grad + eps)
        return x - mom, avg_sq_grad, mom
    return init, update, _params


@optimizer
def adam(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8) -> tuple[Callable, Callable, Callable]:
    """Adam (Kingma and Ba 2014), bias-corrected by the step number: step `i` is the (i+1)-th update."""
    step_size = make_schedule(step_size)

    init = _with_zeros(2)

    def update(i: Any, g: Any, state: Any) -> Any:
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * tnp.square(g) + b2 * v
        mhat = m / (1 - tnp.asarray(b1, m.dtype) ** (i + 1))
        vhat = v / (1 - tnp.asarray(b2, m.dtype) ** (i + 1))
        return x - step_size(i) * mhat / (tnp.sqrt(vhat) + eps), m, v
    return init, update, _params


@optimizer
def adamax(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999,
           eps: float = 1e-8) -> tuple[Callable, Callable, Callable]:
    """AdaMax, Adam's infinity-norm variant."""
    step_size = make_schedule(step_size)

    init = _with_zeros(2)

    def update(i: Any, g: Any, state: Any) -> Any:
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = tnp.maximum(b2 * u, tnp.abs(g))
        return x - (step_size(i) / (1 - tnp.asarray(b1, m.dtype) ** (i + 1))) * m / (u + eps), m, u
    return init, update, _params


@optimizer
def sm3(step_size: float | Schedule, momentum: float = 0.9) -> tuple[Callable, Callable, Callable]:
    """SM3 (Anil et al. 2019): one accumulator per index of each axis; an element's is the least of those it
    meets. The parameter's shape is kept in the state (as JAX's): read the parameters outside `jit`."""
    step_size = make_schedule(step_size)

    def along(v: Any, axis: int, ndim: int) -> Any:   # an axis's accumulator, broadcastable along that axis
        return tnp.reshape(v, tuple(v.shape[0] if k == axis else 1 for k in range(ndim)))

    def init(x0: Any) -> Any:
        shape = tuple(tnp.shape(x0))
        x0 = tnp.atleast_1d(x0)
        return x0, tnp.zeros_like(x0), [tnp.zeros(n, dtype=x0.dtype) for n in x0.shape], shape

    def update(i: Any, g: Any, state: Any) -> Any:
        x, m, vs, shape = state
        g = tnp.reshape(g, x.shape)
        accum = functools.reduce(tnp.minimum, [along(v, k, x.ndim) for k, v in enumerate(vs)]) + tnp.square(g)
        accum_inv_sqrt = tnp.where(accum > 0, 1.0 / tnp.sqrt(accum), 0.0)
        m = (1.0 - momentum) * (g * accum_inv_sqrt) + momentum * m
        x = x - step_size(i) * m
        vs = [accum.max(axis=tuple(a for a in range(x.ndim) if a != k)) for k in range(x.ndim)]
        return x, m, vs, shape

    def get_params(state: Any) -> Any:
        x, _, _, shape = state
        return tnp.reshape(x, tuple(int(n) for n in shape))
    return init, update, get_params


# ---- utilities ----
def l2_norm(tree: Any) -> Any:
    """The l2 norm of all the leaves of `tree` together, as one flat vector's."""
    leaves, _ = tree_flatten(tree)
    return tnp.sqrt(sum(tnp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree: Any, max_norm: float) -> Any:
    """`grad_tree` scaled so that its `l2_norm` is at most `max_norm`."""
    norm = l2_norm(grad_tree)
    return tree_map(lambda g: tnp.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree)


class JoinPoint:
    """A parameter's optimiser state, as a leaf of the parameters' tree (`unpack_optimizer_state`)."""

    def __init__(self, subtree: Any) -> None:
        self.subtree = subtree

    def __iter__(self) -> Any:   # (as JAX's: a JoinPoint unpacks to its subtree's items, e.g. for pickling)
        return iter((self.subtree,))


def unpack_optimizer_state(opt_state: OptimizerState) -> Any:
    """The state as the parameters' tree with each leaf a `JoinPoint` of that parameter's state (plain Python
    containers and arrays: what a checkpoint saves)."""
    packed, tree, subtrees = opt_state
    return tree_unflatten(tree, [JoinPoint(tree_unflatten(d, leaves)) for d, leaves in zip(subtrees, packed,
                                                                                            strict=True)])


def pack_optimizer_state(marked_pytree: Any) -> OptimizerState:
    """The inverse of `unpack_optimizer_state`."""
    sentinels, tree = tree_flatten(marked_pytree)
    if not all(isinstance(s, JoinPoint) for s in sentinels):
        raise TypeError("pack_optimizer_state: every leaf must be a JoinPoint, as unpack_optimizer_state gives; got "
                        f"{sorted({type(s).__name__ for s in sentinels if not isinstance(s, JoinPoint)})}")
    flat = [tree_flatten(s.subtree) for s in sentinels]
    return OptimizerState([leaves for leaves, _ in flat], tree, tuple(d for _, d in flat))

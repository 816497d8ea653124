"""`tg.optim`: optimizers as pure gradient transformations, in optax's style.

An optimizer is a pair of pure functions:

- `init(params) -> state`: the optimizer's state, a pytree of Tensors (moment estimates, and the step count as an
  int32 Tensor, so a jitted train step sees the same signature at every step and traces once);
- `update(grads, state, params=None) -> (updates, new_state)`: the updates to *add* to the parameters (already
  scaled by -learning_rate), and the next state. `apply_updates(params, updates)` adds them.

>>> opt = tg.optim.adam(1e-3)
>>> state = opt.init(params)
>>> @tg.jit
... def step(params, state, x, y):
...     loss, grads = tg.value_and_grad(loss_fn)(params, x, y)
...     updates, state = opt.update(grads, state, params)
...     return tg.optim.apply_updates(params, updates), state, loss

The learning rate is a float or a schedule: a function of the number of updates done so far (an int32 Tensor: 0 at
the first update) returning the rate, e.g. `linear_schedule(...)`. Optimizers compose with `chain`, e.g.
`chain(clip_by_global_norm(1.0), adamw(3e-4))`.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.tensor import Tensor
from tgfx.transforms.jit import jit
from tgfx.tree import tree_leaves, tree_map

Params = Any
Updates = Any
Schedule = Callable[[Tensor], Any]
ScalarOrSchedule = float | Schedule


class GradientTransformation(NamedTuple):
    """An optimizer: `init(params) -> state`, `update(grads, state, params=None) -> (updates, new_state)`."""

    init: Callable[[Params], Any]
    update: Callable[..., tuple[Updates, Any]]


class SgdState(NamedTuple):
    count: Tensor       # updates done so far (int32, 0-d)
    momentum: Any       # the velocity, params-shaped; None without momentum


class AdamState(NamedTuple):
    count: Tensor       # updates done so far (int32, 0-d)
    mu: Any             # first moment (mean of gradients), params-shaped
    nu: Any             # second moment (mean of squared gradients), params-shaped


class EmptyState(NamedTuple):
    pass


class ChainState(NamedTuple):
    states: tuple


def _zero_count() -> Tensor:
    return tnp.zeros((), dtypes.int32)


def _zeros_like(params: Params, who: str) -> Any:
    def zero(p: Any) -> Tensor:
        if not isinstance(p, Tensor):
            raise TypeError(f"{who}.init: every params leaf must be a Tensor, got {type(p).__name__}")
        if not p.dtype.is_float:
            raise TypeError(f"{who}.init: params must be float Tensors, got one of dtype {p.dtype.name} (shape "
                            f"{p.shape}); keep integer data out of the params tree")
        return tnp.zeros_like(p, p.dtype)   # (where p is: laid out over p's devices as p is, as optax's)
    return tree_map(zero, params)


def _map(who: str, what: str, f: Callable[..., Any], ref: Any, *others: Any) -> Any:
    """tree_map, with a structure mismatch reported as the optimizer's error about `what` (grads, params)."""
    try:
        return tree_map(f, ref, *others)
    except ValueError as e:
        detail = str(e).split("; they differ at ", 1)[-1]
        raise ValueError(f"{who}.update: {what} do not have the structure of the params this state was made for "
                         f"(by init); they differ at {detail}") from None


def _lr(learning_rate: ScalarOrSchedule, count: Tensor) -> Any:
    return learning_rate(count) if callable(learning_rate) else learning_rate


def _scale(u: Tensor, s: Any) -> Tensor:
    """u * s in u's dtype: a schedule's float32 rate must not promote float16 updates."""
    return u * (s.astype(u.dtype) if isinstance(s, Tensor) else s)


def _at_least_f32(t: Tensor) -> Tensor:
    return t if t.dtype in (dtypes.float32, dtypes.float64) else t.astype(dtypes.float32)


def _check_lr(learning_rate: ScalarOrSchedule, who: str) -> None:
    if not callable(learning_rate) and not isinstance(learning_rate, (int, float)):
        raise TypeError(f"{who}: learning_rate must be a float or a schedule (a function of the step count), got "
                        f"{type(learning_rate).__name__}")


def sgd(learning_rate: ScalarOrSchedule, momentum: float = 0.0, nesterov: bool = False) -> GradientTransformation:
    """Stochastic gradient descent, with optional (Nesterov) momentum, as `optax.sgd` and `torch.optim.SGD`.

    velocity = g + momentum * velocity;  update = -lr * (g + momentum * velocity if nesterov else velocity).

    >>> opt = tg.optim.sgd(0.1, momentum=0.9)
    """
    _check_lr(learning_rate, "sgd")
    if not 0.0 <= momentum:
        raise ValueError(f"sgd: momentum must be >= 0, got {momentum}")
    if nesterov and not momentum:
        raise ValueError("sgd: nesterov=True needs momentum > 0")

    def init(params: Params) -> SgdState:
        return SgdState(_zero_count(), _zeros_like(params, "sgd") if momentum else None)

    def update(grads: Updates, state: SgdState, params: Params | None = None) -> tuple[Updates, SgdState]:
        lr = _lr(learning_rate, state.count)
        if not momentum:
            return tree_map(lambda g: _scale(g, -lr), grads), SgdState(state.count + 1, None)
        vel = _map("sgd", "grads", lambda v, g: g + momentum * v, state.momentum, grads)
        direction = _map("sgd", "grads", lambda g, v: g + momentum * v, grads, vel) if nesterov else vel
        updates = tree_map(lambda d: _scale(d, -lr), direction)
        return updates, SgdState(state.count + 1, vel)

    return GradientTransformation(init, update)


def _adam(who: str, learning_rate: ScalarOrSchedule, b1: float, b2: float, eps: float, eps_root: float,
          weight_decay: float, mask: Any) -> GradientTransformation:
    _check_lr(learning_rate, who)
    for name, v in (("b1", b1), ("b2", b2)):
        if not 0.0 <= v < 1.0:
            raise ValueError(f"{who}: {name} must be in [0, 1), got {v}")

    def init(params: Params) -> AdamState:
        return AdamState(_zero_count(), _zeros_like(params, who), _zeros_like(params, who))

    def update(grads: Updates, state: AdamState, params: Params | None = None) -> tuple[Updates, AdamState]:
        mu = _map(who, "grads", lambda m, g: b1 * m + (1 - b1) * g, state.mu, grads)
        nu = _map(who, "grads", lambda v, g: b2 * v + (1 - b2) * (g * g), state.nu, grads)
        count = state.count + 1

        def direction(m: Tensor, v: Tensor) -> Tensor:
            # bias correction: the moments start at 0, so early averages are too small by a factor 1 - b^t (taken in
            # the moments' precision, at least float32)
            t = count.astype(dtypes.float64 if m.dtype == dtypes.float64 else dtypes.float32)
            m_hat = m / (1 - b1 ** t).astype(m.dtype)
            v_hat = v / (1 - b2 ** t).astype(v.dtype)
            return m_hat / (tnp.sqrt(v_hat + eps_root) + eps)

        u = tree_map(direction, mu, nu)
        if weight_decay:
            if params is None:
                raise ValueError(f"{who}.update: weight decay needs the params: call update(grads, state, params)")
            decay = _decay_mask(mask, params, who)
            # decoupled (AdamW): the decay is added to the adaptive direction, not to the gradient, so it is not
            # rescaled by the second moment
            u = _map(who, "params", lambda d, p, on: d + weight_decay * p if on else d, u, params, decay)
        lr = _lr(learning_rate, state.count)
        updates = tree_map(lambda d: _scale(d, -lr), u)
        return updates, AdamState(count, mu, nu)

    return GradientTransformation(init, update)


def _decay_mask(mask: Any, params: Params, who: str) -> Any:
    """A pytree of bools like params: which leaves get weight decay (all of them when mask is None)."""
    if mask is None:
        return tree_map(lambda _: True, params)
    m = mask(params) if callable(mask) else mask
    try:
        return tree_map(lambda _, on: bool(on), params, m)
    except ValueError as e:
        raise ValueError(f"{who}: the weight decay mask must be a pytree of bools with the params' structure; "
                         f"{str(e).split('; ', 1)[-1]}") from None


def adam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         eps_root: float = 0.0) -> GradientTransformation:
    """Adam (Kingma & Ba, 2015), as `optax.adam`:

    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  update = -lr * m_hat / (sqrt(v_hat + eps_root) + eps),
    with the bias-corrected m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t) at step t = 1, 2, ...

    >>> opt = tg.optim.adam(1e-3)
    """
    return _adam("adam", learning_rate, b1, b2, eps, eps_root, 0.0, None)


def adamw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          eps_root: float = 0.0, weight_decay: float = 1e-4, mask: Any = None) -> GradientTransformation:
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019), as `optax.adamw`:

    update = -lr * (m_hat / (sqrt(v_hat + eps_root) + eps) + weight_decay * param).

    The decay is scaled by the learning rate but not by the adaptive denominator. `mask` (a pytree of bools like
    the params, or a function of the params returning one) limits the decay to some leaves, e.g. not biases:
    `mask=lambda p: tg.tree.tree_map(lambda x: x.ndim > 1, p)`. `update` needs the params.

    >>> opt = tg.optim.adamw(3e-4, weight_decay=0.01)
    """
    return _adam("adamw", learning_rate, b1, b2, eps, eps_root, weight_decay, mask)


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Scale all gradients by min(1, max_norm / ||g||), ||g|| the 2-norm over every leaf together (optax's).
    Use it first in a `chain`."""
    def init(params: Params) -> EmptyState:
        return EmptyState()

    def update(grads: Updates, state: EmptyState, params: Params | None = None) -> tuple[Updates, EmptyState]:
        leaves = tree_leaves(grads)
        if not leaves:
            return grads, state
        # squares summed in at least float32 (a float16 sum of squares overflows at a norm of 256)
        norm = tnp.sqrt(sum(tnp.sum(_at_least_f32(g) ** 2) for g in leaves))
        factor = tnp.minimum(1.0, max_norm / tnp.maximum(norm, 1e-30))
        return tree_map(lambda g: _scale(g, factor), grads), state

    return GradientTransformation(init, update)


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """The transformations applied in order, each to the previous one's updates (optax.chain)."""
    def init(params: Params) -> ChainState:
        return ChainState(tuple(t.init(params) for t in transforms))

    def update(grads: Updates, state: ChainState, params: Params | None = None) -> tuple[Updates, ChainState]:
        if len(state.states) != len(transforms):
            raise ValueError(f"chain.update: the state has {len(state.states)} parts for {len(transforms)} "
                             f"transformations; make it with this chain's init")
        new = []
        for t, s in zip(transforms, state.states, strict=True):
            grads, s = t.update(grads, s, params)
            new.append(s)
        return grads, ChainState(tuple(new))

    return GradientTransformation(init, update)


def apply_updates(params: Params, updates: Updates) -> Params:
    """params + updates, leaf by leaf, each result in its param's dtype (optax.apply_updates)."""
    try:
        return tree_map(lambda p, u: (p + u).astype(p.dtype), params, updates)
    except ValueError as e:
        raise ValueError(f"apply_updates: updates do not have the structure of params; they differ at "
                         f"{str(e).split('; they differ at ', 1)[-1]}") from None


# ---- learning-rate schedules: functions of the update count (an int32 Tensor, or an int) ----
# Each is jitted: called eagerly between steps with each step's Python int (a weak int32 input: one trace for all
# values), it is one replay of one kernel, not its dozen eager ops (a warmup-cosine schedule's 366 us against
# jax's 156); inside a jitted step it is traced into the step, as any function.
def constant_schedule(value: float) -> Schedule:
    """The same rate at every step."""
    return lambda count: tnp.full((), value, dtypes.float32)


def linear_schedule(init_value: float, end_value: float, transition_steps: int,
                    transition_begin: int = 0) -> Schedule:
    """init_value until `transition_begin`, then linearly to end_value over `transition_steps`, then end_value."""
    if transition_steps <= 0:
        return constant_schedule(init_value)

    def schedule(count: Tensor | int) -> Tensor:
        frac = tnp.clip((tnp.asarray(count).astype(dtypes.float32) - transition_begin) / transition_steps, 0.0, 1.0)
        return init_value + (end_value - init_value) * frac
    return jit(schedule)


def cosine_decay_schedule(init_value: float, decay_steps: int, alpha: float = 0.0) -> Schedule:
    """init_value * ((1 - alpha) * (1 + cos(pi * min(t, decay_steps) / decay_steps)) / 2 + alpha)."""
    if decay_steps <= 0:
        raise ValueError(f"cosine_decay_schedule: decay_steps must be positive, got {decay_steps}")

    def schedule(count: Tensor | int) -> Tensor:
        frac = tnp.minimum(tnp.asarray(count).astype(dtypes.float32), float(decay_steps)) / decay_steps
        return init_value * ((1 - alpha) * 0.5 * (1 + tnp.cos(math.pi * frac)) + alpha)
    return jit(schedule)


def warmup_cosine_decay_schedule(init_value: float, peak_value: float, warmup_steps: int, decay_steps: int,
                                 end_value: float = 0.0) -> Schedule:
    """Linear warmup from init_value to peak_value over warmup_steps, then cosine decay to end_value at
    decay_steps (counted from the start, as optax)."""
    warm = linear_schedule(init_value, peak_value, warmup_steps)
    cos_steps = max(decay_steps - warmup_steps, 1)
    decay = cosine_decay_schedule(peak_value - end_value, cos_steps)

    def schedule(count: Tensor | int) -> Tensor:
        c = tnp.asarray(count)
        after = decay(tnp.maximum(c - warmup_steps, 0)) + end_value
        return (c < warmup_steps).where(warm(c), after)
    return jit(schedule)

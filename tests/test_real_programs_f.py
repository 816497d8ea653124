"""How JAX users structure programs (bench/ported_structure.py), at their quick sizes: each trains to jax's losses, and
a step after the first compiles and traces nothing.

The losses are jax 0.10.2's (CPU, the bench's jax Fw) for the same numpy initial values and batches: the first three
steps', each after an update by the one before.
"""
import os
import sys

import numpy as np
import pytest

import tgfx as tg

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # bench/ is not installed

_JAX_LOSSES = {
    "eqx": (1.890836238861084, 1.94376802444458, 1.938672423362732),
    "mps": (2.7407727241516113, 1.7483575344085693, 1.6383204460144043),
    "pool_scan": (1.746760368347168, 0.8813529014587402, 2.3836669921875),
    "odeint_adjoint": (0.6431933641433716, 0.5836862325668335, 0.5365369915962219),
    "svi": (0.7379878163337708, 0.7112574577331543, 0.6991760730743408),
    "actor_critic": (24.231046676635742, 19.881683349609375, 18.72606658935547),
}


def _steps(name: str, n: int) -> tuple[list[float], object]:
    from bench import ported_structure
    from bench.frameworks import tgfx_fw
    run = getattr(ported_structure, name)(tgfx_fw(), True)
    return [float(run(i)) for i in range(n)], run


@pytest.mark.parametrize("name", sorted(_JAX_LOSSES))
def test_a_program_structured_as_jax_users_write_it_trains_as_under_jax(name):
    """Equinox-style modules (a `register_pytree_node_class` layer inside a `register_dataclass` model with a static
    field, trainable leaves partitioned from frozen ones with None in their place, a NamedTuple Adam state, the step
    jitted with a hashable dataclass as a static argument, the model's `__call__` jitted as a function of the module);
    a matrix product state contracted by three-operand `einsum`s, its accuracy a `pure_callback` and its loss logged by
    `io_callback` inside the jitted step; max and mean pooling by `reduce_window` and a linear recurrence and prefix
    sums by `associative_scan`; a neural ODE fitted through `odeint`'s adjoint; SVI of a Bayesian logistic regression
    (`vmap` over reparameterised particles); an actor-critic whose cart-pole environment steps in a `lax.scan`."""
    got, run = _steps(name, 3)
    np.testing.assert_allclose(got, _JAX_LOSSES[name], rtol=2e-6)
    tg.counters.reset()
    float(run(3))
    assert tg.counters.compile_count == 0 and tg.counters.trace_count == 0


def test_mixed_precision_over_a_scan_of_checkpointed_layers_trains_as_under_jax():
    """bfloat16 copies of float32 master weights, 12 checkpointed blocks (`checkpoint_policies` named) in a `lax.scan`
    over their stacked parameters, `vmap` over the attention heads, `lax.map` over the examples, a dynamic loss scale.
    The first loss is jax's with XLA's excess precision off (`--xla_allow_excess_precision=false`: each bfloat16 op
    rounded, as jnp's semantics say; XLA's default keeps some fused intermediates in float32, 3.394989), to the last
    bit. The later ones differ from jax's by bfloat16 roundings of the gradient: XLA's CPU backend sums a broadcast's
    cotangent (a layer norm's gain, over every position) in bfloat16, one rounding per term, where tgfx sums it in
    float32 and rounds once, as jnp.sum of bfloat16 does.
    """
    got, run = _steps("remat", 3)
    assert got[0] == np.float32(3.395620346069336)
    np.testing.assert_allclose(got[1:], (3.5836262702941895, 3.378922700881958), rtol=2e-3)
    tg.counters.reset()
    float(run(3))
    assert tg.counters.compile_count == 0 and tg.counters.trace_count == 0

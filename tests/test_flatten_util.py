"""tgfx.flatten_util.ravel_pytree (jax.flatten_util's): a pytree as one vector and back, its dtypes, and its use with
a vector optimiser under jit."""
import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.flatten_util import ravel_pytree


def test_ravel_and_unravel_round_trip_in_tree_order() -> None:
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((3, 2)).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    flat, unravel = ravel_pytree({"w": tg.asarray(w), "b": [tg.asarray(b), None]})
    assert flat.shape == (8,) and flat.dtype == dtypes.float32
    np.testing.assert_array_equal(flat.numpy(), np.concatenate([b, w.ravel()]))   # 'b' sorts before 'w'
    back = unravel(flat * 2)
    assert back["b"][1] is None
    np.testing.assert_array_equal(back["w"].numpy(), w * 2)
    np.testing.assert_array_equal(back["b"][0].numpy(), b * 2)
    # one dtype: unravel takes any dtype (JAX's is dtype-polymorphic there)
    assert unravel(flat.astype(tnp.float16))["w"].dtype == dtypes.float16
    assert hash(unravel) == hash(ravel_pytree({"w": tnp.zeros((3, 2)), "b": [tnp.zeros(2), None]})[1])


def test_mixed_dtypes_promote_and_cast_back() -> None:
    tree = {"a": tnp.ones((2, 3), tnp.bfloat16), "b": 2.0, "c": [tnp.arange(3)]}
    flat, unravel = ravel_pytree(tree)
    assert flat.dtype == dtypes.float32 and flat.shape == (10,)
    back = unravel(flat)
    assert [back["a"].dtype, back["b"].dtype, back["c"][0].dtype] == [dtypes.bfloat16, dtypes.float32, dtypes.int32]
    np.testing.assert_array_equal(back["c"][0].numpy(), [0, 1, 2])
    with pytest.raises(TypeError, match="dtype float16, but expected dtype float32"):
        unravel(flat.astype(tnp.float16))
    with pytest.raises(ValueError, match=r"shape \(10,\).*got shape \(4,\)"):
        unravel(tnp.ones(4))


def test_empty_pytree_is_an_empty_float32_vector() -> None:
    flat, unravel = ravel_pytree({"a": [], "b": None})
    assert flat.shape == (0,) and flat.dtype == dtypes.float32
    assert unravel(flat) == {"a": [], "b": None}


def test_minimize_over_a_pytree_of_parameters_under_jit() -> None:
    """The use it exists for: fit a dict of parameters with a vector optimiser, inside jit."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((50, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32) + 0.3).astype(np.float32)

    @tg.jit
    def fit(x: tg.Tensor, y: tg.Tensor) -> dict:
        flat, unravel = ravel_pytree({"w": tnp.zeros(3), "b": tnp.zeros(())})

        def loss(v: tg.Tensor) -> tg.Tensor:
            p = unravel(v)
            return tnp.mean((x @ p["w"] + p["b"] - y) ** 2)
        return unravel(tg.scipy.optimize.minimize(loss, flat, method="BFGS").x)
    p = fit(tg.asarray(x), tg.asarray(y))
    np.testing.assert_allclose(p["w"].numpy(), [1.0, -2.0, 0.5], atol=1e-3)
    np.testing.assert_allclose(p["b"].numpy(), 0.3, atol=1e-3)
    # the gradient flows through ravel and unravel
    g = tg.grad(lambda t: (ravel_pytree(t)[0] ** 2).sum())({"w": tnp.ones(3), "b": tnp.full((), 2.0)})
    np.testing.assert_array_equal(g["w"].numpy(), [2, 2, 2])
    np.testing.assert_array_equal(g["b"].numpy(), 4)

"""JAX's small top-level helpers: eval_shape and ShapeDtypeStruct, device_get, Array, tree transpose/broadcast."""
import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.counters import counters
from tgfx.devices import DEFAULT_DEVICE


def test_eval_shape_traces_and_computes_nothing() -> None:
    w = tg.asarray(np.ones((784, 256), np.float32))

    def init(key: tg.Tensor) -> dict:
        k1, _ = tg.random.split(key)
        return {"w": tg.random.normal(k1, (3, 4)), "b": tnp.zeros(4, dtype=tnp.int32), "n": 3}
    counters.reset()
    out = tg.eval_shape(lambda x, w: tnp.tanh(x @ w), tg.ShapeDtypeStruct((128, 784), tnp.float32), w)
    assert out == tg.ShapeDtypeStruct((128, 256), tnp.float32) and out.ndim == 2 and out.size == 128 * 256
    params = tg.eval_shape(init, tg.random.key(0))
    assert params == {"w": tg.ShapeDtypeStruct((3, 4), "float32"), "b": tg.ShapeDtypeStruct((4,), "int32"),
                      "n": tg.ShapeDtypeStruct((), "int32")}
    nested = tg.eval_shape(lambda d, k=1: {"s": d["a"].sum(0) * k, "h": d["a"].astype(tnp.float16)},
                           {"a": tg.ShapeDtypeStruct((5, 2), tnp.int32)}, k=2)
    assert nested == {"s": tg.ShapeDtypeStruct((2,), "int32"), "h": tg.ShapeDtypeStruct((5, 2), "float16")}
    assert counters.kernel_count == 0 and counters.compile_count == 0


def test_eval_shape_errors() -> None:
    with pytest.raises(TypeError, match="expected a function"):
        tg.eval_shape(3, 1)
    with pytest.raises(TypeError, match="sequence of ints"):
        tg.ShapeDtypeStruct(3, "float32")
    with pytest.raises(ValueError, match="negative"):
        tg.ShapeDtypeStruct((2, -1), "float32")
    with pytest.raises(ValueError, match="shapes"):   # a shape error inside the function surfaces as it would eagerly
        tg.eval_shape(lambda a, b: a + b, tg.ShapeDtypeStruct((2, 3), "float32"), tg.ShapeDtypeStruct((4,), "float32"))


def test_device_get_and_array() -> None:
    x = tg.asarray(np.arange(3, dtype=np.float32))
    got = tg.device_get({"y": x * 2, "step": 3, "z": [x]})
    assert isinstance(got["y"], np.ndarray) and got["step"] == 3
    np.testing.assert_array_equal(got["y"], [0, 2, 4])
    np.testing.assert_array_equal(got["z"][0], [0, 1, 2])
    assert isinstance(x, tg.Array) and isinstance(x * 2, tg.Array)


def test_tree_transpose_and_broadcast() -> None:
    outer, inner = tg.tree.structure([0, 0]), tg.tree.structure({"a": 0, "b": 0})
    assert tg.tree.transpose(outer, inner, [{"a": 1, "b": 2}, {"a": 3, "b": 4}]) == {"a": [1, 3], "b": [2, 4]}
    assert tg.tree.transpose(inner, outer, {"a": [1, 3], "b": [2, 4]}) == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    with pytest.raises(TypeError, match="not the outer structure"):
        tg.tree.transpose(outer, inner, [{"a": 1}, {"a": 3, "b": 4}])
    assert tg.tree.broadcast([1, 2], [(0, 0), {"a": 0}]) == [(1, 1), {"a": 2}]
    assert tg.tree.broadcast({"x": None}, {"x": None}) == {"x": None}
    with pytest.raises(ValueError, match="not a prefix"):
        tg.tree.broadcast([1, 2, 3], [(0, 0), {"a": 0}])
    pairs = tg.tree.leaves_with_path({"a": [5, 6]})
    assert [tg.tree.keystr(p) for p, _ in pairs] == ["['a'][0]", "['a'][1]"]
    assert tg.tree.flatten_with_path({"a": 1})[0][0][1] == 1


def test_disable_jit_runs_the_python_eagerly() -> None:
    runs = []

    @tg.jit
    def step(x: tg.Tensor) -> tg.Tensor:
        runs.append(float(x.sum()) if not tg.trace_state.active() else None)   # a concrete value only eagerly
        return x * 2
    x = tnp.ones(3)
    step(x)
    counters.reset()
    with tg.disable_jit():
        np.testing.assert_array_equal(step(x).numpy(), [2, 2, 2])
        np.testing.assert_array_equal(step(x + 1).numpy(), [4, 4, 4])
    assert runs == [None, 3.0, 6.0] and counters.trace_count == 0
    step(x)                        # jit again: its trace is reused
    assert len(runs) == 3 and counters.trace_count == 0
    tg.config.update("jax_disable_jit", True)
    try:
        step(x)
    finally:
        tg.config.update("jax_disable_jit", False)
    assert runs[-1] == 3.0


def test_more_array_methods_as_jax_has_them() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    t = tg.asarray(a)
    for d in ("int32", "uint8", "float16", "float32"):
        np.testing.assert_array_equal(t.view(d).numpy(), a.view(d))
    b = np.arange(8, dtype=np.uint8).reshape(2, 4)
    np.testing.assert_array_equal(tg.asarray(b).view(np.float32).numpy(), b.view(np.float32))
    with pytest.raises(ValueError, match="whole number of 4-byte items"):
        tg.asarray(np.ones(3, np.uint8)).view(np.float32)
    assert t.itemsize == 4 and t.tobytes() == a.tobytes() and t.devices() == {DEFAULT_DEVICE}
    np.testing.assert_array_equal(t.copy().numpy(), a)
    assert t.ptp().item() == np.ptp(a) and t.ptp(axis=1).tolist() == np.ptp(a, axis=1).tolist()
    for got, want in zip((t > 0).nonzero(), np.nonzero(a > 0), strict=True):
        np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(t.ravel().searchsorted(tnp.asarray([0.0, 1.5])).numpy(),
                                  a.ravel().searchsorted([0.0, 1.5]))
    part = tg.asarray(np.asarray([5.0, 1.0, 4.0, 2.0, 3.0], np.float32)).argpartition(2).numpy()
    assert sorted(part[:2].tolist()) == [1, 3] and part[2] == 4


def test_linspace_takes_arrays_an_axis_and_retstep() -> None:
    # jnp.linspace's signature (retstep before dtype) and array endpoints; an array start was a TypeError before
    for args, kw in [((0.0, 1.0, 5), {}), ((0, 10, 4), {"dtype": "int32"}), ((2.0, 3.0, 5), {"endpoint": False}),
                     ((0, 1, 1), {}), ((0, 1, 0), {}), ((-3, 7, 6), {"dtype": "int32", "endpoint": False})]:
        got, want = tnp.linspace(*args, **kw).numpy(), np.linspace(*args, **kw)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)
    lo, hi = np.array([[0.0], [1.0]], np.float32), np.array([1.0, 2.0, 3.0], np.float32)
    for axis in (0, 1, 2, -1):
        np.testing.assert_allclose(tnp.linspace(lo, hi, 4, axis=axis).numpy(), np.linspace(lo, hi, 4, axis=axis),
                                   rtol=1e-6)
    samples, step = tnp.linspace(0.0, 1.0, 5, retstep=True)
    assert step.item() == 0.25 and samples[-1].item() == 1.0
    jitted = tg.jit(lambda a: tnp.linspace(0.0, a, 4))(tnp.asarray(2.0)).numpy()
    np.testing.assert_allclose(jitted, [0, 2 / 3, 4 / 3, 2], rtol=1e-6)
    assert tg.grad(lambda a: tnp.linspace(0.0, a, 4).sum())(2.0).item() == pytest.approx(2.0)
    with pytest.raises(ValueError, match="non-negative"):
        tnp.linspace(0, 1, -1)
    with pytest.raises(np.exceptions.AxisError, match="axis 3"):
        tnp.linspace(lo, hi, 4, axis=3)

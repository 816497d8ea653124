"""JAX's x64 mode: 64-bit types only when asked for, 32-bit defaults and one warning per narrowed type otherwise."""
import importlib
import warnings

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.config import Context
from tgfx.dtypes import dtypes


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.import_module("tgfx.dtypes"), "_warned", set())  # `tg.dtypes` is the namespace


def narrowing_warnings(fn) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message) for w in caught if "is not enabled" in str(w.message)]


def test_64_bit_data_becomes_32_bit_silently_as_in_jax(fresh_warnings: None) -> None:
    """numpy data of a 64-bit type narrows without a word (`jnp.asarray(np.ones(3))`, a jitted function called with
    one, a numpy scalar in arithmetic: JAX is silent); a user's explicit request for the type warns, once a type."""
    data = np.random.default_rng(0).standard_normal((3, 3))
    x, msgs = narrowing_warnings(lambda: tg.asarray(data))
    assert x.dtype == dtypes.float32 and msgs == []
    i, msgs = narrowing_warnings(lambda: (tg.asarray(np.arange(3)), tg.jit(lambda a: a * 2)(data),
                                          tnp.ones(2) * np.float64(2), tnp.array([np.float64(1), 2.0]),
                                          tg.ShapeDtypeStruct.like(data))[0])
    assert i.dtype == dtypes.int32 and msgs == []
    assert tg.asarray(np.arange(3, dtype=np.uint64)).dtype == dtypes.uint32
    np.testing.assert_array_equal(i.numpy(), [0, 1, 2])


def test_an_explicit_64_bit_request_warns_once_per_type(fresh_warnings: None) -> None:
    x, msgs = narrowing_warnings(lambda: tnp.zeros(2, tnp.float64))
    assert x.dtype == dtypes.float32 and len(msgs) == 1
    assert "float64" in msgs[0] and "float32" in msgs[0] and "config.update('x64', True)" in msgs[0]
    # the same type again does not warn again; another type warns once
    _, again = narrowing_warnings(lambda: tnp.zeros(2, tnp.float64) + tg.asarray(np.ones(2)).astype("float64"))
    assert again == []
    i, msgs = narrowing_warnings(lambda: tg.asarray(np.arange(3), dtype=np.int64))
    assert i.dtype == dtypes.int32 and len(msgs) == 1 and "int64" in msgs[0]


def test_warning_points_at_the_users_line(fresh_warnings: None) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tnp.ones(2, dtype=np.float64)
    assert [w.filename for w in caught] == [__file__]


def test_defaults_and_promotion_follow_the_mode() -> None:
    i32, u32 = tnp.ones(2, tnp.int32), tnp.ones(2, tnp.uint32)
    assert tnp.array([1.5]).dtype == dtypes.float32 and tnp.array([1, 2]).dtype == dtypes.int32
    assert tnp.arange(3).dtype == dtypes.int32 and (i32 * 2.5).dtype == dtypes.float32
    assert (i32 + u32).dtype == dtypes.int32  # widening 32-bit operands stays at 32 bits, as JAX's x32
    assert tnp.sum(tnp.ones(3, bool)).dtype == dtypes.int32
    with Context(TGFX_ENABLE_X64=1):
        assert tnp.array([1.5]).dtype == dtypes.float64 and tnp.array([1, 2]).dtype == dtypes.int64
        assert tg.asarray(np.zeros(2)).dtype == dtypes.float64 and tnp.arange(3).dtype == dtypes.int64
        assert (i32 + u32).dtype == dtypes.int64 and (i32 * 2.5).dtype == dtypes.float64
        # float functions of integers up to 32 bits compute in float32 in either mode, as JAX's
        assert tnp.sin(i32).dtype == dtypes.float32 and tnp.mean(i32).dtype == dtypes.float32
        assert tnp.sin(tnp.arange(3)).dtype == dtypes.float64
        np.testing.assert_array_equal((tnp.ones(2, tnp.int64) + 2**40).numpy(), [2**40 + 1] * 2)


def test_a_program_initialised_with_numpy_defaults_trains_in_float32() -> None:
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((4, 3)), "b": np.zeros(3)}
    x = rng.standard_normal((8, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        params = tg.tree.map(tg.asarray, params)

    def loss(p: dict, x: tg.Tensor) -> tg.Tensor:
        return tnp.mean(tnp.tanh(x @ p["w"] + p["b"]) ** 2)

    step = tg.jit(tg.value_and_grad(loss))
    value, grads = step(params, x)
    assert value.dtype == dtypes.float32 and all(g.dtype == dtypes.float32 for g in tg.tree.leaves(grads))
    ref = np.mean(np.tanh(x @ params["w"].numpy().astype(np.float64) + params["b"].numpy()) ** 2)
    np.testing.assert_allclose(value.item(), ref, rtol=1e-5)
    # the float64 numpy batch and a float32 Tensor batch share one trace
    step(params, tg.asarray(x.astype(np.float32)))
    assert step.trace_count == 1


def test_jit_traces_python_scalars_and_numpy_arrays_in_the_mode_of_the_call() -> None:
    f = tg.jit(lambda x, s: x * s)
    assert f(np.ones(2), 1.5).dtype == dtypes.float32
    with Context(TGFX_ENABLE_X64=1):
        out = f(np.ones(2), 1.5)
        assert out.dtype == dtypes.float64
    assert f.trace_count == 2
    assert f(np.ones(2), 2.5).dtype == dtypes.float32 and f.trace_count == 2  # back in x32: the first trace
    g = tg.jit(lambda x: x + 1)
    t = tnp.ones(2)
    g(t)
    with Context(TGFX_ENABLE_X64=1):  # the all-Tensor fast path also keys on the mode
        assert g(t).dtype == dtypes.float32 and g.trace_count == 2


def test_config_update_takes_jax_spellings_and_names_unknown_options() -> None:
    from tgfx import config
    try:
        tg.config.update("jax_enable_x64", True)
        assert tnp.array([1.0]).dtype == dtypes.float64
        tg.config.update("x64", False)
        assert tnp.array([1.0]).dtype == dtypes.float32
    finally:
        config.X64.value = 0
    with pytest.raises(ValueError, match="unknown option 'x65'"):
        tg.config.update("x65", True)


def test_randint_bounds_beyond_int32_need_x64() -> None:
    key = tg.random.key(0)
    with pytest.raises(OverflowError, match=r"maxval.*int32.*x64"):
        tg.random.randint(key, (3,), 0, 2**31)
    with Context(TGFX_ENABLE_X64=1):
        out = tg.random.randint(key, (3,), 0, 2**40, dtype=tnp.int64).numpy()
        assert out.dtype == np.int64 and (out >= 0).all() and (out < 2**40).all()


def test_index_dtypes_follow_jax_in_either_mode() -> None:
    # as JAX: arg-reductions and argsort give the default integer (int64 with x64; they gave int32), searchsorted and
    # argpartition int32 in either mode (searchsorted gave int64 with x64)
    x = tnp.asarray(np.float32([[1.0, np.nan, 3.0], [2.0, 0.0, 5.0]]))
    for x64, wide in ((0, dtypes.int32), (1, dtypes.int64)):
        with Context(TGFX_ENABLE_X64=x64):
            for f in (tnp.argmax, tnp.argmin, tnp.nanargmax, tnp.nanargmin, tnp.argsort, tg.jit(tnp.argmax)):
                assert f(x).dtype == wide
            assert tnp.argmax(x, axis=1, keepdims=True).dtype == wide and x.argsort(axis=0).dtype == wide
            assert tnp.nanargmin(tnp.asarray([3, 1, 2]), axis=0).dtype == wide
            np.testing.assert_array_equal(tnp.nanargmax(x, axis=1).numpy(), [2, 2])
            s = tnp.asarray(np.float32([1.0, 3.0, 5.0]))
            for n in (3, 100):   # the compare and the bisection
                a = tnp.arange(n, dtype=tnp.float32)
                assert tnp.searchsorted(a, tnp.asarray(np.float32([2.5, 7.0]))).dtype == dtypes.int32
            assert tnp.searchsorted(s, 2.0, side="right").dtype == dtypes.int32 and s.searchsorted(4).dtype == \
                dtypes.int32
            assert tnp.argpartition(s, 1).dtype == dtypes.int32


def test_constructor_default_dtypes_in_x64() -> None:
    # as JAX with x64: eye, identity, zeros, ones, full, linspace default to float64, but tri to float32 (jnp.tri's
    # "strange default"; it was float64)
    with Context(TGFX_ENABLE_X64=1):
        assert tnp.tri(2).dtype == dtypes.float32 and tnp.tri(2, M=3, k=1).dtype == dtypes.float32
        assert tnp.tri(2, dtype=tnp.float64).dtype == dtypes.float64 and tnp.tri(2, dtype=int).dtype == dtypes.int64
        for f in (lambda: tnp.eye(2), lambda: tnp.identity(2), lambda: tnp.zeros(2), lambda: tnp.ones(2),
                  lambda: tnp.full(2, 1.5), lambda: tnp.linspace(0, 1, 3), lambda: tnp.arange(2.0)):
            assert f().dtype == dtypes.float64
    assert tnp.tri(2).dtype == dtypes.float32

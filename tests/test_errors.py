"""Bad input gives the exception numpy would raise, with a message that names the user's thing and the function."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import to_tensor

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import dtypes

AxisError = np.exceptions.AxisError


def _t(shape: tuple[int, ...], dtype: Any = np.float32) -> tg.Tensor:
    return to_tensor(np.ones(shape, dtype))


def _raises(exc: type[BaseException], fn: Callable[[], Any], *needles: str) -> str:
    """`fn()` raises `exc` and its message contains every needle (case-insensitive); returns the message."""
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    for n in needles:
        assert n.lower() in msg.lower(), f"{n!r} not in error message {msg!r}"
    return msg


# ---- shape mismatches name both shapes and the op ----
@pytest.mark.parametrize("name,fn", [
    ("add", lambda a, b: a + b), ("subtract", lambda a, b: a - b), ("multiply", lambda a, b: tnp.multiply(a, b)),
    ("maximum", tnp.maximum), ("minimum", tnp.minimum), ("less", lambda a, b: a < b), ("equal", tnp.equal),
    ("true_divide", lambda a, b: a / b), ("floor_divide", tnp.floor_divide), ("remainder", tnp.remainder),
    ("power", tnp.power), ("arctan2", tnp.arctan2), ("logical_and", tnp.logical_and),
])
def test_broadcast_mismatch_names_op_and_shapes(name: str, fn: Callable[[Any, Any], Any]) -> None:
    _raises(ValueError, lambda: fn(_t((2, 3)), _t((4,))), name, "(2, 3)", "(4,)")


def test_bitwise_mismatch_names_op_and_shapes() -> None:
    _raises(ValueError, lambda: tnp.bitwise_and(_t((2, 3), np.int32), _t((2,), np.int32)), "bitwise_and", "(2, 3)",
            "(2,)")
    _raises(ValueError, lambda: tnp.left_shift(_t((5,), np.int32), _t((3,), np.int32)), "left_shift", "(5,)", "(3,)")


def test_where_mismatch_names_all_shapes() -> None:
    _raises(ValueError, lambda: tnp.where(_t((2, 3), bool), _t((3,)), _t((2,))), "where", "(2, 3)", "(3,)", "(2,)")


def test_matmul_mismatch() -> None:
    _raises(ValueError, lambda: tnp.matmul(_t((2, 3)), _t((4, 5))), "matmul", "(2, 3)", "(4, 5)")
    _raises(ValueError, lambda: _t((2, 3)) @ _t((2,)), "matmul", "(2, 3)", "(2,)")
    _raises(ValueError, lambda: tnp.matmul(_t((2, 2, 3)), _t((3, 3, 4))), "matmul", "(2,)", "(3,)")
    _raises(ValueError, lambda: tnp.matmul(_t(()), _t((3,))), "matmul", "()", "(3,)")


def test_concatenate_and_stack_mismatch() -> None:
    _raises(ValueError, lambda: tnp.concatenate([_t((2, 3)), _t((2, 4))], axis=0), "concatenate", "(2, 3)", "(2, 4)")
    _raises(ValueError, lambda: tnp.stack([_t((2, 3)), _t((3, 2))]), "stack", "(2, 3)", "(3, 2)")
    _raises(ValueError, lambda: tnp.concatenate([]), "concatenate")
    _raises(ValueError, lambda: tnp.concatenate([_t(()), _t(())]), "concatenate", "zero-dimensional")


def test_shape_mismatches_are_also_the_type_error_jax_raises() -> None:
    # numpy raises ValueError for these, JAX TypeError; JAX's Neural Network tutorial catches a mismatched matmul with
    # `except TypeError` (it escaped as a ValueError): both catch them
    a, b = tnp.ones((512, 784)), tnp.ones((10, 784))
    for fn in (lambda: a @ b, lambda: tnp.dot(a, b), lambda: tnp.ones(3) + tnp.ones(4), lambda: tnp.ones(6).reshape(4),
               lambda: tnp.concatenate([tnp.ones((2, 3)), tnp.ones((2, 4))])):
        with pytest.raises(TypeError):
            fn()
        with pytest.raises(ValueError):
            fn()


def test_broadcast_to_incompatible() -> None:
    _raises(ValueError, lambda: tnp.broadcast_to(_t((2, 3)), (4, 3)), "(2, 3)", "(4, 3)")
    _raises(ValueError, lambda: tnp.broadcast_to(_t((2, 3)), (3,)), "(2, 3)", "(3,)")


def test_clip_bounds_mismatch() -> None:
    _raises(ValueError, lambda: tnp.clip(_t((2, 3)), _t((2,)), None), "(2, 3)", "(2,)")


# ---- reshape to an incompatible size ----
@pytest.mark.parametrize("shape,target", [((2, 3), (4, 2)), ((2, 3), (5, -1)), ((6,), (7,)), ((0, 3), (-1, 0)),
                                          ((2, 3), ())])
def test_reshape_incompatible_size(shape: tuple[int, ...], target: tuple[int, ...]) -> None:
    _raises(ValueError, lambda: _t(shape).reshape(target), "reshape", str(shape))
    _raises(ValueError, lambda: tnp.reshape(_t(shape), target), "reshape", str(shape))


def test_reshape_bad_arguments() -> None:
    _raises(ValueError, lambda: _t((2, 3)).reshape(-1, -1), "reshape", "-1")
    _raises(ValueError, lambda: _t((2, 3)).reshape(-2, -3), "negative")
    _raises(TypeError, lambda: _t((2, 3)).reshape((2.5, 2)), "reshape")


# ---- axis out of range: numpy's AxisError (a ValueError and an IndexError), naming the function ----
AXIS_CASES: list[tuple[str, Callable[[tg.Tensor], Any]]] = [
    ("sum", lambda x: tnp.sum(x, axis=2)), ("sum", lambda x: tnp.sum(x, axis=-3)),
    ("sum", lambda x: x.sum(axis=(0, 5))), ("prod", lambda x: tnp.prod(x, axis=2)),
    ("mean", lambda x: tnp.mean(x, axis=3)), ("var", lambda x: tnp.var(x, axis=2)), ("std", lambda x: x.std(axis=2)),
    ("max", lambda x: tnp.max(x, axis=2)), ("min", lambda x: tnp.min(x, axis=-3)),
    ("any", lambda x: tnp.any(x, axis=2)), ("all", lambda x: tnp.all(x, axis=2)),
    ("argmax", lambda x: tnp.argmax(x, axis=2)), ("argmin", lambda x: tnp.argmin(x, axis=-3)),
    ("cumsum", lambda x: tnp.cumsum(x, axis=2)), ("cumprod", lambda x: tnp.cumprod(x, axis=2)),
    ("squeeze", lambda x: tnp.squeeze(x, axis=2)), ("expand_dims", lambda x: tnp.expand_dims(x, 3)),
    ("swapaxes", lambda x: tnp.swapaxes(x, 0, 2)), ("moveaxis", lambda x: tnp.moveaxis(x, 0, 2)),
    ("flip", lambda x: tnp.flip(x, 2)), ("concatenate", lambda x: tnp.concatenate([x, x], axis=2)),
    ("stack", lambda x: tnp.stack([x, x], axis=4)), ("split", lambda x: tnp.split(x, 1, axis=2)),
    ("roll", lambda x: tnp.roll(x, 1, axis=2)), ("repeat", lambda x: tnp.repeat(x, 2, axis=2)),
    ("transpose", lambda x: tnp.transpose(x, (0, 2))),
]


@pytest.mark.parametrize("name,fn", AXIS_CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(AXIS_CASES)])
def test_axis_out_of_range(name: str, fn: Callable[[tg.Tensor], Any]) -> None:
    msg = _raises(AxisError, lambda: fn(_t((2, 3))), name)
    assert re.search(r"out of bounds|axis", msg)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "argmax", "cumsum", "any"])
def test_axis_of_a_0d_tensor(name: str) -> None:
    _raises(AxisError, lambda: getattr(tnp, name)(_t(()), axis=0), name)
    _raises(AxisError, lambda: getattr(tnp, name)(_t(()), axis=1), name)


def test_repeated_axis() -> None:
    _raises(ValueError, lambda: tnp.sum(_t((2, 3)), axis=(0, -2)), "sum", "repeated")
    _raises(ValueError, lambda: tnp.transpose(_t((2, 3)), (0, 0)), "transpose")


def test_axis_must_be_an_integer() -> None:
    _raises(TypeError, lambda: tnp.sum(_t((2, 3)), axis=1.5), "axis")


# ---- basic indexing out of range: a static int is clamped into its axis, as JAX reads it (not an error) ----
@pytest.mark.parametrize("index,clamped", [(5, 4), (-6, 0), ((0, 9), (0, 2)), ((1, -4), (1, 0)),
                                           ((slice(None), 3), (slice(None), 2))])
def test_index_out_of_range_clamps(index: Any, clamped: Any) -> None:
    x = _t((5, 3))
    np.testing.assert_array_equal(x[index].numpy(), x.numpy()[clamped])


def test_index_into_an_empty_axis() -> None:
    with pytest.raises(IndexError, match="index 0 is out of bounds for axis 0 with size 0"):
        _t((0, 3))[0]


def test_too_many_indices() -> None:
    _raises(IndexError, lambda: _t((5, 3))[0, 0, 0], "too many indices")
    _raises(IndexError, lambda: _t(())[0], "too many indices")
    _raises(IndexError, lambda: _t((5, 3))[..., 0, ...], "ellipsis")


# ---- unsupported dtypes are named ----
@pytest.mark.parametrize("fn,name", [
    (lambda: tg.asarray(np.array([1 + 2j], np.clongdouble)), "complex256"),
    (lambda: tg.asarray(np.array(["a"])), "<U1"),
    (lambda: _t((2,)).astype("complex256"), "complex256"),
    (lambda: tnp.zeros((2,), dtype="float8"), "float8"),
    (lambda: tnp.ones(3, dtype=np.longdouble), "longdouble"),
    (lambda: tnp.arange(3, dtype="int4"), "int4"),
])
def test_unsupported_dtype_is_named(fn: Callable[[], Any], name: str) -> None:
    _raises(TypeError, fn, name)


def test_object_data_is_rejected() -> None:
    _raises(TypeError, lambda: tg.asarray([{"a": 1}]), "cannot make a Tensor", "{'a': 1}")


# ---- ops that a dtype does not support ----
def test_bool_arithmetic_that_numpy_rejects() -> None:
    b = _t((3,), bool)
    _raises(TypeError, lambda: b - b, "subtract", "bool")
    _raises(TypeError, lambda: -b, "negative", "bool")


@pytest.mark.parametrize("fn,name", [(tnp.bitwise_and, "bitwise_and"), (tnp.bitwise_or, "bitwise_or"),
                                     (tnp.bitwise_xor, "bitwise_xor"), (tnp.left_shift, "left_shift"),
                                     (tnp.right_shift, "right_shift")])
def test_bitwise_on_floats(fn: Callable[[Any, Any], Any], name: str) -> None:
    _raises(TypeError, lambda: fn(_t((3,)), _t((3,))), name, "float32")
    _raises(TypeError, lambda: fn(_t((3,), np.int32), 1.5), name, "float32")


def test_invert_on_floats() -> None:
    _raises(TypeError, lambda: ~_t((3,)), "invert", "float32")
    _raises(TypeError, lambda: tnp.invert(_t((3,), np.float16)), "invert", "float16")


def test_bitcast_needs_equal_sizes() -> None:
    _raises(TypeError, lambda: _t((3,)).bitcast(dtypes.int16), "float32", "int16")


# ---- other misuse ----
@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin"])
def test_reduction_without_identity_on_empty(name: str) -> None:
    _raises(ValueError, lambda: getattr(tnp, name)(tnp.zeros((0, 3)), axis=0), name, "zero-size")
    _raises(ValueError, lambda: getattr(tnp, name)(tnp.zeros((2, 0))), name, "zero-size")


def test_squeeze_a_non_unit_axis() -> None:
    _raises(ValueError, lambda: tnp.squeeze(_t((2, 1)), axis=0), "squeeze", "(2, 1)")


def test_split_unequal() -> None:
    _raises(ValueError, lambda: tnp.split(_t((5, 2)), 2), "split", "equal division")


def test_pad_errors() -> None:
    # (mode="mean" is jnp.pad's since 509f2e8: an unknown mode is what raises, naming the modes there are)
    _raises(ValueError, lambda: tnp.pad(_t((2, 2)), 1, mode="bogus"), "pad", "bogus", "median")
    _raises(ValueError, lambda: tnp.pad(_t((2, 2)), -1), "pad", "negative")
    _raises(ValueError, lambda: tnp.pad(_t((0, 2)), 1, mode="edge"), "pad", "empty")


def test_repeat_errors() -> None:
    _raises(ValueError, lambda: tnp.repeat(_t((3,)), -1), "repeat", "negative")
    _raises(ValueError, lambda: tnp.repeat(_t((3,)), [1, 2]), "repeat")


def test_creation_errors() -> None:
    _raises(ValueError, lambda: tnp.arange(0, 5, 0), "arange", "step")
    _raises(ValueError, lambda: tnp.linspace(0, 1, -1), "linspace", "-1")
    _raises(ValueError, lambda: tnp.zeros((2, -1)), "negative", "(2, -1)")
    _raises(TypeError, lambda: tnp.ones((2, 1.5)), "shape")
    _raises(ValueError, lambda: tnp.tril(_t((3,))), "tril", "(3,)")
    _raises(ValueError, lambda: tnp.triu(_t(())), "triu", "()")


def test_truth_value_and_scalar_conversion() -> None:
    _raises(ValueError, lambda: bool(_t((2,))), "ambiguous", "(2,)")
    _raises(ValueError, lambda: float(_t((2, 2))), "(2, 2)")
    _raises(TypeError, lambda: len(_t(())), "0-d")
    _raises(TypeError, lambda: range(10)[_t((1,))], "float32")
    assert bool(_t((1,))) is True
    assert int(to_tensor(np.array([7], np.int32))) == 7


def test_jax_errors_names_each_conversion_of_a_traced_value() -> None:
    """`tg.errors` holds jax.errors' names, and each conversion of a traced value raises the one JAX raises, so
    `except jax.errors.X` ports by spelling: bool -> TracerBoolConversionError, int and an index ->
    TracerIntegerConversionError, np.asarray -> TracerArrayConversionError, a traced mask as an index ->
    NonConcreteBooleanIndexError (an IndexError too); all ConcretizationTypeErrors (TypeErrors), float too."""
    E = tg.errors
    x = tnp.arange(4.0)
    cases = [
        (lambda v: tnp.where(v.sum() > 0, v, -v) if v.sum() > 0 else v, E.TracerBoolConversionError),
        (lambda v: v[int(v.sum().astype(tnp.int32)) % 4], E.TracerIntegerConversionError),
        (lambda v: [1, 2, 3, 4, 5, 6, 7][v.sum().astype(tnp.int32)], E.TracerIntegerConversionError),
        (lambda v: v * np.asarray(v).sum(), E.TracerArrayConversionError),
        (lambda v: v[v > 1].sum(), E.NonConcreteBooleanIndexError),
        (lambda v: v * float(v.sum()), E.ConcretizationTypeError),
    ]
    for fn, err in cases:
        with pytest.raises(err, match="not known while tracing") as info:
            tg.jit(fn)(x)
        assert isinstance(info.value, TypeError) and isinstance(info.value, E.ConcretizationTypeError)
        assert E.ConcretizationTypeError is tg.ConcretizationError
    with pytest.raises(IndexError):
        tg.jit(lambda v: v[v > 1].sum())(x)
    assert issubclass(E.UnexpectedTracerError, Exception)
    # concrete values convert as before
    assert bool(x.sum() > 0) and int(x[3]) == 3 and [0, 1, 2, 3][x.astype(tnp.int32)[2]] == 2
    np.testing.assert_array_equal(np.asarray(x), np.arange(4.0))
    np.testing.assert_array_equal(x[x > 1].numpy(), [2.0, 3.0])


def test_an_allocation_past_the_hosts_memory_is_a_memory_error_naming_the_device_and_size_and_the_next_works():
    # numpy's words named a uint8 array of the buffer's size plus one cache line ('Unable to allocate 64.0 GiB for an
    # array with shape (68719476800,) and data type uint8'), nothing the user made
    one = tg.Tensor(np.ones(1, np.float32), device="CPU")
    with pytest.raises(MemoryError, match=r"^CPU(:0)? is out of memory: a buffer of 512\.0 TiB \(562949953421312 B\)"):
        (tnp.broadcast_to(one, (1 << 47,)) + 1).block_until_ready()   # (past any address space a process has)
    np.testing.assert_array_equal(np.asarray(one * 3), [3.0])

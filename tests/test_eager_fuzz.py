"""Random eager sessions against numpy: a few named arrays updated step by step with Python constants (lifted into
kernel arguments, one schedule for every value: 0.0, -0.0, 1.0 and others), old values kept alive and read later
(siblings computed in the same schedule), partial reads (`float(x[i])`, a row), graphs left lazy across many steps
(each step's template found by its description). Every value read must be numpy's."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp

_CONSTS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.25, -7.5]
_ACTIONS = st.one_of(
    st.tuples(st.just("axpy"), st.integers(0, 2), st.integers(0, 2), st.sampled_from(_CONSTS)),
    st.tuples(st.just("sin"), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("keep"), st.integers(0, 2)),
    st.tuples(st.just("read_kept"),),
    st.tuples(st.just("read"), st.integers(0, 2)),
    st.tuples(st.just("read_elem"), st.integers(0, 2), st.integers(0, 3)),
    st.tuples(st.just("normalise"), st.integers(0, 2)),
    st.tuples(st.just("roll_set"), st.integers(0, 2), st.integers(0, 3), st.sampled_from(_CONSTS)),
    st.tuples(st.just("call"), st.integers(0, 2), st.integers(0, 2), st.sampled_from(_CONSTS), st.booleans()),
    st.tuples(st.just("scale"), st.integers(0, 2), st.sampled_from(_CONSTS)),
    st.tuples(st.just("xpay"), st.integers(0, 2), st.integers(0, 2), st.sampled_from(_CONSTS)),
)


def _scaled(a: tg.Tensor, b: tg.Tensor, c: float) -> tg.Tensor:
    # a function whose argument `b` nothing reads: its eager graph (a call) has an input more than its inlined form,
    # which must not share the schedule (and program) of that form's own graph, `a * c` ("scale"): one input fewer
    return _SCALED.setdefault(repr(c), tg.function(lambda a, b: a * c))(a, b)   # (repr: -0.0 is not 0.0)


_SCALED: dict[str, object] = {}


@settings(max_examples=30)
@given(actions=st.lists(_ACTIONS, min_size=1, max_size=25), seed=st.integers(0, 2**16))
def test_random_eager_sessions_compute_numpys_values(actions: list[tuple], seed: int) -> None:
    rng = np.random.default_rng(seed)
    ref = [rng.standard_normal(4).astype(np.float32) for _ in range(3)]
    ts = [tg.asarray(r) for r in ref]
    kept: list[tuple[tg.Tensor, np.ndarray]] = []
    for act in actions:
        kind = act[0]
        if kind == "axpy":   # x_i = x_i * c + x_j
            _, i, j, c = act
            ts[i], ref[i] = ts[i] * c + ts[j], (ref[i] * np.float32(c) + ref[j]).astype(np.float32)
        elif kind == "sin":
            _, i, j = act
            ts[i], ref[i] = tnp.sin(ts[j]) + ts[i] * 0.5, (np.sin(ref[j]) + ref[i] * np.float32(0.5)).astype(np.float32)
        elif kind == "keep":
            kept.append((ts[act[1]], ref[act[1]].copy()))
        elif kind == "read_kept" and kept:
            t, r = kept.pop(0)
            np.testing.assert_allclose(t.numpy(), r, rtol=1e-5, atol=1e-6)
        elif kind == "read":
            np.testing.assert_allclose(ts[act[1]].numpy(), ref[act[1]], rtol=1e-5, atol=1e-6)
        elif kind == "read_elem":
            _, i, k = act
            got = float(ts[i][k])
            assert np.isclose(got, ref[i][k], rtol=1e-5, atol=1e-6) and np.signbit(got) == np.signbit(ref[i][k]) or \
                ref[i][k] == 0 or np.isnan(ref[i][k]) and np.isnan(got), (got, ref[i][k])
        elif kind == "normalise":   # a row reduction with a lifted constant inside
            i = act[1]
            ts[i] = ts[i] / (tnp.abs(ts[i]).sum() + 1.5)
            ref[i] = (ref[i] / (np.abs(ref[i]).sum() + np.float32(1.5))).astype(np.float32)
        elif kind == "call":   # x_i = f(x_i, x_j) reading only x_i, or its jvp's tangent along x_j
            _, i, j, c, tangent = act
            if tangent:
                ts[i] = tg.jvp(functools.partial(_scaled, c=c), (ts[i], ts[j]), (ts[j], ts[i]))[1]
                ref[i] = (ref[j] * np.float32(c)).astype(np.float32)
            else:
                ts[i], ref[i] = _scaled(ts[i], ts[j], c), (ref[i] * np.float32(c)).astype(np.float32)
        elif kind == "xpay":   # x_i = x_i + x_j * c: the constant the third argument, after two buffers
            _, i, j, c = act
            ts[i], ref[i] = ts[i] + ts[j] * c, (ref[i] + ref[j] * np.float32(c)).astype(np.float32)
        elif kind == "scale":   # the graph of "call" as it is once inlined
            _, i, c = act
            ts[i], ref[i] = ts[i] * c, (ref[i] * np.float32(c)).astype(np.float32)
        elif kind == "roll_set":
            _, i, k, c = act
            ts[i] = tnp.roll(ts[i], 1).at[k].set(c)
            ref[i] = np.roll(ref[i], 1)
            ref[i][k] = c
    for t, r in zip(ts, ref, strict=True):
        np.testing.assert_allclose(t.numpy(), r, rtol=1e-4, atol=1e-5)
        assert (np.signbit(t.numpy()) == np.signbit(r))[r == 0].all()
    for t, r in kept:
        np.testing.assert_allclose(t.numpy(), r, rtol=1e-4, atol=1e-5)


_STEP = st.one_of(
    st.tuples(st.sampled_from(["add", "mul", "sub", "max", "where"]), st.sampled_from(["x", "y", "x2", "row", "col"])),
    st.tuples(st.sampled_from(["addc", "mulc", "rsubc"]), st.sampled_from(_CONSTS + [0.25, 4.0])),
    st.tuples(st.sampled_from(["neg", "exp", "abs", "T", "reshape"]),),
)


@settings(max_examples=40)
@given(steps=st.lists(_STEP, min_size=1, max_size=5), reduce=st.sampled_from([None, 0, 1, "all"]),
       seed=st.integers(0, 2**16), dtype=st.sampled_from([np.float32, np.int32]))
def test_op_chains_repeated_with_new_operands_and_constants(steps: list[tuple], reduce: object, seed: int,
                                                            dtype: type) -> None:
    """A chain of eager ops (each reading buffers, broadcasts of them, Python constants and the op before it) run
    three times: the second and third find their program by the chain's signature (`eager.op_signature`), with new
    arrays in every operand and the third with other constants: each must read its own operands, in their roles, and
    its own constants (a program's inputs in another order than the first run's would swap x and y)."""
    rng = np.random.default_rng(seed)
    for run in range(3):
        data = {k: (rng.integers(-4, 5, s) if dtype == np.int32 else rng.standard_normal(s)).astype(dtype)
                for k, s in (("x", (3, 4)), ("y", (3, 4)), ("row", (4,)), ("col", (3, 1)))}
        ts = {k: tg.asarray(v) for k, v in data.items()}
        ts["x2"], data["x2"] = ts["x"], data["x"]   # the same buffer read twice
        t, r = ts["x"] * 1, data["x"]               # (a chain from an op: not a plain buffer)
        shift = 0.0 if run < 2 else 1.0             # the third run: other constants
        for op, *args in steps:
            if t.ndim != 2 or t.shape != (3, 4) and op in ("add", "mul", "sub", "max", "where"):
                continue
            if op in ("add", "mul", "sub", "max"):
                o, ro = ts[args[0]], data[args[0]]
                t, r = {"add": (t + o, r + ro), "mul": (t * o, r * ro), "sub": (t - o, r - ro),
                        "max": (tnp.maximum(t, o), np.maximum(r, ro))}[op]
            elif op == "where":
                o, ro = ts[args[0]], data[args[0]]
                t, r = tnp.where(t > o, t, o), np.where(r > ro, r, ro)
            elif op in ("addc", "mulc", "rsubc"):
                c = args[0] + shift
                if dtype == np.int32:
                    c = int(c)
                t, r = {"addc": (t + c, r + dtype(c)), "mulc": (t * c, r * dtype(c)),
                        "rsubc": (c - t, dtype(c) - r)}[op]
            elif op == "neg":
                t, r = -t, -r
            elif op == "abs":
                t, r = tnp.abs(t), np.abs(r)
            elif op == "exp" and dtype == np.float32:
                t, r = tnp.exp(tnp.minimum(t, 10.0)), np.exp(np.minimum(r, dtype(10.0)))
            elif op == "T":
                t, r = t.T, r.T
            elif op == "reshape":
                t, r = t.reshape(-1), r.reshape(-1)
                t, r = t.reshape(3, 4) if t.size == 12 and run % 2 else t.reshape(4, 3), \
                    r.reshape(3, 4) if r.size == 12 and run % 2 else r.reshape(4, 3)
            r = r.astype(dtype)
        if reduce == "all":
            t, r = t.sum(), r.sum(dtype=dtype)
        elif reduce is not None and t.ndim == 2:
            t, r = t.sum(reduce), r.sum(reduce, dtype=dtype)
        np.testing.assert_allclose(t.numpy(), r, rtol=2e-5, atol=1e-5)


_SIDED = {   # ops whose operands' order matters, with a Python constant on either side
    "sub": (lambda a, b: a - b, np.subtract), "div": (lambda a, b: a / b, np.divide),
    "lt": (lambda a, b: a < b, np.less), "le": (lambda a, b: a <= b, np.less_equal),
    "pow": (lambda a, b: a ** b, np.power), "mod": (lambda a, b: a % b, np.mod),
    "arctan2": (tnp.arctan2, np.arctan2), "where": (lambda a, b: tnp.where(a > 1.5, a, b) if isinstance(a, tg.Tensor)
                                                    else tnp.where(b > 1.5, a, b),
                                                    lambda a, b: np.where((a if isinstance(a, np.ndarray) else b) > 1.5,
                                                                          a, b)),
}


@pytest.mark.parametrize("c", [2.5, 1.0, 3], ids=["lifted", "literal", "int"])
@pytest.mark.parametrize("name", _SIDED)
def test_an_op_with_a_constant_on_either_side_is_two_programs(name: str, c: float) -> None:
    """`x - c` and `c - x` read the same buffer and constant in another order: two programs, whichever ran first (the
    per-op dispatch keyed both alike and ran `x / 3.0`'s kernel for `3.0 / x`)."""
    fn, ref = _SIDED[name]
    x = np.array([0.5, 1.0, 2.0, 4.0], np.float32)
    for _ in range(2):   # the second time each comes from the dispatch cache
        for got, want in ((fn(tg.asarray(x), c), ref(x, np.float32(c))), (fn(c, tg.asarray(x)), ref(np.float32(c), x))):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)

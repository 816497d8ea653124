"""Random chains of elementwise, movement and reduce ops over special values (+-0, +-inf, NaN, tiny, huge), run
eagerly, under jit and under vmap, against numpy: values, NaN positions, infinities and the sign of zero.

Such a fuzz found that concatenate and short cumsums turned -0.0 into 0.0 and that a sum of zeros came out -0.0
(LLVM's nsz on reduce updates). The sign of a zero is not checked after a sum, mean or max/min: numpy's own sign for
a sum of -0.0s depends on its code path (a 1-d sum keeps -0.0, axis 1 of a 2-d array gives 0.0), and the sign of
max/min over mixed zeros is unspecified."""
from collections.abc import Callable

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 3.0, -2.5, 1e-30, 65504.0]

# (name, numpy, tgfx); each takes the value and the second operand (same shape or a scalar)
UNARY = [("neg", np.negative, tnp.negative), ("abs", np.abs, tnp.abs), ("exp", np.exp, tnp.exp),
         ("sqrt", np.sqrt, tnp.sqrt), ("tanh", np.tanh, tnp.tanh), ("floor", np.floor, tnp.floor),
         ("sign", np.sign, tnp.sign), ("recip", np.reciprocal, tnp.reciprocal), ("trunc", np.trunc, tnp.trunc),
         ("round", np.round, tnp.round)]
# (no sin, cos or log1p: after an exp their arguments are large or near a pole, where one ulp of input moves the
# result by more than any tolerance; that is the problem's conditioning, not an error of either side)
BINARY = [("add", np.add, tnp.add), ("sub", np.subtract, tnp.subtract), ("mul", np.multiply, tnp.multiply),
          ("div", np.divide, tnp.divide), ("max", np.maximum, tnp.maximum), ("min", np.minimum, tnp.minimum),
          ("copysign", np.copysign, tnp.copysign), ("fmod", np.fmod, tnp.fmod),
          ("where", lambda a, b: np.where(a > b, a, b), lambda a, b: tnp.where(a > b, a, b))]
TRANSCENDENTAL = {"exp", "sqrt", "tanh", "recip", "div", "fmod"}
# steps with a jump or a pole: after a rounded function, one ulp there may move the result by a whole step (trunc of
# tanh(8.5), 0.99999994 or 1.0 depending on its last bit) or across a NaN (sqrt(tanh(x) - 1))
DISCONTINUOUS = {"floor", "trunc", "round", "sign", "sqrt", "recip", "div", "fmod", "copysign", "where", "max", "min"}
# ... and the sign of max/min over mixed zeros is unspecified (numpy's minimum(0.0, -0.0) is 0.0, IEEE's -0.0), which a
# division or copysign afterwards turns into an infinity's or a value's sign
SIGN_OF_ZERO = {"recip", "div", "fmod", "copysign"}
SIGN_FREE = {"sum", "mean", "max", "min", "cumsum"}


def _movement(kind: int, k: int) -> tuple[str, Callable, Callable]:
    ax = lambda x: k % x.ndim   # noqa: E731 - an axis of whatever the value's rank is by then
    return [
        ("flip", lambda x: np.flip(x, ax(x)), lambda x: tnp.flip(x, ax(x))),
        ("roll", lambda x: np.roll(x, k - 3, ax(x)), lambda x: tnp.roll(x, k - 3, ax(x))),
        ("cat", lambda x: np.concatenate([x, -x], ax(x)), lambda x: tnp.concatenate([x, -x], ax(x))),
        ("stack", lambda x: np.stack([x, 2 * x], ax(x)), lambda x: tnp.stack([x, 2 * x], ax(x))),
        ("pad", lambda x: np.pad(x, [(k % 2, 1)] * x.ndim), lambda x: tnp.pad(x, [(k % 2, 1)] * x.ndim)),
        ("step", lambda x: x[(slice(None),) * ax(x) + (slice(None, None, -2),)],
         lambda x: x[(slice(None),) * ax(x) + (slice(None, None, -2),)]),
        ("cumsum", lambda x: np.cumsum(x, ax(x)), lambda x: tnp.cumsum(x, ax(x))),
        ("T", lambda x: x.T, lambda x: x.T),
    ][kind]


def _reduce(kind: int, k: int) -> tuple[str, Callable, Callable]:
    name, f, g = [("sum", np.sum, tnp.sum), ("max", np.max, tnp.max), ("min", np.min, tnp.min),
                  ("mean", np.mean, tnp.mean), ("argmax", np.argmax, tnp.argmax), ("prod", np.prod, tnp.prod)][kind]
    return name, lambda x: f(x, axis=k % x.ndim), lambda x: g(x, axis=k % x.ndim)


step = st.one_of(
    st.tuples(st.just("u"), st.integers(0, len(UNARY) - 1)),
    st.tuples(st.just("b"), st.integers(0, len(BINARY) - 1)),
    st.tuples(st.just("m"), st.integers(0, 7), st.integers(0, 6)),
)


def _program(steps: list[tuple], last: tuple | None) -> list[tuple[str, str, Callable, Callable]]:
    prog = []
    for s in steps:
        if s[0] == "u":
            prog.append(("u", *UNARY[s[1]]))
        elif s[0] == "b":
            prog.append(("b", *BINARY[s[1]]))
        else:
            prog.append(("m", *_movement(s[1], s[2])))
    if last is not None:
        prog.append(("m", *_reduce(*last)))
    return prog


def _run(prog: list, x: object, y: object, which: int) -> object:
    for kind, _, *fns in prog:
        f = fns[which]
        if kind == "b":
            x = f(x, y if y.shape == x.shape else y.reshape(-1)[0])
        else:
            x = f(x)
        if which == 0:
            x = np.asarray(x, dtype=np.float32) if np.asarray(x).dtype.kind == "f" else np.asarray(x)
    return x


def _check(got: np.ndarray, want: np.ndarray, names: list[str], what: str) -> None:
    assert got.shape == want.shape, (what, names, got.shape, want.shape)
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=f"{what} {names}")
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{what} {names}: NaNs")
    inf = np.isinf(g) | np.isinf(w)
    np.testing.assert_array_equal(g[inf], w[inf], err_msg=f"{what} {names}: infinities")
    loose = sum(n in TRANSCENDENTAL | {"sum", "mean", "cumsum", "prod"} for n in names) >= 2
    fin = ~np.isnan(w) & ~inf
    np.testing.assert_allclose(g[fin], w[fin], rtol=2e-3 if loose else 2e-5, atol=1e-6, err_msg=f"{what} {names}")
    if not SIGN_FREE & set(names):
        zero = fin & (w == 0) & (g == 0)
        np.testing.assert_array_equal(np.signbit(g[zero]), np.signbit(w[zero]), err_msg=f"{what} {names}: sign of 0")


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), steps=st.lists(step, min_size=1, max_size=4),
       last=st.none() | st.tuples(st.integers(0, 5), st.integers(0, 6)), seed=st.integers(0, 2 ** 16),
       special=st.booleans())
def test_random_programs_match_numpy_eagerly_under_jit_and_vmap(shape: list[int], steps: list[tuple],
                                                                 last: tuple | None, seed: int, special: bool) -> None:
    rng = np.random.default_rng(seed)
    draw = (lambda s: rng.choice(np.array(SPECIAL, np.float32), s)) if special else \
        (lambda s: (rng.standard_normal(s) * 3).astype(np.float32))
    x, y = draw(tuple(shape)), draw(tuple(shape))
    prog = _program(steps, last)
    names = [p[1] for p in prog]
    assume(not any(n in TRANSCENDENTAL and DISCONTINUOUS & set(names[i + 1:]) or
                   n in ("max", "min") and SIGN_OF_ZERO & set(names[i + 1:]) for i, n in enumerate(names)))
    # a product in another order can meet tiny * tiny = 0 before inf (0 * inf: NaN, where numpy's order gives inf):
    # reductions are reassociated (vector lanes), as XLA's are
    assume(not (special and "prod" in names))
    with np.errstate(all="ignore"):
        want = _run(prog, x, y, 0)
        wants = np.stack([np.asarray(_run(prog, v, y, 0)) for v in (x, -x, 2 * x)])
    _check(np.asarray(_run(prog, tnp.asarray(x), tnp.asarray(y), 1)), np.asarray(want), names, "eager")
    jitted = tg.jit(lambda a, b: _run(prog, a, b, 1))
    _check(np.asarray(jitted(tnp.asarray(x), tnp.asarray(y))), np.asarray(want), names, "jit")
    batched = tg.vmap(lambda a: _run(prog, a, tnp.asarray(y), 1))
    _check(np.asarray(batched(tnp.asarray(np.stack([x, -x, 2 * x])))), wants, names, "vmap")


def test_padded_stack_cumsum_sum_with_a_scalar_argument() -> None:
    # (found by the fuzz above) the short cumsum's reduce loop was emitted twice, once hoisted out of the sum's loop;
    # the second reused the first's splat of the loop index, so its triangle mask read the first loop's last index
    x = np.random.default_rng(0).standard_normal((1, 3, 3)).astype(np.float32)

    def f(xp: object, x: object, c: object) -> object:
        p = xp.pad(x, [(0, 1)] * 3)
        return xp.sum(xp.cumsum(xp.stack([p, c * p], 0), 2), axis=1)

    got = tg.jit(lambda x, c: f(tnp, x, c))(tnp.asarray(x), tnp.asarray(np.float32(2.0)))
    np.testing.assert_allclose(got.numpy(), f(np, x, np.float32(2.0)), rtol=1e-5, atol=1e-6)


def test_padded_transposed_cumsum_mean_under_vmap() -> None:
    # (found by the fuzz above) a reduce emitted twice, once hoisted out of the vmapped loop and once inside it: the
    # first emission's read looked up the second's register (KeyError), as a REDUCE had one register for all emissions
    x = np.random.default_rng(0).standard_normal((1, 3, 3)).astype(np.float32)

    def g(xp: object, x: object) -> object:
        return xp.mean(xp.cumsum(xp.pad(x, [(0, 1)] * 3).T, 1), axis=1)

    xb = np.stack([x, -x, 2 * x])
    got = tg.vmap(lambda a: g(tnp, a))(tnp.asarray(xb)).numpy()
    np.testing.assert_allclose(got, np.stack([g(np, v) for v in xb]), rtol=1e-5, atol=1e-6)

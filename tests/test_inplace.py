"""A loop carry updated by `lax.dynamic_update_slice` at a traced start (a KV cache, a buffer filled row by row) is
updated in place: the step's kernel stores the window alone into the carry's one buffer, instead of copying the
whole carry into the other buffer of the pair (tgfx/lowering/inplace.py, control.py's `_in_place_carries`).

What is counted: the elements each kernel of a loop step stores (the schedule's LINEAR), never a clock."""
from __future__ import annotations

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import lax
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp, prod
from tgfx.lowering.inline import inline
from tgfx.lowering.inplace import window_update
from tgfx.lowering.schedule import schedule

T, D = 16, 8


def rand(*shape: int, seed: int = 0) -> tg.Tensor:
    return tnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def step_stores(*outs: tg.Tensor) -> list[int]:
    """The elements each kernel of a loop's steps stores (after the loop's top label, not its initial values), per
    kernel, in schedule order."""
    linear, _ = schedule(list(inline(UOp(Ops.SINK, None, tuple(o.uop for o in outs))).src))
    out, stepping = [], False
    for call in linear.src:
        body = call.src[0]
        if body.op is Ops.BLOCK or body.op is Ops.LABEL:
            stepping = body.op is Ops.LABEL or (stepping and body.arg[0])
        elif body.op is Ops.SINK and stepping:
            out.append(sum(prod(st.src[1].shape) for st in body.src))
    return out


def fill_rows(xs: tg.Tensor) -> tuple[tg.Tensor, tg.Tensor]:
    """A scan writing row t of a (T, D) carry each step, and reading the new carry (the sum so far)."""
    def step(c: tuple, x: tg.Tensor) -> tuple:
        buf, t = c
        buf = lax.dynamic_update_slice(buf, (x * 2.0)[None], (t, 0))
        return (buf, t + 1), buf.sum()
    (buf, _), sums = lax.scan(step, (tnp.zeros((T, D)), tnp.int32(0)), xs)
    return buf, sums


def test_a_window_update_kernel_is_recognised_and_rewritten() -> None:
    x, u, t = rand(T, D), rand(1, D, seed=1), tnp.int32(3)
    for a in (x, u, t):
        a.realize()
    y = lax.dynamic_update_slice(x, u * 2.0, (t, 0))
    linear, _ = schedule([y.uop])
    (call,) = [c for c in linear.src if c.src[0].op is Ops.SINK]
    wu = window_update(call.src[0])
    assert wu is not None and wu.out != wu.base
    (st,) = wu.ast.src
    assert st.src[0].op is Ops.DYNAMIC_SHRINK and st.src[1].shape == (1, D)   # the update alone, into the window
    # not an update of an input: a where over a computed value, or an update that reads the buffer it changes
    assert window_update(schedule([lax.dynamic_update_slice(x * 3.0, u, (t, 0)).uop])[0].src[-1].src[0]) is None
    z = lax.dynamic_update_slice(x, lax.dynamic_slice(x, (t + 1, 0), (1, D)), (t, 0))
    assert all(window_update(c.src[0]) is None for c in schedule([z.uop])[0].src if c.src[0].op is Ops.SINK)
    np.testing.assert_array_equal(z.numpy()[3], x.numpy()[4])


def test_a_scan_fills_its_carry_in_place() -> None:
    xs = rand(T, D)
    buf, sums = fill_rows(xs)
    stores = step_stores(buf, sums)
    assert stores and max(stores) < T * D, stores   # no step copies the whole carry
    ref = 2 * xs.numpy()
    np.testing.assert_allclose(buf.numpy(), ref, rtol=1e-6)
    np.testing.assert_allclose(sums.numpy(), np.cumsum(ref.sum(1)), rtol=1e-5, atol=1e-5)
    jitted = tg.jit(fill_rows)
    for _ in range(2):   # the replay starts from the initial zeros again
        np.testing.assert_allclose(jitted(xs)[0].numpy(), ref, rtol=1e-6)


@pytest.mark.parametrize("n", [5, 6])
def test_a_fori_loop_with_a_device_trip_count_updates_in_place(n: int) -> None:
    # an odd or even number of steps, known only on the device: the carry has one buffer, nothing copies it back
    x = rand(T, D)

    def f(x: tg.Tensor, hi: tg.Tensor) -> tg.Tensor:
        return lax.fori_loop(0, hi, lambda i, b: lax.dynamic_update_slice(b, b[i][None] * 0.0 + i, (i, 0)), x)
    got = tg.jit(f)(x, tnp.int32(n)).numpy()
    ref = x.numpy().copy()
    ref[:n] = np.arange(n, dtype=np.float32)[:, None]
    np.testing.assert_array_equal(got, ref)


def test_the_old_value_read_after_the_update_keeps_two_buffers() -> None:
    # the step returns a sum of the old carry too, and passes the old carry through as a second carry: both must
    # see the value from before the update
    xs = rand(T, D)

    def step(c: tuple, x: tg.Tensor) -> tuple:
        buf, prev, t = c
        new = lax.dynamic_update_slice(buf, x[None], (t, 0))
        return (new, buf, t + 1), buf.sum()
    (buf, prev, _), old_sums = lax.scan(step, (tnp.zeros((T, D)), tnp.zeros((T, D)), tnp.int32(0)), xs)
    x = xs.numpy()
    np.testing.assert_array_equal(buf.numpy(), x)
    np.testing.assert_array_equal(prev.numpy(), np.concatenate([x[:-1], np.zeros((1, D), np.float32)]))
    np.testing.assert_allclose(old_sums.numpy(), np.concatenate([[0], np.cumsum(x.sum(1))[:-1]]), rtol=1e-5,
                               atol=1e-5)


def test_gradient_through_an_in_place_scan() -> None:
    xs, w = rand(T, D), rand(D, seed=2)

    def loss(xs: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
        buf, sums = fill_rows(xs * w)
        return (buf ** 2).sum() + (sums * tnp.arange(T)).sum()

    def unrolled(xs: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
        rows = 2.0 * xs * w
        return (rows ** 2).sum() + (tnp.cumsum(rows.sum(1)) * tnp.arange(T)).sum()
    for a, b in zip(tg.grad(loss, argnums=(0, 1))(xs, w), tg.grad(unrolled, argnums=(0, 1))(xs, w), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-4)
    _, tangent = tg.jvp(lambda xs: fill_rows(xs)[0], (xs,), (tnp.ones((T, D)),))
    np.testing.assert_allclose(tangent.numpy(), np.full((T, D), 2.0, np.float32))


def test_vmap_of_an_in_place_scan() -> None:
    # unbatched starts: still one window a step (of every example); batched starts: each example its own row
    xs = rand(3, T, D)
    buf, _ = tg.vmap(fill_rows)(xs)
    assert max(step_stores(buf)) < 3 * T * D
    np.testing.assert_allclose(buf.numpy(), 2 * xs.numpy(), rtol=1e-6)

    def put(x: tg.Tensor, t: tg.Tensor) -> tg.Tensor:
        return lax.dynamic_update_slice(tnp.zeros((T, D)), x[None], (t, 0))
    ts = tnp.asarray([0, 7, T + 4], dtype=tnp.int32)   # the last clamped to the final row
    got = tg.vmap(put)(xs[:, 0], ts).numpy()
    ref = np.zeros((3, T, D), np.float32)
    for b, t in enumerate([0, 7, T - 1]):
        ref[b, t] = xs.numpy()[b, 0]
    np.testing.assert_array_equal(got, ref)


def test_at_set_and_add_of_a_traced_row_in_a_fori_loop_are_in_place() -> None:
    # the JAX idiom for filling arrays in a loop: x.at[i].set(...) reading x[i], and a column add
    x0 = rand(T, D)

    def f(x: tg.Tensor) -> tuple:
        def body(i: tg.Tensor, c: tuple) -> tuple:
            a, b = c
            return a.at[i].set(a[i] * 2.0 + i), b.at[:, i % D].add(1.0)
        return lax.fori_loop(0, T, body, (x, tnp.zeros((T, D))))
    a, b = f(x0)
    assert max(step_stores(a, b)) <= T, step_stores(a, b)
    np.testing.assert_allclose(a.numpy(), x0.numpy() * 2 + np.arange(T, dtype=np.float32)[:, None], rtol=1e-6)
    np.testing.assert_array_equal(b.numpy(), np.full((T, D), T // D, np.float32))


@pytest.mark.parametrize("op", ["set", "add", "multiply"])
@pytest.mark.parametrize("mode", [None, "clip"])
def test_at_a_traced_position_matches_numpy_in_and_out_of_range(op: str, mode: str | None) -> None:
    # negatives count from the end; out of range is dropped (JAX's default) or clamped (mode="clip")
    x, v = rand(4, 3), rand(3, seed=1)

    @tg.jit
    def update(x: tg.Tensor, i: tg.Tensor, v: tg.Tensor) -> tg.Tensor:
        return x.at[:, i].add(2.0, mode=mode) if op == "add" else getattr(x.at[i], op)(v, mode=mode)
    for i in (-5, -4, -1, 0, 2, 3, 4, 9):
        ref = x.numpy().copy()
        n = 3 if op == "add" else 4
        j = i + n if i < 0 else i
        if mode == "clip":
            j = min(max(j, 0), n - 1)
        if 0 <= j < n:
            if op == "add":
                ref[:, j] += 2.0
            elif op == "set":
                ref[j] = v.numpy()
            else:
                ref[j] *= v.numpy()
        np.testing.assert_allclose(update(x, tnp.int32(i), v).numpy(), ref, rtol=1e-6, err_msg=f"i={i}")


def test_reading_and_updating_a_traced_row_differentiates_and_vmaps() -> None:
    x, v = rand(T, D), rand(D, seed=3)

    def f(x: tg.Tensor, v: tg.Tensor, i: tg.Tensor) -> tg.Tensor:
        y = x.at[i].add(v * x[i])
        return (y ** 2).sum() + y[i + 1].sum()

    def ref(x: np.ndarray, v: np.ndarray, i: int) -> float:
        y = x.copy()
        y[i] += v * x[i]
        return float((y ** 2).sum() + y[i + 1].sum())
    i = tnp.int32(5)
    gx, gv = tg.grad(f, argnums=(0, 1))(x, v, i)
    eps, xn, vn = 1e-2, x.numpy().astype(np.float64), v.numpy().astype(np.float64)
    for (r, c) in [(5, 0), (6, 3), (0, 1)]:
        d = np.zeros_like(xn)
        d[r, c] = eps
        fd = (ref(xn + d, vn, 5) - ref(xn - d, vn, 5)) / (2 * eps)
        np.testing.assert_allclose(gx.numpy()[r, c], fd, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(gv.numpy(), 2 * (xn[5] + vn * xn[5]) * xn[5], rtol=1e-4)
    ts = tnp.asarray([0, 3, -2], dtype=tnp.int32)
    got = tg.vmap(f, in_axes=(None, None, 0))(x, v, ts).numpy()
    np.testing.assert_allclose(got, [ref(xn, vn, t) for t in (0, 3, T - 2)], rtol=1e-4)


def test_a_donated_buffer_updated_at_a_traced_row_is_written_in_place() -> None:
    # a replay buffer: `buf.at[i].set(x)` jitted with the buffer donated stores the row alone into the buffer's
    # memory (the result takes it over), instead of copying the other rows
    set_row = tg.jit(lambda buf, i, x: buf.at[i].set(x), donate_argnums=0)
    add_row = tg.jit(lambda buf, i, x: buf.at[i].add(x * 2.0), donate_argnums=0)
    buf, ref = tnp.asarray(np.zeros((T, D), np.float32)), np.zeros((T, D), np.float32)
    for step in range(6):
        x = rand(D, seed=step)
        buf = set_row(buf, tnp.int32(step * 5 % T), x)
        ref[step * 5 % T] = x.numpy()
        buf = add_row(buf, tnp.int32(step - 3), x)    # negatives count from the end
        ref[step - 3] += 2 * x.numpy()
    np.testing.assert_allclose(buf.numpy(), ref, rtol=1e-6)
    for f in (set_row, add_row):
        ((prog, _),) = f._cache.values()
        assert [sum(prod(st.src[1].shape) for st in c.src[0].src) for c in prog.calls if c.src[0].op is Ops.SINK] \
            == [D]
    # not donated: the result is a new buffer, the argument keeps its values
    keep = tg.jit(lambda buf, i, x: buf.at[i].set(x))
    old = buf.numpy()
    new = keep(buf, tnp.int32(0), tnp.zeros(D))
    np.testing.assert_array_equal(buf.numpy(), old)
    assert new.numpy()[0].sum() == 0 and (new.numpy()[1:] == old[1:]).all()


def test_an_elementwise_loop_whose_carry_reads_no_element() -> None:
    # a loop kernel (tgfx/lowering/loop_kernel.py) whose new carry is a scanned scalar broadcast reads no element of
    # anything, but its initial value and the stacked outputs (here the old carry, and with grad the saved carries) do:
    # the linearizer placed the carries before the element loop, where their initial values cannot be read
    x0, xs = rand(4), tnp.arange(3, dtype=tnp.float32)

    def f(x: tg.Tensor) -> tuple:
        def step(c: tuple, s: tg.Tensor) -> tuple:
            a, b = c
            return (tnp.zeros(4) + s, b + 1.0), a
        return lax.scan(step, (x, x), xs)
    (a, b), olds = f(x0)
    np.testing.assert_array_equal(a.numpy(), np.full(4, 2.0, np.float32))
    np.testing.assert_allclose(b.numpy(), x0.numpy() + 3, rtol=1e-6)
    np.testing.assert_array_equal(olds.numpy(), np.stack([x0.numpy(), np.zeros(4), np.ones(4)]).astype(np.float32))
    g = tg.grad(lambda x: f(x)[0][0].sum() + f(x)[1].sum())(x0)   # the forward saves the carries for the backward
    np.testing.assert_array_equal(g.numpy(), np.ones(4, np.float32))


def test_the_same_starts_of_another_view_are_another_window() -> None:
    # the update reads the carry at the update's own starts, but of the carry viewed in another shape: (3, 4, 2) read
    # as (4, 3, 2), the window at (1, 0, i) is elements 6 + i, 8 + i, where the store writes 8 + i, 10 + i. Stored in
    # place, element 8 + i was overwritten before it was read
    c0 = np.arange(24, dtype=np.float32).reshape(3, 4, 2)

    def body(i: tg.Tensor, c: tg.Tensor) -> tg.Tensor:
        return lax.dynamic_update_slice(c, lax.dynamic_slice(c.reshape(4, 3, 2), (1, 0, i), (1, 2, 1)) + 1.0, (1, 0, i))
    ref = c0.copy()
    for i in range(2):
        ref[1:2, 0:2, i:i + 1] = ref.reshape(4, 3, 2)[1:2, 0:2, i:i + 1] + 1
    np.testing.assert_array_equal(lax.fori_loop(0, 2, body, tnp.asarray(c0)).numpy(), ref)
    np.testing.assert_array_equal(tg.jit(lambda c: lax.fori_loop(0, 2, body, c))(tnp.asarray(c0)).numpy(), ref)


def test_jvp_of_a_loop_after_a_cond_with_a_weight() -> None:
    # forward mode transposes the pullback, where a while loop's `Jᵀ u` is a placeholder never run: the cond's
    # backward, transposed, passed it to its branches as an operand, and computed the gradient of the weight s, which
    # reads it (the pullback of c * s is bilinear in the cotangent and c)
    a, s = rand(2, 5), tnp.float32(3.0)

    def f(a: tg.Tensor) -> tg.Tensor:
        def step(c: tg.Tensor, x: tg.Tensor) -> tuple:
            c = lax.cond(x % 2 == 0, lambda c: c * s, lambda c: c.at[x].multiply(2.0), c)
            c = lax.while_loop(lambda st: st[1] < x, lambda st: (st[0] * 0.5, st[1] + 1), (c, tnp.int32(0)))[0]
            return c, c[0]
        return lax.scan(step, a, tnp.arange(3, dtype=tnp.int32))
    t = rand(2, 5, seed=1)
    (c, ys), (dc, dys) = tg.jvp(f, (a,), (t,))
    # step 0: * 3; step 1: row 1 * 2, then * 0.5; step 2: * 3, then * 0.25
    scale = np.array([[3 * 0.5 * 3 * 0.25], [3 * 2 * 0.5 * 3 * 0.25]], np.float32)
    np.testing.assert_allclose(c.numpy(), a.numpy() * scale, rtol=1e-6)
    np.testing.assert_allclose(dc.numpy(), t.numpy() * scale, rtol=1e-6)

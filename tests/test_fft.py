"""tnp.fft against numpy.fft: values (sizes including primes and 1, every norm, n / s / axis / axes), dtypes,
gradients against finite differences (and jax where installed), and kernel counts."""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.counters import counters
from tgfx.devices.target import host_target

try:
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = jnp = None

EPS32 = float(np.finfo(np.float32).eps)
SIZES = [1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 31, 32, 48, 64, 67, 97, 100, 128, 210, 256]


def cvalues(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def assert_fft_close(got: tg.Tensor, want: np.ndarray, n: int) -> None:
    """float32 rounding grows with the log of the length: each of ~log2 n stages adds a few ulps of the largest
    value (the error of an FFT is O(eps log n) relative to the norm of the input)."""
    g = got.numpy()
    want = np.asarray(want)
    assert g.dtype == (np.complex64 if want.dtype.kind == "c" else np.float32), g.dtype
    assert g.shape == want.shape
    scale = max(float(np.abs(want).max(initial=0.0)), 1e-30)
    tol = 8 * EPS32 * math.log2(n + 1) * scale + 1e-30
    err = float(np.abs(g - want).max(initial=0.0))
    assert err <= tol, (err, tol)


@settings(max_examples=20)
@given(n=st.sampled_from(SIZES), batch=st.integers(1, 3), axis=st.sampled_from([0, -1]),
       norm=st.sampled_from([None, "backward", "ortho", "forward"]), inverse=st.booleans(), seed=st.integers(0, 99))
def test_fft_ifft_match_numpy(n: int, batch: int, axis: int, norm: str | None, inverse: bool, seed: int) -> None:
    x = cvalues((n, batch) if axis == 0 else (batch, n), seed)
    fn = "ifft" if inverse else "fft"
    assert_fft_close(getattr(tnp.fft, fn)(tnp.asarray(x), axis=axis, norm=norm),
                     getattr(np.fft, fn)(x, axis=axis, norm=norm), n)


@settings(max_examples=15)
@given(n=st.sampled_from(SIZES), m=st.sampled_from([1, 2, 5, 9, 16]), seed=st.integers(0, 99))
def test_n_crops_or_pads(n: int, m: int, seed: int) -> None:
    x = cvalues((2, m), seed)
    assert_fft_close(tnp.fft.fft(tnp.asarray(x), n), np.fft.fft(x, n), n)
    assert_fft_close(tnp.fft.ifft(tnp.asarray(x), n, norm="ortho"), np.fft.ifft(x, n, norm="ortho"), n)


@settings(max_examples=15)
@given(n=st.sampled_from(SIZES), norm=st.sampled_from([None, "ortho", "forward"]), seed=st.integers(0, 99),
       dtype=st.sampled_from([np.float32, np.int32]))
def test_rfft_irfft_match_numpy(n: int, norm: str | None, seed: int, dtype: type) -> None:
    x = (np.random.default_rng(seed).standard_normal((3, n)) * 4).astype(dtype)
    spectrum = tnp.fft.rfft(tnp.asarray(x), norm=norm)
    assert_fft_close(spectrum, np.fft.rfft(x, norm=norm).astype(np.complex64), n)
    want = np.fft.irfft(np.fft.rfft(x, norm=norm), n, norm=norm).astype(np.float32)
    assert_fft_close(tnp.fft.irfft(spectrum, n, norm=norm), want, n)
    # irfft of arbitrary (not Hermitian) input, default and odd lengths: the DC and Nyquist imaginary parts ignored
    c = cvalues((2, n // 2 + 1), seed)
    for m in (None, n, n + 1):
        if m is None and n // 2 + 1 < 2:
            continue
        want = np.fft.irfft(c, m, norm=norm).astype(np.float32)
        assert_fft_close(tnp.fft.irfft(tnp.asarray(c), m, norm=norm), want, want.shape[-1])


@pytest.mark.parametrize("shape,s,axes", [((4, 6), None, None), ((3, 5, 4), (4, 6), (1, 2)), ((3, 5, 4), None, (0, 2)),
                                          ((2, 7, 3), (5, 2), (1, 0)), ((8,), None, None), ((1, 2), None, None)])
def test_nd_transforms_match_numpy(shape: tuple, s: tuple | None, axes: tuple | None) -> None:
    x = cvalues(shape, 1)
    r = x.real.copy()
    n = math.prod(shape) + math.prod(s or (1,))
    for fn, arg in (("fftn", x), ("ifftn", x), ("rfftn", r)):
        want = getattr(np.fft, fn)(arg, s=s, axes=axes)
        assert_fft_close(getattr(tnp.fft, fn)(tnp.asarray(arg), s=s, axes=axes), want.astype(np.complex64), n)
    spectrum = np.fft.rfftn(r, s=s, axes=axes)
    want = np.fft.irfftn(spectrum, s=s, axes=axes).astype(np.float32)
    assert_fft_close(tnp.fft.irfftn(tnp.asarray(spectrum.astype(np.complex64)), s=s, axes=axes), want, n)
    if len(shape) >= 2 and s is None and axes is None:
        assert_fft_close(tnp.fft.fft2(tnp.asarray(x)), np.fft.fft2(x), n)
        assert_fft_close(tnp.fft.irfft2(tnp.fft.rfft2(tnp.asarray(r))), r, n)


@pytest.mark.parametrize("n", [1, 2, 5, 6, 11])
def test_frequencies_and_shifts(n: int) -> None:
    for d in (1.0, 0.25):
        np.testing.assert_allclose(tnp.fft.fftfreq(n, d).numpy(), np.fft.fftfreq(n, d), rtol=1e-6)
        np.testing.assert_allclose(tnp.fft.rfftfreq(n, d).numpy(), np.fft.rfftfreq(n, d), rtol=1e-6)
    assert tnp.fft.fftfreq(n).dtype == tnp.float32
    x = np.arange(n * 3, dtype=np.int32).reshape(n, 3)
    for axes in (None, 0, (1,), (0, 1)):
        np.testing.assert_array_equal(tnp.fft.fftshift(tnp.asarray(x), axes).numpy(), np.fft.fftshift(x, axes))
        np.testing.assert_array_equal(tnp.fft.ifftshift(tnp.asarray(x), axes).numpy(), np.fft.ifftshift(x, axes))


def test_errors() -> None:
    with pytest.raises(ValueError, match="invalid number of data points"):
        tnp.fft.fft(tnp.ones(4), 0)
    with pytest.raises(ValueError, match="norm"):
        tnp.fft.fft(tnp.ones(4), norm="unitary")
    with pytest.raises(TypeError, match="real"):
        tnp.fft.rfft(tnp.ones(4) * 1j)
    with pytest.raises(ValueError, match="0-d"):
        tnp.fft.fft(tnp.asarray(1.0))


# ---- gradients: each transform inside a real loss, against central differences in float64 ----
W = cvalues((6,), 7)
GRAD_CASES: list[tuple[str, Callable, Callable, bool]] = [
    # (name, tgfx loss, numpy loss, complex input)
    ("fft", lambda x: tnp.real(tnp.sum(tnp.fft.fft(x) * tnp.asarray(W))),
     lambda x: np.real(np.sum(np.fft.fft(x) * W)), True),
    ("fft_abs", lambda x: tnp.sum(tnp.abs(tnp.fft.fft(x, 8)) ** 2), lambda x: np.sum(np.abs(np.fft.fft(x, 8)) ** 2),
     True),
    ("ifft_ortho", lambda x: tnp.imag(tnp.sum(tnp.fft.ifft(x, norm="ortho") * tnp.asarray(W))),
     lambda x: np.imag(np.sum(np.fft.ifft(x, norm="ortho") * W)), True),
    ("fft_prime_bluestein", lambda x: tnp.sum(tnp.abs(tnp.fft.fft(x, 67))),
     lambda x: np.sum(np.abs(np.fft.fft(x, 67))), True),
    ("rfft", lambda x: tnp.sum(tnp.abs(tnp.fft.rfft(x)) ** 1.5), lambda x: np.sum(np.abs(np.fft.rfft(x)) ** 1.5),
     False),
    ("irfft", lambda x: tnp.sum(tnp.fft.irfft(x, 9) * tnp.arange(9.0)),
     lambda x: np.sum(np.fft.irfft(x, 9) * np.arange(9.0)), True),
    ("fftn", lambda x: tnp.real(tnp.sum(tnp.fft.fftn(x.reshape(2, 3)) ** 2)),
     lambda x: np.real(np.sum(np.fft.fftn(x.reshape(2, 3)) ** 2)), True),
    ("rfftn_irfftn", lambda x: tnp.sum(tnp.fft.irfftn(tnp.fft.rfftn(x.reshape(2, 3)) * 1j, s=(2, 4)) ** 2),
     lambda x: np.sum(np.fft.irfftn(np.fft.rfftn(x.reshape(2, 3)) * 1j, s=(2, 4), axes=(0, 1)) ** 2), False),
]


def fd_grad(f: Callable[[np.ndarray], float], x: np.ndarray, is_complex: bool, h: float = 1e-4) -> np.ndarray:
    """df/dx - i df/dy (JAX's convention) by central differences in float64."""
    x = x.astype(np.complex128 if is_complex else np.float64)
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        for unit, sign in ((1.0, 1.0), (1j, -1j)) if is_complex else ((1.0, 1.0),):
            e = np.zeros_like(x)
            e[i] = unit * h
            out[i] += sign * (f(x + e) - f(x - e)) / (2 * h)
    return out


@pytest.mark.parametrize("name,f,fn,is_complex", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_grad_matches_finite_differences(name: str, f: Callable, fn: Callable, is_complex: bool) -> None:
    x = cvalues((6,), 2) if is_complex else np.random.default_rng(2).standard_normal(6).astype(np.float32)
    got = tg.grad(f)(tnp.asarray(x)).numpy()
    want = fd_grad(fn, x, is_complex)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * float(np.abs(want).max()))


@pytest.mark.skipif(jax is None, reason="jax is not installed")
def test_grad_matches_jax() -> None:
    x = cvalues((6,), 2)
    for n in (6, 13):
        got = tg.grad(lambda x, n=n: tnp.sum(tnp.abs(tnp.fft.fft(x, n)) ** 3))(tnp.asarray(x)).numpy()
        want = jax.grad(lambda x, n=n: jnp.sum(jnp.abs(jnp.fft.fft(x, n)) ** 3))(jnp.asarray(x))
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-4, atol=1e-3)


# ---- how they run ----
def test_transforms_are_traceable_without_captured_buffers() -> None:
    """Every table is a constant the trace makes itself: a function (allow_implicit=False) traces an fft of any
    length."""
    f = tg.function(lambda x: tnp.fft.irfft(tnp.fft.rfft(x), x.shape[-1]))
    x = np.random.default_rng(0).standard_normal((2, 67)).astype(np.float32)
    assert_fft_close(f(tnp.asarray(x)), x, 67)


def stages(n: int) -> int:
    """Kernels of a transform of length n on this host's target: one a stage (`_radices`)."""
    import tgfx.numpy.fft as F
    return len(F._radices(n, host_target().lanes(4)))


@pytest.mark.parametrize("fn,n,most", [
    ("fft", 16, lambda: stages(16) + 2), ("fft", 64, lambda: stages(64) + 2), ("fft", 1024, lambda: stages(1024) + 2),
    ("fft", 97, lambda: 3 * stages(256) + 2), ("rfft", 256, lambda: stages(128) + 2),
    ("rfft", 1024, lambda: stages(512) + 2)])
def test_kernel_counts(fn: str, n: int, most: Callable[[], int]) -> None:
    """A stage is one kernel (its twiddles folded into its tables, constants) and a transform along the last axis
    a transpose in and one out: with 16 lanes, n = 1024 is four stages (4, 4, 8, 8), 6 kernels, 7 before; a prime
    length three power-of-two transforms (Bluestein: 11, 12 before). rfft of n is a complex transform of n / 2
    (512: 8, 8, 8) and a post-processing pass that writes the result (5, 7 before)."""
    x = tnp.asarray(cvalues((4, n)) if fn == "fft" else cvalues((4, n)).real).realize()
    f = tg.jit(getattr(tnp.fft, fn))
    f(x).block_until_ready()
    counters.reset()
    f(x).block_until_ready()
    assert counters.kernel_count <= most()


@pytest.mark.parametrize("fn,shape,most", [
    ("fft2", (128, 128), lambda: 2 * stages(128) + 2), ("ifft2", (4, 32, 32), lambda: 2 * stages(32) + 2),
    ("rfft2", (128, 128), lambda: stages(64) + stages(128) + 3),
    ("irfft2", (128, 65), lambda: stages(64) + stages(128) + 3),
    ("rfft2", (4, 32, 32), lambda: stages(16) + stages(32) + 3), ("fft_rows", (64, 64), lambda: stages(64) + 2),
    ("fft_columns", (64, 64), lambda: stages(64) + 1)])
def test_2d_kernel_counts(fn: str, shape: tuple, most: Callable[[], int]) -> None:
    """Each stage of a transform is one kernel, its twiddles folded into its matrices; an axis with others after it
    is transformed where it lies (the first stage reads the input's pairs, the last stage's planes are read by the
    result's consumer), the last axis through one transpose in and one out. fft2 of 128 x 128 (with 16 lanes, 4, 4,
    8 along each axis): 6 stages and 2 transposes, 10 kernels before. rfft2: the paired transform of 64 (8, 8), a
    transpose, the columns' 3 stages and the post-processing pass: 8, 9 before (and 6x the time: its post-processing
    was a gather). irfft2 the reverse. fft along the columns of 64 x 64 (8, 8): 2 stages and the interleaving of the
    result; along the rows a transpose in and out."""
    x = cvalues(shape) if fn in ("fft2", "ifft2", "irfft2", "fft_rows", "fft_columns") else cvalues(shape).real
    special = {"fft_rows": lambda m, a: m.fft(a, axis=-1), "fft_columns": lambda m, a: m.fft(a, axis=0),
               "irfft2": lambda m, a: m.irfft2(a, s=(shape[0], 2 * (shape[1] - 1)))}
    f = (lambda a: special[fn](tnp.fft, a)) if fn in special else getattr(tnp.fft, fn)
    jitted = tg.jit(f)
    xt = tnp.asarray(x).realize()
    jitted(xt).block_until_ready()
    counters.reset()
    got = jitted(xt).block_until_ready()
    assert counters.kernel_count <= most()
    want = special[fn](np.fft, x) if fn in special else getattr(np.fft, fn)(x)
    assert_fft_close(got, want.astype(np.complex64 if want.dtype.kind == "c" else np.float32), math.prod(shape))


@pytest.mark.parametrize("shape,axes,s", [((3, 16, 12), (-2, -1), None), ((3, 16, 12), (0, 2), (5, 10)),
                                          ((2, 6, 8, 10), (1, 2, 3), None), ((2, 6, 8, 10), (3, 1), (6, 4)),
                                          ((5, 6), (1, 0), (4, 8))])
def test_batched_and_nd_real_transforms_match_numpy(shape: tuple, axes: tuple, s: tuple | None) -> None:
    """rfftn's post-processing reads each term's partner at the negated frequency of every other axis (in pieces
    along them), irfftn's pre-processing the same before its transforms: batches, three axes, crops and pads, axes
    out of order, and irfftn of input that is not Hermitian (its DC and Nyquist planes' imaginary parts ignored,
    as numpy's)."""
    r = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    n = math.prod(shape)
    spectrum = np.fft.rfftn(r, s=s, axes=axes)
    assert_fft_close(tnp.fft.rfftn(tnp.asarray(r), s=s, axes=axes), spectrum.astype(np.complex64), n)
    for norm in (None, "ortho"):
        c = cvalues(spectrum.shape, 4)
        want = np.fft.irfftn(c, s=s, axes=axes, norm=norm).astype(np.float32)
        assert_fft_close(tnp.fft.irfftn(tnp.asarray(c), s=s, axes=axes, norm=norm), want, n)


def test_transforms_of_views_and_of_computed_values() -> None:
    """A transform along an axis with others after it reads a stored input's pairs where they lie; a view in another
    layout (a transpose) or a computed value is stored first, in its own kernel: the values are the same."""
    x = cvalues((12, 16), 5)
    xt = tnp.asarray(np.ascontiguousarray(x.T))
    assert_fft_close(tnp.fft.fft(xt.T, axis=0), np.fft.fft(x, axis=0), 12)
    assert_fft_close(tnp.fft.fft(tnp.asarray(x) * 2j, axis=0), np.fft.fft(x * 2j, axis=0), 12)
    assert_fft_close(tg.jit(lambda a: tnp.fft.ifft2(a.T))(xt), np.fft.ifft2(x), 16)


def test_spectral_step_matches_numpy() -> None:
    """One explicit step of a pseudo-spectral vorticity solver (velocity from the stream function, the nonlinear
    term in real space, dealiased): an rfft2 feeding products feeding irfft2s, inside jit."""
    n = 32
    k = np.fft.fftfreq(n, 1.0 / n).astype(np.float32)
    kx, ky = k[None, :n // 2 + 1] * np.ones((n, 1), np.float32), k[:, None] * np.ones((1, n // 2 + 1), np.float32)
    k2 = kx * kx + ky * ky
    k2inv = np.where(k2 == 0, 0, 1 / np.where(k2 == 0, 1, k2)).astype(np.float32)
    keep = ((np.abs(kx) < n / 3) & (np.abs(ky) < n / 3)).astype(np.float32)

    def step(fft, w, kx, ky, k2inv, keep):
        wh = fft.rfft2(w)
        u, v = fft.irfft2(1j * ky * wh * k2inv, s=(n, n)), fft.irfft2(-1j * kx * wh * k2inv, s=(n, n))
        wx, wy = fft.irfft2(1j * kx * wh, s=(n, n)), fft.irfft2(1j * ky * wh, s=(n, n))
        return fft.irfft2(wh - 0.01 * fft.rfft2(u * wx + v * wy) * keep, s=(n, n))
    w = np.random.default_rng(6).standard_normal((n, n)).astype(np.float32)
    got = tg.jit(lambda *a: step(tnp.fft, *a))(*(tnp.asarray(a) for a in (w, kx, ky, k2inv, keep)))
    want = step(np.fft, w.astype(np.float64), kx, ky, k2inv, keep)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_radices_follow_the_targets_vectors() -> None:
    """A stage costs a pass plus its arithmetic, which weighs more against the pass the narrower the vectors: with
    16 lanes 256 is 4, 8, 8 (16, 16 ran 147 us for a 256 x 256 column transform, 4, 8, 8 110); with 8, 4, 4, 4, 4.
    Up to 16 one direct stage; a prime up to 64 is one stage of its own; beyond, Bluestein's (None)."""
    import tgfx.numpy.fft as F
    assert F._radices(256, 16) == (4, 8, 8) and F._radices(256, 8) == (4, 4, 4, 4)
    assert F._radices(128, 16) == (4, 4, 8) and F._radices(64, 16) == (8, 8) and F._radices(16, 16) == (16,)
    assert F._radices(74, 16) == (2, 37) and F._radices(97, 16) is None


def test_rfftn_post_processes_in_a_kernel_of_its_own() -> None:
    """rfft2 of 64 x 64: the post-processing of the paired transform is one kernel of its own, after the columns'
    last stage, writing the (64, 33) result's pairs; no stage computes it. Fused into the columns' first stage, it
    was computed through that stage's (r, m c) view of its operand: a scalar loop of masked reads (11 of the
    transform's 20 us on one core)."""
    import re
    from collections import Counter

    from tgfx.devices import get_device
    dev = get_device("CPU:0")   # (the CPU's kernels, whatever the default device: the input is put there)
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    f = tg.jit(tnp.fft.rfft2)
    assert_fft_close(f(tg.device_put(x, dev.name)), np.fft.rfft2(x).astype(np.complex64), 64 * 64)
    dev.synchronize()
    dev.clear_profile()
    f(tg.device_put(x, dev.name)).block_until_ready()
    dev.synchronize()
    names = Counter(e.name for e in dev.profile_events)
    assert sum(n for name, n in names.items() if re.fullmatch(r"E_64_33_2_[0-9a-f]{8}", name)) == 1, names
    assert not any("33" in name for name in names if name.startswith("r_")), names


@pytest.mark.x64
def test_complex128_in_x64_mode() -> None:
    x = np.random.default_rng(0).standard_normal((2, 12)) + 1j * np.random.default_rng(1).standard_normal((2, 12))
    got = tnp.fft.fft(tnp.asarray(x))
    assert got.dtype == tnp.complex128
    np.testing.assert_allclose(got.numpy(), np.fft.fft(x), rtol=1e-12, atol=1e-12)
    assert tnp.fft.rfft(tnp.asarray(x.real)).dtype == tnp.complex128


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("n", [None, 7, 8])
def test_hfft_ihfft_match_numpy(norm, n) -> None:
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((2, 5)) + 1j * rng.standard_normal((2, 5))).astype(np.complex64)
    r = rng.standard_normal((2, 6)).astype(np.float32)
    np.testing.assert_allclose(tnp.fft.hfft(x, n=n, norm=norm).numpy(), np.fft.hfft(x, n=n, norm=norm),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tnp.fft.ihfft(r, n=n, norm=norm).numpy(), np.fft.ihfft(r, n=n, norm=norm),
                               rtol=1e-4, atol=1e-5)


def test_quarter_turn_twiddles_are_exact() -> None:
    # cos(pi/2) in float32 is -4.4e-8: from exact tables a 4-point transform is exact, as numpy's
    np.testing.assert_array_equal(tnp.fft.fft(tnp.ones(4)).numpy(), np.array([4, 0, 0, 0], np.complex64))
    x = np.arange(4.0, dtype=np.float32)
    np.testing.assert_array_equal(tnp.fft.fft(x).numpy(), np.fft.fft(x).astype(np.complex64))
    np.testing.assert_array_equal(tnp.fft.ifft(tnp.fft.fft(x)).numpy(), x.astype(np.complex64))


def test_an_eager_transform_replays_its_traced_body(monkeypatch: pytest.MonkeyPatch) -> None:
    # fft's stages are a cached traced function: a second eager transform of the same signature builds no stage
    import tgfx.numpy.fft as F
    built = []
    stage_block = F._stage_block
    monkeypatch.setattr(F, "_stage_block", lambda *a: (built.append(1), stage_block(*a))[1])
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.standard_normal((4, 256)).astype(np.float32)
        np.testing.assert_allclose(tnp.fft.rfft(tg.asarray(x)).numpy(), np.fft.rfft(x), rtol=1e-4, atol=1e-3)
    assert len(built) == len(F._radices(128, host_target().lanes(4)))   # the stages of one transform

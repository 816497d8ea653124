"""Every op follows its input's device: a computation on Tensors on "CPU:1" runs there, with no "operands are on
different devices" from inside tgfx and no result on the default device. The tables, masks and index arrays library
code makes from host data, and the constants it starts loops from, go where the input is (JAX's uncommitted
arrays). Each call is compared with the same call on "CPU:0": the same values, bit for bit (the same kernels)."""
import inspect
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tgfx as tg
import tgfx.nn as nn
import tgfx.numpy as tnp
import tgfx.scipy.linalg as sla
import tgfx.scipy.special as sps
from tgfx.ir.ops import Ops

_RNG = np.random.default_rng(0)
_MATRIX = (_RNG.standard_normal((8, 8)) + 3 * np.eye(8)).astype(np.float32)
_VECTOR = _RNG.standard_normal(16).astype(np.float32)
_SPD = (_MATRIX @ _MATRIX.T + 8 * np.eye(8)).astype(np.float32)

_MODULES = {"tnp": tnp, "linalg": tnp.linalg, "fft": tnp.fft, "special": sps, "sla": sla, "nn": nn}
# index arrays of a shape (numpy's *_indices_from take only the shape of their argument: made on the default device,
# as JAX's)
_SHAPE_ONLY = {"tnp.tril_indices_from", "tnp.triu_indices_from", "tnp.diag_indices_from"}


def _public(prefix: str, module: Any) -> list[str]:
    return [f"{prefix}.{name}" for name in sorted(dir(module)) if not name.startswith("_")
            and callable(fn := getattr(module, name)) and not inspect.isclass(fn) and not inspect.ismodule(fn)]


def _function(name: str) -> Callable:
    prefix, attr = name.split(".", 1)
    return getattr(_MODULES[prefix], attr)


def _on(device: str, *arrays: np.ndarray) -> list[tg.Tensor]:
    return [tg.device_put(a, device) for a in arrays]


def _leaves(fn: Callable, args: list[tg.Tensor]) -> list[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tg.tree.leaves(fn(*args))


def _on_one_device(leaves: list[Any], device: str) -> bool:
    """Whether every result is a graph (traced functions' bodies included) of buffers and parameters on `device` and
    constants, with no loop, branch, call or copy: one that computes on `device` alone by construction (a loop's
    operands, placed when it is scheduled, are not)."""
    stack, seen = [leaf.uop for leaf in leaves if isinstance(leaf, tg.Tensor)], set()
    while stack:
        u = stack.pop()
        if u in seen:
            continue
        seen.add(u)
        if u.op in (Ops.BUFFER, Ops.PARAM) and u.device != device or u.op in _OPAQUE:
            return False
        stack.extend(u.src)
    return True


_OPAQUE = {Ops.LOOP, Ops.SWITCH, Ops.CALL, Ops.COPY, Ops.MULTI, Ops.CALLBACK}


def _check_follows(name: str, fn: Callable, *arrays: np.ndarray, lazy: bool = False) -> bool:
    """fn on `arrays` on CPU:1: no error where it takes them on CPU:0, every result on CPU:1 with CPU:0's values.
    False where it does not take them. With `lazy`, results that compute on CPU:1 alone by construction are not
    computed (`_on_one_device`: a suite's worth of kernels compiled for nothing)."""
    try:
        want = _leaves(fn, _on("CPU:0", *arrays))
        if not lazy:
            tg.block_until_ready(want)
    except Exception:   # (a function of other arguments: a shape, a key, two arrays)
        return False
    got = _leaves(fn, _on("CPU:1", *arrays))   # (raises what it raises)
    assert len(got) == len(want), name
    for k, g in enumerate(got):
        if isinstance(g, tg.Tensor) and name not in _SHAPE_ONLY:
            assert g.device == "CPU:1", f"{name}: result {k} on {g.device}"
    if lazy and _on_one_device(got, "CPU:1"):
        return True
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if isinstance(g, tg.Tensor):
            np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=f"{name}: result {k}")
    return True


# (checked by `_CASES` below, eagerly and under jit, on the inputs they take)
_IN_CASES = {"linalg.det", "linalg.slogdet", "linalg.inv", "linalg.cholesky", "linalg.eigh", "linalg.svd", "linalg.qr",
             "linalg.pinv", "linalg.matrix_rank", "linalg.cond", "sla.lu", "sla.expm", "sla.polar", "sla.toeplitz",
             "sla.companion", "special.exp1"}


@pytest.mark.parametrize("name", [n for p, m in _MODULES.items() for n in _public(p, m) if n not in _IN_CASES])
def test_public_functions_of_one_array_follow_it(name: str) -> None:
    """Each public function of one float array, on a vector, or a matrix where it takes no vector (each compile
    once: the matrix's 2-d paths, an FFT's and a cumsum's, are `_CASES`)."""
    fn = _function(name)
    if not _check_follows(name, fn, _VECTOR, lazy=True):
        _check_follows(name, fn, _MATRIX, lazy=True)


def _complex(x: tg.Tensor) -> tg.Tensor:
    return x.astype(tnp.complex64) * (1 - 0.5j)


# the transforms whose tables, lengths and paths differ (Bluestein's for 17 and 13, the paired real ones for even
# lengths, odd real lengths as complex), and linalg's decompositions on square matrices: eagerly and under jit
_CASES: dict[str, tuple[Callable, tuple[np.ndarray, ...]]] = {
    "fft_n": (lambda x: tnp.fft.fft(_complex(x), n=12), (_VECTOR,)),
    "fft_prime": (lambda x: tnp.fft.fft(_complex(x), n=17), (_VECTOR,)),
    "ifft_axis0": (lambda x: tnp.fft.ifft(_complex(x), axis=0), (_MATRIX,)),
    "fft2": (lambda x: tnp.fft.fft2(_complex(x), axes=(0, 1)), (_MATRIX,)),
    "fftn_s": (lambda x: tnp.fft.fftn(_complex(x), s=(6, 13)), (_MATRIX,)),
    "rfft_n": (lambda x: tnp.fft.rfft(x, n=10), (_VECTOR,)),
    "rfft_odd": (lambda x: tnp.fft.rfft(x, n=15), (_VECTOR,)),
    "rfftn_axes": (lambda x: tnp.fft.rfftn(x, axes=(1, 0)), (_MATRIX,)),
    "irfft_n": (lambda x: tnp.fft.irfft(_complex(x), n=14), (_VECTOR,)),
    "irfft2": (lambda x: tnp.fft.irfft2(_complex(x), s=(8, 6)), (_MATRIX,)),
    "hfft_n": (lambda x: tnp.fft.hfft(_complex(x), n=9), (_VECTOR,)),
    "ihfft": (lambda x: tnp.fft.ihfft(x), (_VECTOR,)),
    "det": (tnp.linalg.det, (_MATRIX,)),
    "slogdet": (tnp.linalg.slogdet, (_MATRIX,)),
    "inv": (tnp.linalg.inv, (_MATRIX,)),
    "solve": (tnp.linalg.solve, (_MATRIX, _MATRIX[:, :3])),
    "cholesky": (tnp.linalg.cholesky, (_SPD,)),
    "eigh": (tnp.linalg.eigh, (_SPD,)),
    "svd": (tnp.linalg.svd, (_MATRIX,)),
    "qr": (tnp.linalg.qr, (_MATRIX,)),
    "pinv": (tnp.linalg.pinv, (_MATRIX,)),
    "matrix_rank": (tnp.linalg.matrix_rank, (_MATRIX,)),
    "cond": (tnp.linalg.cond, (_MATRIX,)),
    "lu": (sla.lu, (_MATRIX,)),
    "expm": (lambda x: sla.expm(x * 0.1), (_MATRIX,)),
    "polar": (sla.polar, (_MATRIX,)),
    "toeplitz": (sla.toeplitz, (_VECTOR,)),
    "companion": (sla.companion, (_VECTOR,)),
    "exp1": (lambda x: sps.exp1(tnp.abs(x) + 0.5), (_VECTOR,)),
    "cumsum_loop": (lambda x: tnp.cumsum(x), (_MATRIX,)),
    "polyint": (tnp.polyint, (_VECTOR,)),
    "take_host_index": (lambda x: x[np.array([3, 1, 2])], (_MATRIX,)),
    "where_host_mask": (lambda x: tnp.where(np.eye(8, dtype=bool), x, 0.0), (_MATRIX,)),
    "scan_from_constant": (lambda x: tg.lax.scan(lambda c, r: (c + r, c * r), tnp.zeros(8), x), (_MATRIX,)),
}


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("case", list(_CASES))
def test_transforms_and_decompositions_follow_their_input(case: str, jit: bool) -> None:
    fn, arrays = _CASES[case]
    _check_follows(case, tg.jit(fn) if jit else fn, *arrays)


@pytest.mark.parametrize("case", ["rfft_n", "exp1", "cumsum_loop"])
def test_jitted_function_runs_on_its_inputs_device(case: str) -> None:
    """A jitted function of a Tensor on CPU:1 runs its kernels on CPU:1, none on CPU:0: an FFT's twiddle tables are
    uploaded there, and the constants its loops start from (exp1's continued fraction, a long cumsum's scan) are
    computed there (they were computed on CPU:0 and copied)."""
    from tgfx.devices import get_device
    fn, arrays = _CASES[case]
    f = tg.jit(fn)
    (x,) = _on("CPU:1", *arrays)
    f(x).block_until_ready()
    cpu0, cpu1 = get_device("CPU:0"), get_device("CPU:1")
    for d in (cpu0, cpu1):
        d.synchronize()
        d.clear_profile()
    f(x).block_until_ready()
    for d in (cpu0, cpu1):
        d.synchronize()
    assert cpu1.profile_events and not cpu0.profile_events, (cpu0.profile_events, cpu1.profile_events)


def test_a_weakly_typed_value_moved_to_another_device_stays_weakly_typed() -> None:
    """`x.to(device)` keeps a Python scalar's weak type, as `jax.device_put` does: moved next to a float16 array it
    still takes that array's type (what the loops and functions that move constants beside their operands rely on)."""
    from tgfx.tensor import is_weak
    w = tg.asarray(2.0)
    moved = w.to("CPU:1")
    assert is_weak(w) and is_weak(moved) and moved.device == "CPU:1"
    half = tnp.asarray(np.ones(3, np.float16), device="CPU:1")
    assert (moved * half).dtype == tnp.float16
    assert not is_weak(tg.asarray(np.float32(2.0)).to("CPU:1"))


def test_jitted_calls_python_scalars_and_host_arrays_go_to_their_tensors_device() -> None:
    """A jitted step on CPU:1 given a Python float (a learning rate), a Python int and a numpy array runs there: the
    host data goes where its Tensor arguments lie, as JAX's uncommitted arguments do (it was put on the default
    device, and the step raised "operands are on different devices"). Each new scalar value is neither a retrace nor
    a buffer on CPU:0: the replay writes it into the program's own buffers, on CPU:1."""
    f = tg.jit(lambda x, lr, i, a: x * lr + i - a)
    x0 = _RNG.standard_normal(8).astype(np.float32)
    a = np.arange(8, dtype=np.float32)
    x = tnp.asarray(x0, device="CPU:1")
    for step in range(4):
        lr = 0.5 + step
        out = f(x, lr, step, a)
        assert out.device == "CPU:1"
        np.testing.assert_array_equal(out.numpy(), x0 * np.float32(lr) + np.float32(step) - a)
    g = tg.jit(lambda x, lr: x * lr)
    for step in range(4):
        out = g(x, 0.25 * step)
        assert out.device == "CPU:1"
        np.testing.assert_array_equal(out.numpy(), x0 * np.float32(0.25 * step))
    assert f.trace_count == g.trace_count == 1
    ((prog, _, host, _),) = list(g._fast.values())
    assert host == "CPU:1" and prog.scalar_args and {s.device for s in prog.scalar_args.values()} == {"CPU:1"}
    np.testing.assert_array_equal(g(tnp.asarray(x0), 2.0).numpy(), x0 * 2)   # on the default device: its own trace
    assert g.trace_count == 2

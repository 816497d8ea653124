"""A table of the API calls a differential run against jax 0.10.2 found answering otherwise (values, dtypes, shapes,
raising where JAX answers) or that sit where the two are easy to part: padding modes, split and roll argument
forms, reshape order, joins' dtype, `.at[]` modes with repeated and out-of-range indices, take modes, reductions with
where/initial/dtype, stable and descending sorts, searchsorted methods, einsum forms, nn and special functions with
where=, lax windows, slices and clamps.

Each case is one function of a namespace (`xp.np`, `xp.lax`, `xp.nn`, `xp.special`, `xp.arr`); its reference is
numpy/scipy where they define the answer, else the values JAX gave (written out). With jax installed every case is
also run through jax itself and compared value for value, dtype for dtype."""
from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import scipy.special as ss
import scipy.stats as ss_stats

import tgfx as tg
import tgfx.numpy as tnp
import tgfx.scipy.special
import tgfx.scipy.stats

TG = SimpleNamespace(np=tnp, lax=tg.lax, nn=tg.nn, special=tgfx.scipy.special, stats=tgfx.scipy.stats, arr=tnp.asarray,
                     grad=tg.grad)

X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
I = np.array([[3, -1, 4, 1], [-5, 9, 2, -6], [5, 3, -5, 8]], np.int32)
W = np.array([[True, False, True, True], [False, False, False, False], [True, True, False, True]])
IDX = np.array([0, 2, 2, -1, 5], np.int32)
TIES = np.array([2.0, 1.0, 2.0, np.nan, 1.0, -0.0, 0.0, 2.0], np.float32)


def _ref(fn: Callable[[], Any], dtype: Any = None) -> Callable[[], Any]:
    return lambda: np.asarray(fn(), dtype) if dtype is not None else fn()


# (id, case(xp), reference() or None: numpy's answer, in the dtype JAX gives with x64 off)
CASES: list[tuple[str, Callable[[Any], Any], Callable[[], Any] | None]] = [
    # padding: every jnp.pad mode, widths past the axis length
    ("pad-constant-pairs", lambda xp: xp.np.pad(xp.arr(I), ((1, 2), (3, 0)), constant_values=((7, 8), (9, 6))),
     lambda: np.pad(I, ((1, 2), (3, 0)), constant_values=((7, 8), (9, 6)))),
    ("pad-linear-ramp", lambda xp: xp.np.pad(xp.arr(X), ((2, 1), (5, 2)), mode="linear_ramp", end_values=(1, -3)),
     lambda: np.pad(X, ((2, 1), (5, 2)), mode="linear_ramp", end_values=(1, -3))),
    ("pad-mean-stat-length", lambda xp: xp.np.pad(xp.arr(I), 3, mode="mean", stat_length=2),
     lambda: np.pad(I, 3, mode="mean", stat_length=2)),
    ("pad-median", lambda xp: xp.np.pad(xp.arr(X), (1, 4), mode="median"), lambda: np.pad(X, (1, 4), mode="median")),
    ("pad-minimum", lambda xp: xp.np.pad(xp.arr(I), ((0, 2), (1, 1)), mode="minimum"),
     lambda: np.pad(I, ((0, 2), (1, 1)), mode="minimum")),
    ("pad-reflect-odd", lambda xp: xp.np.pad(xp.arr(I), ((5, 4), (7, 2)), mode="reflect", reflect_type="odd"),
     lambda: np.pad(I, ((5, 4), (7, 2)), mode="reflect", reflect_type="odd")),
    ("pad-symmetric-odd", lambda xp: xp.np.pad(xp.arr(X), ((4, 5), (2, 9)), mode="symmetric", reflect_type="odd"),
     lambda: np.pad(X, ((4, 5), (2, 9)), mode="symmetric", reflect_type="odd")),
    ("pad-wrap-long", lambda xp: xp.np.pad(xp.arr(I), ((7, 1), (0, 9)), mode="wrap"),
     lambda: np.pad(I, ((7, 1), (0, 9)), mode="wrap")),
    # shapes
    ("reshape-F", lambda xp: xp.np.reshape(xp.arr(X), (2, -1), order="F"), lambda: np.reshape(X, (2, -1), order="F")),
    ("ravel-F", lambda xp: xp.np.ravel(xp.arr(I), order="F"), lambda: np.ravel(I, order="F")),
    ("split-indices", lambda xp: xp.np.split(xp.arr(X), [1, 1, 3], axis=1), lambda: np.split(X, [1, 1, 3], axis=1)),
    ("array_split-indices", lambda xp: xp.np.array_split(xp.arr(X), [2], axis=0),
     lambda: np.array_split(X, [2], axis=0)),
    ("array_split-uneven", lambda xp: xp.np.array_split(xp.arr(X), 3, axis=1), lambda: np.array_split(X, 3, axis=1)),
    ("roll-shifts-one-axis", lambda xp: xp.np.roll(xp.arr(I), (1, 2), 1), lambda: np.roll(I, (1, 2), 1)),
    ("roll-axis-twice", lambda xp: xp.np.roll(xp.arr(I), (1, -3), (0, 0)), lambda: np.roll(I, (1, -3), (0, 0))),
    ("concatenate-dtype", lambda xp: xp.np.concatenate([xp.arr(X), xp.arr(I)], axis=0, dtype=xp.np.int8),
     _ref(lambda: np.concatenate([X, I]).astype(np.int8))),
    ("stack-dtype", lambda xp: xp.np.stack([xp.arr(I), xp.arr(I)], axis=-1, dtype=xp.np.float16),
     _ref(lambda: np.stack([I, I], -1), np.float16)),
    ("rot90-negative-k", lambda xp: xp.np.rot90(xp.arr(I), -3, (1, 0)), lambda: np.rot90(I, -3, (1, 0))),
    ("tril-k", lambda xp: xp.np.tril(xp.arr(I), -1), lambda: np.tril(I, -1)),
    ("triu-k", lambda xp: xp.np.triu(xp.arr(X), 2), lambda: np.triu(X, 2)),
    ("moveaxis-pair", lambda xp: xp.np.moveaxis(xp.arr(X[None]), (0, 1), (-1, 0)),
     lambda: np.moveaxis(X[None], (0, 1), (-1, 0))),
    ("repeat-array", lambda xp: xp.np.repeat(xp.arr(I), xp.arr(np.array([2, 0, 1], np.int32)), axis=0,
                                             total_repeat_length=5),
     lambda: np.repeat(I, [2, 0, 3], axis=0)),   # (cut to 5, or the last row repeated)
    ("repeat-total-length-traced", lambda xp: xp.np.repeat(xp.arr(X), xp.arr(np.int32([1, 3, 0, 1])), axis=1,
                                                          total_repeat_length=4),
     lambda: np.repeat(X, [1, 3, 0, 0], axis=1)),
    # indexing and scatters
    ("getitem-mixed", lambda xp: xp.arr(X)[None, ::-2, np.array([3, 0, 3], np.int32)],
     lambda: X[None, ::-2, np.array([3, 0, 3])]),
    ("getitem-ellipsis-mask", lambda xp: xp.arr(I)[..., W[0]], lambda: I[..., W[0]]),
    ("at-add-repeated", lambda xp: xp.arr(X).at[IDX[:4]].add(1.5), lambda: _scatter_add(X, IDX[:4], 1.5)),
    ("at-mul-repeated", lambda xp: xp.arr(I).at[IDX[:4], 1].mul(3), lambda: _scatter_mul(I, IDX[:4], 3)),
    ("at-min-drop", lambda xp: xp.arr(I).at[:, IDX].min(-7, mode="drop"), lambda: _drop_min(I, IDX, -7)),
    ("at-get-fill", lambda xp: xp.arr(X).at[IDX, 0].get(mode="fill", fill_value=-1.0),
     _ref(lambda: np.where((IDX >= -3) & (IDX < 3), X[np.clip(IDX, -3, 2), 0], -1.0), np.float32)),
    ("at-set-clip", lambda xp: xp.arr(I).at[1, IDX].set(0, mode="clip"), lambda: _clip_set(I, IDX)),
    ("take-wrap", lambda xp: xp.np.take(xp.arr(X), xp.arr(IDX + 7), axis=1, mode="wrap"),
     lambda: np.take(X, IDX + 7, axis=1, mode="wrap")),
    ("take-clip", lambda xp: xp.np.take(xp.arr(I), xp.arr(IDX * 3), mode="clip"),
     lambda: np.take(I, IDX * 3, mode="clip")),
    ("take_along_axis-negative", lambda xp: xp.np.take_along_axis(xp.arr(X), xp.arr(I % 4 - 4), axis=1),
     lambda: np.take_along_axis(X, I % 4 - 4, axis=1)),
    # reductions and scans
    ("sum-where-initial", lambda xp: xp.np.sum(xp.arr(I), axis=(0, 1), where=xp.arr(W), initial=5),
     _ref(lambda: np.sum(I, where=W, initial=5), np.int32)),
    ("max-where-initial-keepdims", lambda xp: xp.np.max(xp.arr(X), axis=1, where=xp.arr(W), initial=-2.0,
                                                        keepdims=True),
     lambda: np.max(X, axis=1, where=W, initial=-2.0, keepdims=True)),
    ("mean-where-dtype", lambda xp: xp.np.mean(xp.arr(I), axis=0, where=xp.arr(W), dtype=xp.np.float16),
     _ref(lambda: np.mean(I.astype(np.float32), axis=0, where=W), np.float16)),
    ("prod-uint8-dtype", lambda xp: xp.np.prod(xp.arr(I.astype(np.uint8)), axis=-1, dtype=xp.np.uint8),
     lambda: np.prod(I.astype(np.uint8), axis=-1, dtype=np.uint8)),
    ("cumsum-int8-wraps", lambda xp: xp.np.cumsum(xp.arr(I.astype(np.int8) * 20), axis=1),
     lambda: np.cumsum(I.astype(np.int8) * 20, axis=1, dtype=np.int8)),   # (jnp.sum widens int8, cumsum does not)
    ("cumprod-bool", lambda xp: xp.np.cumprod(xp.arr(W), axis=1), _ref(lambda: np.cumprod(W, axis=1), np.int32)),
    ("nanmean-int-dtype-wraps", lambda xp: xp.np.nanmean(xp.arr(I.astype(np.int8) * 40), axis=0, dtype=xp.np.uint8),
     lambda: np.nanmean(I.astype(np.int8) * 40, axis=0, dtype=np.uint8)),
    ("nanargmin-ties", lambda xp: xp.np.nanargmin(xp.arr(TIES)), lambda: np.int32(np.nanargmin(TIES))),
    ("nanmax-keepdims", lambda xp: xp.np.nanmax(xp.arr(TIES.reshape(2, 4)), axis=0, keepdims=True),
     lambda: np.nanmax(TIES.reshape(2, 4), axis=0, keepdims=True)),
    ("argmax-first-tie", lambda xp: xp.np.argmax(xp.arr(np.abs(I)), axis=0),
     _ref(lambda: np.argmax(np.abs(I), axis=0), np.int32)),
    ("lax-cummax-reverse", lambda xp: xp.lax.cummax(xp.arr(I), axis=1, reverse=True),
     lambda: np.maximum.accumulate(I[:, ::-1], axis=1)[:, ::-1]),
    # sorting
    ("sort-nan-negzero", lambda xp: xp.np.sort(xp.arr(TIES)), lambda: np.sort(TIES, kind="stable")),
    ("argsort-stable", lambda xp: xp.np.argsort(xp.arr(TIES)), _ref(lambda: np.argsort(TIES, kind="stable"), np.int32)),
    ("argsort-descending-stable", lambda xp: xp.np.argsort(xp.arr(I % 3), axis=1, descending=True, stable=True),
     _ref(lambda: np.argsort(-(I % 3), axis=1, kind="stable"), np.int32)),
    ("lexsort", lambda xp: xp.np.lexsort((xp.arr(I[0] % 2), xp.arr(I[1] % 3))),
     _ref(lambda: np.lexsort((I[0] % 2, I[1] % 3)), np.int32)),
    ("searchsorted-right", lambda xp: xp.np.searchsorted(xp.arr(np.sort(I.ravel())), xp.arr(I[0]), side="right",
                                                         method="compare_all"),
     _ref(lambda: np.searchsorted(np.sort(I.ravel()), I[0], side="right"), np.int32)),
    ("top_k-ties", lambda xp: xp.lax.top_k(xp.arr(np.abs(I)), 2), None),
    ("unique-inverse-counts", lambda xp: xp.np.unique(xp.arr(I % 4), return_inverse=True, return_counts=True),
     None),
    # einsum
    ("einsum-ellipsis", lambda xp: xp.np.einsum("...ij,jk->...ik", xp.arr(X[None]), xp.arr(X.T), optimize=True),
     lambda: np.einsum("...ij,jk->...ik", X[None], X.T)),
    ("einsum-repeated", lambda xp: xp.np.einsum("ii->i", xp.arr(X[:, :3])), lambda: np.einsum("ii->i", X[:, :3])),
    ("einsum-int-trace", lambda xp: xp.np.einsum("ij,ij->", xp.arr(I), xp.arr(I)),
     _ref(lambda: np.einsum("ij,ij->", I, I), np.int32)),
    # nn and special functions
    ("standardize-where", lambda xp: xp.nn.standardize(xp.arr(X), where=xp.arr(W | ~W.any(1, keepdims=True))), None),
    ("softmax-where", lambda xp: xp.nn.softmax(xp.arr(X), axis=1, where=xp.arr(W[[0, 0, 2]])), None),
    ("one_hot-out-of-range", lambda xp: xp.nn.one_hot(xp.arr(IDX), 3, dtype=xp.np.int8),
     _ref(lambda: (IDX[:, None] == np.arange(3)), np.int8)),
    ("logsumexp-where-b-sign", lambda xp: xp.special.logsumexp(xp.arr(X), axis=1, b=xp.arr(I[0].astype(np.float32)),
                                                               where=xp.arr(W), return_sign=True), None),
    ("logsumexp-b-zero-inf", lambda xp: xp.special.logsumexp(xp.arr(np.float32([np.inf, 1.0])),
                                                             b=xp.arr(np.float32([0.0, 2.0]))),
     _ref(lambda: 1 + np.log(2.0), np.float32)),
    ("xlogy-zero", lambda xp: xp.special.xlogy(xp.arr(np.float32([0, 0, 1])), xp.arr(np.float32([0, -1, 0]))),
     _ref(lambda: ss.xlogy(np.float32([0, 0, 1]), np.float32([0, -1, 0])), np.float32)),
    ("gammaln-poles", lambda xp: xp.special.gammaln(xp.arr(np.float32([0, -1, -2.5, 1e-30]))),
     _ref(lambda: ss.gammaln(np.float32([0, -1, -2.5, 1e-30])), np.float32)),
    ("erfinv-edges", lambda xp: xp.special.erfinv(xp.arr(np.float32([-1, 1, 0, 2]))),
     _ref(lambda: ss.erfinv(np.float32([-1, 1, 0, 2])), np.float32)),
    # scipy.stats at the edges of their parameters, as JAX's formulas give them
    ("norm-logpdf-negative-scale", lambda xp: xp.stats.norm.logpdf(xp.arr(np.float32([-1, 0, 1])), 0.0, -1.0),
     _ref(lambda: ss_stats.norm.logpdf(np.float32([-1, 0, 1])), np.float32)),   # (as scale 1)
    ("uniform-cdf-nan-and-zero-scale", lambda xp: (xp.stats.uniform.cdf(xp.arr(np.float32([np.nan, -1, 0.5, 2]))),
                                                   xp.stats.uniform.cdf(xp.arr(np.float32(0)), 0.0, 0.0)),
     lambda: (np.float32([0, 0, 0.5, 1]), np.float32(np.nan))),
    # lax
    # (a negative start counts from the end, as JAX's allow_negative_indices: -3 is 1; then clamped into range)
    ("lax-dynamic_slice-clamped", lambda xp: xp.lax.dynamic_slice(xp.arr(X), (2, -3), (2, 2)),
     lambda: X[1:3, 1:3]),
    ("lax-dynamic_update_slice-clamped", lambda xp: xp.lax.dynamic_update_slice(xp.arr(I), xp.arr(I[:2, :3]), (5, 3)),
     lambda: _dus(I, I[:2, :3], 1, 1)),
    ("lax-clamp-order", lambda xp: xp.lax.clamp(np.float32(-1.0), xp.arr(X), np.float32(2.5)),
     lambda: np.clip(X, -1.0, 2.5)),
    ("lax-select_n-int", lambda xp: xp.lax.select_n(xp.arr(np.int32([2, 0, 1, 2])), xp.arr(X[0]), xp.arr(X[1]),
                                                    xp.arr(X[2])),
     lambda: X[[2, 0, 1, 2], np.arange(4)]),
    ("lax-reduce_window-max-dilated", lambda xp: xp.lax.reduce_window(xp.arr(X), -np.inf, xp.lax.max, (2, 2),
                                                                      (1, 2), "SAME", window_dilation=(1, 2)), None),
    ("lax-pad-interior-negative", lambda xp: xp.lax.pad(xp.arr(X), np.float32(9), [(1, -1, 1), (-2, 2, 0)]), None),
    ("lax-sort-num_keys", lambda xp: xp.lax.sort((xp.arr(I[0] % 2), xp.arr(I[1] % 2), xp.arr(I[2])), num_keys=2),
     None),
    ("lax-conv-groups", lambda xp: xp.lax.conv_general_dilated(
        xp.arr(np.arange(32, dtype=np.float32).reshape(1, 4, 2, 4)),
        xp.arr(np.arange(16, dtype=np.float32).reshape(4, 2, 2, 1) - 8), (1, 2), "SAME", rhs_dilation=(1, 1),
        feature_group_count=2), None),
    # Python scalars: a concrete integer exponent is JAX's integer_pow (never converted to the base's type), an int
    # divisor wraps to the operand's type (JAX's), Python types are weak, a complex fill is true where nonzero
    ("power-int-exponent-past-dtype", lambda xp: xp.arr(np.int8([-128, 5, 127])) ** 1000,
     lambda: np.int8([0, 97, 1])),   # (x^1000 mod 2^8)
    ("power-float-odd-exponent-past-mantissa", lambda xp: xp.arr(np.float32([-1.5, -1.0, 0.5])) ** (2**31 - 1),
     lambda: np.float32([-np.inf, -1.0, 0.0])),
    ("floor_divide-divisor-wraps-to-zero", lambda xp: xp.arr(np.int8([-128, 0, 127])) // 256,
     lambda: np.int8([-2, -1, -2])),   # (JAX's x // 0)
    ("result_type-python-types", lambda xp: (xp.np.zeros(1, xp.np.result_type(int, xp.np.uint8)),
                                             xp.np.zeros(1, xp.np.result_type(float, xp.np.float16))),
     lambda: (np.zeros(1, np.uint8), np.zeros(1, np.float16))),
    ("full_like-bool-complex-fill", lambda xp: xp.np.full_like(xp.arr(W[1]), 2j), lambda: np.ones(4, bool)),
    ("complex-power-zero-exponent", lambda xp: xp.np.power(xp.arr(np.complex64([np.inf, np.nan, 0, 2j])),
                                                           xp.arr(np.complex64(0))),
     lambda: np.ones(4, np.complex64)),   # (x ** 0 is 1 for every x: exp(0 * log inf) was NaN)
    ("complex-power-zero-base", lambda xp: xp.np.power(xp.arr(np.zeros(4, np.complex64)),
                                                       xp.arr(np.complex64([2, 0.5, -2, 2j]))),
     lambda: np.complex64([0, 0, complex(np.nan, np.nan), complex(np.nan, np.nan)])),   # (0 ** -2 was 0)
    # linalg
    ("norm-complex", lambda xp: (xp.np.linalg.norm(xp.arr(np.complex64([3 + 4j, 1j]))),
                                 xp.np.linalg.norm(xp.arr(np.complex64([[3 + 4j], [2j]])), "fro")),
     lambda: (np.float32(np.sqrt(26)), np.float32(np.sqrt(29)))),
    ("slogdet-singular", lambda xp: tuple(xp.np.linalg.slogdet(xp.arr(np.float32([[1, 2, 3], [2, 4, 6], [1, 0, 1]])))),
     lambda: (np.float32(0.0), np.float32(-np.inf))),   # (sign +0)
    ("qr-mode-full", lambda xp: xp.np.linalg.qr(xp.arr(X.T + 3 * np.eye(4, 3, dtype=np.float32)), mode="full"),
     None),   # ('reduced', as JAX reads it)
    ("slogdet-method-qr", lambda xp: tuple(xp.np.linalg.slogdet(xp.arr(X[:, :3] + 3 * np.eye(3, dtype=np.float32)),
                                                                method="qr")), None),
    # gradients at ties: lax.clamp's bounds pass none (jnp.clip's share it); a max norm's zeros share it with the 0
    # it starts from
    ("grad-lax-clamp-at-bounds", lambda xp: xp.grad(lambda x: (xp.lax.clamp(np.float32(0), x, np.float32(2)) *
                                                                xp.arr(X[0])).sum())(xp.arr(np.float32([2, 1, 0, 3]))),
     lambda: np.float32([0, X[0, 1], 0, 0])),
    ("grad-cummax-ties", lambda xp: xp.grad(lambda x: (xp.lax.cummax(x) * xp.arr(np.arange(1, 7, dtype=np.float32))
                                                       ).sum())(xp.arr(np.float32([2, 1, 2, 0, -1, 2]))),
     lambda: np.float32([10.5, 0, 7.5, 0, 0, 3])),   # (JAX's shares: its associative scan's tree)
    ("grad-hypot-at-origin", lambda xp: xp.grad(lambda a, b: xp.np.hypot(a, b).sum(), argnums=(0, 1))(
        xp.arr(np.float32([0, 3, -3, 0])), xp.arr(np.float32([0, 4, 4, -2]))),
     lambda: (np.float32([0.5, 0.6, -0.6, 0]), np.float32([0.5, 0.8, 0.8, -1]))),   # (x / hypot; halves at 0, not NaN)
    ("grad-norm-inf-at-zero", lambda xp: xp.grad(lambda x: xp.np.linalg.norm(x, np.inf))(xp.arr(np.zeros(3,
                                                                                                     np.float32))),
     lambda: np.full(3, 1 / 6, np.float32)),
]

def _scatter_add(x: np.ndarray, idx: np.ndarray, v: float) -> np.ndarray:
    out = x.copy()
    np.add.at(out, idx, v)
    return out


def _scatter_mul(x: np.ndarray, idx: np.ndarray, v: int) -> np.ndarray:
    out = x.copy()
    np.multiply.at(out, (idx, 1), v)
    return out


def _drop_min(x: np.ndarray, idx: np.ndarray, v: int) -> np.ndarray:
    out = x.copy()
    keep = (idx >= -x.shape[1]) & (idx < x.shape[1])
    np.minimum.at(out, (slice(None), idx[keep]), v)
    return out


def _clip_set(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    out = x.copy()
    out[1, np.clip(idx, 0, x.shape[1] - 1)] = 0    # (clip mode clamps negatives to 0: they do not wrap)
    return out


def _dus(x: np.ndarray, u: np.ndarray, i: int, j: int) -> np.ndarray:
    out = x.copy()
    out[i:i + u.shape[0], j:j + u.shape[1]] = u
    return out


def _leaves(x: Any) -> list[Any]:
    if isinstance(x, (tuple, list)):
        return [leaf for v in x for leaf in _leaves(v)]
    return [x]


def _dtype_name(x: Any) -> str:
    d = getattr(x, "dtype", None)
    return getattr(d, "name", str(d)) if d is not None else np.asarray(x).dtype.name


def _compare(got: Any, want: Any, exact_dtype: bool = True) -> None:
    gl, wl = _leaves(got), _leaves(want)
    assert len(gl) == len(wl), (len(gl), len(wl))
    for g, w in zip(gl, wl, strict=True):
        if exact_dtype:
            assert _dtype_name(g) == _dtype_name(w), (_dtype_name(g), _dtype_name(w))
        gn, wn = np.asarray(g, np.float32) if _dtype_name(g) == "bfloat16" else np.asarray(g), \
            np.asarray(w, np.float32) if _dtype_name(w) == "bfloat16" else np.asarray(w)
        assert gn.shape == wn.shape, (gn.shape, wn.shape)
        if gn.dtype.kind in "biu":
            np.testing.assert_array_equal(gn, wn)
        else:
            tol = 1e-2 if _dtype_name(g) in ("float16", "bfloat16") else 2e-6
            np.testing.assert_allclose(gn, wn, rtol=tol, atol=tol)
            if gn.dtype.kind == "f":   # (a complex zero's signs are its parts')
                np.testing.assert_array_equal(np.signbit(gn[gn == 0]), np.signbit(wn[gn == 0]))


@pytest.mark.parametrize("name,case,ref", [c for c in CASES if c[2] is not None], ids=lambda v: v if isinstance(v, str)
                         else "")
def test_answers_as_numpy(name: str, case: Callable[[Any], Any], ref: Callable[[], Any]) -> None:
    _compare(case(TG), ref())


@pytest.mark.parametrize("name,case,ref", CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_answers_as_jax(name: str, case: Callable[[Any], Any], ref: Any) -> None:
    pytest.importorskip("jax")
    import jax
    import jax.numpy as jnp
    import jax.scipy.special
    import jax.scipy.stats
    jx = SimpleNamespace(np=jnp, lax=jax.lax, nn=jax.nn, special=jax.scipy.special, stats=jax.scipy.stats,
                         arr=jnp.asarray, grad=jax.grad)
    _compare(case(TG), case(jx))


# (id, call, exception, message): where JAX raises, tgfx raises too, with a message naming the argument
ERRORS: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    ("split-negative-index", lambda: tnp.split(tnp.arange(5), [-1]), ValueError, r"split: indices \[-1\]"),
    ("split-decreasing", lambda: tnp.split(tnp.arange(5), [3, 1]), ValueError, "must be nondecreasing"),
    ("split-unequal", lambda: tnp.split(tnp.arange(5), 2), ValueError, "does not result in an equal division"),
    ("reshape-order-A", lambda: tnp.reshape(tnp.arange(4), (2, 2), order="A"), NotImplementedError, "order='A'"),
    ("pad-stat-length-0", lambda: tnp.pad(tnp.arange(3.0), 1, mode="maximum", stat_length=0), ValueError,
     "yields no value"),
    ("pad-bad-reflect-type", lambda: tnp.pad(tnp.arange(3.0), 1, mode="reflect", reflect_type="x"), ValueError,
     "reflect_type must be 'even' or 'odd'"),
    ("pad-unknown-mode", lambda: tnp.pad(tnp.arange(3.0), 1, mode="spiral"), ValueError, "unsupported mode 'spiral'"),
    ("broadcast_to-smaller", lambda: tnp.broadcast_to(tnp.zeros((2, 3)), (3,)), ValueError, ""),
    ("concatenate-nested-list", lambda: tnp.concatenate([[1, 2], tnp.arange(2)]), TypeError, r"arrays\[0\] is a list"),
    ("matrix_power-float-exponent", lambda: tnp.linalg.matrix_power(tnp.eye(2), 2.0), TypeError,
     "n must be a Python int, got 2.0"),
    ("round-array-decimals", lambda: tnp.round(tnp.arange(3.0), tnp.arange(3)), TypeError,
     r"decimals must be a Python int, got Tensor of shape \(3,\)"),
    ("int-negative-power-scalar", lambda: tnp.power(tnp.arange(3), -1), TypeError, "negative powers"),
]


@pytest.mark.parametrize("name,call,exc,match", ERRORS, ids=lambda v: v if isinstance(v, str) else "")
def test_raises_as_jax(name: str, call: Callable[[], Any], exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        call()

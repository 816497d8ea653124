"""`tgfx.scipy.cluster.vq`: the nearest code of a code book for each observation (`jax.scipy.cluster.vq.vq`).

>>> obs = tg.asarray([[1.1, 2.1, 3.1], [5.9, 4.8, 6.2]])
>>> book = tg.asarray([[1.0, 2.0, 3.0], [2.0, 3.0, 4.0], [3.0, 4.0, 5.0], [4.0, 5.0, 6.0]])
>>> code, dist = vq(obs, book)                  # [0, 3], [0.173205, 1.920937]
"""
from __future__ import annotations

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor


def vq(obs: ArrayLike, code_book: ArrayLike, check_finite: bool = True) -> tuple[Tensor, Tensor]:
    """Each observation's nearest code by Euclidean distance (scipy.cluster.vq.vq): `obs` (M, N) and `code_book`
    (K, N), or both 1-d (observations and codes of length 1). Returns (code, dist): the int32 index of the nearest
    code (the first of equals) and the distance to it, each of shape (M,). `check_finite` is ignored, as in JAX (a
    check would read the values to the host). Differentiable in both arguments through `dist`.
    """
    del check_finite
    o, cb = promote_args_inexact("vq", obs, code_book)
    if o.ndim != cb.ndim:
        raise ValueError(f"vq: obs (shape {o.shape}) and code_book (shape {cb.shape}) must have the same rank: both "
                         f"(M, N) and (K, N), or both 1-d")
    if o.ndim == 1:
        o, cb = o[:, None], cb[:, None]
    if o.ndim != 2:
        raise ValueError(f"vq: obs and code_book must be 1-d or 2-d, got shapes {o.shape} and {cb.shape}")
    if o.shape[1] != cb.shape[1]:
        raise ValueError(f"vq: obs (shape {o.shape}) and code_book (shape {cb.shape}) must have the same number of "
                         f"features (their last axis)")
    if cb.shape[0] == 0:
        raise ValueError(f"vq: code_book must hold at least one code, got shape {cb.shape}")
    diff = o[:, None, :] - cb[None, :, :]
    dist = tnp.sqrt(tnp.sum(tnp.real(diff * tnp.conj(diff)), axis=-1))
    code = tnp.argmin(dist, axis=-1)
    return code, tnp.take_along_axis(dist, code[:, None], axis=-1)[:, 0]

"""Losses, with optax's names and conventions: cross-entropies return one loss per example (reduce them yourself,
usually with `.mean()`), `squared_error` one per element; `mse` is their mean, the usual scalar objective."""
from __future__ import annotations

import tgfx.numpy as tnp
from tgfx.nn._activations import log_softmax, one_hot
from tgfx.tensor import ArrayLike, Tensor, to_tensor


def softmax_cross_entropy(logits: ArrayLike, labels: ArrayLike) -> Tensor:
    """-sum(labels * log_softmax(logits), axis=-1): cross-entropy against a distribution over the last axis
    (one-hot or soft labels), one value per example (`optax.softmax_cross_entropy`).

    >>> logits = tg.asarray([[2.0, 0.5, -1.0]]); labels = tg.nn.one_hot(tg.asarray([0]), 3)
    >>> tg.nn.softmax_cross_entropy(logits, labels)          # [0.2413], shape (1,)
    """
    lg, lb = to_tensor(logits), to_tensor(labels)
    if lg.ndim == 0 or lg.shape != lb.shape:
        raise ValueError(f"softmax_cross_entropy: logits and labels must have the same shape (..., num_classes), "
                         f"got logits {lg.shape} and labels {lb.shape}; for integer class indices use "
                         f"softmax_cross_entropy_with_integer_labels")
    return -tnp.sum(lb * log_softmax(lg, axis=-1), axis=-1)


def softmax_cross_entropy_with_integer_labels(logits: ArrayLike, labels: ArrayLike) -> Tensor:
    """Cross-entropy of `logits` (..., num_classes) against integer class indices `labels` (...), one value per
    example (`optax.softmax_cross_entropy_with_integer_labels`).

    The label's log-probability is picked with a one-hot mask rather than a gather, which fuses with the
    log-softmax into the same kernels. A label outside [0, num_classes) picks nothing and gives a loss of 0.

    >>> tg.nn.softmax_cross_entropy_with_integer_labels(tg.asarray([[2.0, 0.5, -1.0]]), tg.asarray([0]))  # [0.2413]
    """
    lg, lb = to_tensor(logits), to_tensor(labels)
    if not lb.dtype.is_int:
        raise TypeError(f"softmax_cross_entropy_with_integer_labels: labels must be integer class indices, got dtype "
                        f"{lb.dtype.name}; for one-hot or soft labels use softmax_cross_entropy")
    if lg.ndim == 0 or lb.shape != lg.shape[:-1]:
        raise ValueError(f"softmax_cross_entropy_with_integer_labels: labels must have the logits' shape without "
                         f"the class axis, got logits {lg.shape} and labels {lb.shape} (expected {lg.shape[:-1]})")
    logp = log_softmax(lg, axis=-1)
    return -tnp.sum(one_hot(lb, lg.shape[-1], dtype=logp.dtype) * logp, axis=-1)


def squared_error(predictions: ArrayLike, targets: ArrayLike) -> Tensor:
    """(predictions - targets) ** 2 elementwise (`optax.squared_error`); shapes must match exactly, since a silent
    broadcast of (n,) against (n, 1) is a classic wrong-loss bug."""
    p, t = to_tensor(predictions), to_tensor(targets)
    if p.shape != t.shape:
        raise ValueError(f"squared_error: predictions and targets must have the same shape, got {p.shape} and "
                         f"{t.shape}; reshape one of them (e.g. targets.reshape(predictions.shape))")
    d = p - t
    return d * d


def mse(predictions: ArrayLike, targets: ArrayLike) -> Tensor:
    """The mean squared error over all elements, a scalar.

    >>> tg.nn.mse(tg.asarray([1.0, 2.0]), tg.asarray([0.0, 0.0]))    # 2.5
    """
    try:
        return tnp.mean(squared_error(predictions, targets))
    except ValueError as e:
        raise ValueError(str(e).replace("squared_error", "mse", 1)) from None

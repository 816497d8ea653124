"""`tg.ad_checkpoint` and `tg.checkpoint_policies`: JAX's `jax.ad_checkpoint` names, for code written for JAX.

A JAX policy tells `jax.checkpoint` which intermediates of the forward to save rather than recompute, as a
predicate `policy(prim, *avals, **params) -> bool` on each primitive. tgfx's `checkpoint` takes `policy` and does
not read it (`tgfx/transforms/remat.py`: what is stored is the scheduler's decision), so these are the predicates
JAX defines, usable where JAX code names them, with JAX's meaning when called.

>>> body = tg.checkpoint(block, policy=tg.checkpoint_policies.dots_with_no_batch_dims_saveable)
>>> x = tg.ad_checkpoint.checkpoint_name(x, "attn_out")   # the value itself, named for a policy
"""
from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from tgfx.transforms.remat import checkpoint

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies"]

Policy = Callable[..., bool]


def checkpoint_name(x: Any, name: str) -> Any:
    """`x`, named `name` for the `save_*_names` policies (`jax.ad_checkpoint.checkpoint_name`)."""
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: the name must be a str, got {type(name).__name__}")
    return x


def _is_dot(prim: Any) -> bool:
    return getattr(prim, "name", str(prim)) == "dot_general"


def _no_batch_dims(params: dict[str, Any]) -> bool:
    (_, (lhs_batch, rhs_batch)) = params.get("dimension_numbers", (None, ((), ())))
    return not lhs_batch and not rhs_batch


def _names(params: dict[str, Any]) -> str | None:
    return params.get("name")


def _save_anything_except_these_names(*names: str) -> Policy:
    return lambda prim, *_, **params: _names(params) not in names


def _save_only_these_names(*names: str) -> Policy:
    return lambda prim, *_, **params: _names(params) in names


def _save_from_both_policies(a: Policy, b: Policy) -> Policy:
    return lambda prim, *args, **params: a(prim, *args, **params) or b(prim, *args, **params)


checkpoint_policies = SimpleNamespace(
    everything_saveable=lambda *_, **__: True,
    nothing_saveable=lambda *_, **__: False,
    dots_saveable=lambda prim, *_, **__: _is_dot(prim),
    checkpoint_dots=lambda prim, *_, **__: _is_dot(prim),
    dots_with_no_batch_dims_saveable=lambda prim, *_, **params: _is_dot(prim) and _no_batch_dims(params),
    checkpoint_dots_with_no_batch_dims=lambda prim, *_, **params: _is_dot(prim) and _no_batch_dims(params),
    save_anything_except_these_names=_save_anything_except_these_names,
    save_any_names_but_these=_save_anything_except_these_names,
    save_only_these_names=_save_only_these_names,
    save_from_both_policies=_save_from_both_policies,
)

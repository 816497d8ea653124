"""Argument handling shared by `tgfx.scipy`: JAX's `promote_args_inexact` over any number of arguments."""
from __future__ import annotations

from tgfx.dtypes import DType, dtypes, promote_types, to_inexact
from tgfx.tensor import ArrayLike, Tensor, promotion_kind, to_tensor


def promote_args_inexact(name: str, *args: ArrayLike) -> list[Tensor]:
    """The arguments as Tensors of one float dtype: the JAX promotion of their types, made inexact (integers and
    bool become the default float, float16 stays float16). Python scalars and weak Tensors take the others' type.

    A mix that does not promote (e.g. a uint64 with an int64) is a TypeError naming `name`.
    """
    kinds: list[DType | str] = [promotion_kind(a) for a in args]
    try:
        d = to_inexact(promote_types(*kinds)) if kinds else dtypes.default_float
    except (KeyError, TypeError) as e:
        raise TypeError(f"{name}: the arguments' dtypes {', '.join(str(getattr(k, 'name', k)) for k in kinds)} do "
                        f"not promote to one float type; cast them with .astype") from e
    out = []
    for a in args:
        t = a if isinstance(a, Tensor) else Tensor.full((), a, d) if isinstance(a, (bool, int, float)) else to_tensor(a)
        out.append(t if t.dtype == d else t.astype(d))
    return out


def compute_dtype(d: DType) -> DType:
    """The dtype a polynomial approximation is evaluated in: float32 for the 16-bit floats (their own precision
    cannot hold the coefficients; the result is rounded back once), else `d` itself."""
    return dtypes.float32 if d in (dtypes.float16, dtypes.bfloat16) else d

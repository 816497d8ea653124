"""JAX's `jax.errors` names for tgfx's errors, so that code catching them ports by spelling
(`except jax.errors.ConcretizationTypeError` is `except tg.errors.ConcretizationTypeError`).

A traced value asked for its concrete value raises a `ConcretizationTypeError` (tgfx's `ConcretizationError`, a
TypeError), as the subclass naming the conversion that asked: `bool(x)` a `TracerBoolConversionError`, `int(x)` or
an index a `TracerIntegerConversionError`, `np.asarray(x)` a `TracerArrayConversionError`, a traced boolean mask as
an index a `NonConcreteBooleanIndexError` (also an IndexError). A traced value used after its trace ended raises
an `UnexpectedTracerError` (tgfx's `EscapedTracerError`).
"""
from tgfx.lowering.inline import EscapedTracerError as UnexpectedTracerError
from tgfx.trace_state import ConcretizationError as ConcretizationTypeError
from tgfx.trace_state import (
    NonConcreteBooleanIndexError,
    TracerArrayConversionError,
    TracerBoolConversionError,
    TracerIntegerConversionError,
)

__all__ = ["ConcretizationTypeError", "NonConcreteBooleanIndexError", "TracerArrayConversionError",
           "TracerBoolConversionError", "TracerIntegerConversionError", "UnexpectedTracerError"]

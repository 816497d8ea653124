"""Data types and JAX-style type promotion.

Promotion follows JAX's lattice: Python scalars are *weakly typed* (`int32 tensor + 1.5` is float32,
`float16 tensor * 2` stays float16), and two typed operands meet at their least upper bound.

64-bit types follow JAX's x64 mode (`tgfx.config.update("x64", True)` or `TGFX_ENABLE_X64=1`). Without it, what a
user asks for or brings (a dtype argument, a float64 numpy array) becomes its 32-bit kin with one warning per type
(`canonicalize`), Python scalars and lists default to float32/int32, and a promotion that would widen 32-bit
operands to 64 bits (int32 + uint32) stays at 32. With it, the defaults are float64/int64. tgfx's own 64-bit
arithmetic (index words, 64-bit random bits) builds its UOps directly and is not affected.
"""
from __future__ import annotations

import functools
import os
import struct
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tgfx import config


@dataclass(frozen=True, eq=False)
class DType:
    """A scalar element type. `kind` is 'b' (bool), 'i' (signed), 'u' (unsigned), 'f' (float) or 'c' (complex).

    DTypes are interned (the scalars below, and `vec` caches its results), so equality between DTypes is identity
    and hashing is object's own, in C: every UOp built hashes one.
    """

    name: str
    itemsize: int
    kind: str
    np_name: str  # numpy storage dtype; bfloat16 is stored as uint16 bits
    count: int = 1  # vector width, for vectorised kernels

    def __repr__(self) -> str:
        return f"dtypes.{self.name}" if self.count == 1 else f"dtypes.{self.name}.vec({self.count})"

    def __str__(self) -> str:
        """The name, as numpy's and JAX's dtypes print (`print(x.dtype)`, f"{x.dtype}", `np.dtype(str(x.dtype))`)."""
        return self.name if self.count == 1 else repr(self)

    def __eq__(self, other: object) -> bool:
        """A DType equals only itself (they are interned). A numpy dtype, a numpy scalar type or a dtype's name equals
        the DType of the same element type, as numpy's and JAX's dtypes compare: `x.dtype == np.float32`,
        `x.dtype in (np.int8, np.uint8)`, `x.dtype == "bfloat16"` (but `x.dtype == float` is float64, as numpy's)."""
        if other is self or isinstance(other, DType):
            return other is self
        if not isinstance(other, (str, type, np.dtype)):
            return NotImplemented
        if self.count != 1:
            return False
        if isinstance(other, str) and other in _BY_NAME:   # 'bfloat16' too, which numpy does not name
            return other == self.name
        try:
            return np.dtype(other).name == self.name
        except (TypeError, ValueError):
            return False

    __hash__ = object.__hash__   # identity's, in C, as before: DTypes equal to each other are the same object

    def __reduce__(self) -> tuple:
        return (_by_name, (self.name,)) if self.count == 1 else (DType.vec, (_by_name(self.name), self.count))

    @property
    def np(self) -> np.dtype:
        """The numpy dtype that stores this type's bits."""
        return np.dtype(self.np_name)

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of this type, so numpy takes a DType wherever it takes a dtype (`np.dtype(tnp.float32)`,
        `arr.astype(tnp.int8)`); numpy has no bfloat16."""
        if self.name == "bfloat16" or self.count != 1:
            raise TypeError(f"numpy has no dtype for {self!r}")
        return np.dtype(self.np_name)

    @property
    def type(self) -> type:
        """The numpy scalar type of this type (`x.dtype.type(3)` is `np.float32(3.0)`), as numpy's dtype's."""
        return self.dtype.type

    @property
    def scalar(self) -> DType:
        return _by_name(self.name)

    def vec(self, n: int) -> DType:
        return self if n == 1 else _vec(self.scalar, n)

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def is_complex(self) -> bool:
        return self.kind == "c"

    @property
    def is_inexact(self) -> bool:
        """A float or complex type: what carries gradients."""
        return self.kind in "fc"

    @property
    def real(self) -> DType:
        """The float type of a complex type's parts (complex64 -> float32); a real type is its own."""
        return _by_name(_REAL_OF[self.name]) if self.kind == "c" else self

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "u"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def bits(self) -> int:
        return 8 * self.itemsize


@functools.cache
def _vec(scalar: DType, n: int) -> DType:
    return DType(scalar.name, scalar.itemsize, scalar.kind, scalar.np_name, n)


class _Namespace(type):
    """`dtypes.default_float` and `default_int` read the x64 mode when asked, as JAX's defaults do."""

    @property
    def default_float(cls) -> DType:
        return cls.float64 if config.X64 else cls.float32

    @property
    def default_int(cls) -> DType:
        return cls.int64 if config.X64 else cls.int32

    @property
    def default_complex(cls) -> DType:
        return cls.complex128 if config.X64 else cls.complex64


# the helpers of `dtypes` that answer with the numpy surface's rules (`issubdtype`, `result_type` and whether values
# are weakly typed), which registers them when it is imported (this base module imports nothing above it)
FRONT_END: dict[str, Callable[..., Any]] = {}


class dtypes(metaclass=_Namespace):  # noqa: N801 - a namespace, spelled like JAX's and tinygrad's
    bool = DType("bool", 1, "b", "bool")
    int8 = DType("int8", 1, "i", "int8")
    int16 = DType("int16", 2, "i", "int16")
    int32 = DType("int32", 4, "i", "int32")
    int64 = DType("int64", 8, "i", "int64")
    uint8 = DType("uint8", 1, "u", "uint8")
    uint16 = DType("uint16", 2, "u", "uint16")
    uint32 = DType("uint32", 4, "u", "uint32")
    uint64 = DType("uint64", 8, "u", "uint64")
    float16 = DType("float16", 2, "f", "float16")
    bfloat16 = DType("bfloat16", 2, "f", "uint16")
    float32 = DType("float32", 4, "f", "float32")
    float64 = DType("float64", 8, "f", "float64")
    # interleaved (re, im) pairs of float32 / float64, as numpy stores them (tgfx/numpy/_complex.py)
    complex64 = DType("complex64", 8, "c", "complex64")
    complex128 = DType("complex128", 16, "c", "complex128")
    # the type of index arithmetic inside kernels
    index = int64

    @staticmethod
    def all() -> tuple[DType, ...]:
        return ALL_DTYPES

    # jax.dtypes' helpers, answered in tgfx's DTypes. Not here: `float0` (tgfx gives an integer input's gradient as
    # integer zeros of its type, not as a float0 array), `prng_key` and `extended` (keys are uint32 arrays).
    @staticmethod
    def issubdtype(arg1: Any, arg2: Any) -> Any:
        """Whether dtype `arg1` is `arg2` or below it in numpy's hierarchy, bfloat16 a `floating`
        (`jax.dtypes.issubdtype`): `tg.dtypes.issubdtype(tg.dtypes.bfloat16, tnp.floating)` is True."""
        return FRONT_END["issubdtype"](arg1, arg2)

    @staticmethod
    def result_type(*args: Any, return_weak_type_flag: Any = False) -> Any:
        """The dtype operations on `args` (arrays, dtypes, Python scalars) compute in, by JAX's promotion with weak
        Python scalars (`jax.dtypes.result_type`): `result_type(tnp.int8, 1)` is int8; with
        `return_weak_type_flag`, (dtype, whether all of args are weak)."""
        out = FRONT_END["result_type"](*args)
        return (out, FRONT_END["all_weak"](args)) if return_weak_type_flag else out

    @staticmethod
    def canonicalize_dtype(dtype: Any, allow_extended_dtype: Any = False) -> DType:
        """The dtype tgfx computes in for a request of `dtype` (`jax.dtypes.canonicalize_dtype`): without x64,
        64-bit types are their 32-bit kin, silently (a query, not a request)."""
        if isinstance(dtype, DType):
            d = dtype
        elif isinstance(dtype, type) and dtype in _PY_TYPES:
            d = _PY_TYPES[dtype]()
        else:
            d = _named(dtype if isinstance(dtype, (type, str, np.dtype)) else dtype.dtype)
        return canonicalize(d, warn=False)


ALL_DTYPES: tuple[DType, ...] = tuple(v for k, v in vars(dtypes).items() if isinstance(v, DType) and k != "index")
_BY_NAME = {d.name: d for d in ALL_DTYPES}
_NARROW = {"float64": "float32", "int64": "int32", "uint64": "uint32", "complex128": "complex64"}
_REAL_OF = {"complex64": "float32", "complex128": "float64"}
_COMPLEX_OF = {"float32": "complex64", "float64": "complex128"}
_warned: set[str] = set()
_PY_TYPES = {float: lambda: dtypes.float64, int: lambda: dtypes.int64, complex: lambda: dtypes.complex128,
             bool: lambda: dtypes.bool}


def _user_stacklevel() -> int:
    """The `warnings.warn` stacklevel of the innermost caller outside tgfx: the user's line."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(2), 2  # the caller of the function that warns
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def canonicalize(d: DType, warn: bool = True) -> DType:
    """The type a user's request for `d` gets in this mode: without x64, a 64-bit type is its 32-bit kin (the first
    time for each type, with a warning saying how to keep it, unless not `warn`: a query, or numpy data's own type,
    `of_numpy`), as in JAX."""
    if d.name not in _NARROW or config.X64:
        return d
    if warn and d.name not in _warned:
        _warned.add(d.name)
        warnings.warn(f"tgfx: {d.name} is not enabled and becomes {_NARROW[d.name]}, as in JAX; enable 64-bit types "
                      f"with tgfx.config.update('x64', True) or TGFX_ENABLE_X64=1", UserWarning,
                      stacklevel=_user_stacklevel())
    return _BY_NAME[_NARROW[d.name]]


def of_numpy(d: np.dtype) -> DType:
    """The type numpy data of type `d` becomes: without x64, a 64-bit type is its 32-bit kin, silently, as in JAX
    (`jnp.asarray(np.ones(3))` does not warn; an explicit request for the type, `to_dtype`, does)."""
    return canonicalize(from_numpy(d), warn=False)


def _by_name(name: str) -> DType:
    return _BY_NAME[name]


def to_dtype(x: Any) -> DType:
    """The DType a user's dtype argument asks for: a DType, a name ('float32'), a numpy dtype or a Python type (float,
    int, bool), canonical for the x64 mode (`canonicalize`)."""
    if isinstance(x, DType):
        return canonicalize(x) if x.count == 1 else x
    if x is float:
        return dtypes.default_float
    if x is int:
        return dtypes.default_int
    if x is bool:
        return dtypes.bool
    if x is complex:
        return dtypes.default_complex
    return canonicalize(_named(x))


def _named(x: Any) -> DType:
    """The DType a name ('float32') or a numpy dtype or scalar type names, before the x64 mode narrows it."""
    if isinstance(x, str) and x in _BY_NAME:
        return _BY_NAME[x]
    try:
        npd = np.dtype(x)
    except TypeError:
        npd = None
    if npd is not None and npd.name in _BY_NAME:
        return _BY_NAME[npd.name]
    raise TypeError(f"unsupported dtype {x!r}; tgfx supports {', '.join(sorted(_BY_NAME))}")


def from_numpy(npd: np.dtype) -> DType:
    if (d := _BY_NP.get(npd)) is not None:   # (a numpy dtype's name is computed in Python at each read)
        return d
    if npd.name not in _BY_NAME:
        raise TypeError(f"unsupported numpy dtype {npd}; tgfx supports {', '.join(sorted(_BY_NAME))}")
    d = _BY_NP[npd] = _BY_NAME[npd.name]
    return d


_BY_NP: dict[np.dtype, DType] = {}


# ---- promotion lattice (JAX): edges go from a type to the types directly above it ----
# "i*", "f*" and "c*" are the weak types of Python int, float and complex scalars.
_LATTICE: dict[str, tuple[str, ...]] = {
    "bool": ("i*",),
    "i*": ("uint8", "int8"),
    "uint8": ("uint16", "int16"), "uint16": ("uint32", "int32"), "uint32": ("uint64", "int64"), "uint64": ("f*",),
    "int8": ("int16",), "int16": ("int32",), "int32": ("int64",), "int64": ("f*",),
    "f*": ("float16", "bfloat16", "c*"), "float16": ("float32",), "bfloat16": ("float32",),
    "float32": ("float64", "complex64"), "float64": ("complex128",),
    "c*": ("complex64",), "complex64": ("complex128",), "complex128": (),
}


@functools.cache
def _upper(t: str) -> frozenset[str]:
    return frozenset({t}).union(*(_upper(u) for u in _LATTICE[t]))


@functools.cache
def _lub(a: str, b: str) -> str:
    common = _upper(a) & _upper(b)
    # the least upper bound is the common ancestor that every other common ancestor is above
    (least,) = [c for c in common if all(c2 in _upper(c) for c2 in common)]
    return least


def is_python_scalar(x: Any) -> bool:
    """A Python bool, int, float or complex: weakly typed. A numpy scalar is not, though np.float64 and np.complex128
    subclass float and complex: JAX types it strongly (float16 + np.float64(1) is float32 there, float64 in x64)."""
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


def weak_kind(x: Any) -> str:
    """The weak lattice node of a Python scalar."""
    if not isinstance(x, np.generic):
        if isinstance(x, bool):
            return "bool"
        if isinstance(x, int):
            return "i*"
        if isinstance(x, float):
            return "f*"
        if isinstance(x, complex):
            return "c*"
    raise TypeError(f"expected a Python bool, int, float or complex scalar, got {type(x).__name__}")


def scalar_kind(x: Any) -> DType | str:
    """What a scalar brings to promotion: a Python scalar its weak kind, a numpy scalar its own type (canonical for
    the x64 mode), as in JAX."""
    return of_numpy(x.dtype) if isinstance(x, np.generic) else weak_kind(x)


_PYTHON_KINDS = {bool: "bool", int: "i*", float: "f*", complex: "c*"}


def typed_host(data: Any) -> bool:
    """Whether host data carries its own element type, as a numpy array does: numpy arrays and scalars, objects
    numpy reads through `__array__` or the array interface, and buffer-protocol objects (memoryview, bytearray,
    array.array), whose format is their type (`jnp.asarray(bytearray(...))` is uint8). Lists, tuples and Python
    scalars are not (their type is the default of their kind); nor are str and bytes (text, for numpy)."""
    if isinstance(data, (np.ndarray, np.generic)):
        return True
    if isinstance(data, (list, tuple, str, bytes, bool, int, float, complex)):
        return False
    if hasattr(data, "__array__") or hasattr(data, "__array_interface__") or hasattr(data, "__array_struct__"):
        return True
    try:
        memoryview(data)
    except TypeError:
        return False
    return True


def list_leaf_kinds(data: list | tuple) -> list[DType | str] | None:
    """The promotion kinds of a nested list's leaves when numpy scalars or arrays are among them, None when all are
    Python scalars. JAX promotes a list's leaves, numpy ones strongly typed: `[np.float16(1), 2.5]` and a list of
    float16 arrays are float16 (numpy's array of them is float64, and float16, which tgfx read by kind alone)."""
    kinds, typed = _leaf_kinds(data)
    return list(kinds) if typed else None


def _leaf_kinds(data: list | tuple) -> tuple[set[DType | str], bool]:
    kinds: set[DType | str] = set()
    typed = False
    for t in set(map(type, data)):   # (a row's types at C speed: a list of a million floats is one type)
        if t is list or t is tuple:
            for v in data:
                if type(v) is t:
                    sub, sub_typed = _leaf_kinds(v)
                    kinds |= sub
                    typed |= sub_typed
        elif issubclass(t, (np.ndarray, np.generic)):
            typed = True
            kinds.update(of_numpy(v.dtype) for v in data if type(v) is t)
        elif t in _PYTHON_KINDS:
            kinds.add(_PYTHON_KINDS[t])
    return kinds, typed


def promote_types(*ts: DType | str) -> DType:
    """The JAX result type of operands of these types (DTypes, or the weak kinds 'i*', 'f*' and 'c*')."""
    names = [t.name if isinstance(t, DType) else t for t in ts]
    out = functools.reduce(_lub, names)
    if out == "c*":
        return dtypes.default_complex
    if out == "f*":
        # two strong integer types with no integer bound (int64 + uint64), or only weak floats
        return dtypes.float64 if any(n in ("int64", "uint64") for n in names) else dtypes.default_float
    if out == "i*":
        return dtypes.default_int
    if out in _NARROW and not config.X64 and not any(n in _NARROW for n in names):
        return _BY_NAME[_NARROW[out]]  # 32-bit operands that widen (int32 + uint32) stay 32-bit, as in JAX
    return _BY_NAME[out]


def promote_weak(*ts: DType | str) -> tuple[DType, bool]:
    """`promote_types`, and whether the result is weakly typed, as JAX's `result_type` says: its lattice node is a
    weak kind (weak operands alone, or a weak float or complex with bool and integer operands: int8 and 2.5 give a
    weak float32)."""
    return promote_types(*ts), functools.reduce(_lub, [t.name if isinstance(t, DType) else t for t in ts]) in (
        "i*", "f*", "c*")


def to_inexact(d: DType) -> DType:
    """The float type a function that needs floats (exp, true_divide, mean, ...) computes a `d` input in.

    As JAX in either mode: bool and integers up to 32 bits become float32, 64-bit integers float64.
    """
    return d if d.is_inexact else dtypes.float64 if d.itemsize == 8 else dtypes.float32


def uint_of(d: DType) -> DType:
    """The unsigned integer type as wide as `d` (its bits, for bit manipulations: a float's sign, exponent, order)."""
    return _by_name({1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}[d.itemsize])


def host_np(d: DType) -> np.dtype:
    """The numpy dtype a value of `d` has on the host (`Tensor.numpy`): its own, but float32 for bfloat16, which numpy
    has not."""
    return np.dtype(np.float32) if d == dtypes.bfloat16 else np.dtype(d.np)


def to_complex(d: DType) -> DType:
    """The complex type whose parts are `d` computed as a float (float32 -> complex64, int32 -> complex64)."""
    d = to_inexact(d)
    return d if d.is_complex else _by_name(_COMPLEX_OF.get(d.name, "complex64"))


@functools.cache
def _int_range(d: DType) -> tuple[int, int]:
    """(min, max) of an integer dtype; cached: numpy's iinfo is built anew on every call, and jit's scalar
    arguments ask on every call."""
    info = np.iinfo(d.np)
    return int(info.min), int(info.max)


def min_value(d: DType) -> int | float | bool:
    if d.is_bool:
        return False
    if d.is_int:
        return _int_range(d)[0]
    return -float("inf")


def max_value(d: DType) -> int | float | bool:
    if d.is_bool:
        return True
    if d.is_int:
        return _int_range(d)[1]
    return float("inf")


_F32 = struct.Struct("f")
_EXACT = 1 << 53   # the ints a double holds exactly (so rounding one to float32 is rounding it once)


def cast_scalar(x: Any, d: DType) -> int | float | bool | complex:
    """A Python scalar converted to the value it takes in dtype `d`, as a cast in a kernel: an integer wraps around, a
    float becoming an integer saturates to d's bounds (NaN is 0), as XLA converts."""
    if type(x) is int and (bounds := _INT_BOUNDS.get(d)) is not None and bounds[0] <= x <= bounds[1]:
        return x   # an index constant, the lowering's most made node: 5 property and range calls, for x itself
    if (type(x) is float or type(x) is int) and -3.4e38 < x < 3.4e38:   # the common case, without numpy's state
        if d is dtypes.float32 and (type(x) is float or -_EXACT <= x <= _EXACT):
            # rounded by C's double -> float conversion, as numpy does (np.float32(x) cost an eager `x * 2.0` 1 us)
            return _F32.unpack(_F32.pack(x))[0]
        if d is dtypes.float64:
            return float(x)
    if d.is_complex:
        return complex(np.array(x, dtype=d.np))
    if d.is_bool:
        return bool(x)   # (a complex x is true where either part is nonzero, as a complex -> bool cast)
    if isinstance(x, complex):
        x = x.real  # the real part, as a complex -> real cast takes it
    if d.is_int:
        if isinstance(x, (float, np.floating)):
            return 0 if x != x else int(min(max(x, min_value(d)), max_value(d)))
        return int(np.array(int(x) & ((1 << d.bits) - 1), dtype=np.uint64).astype(d.np)) if not (
            min_value(d) <= int(x) <= max_value(d)) else int(x)
    with np.errstate(over="ignore"):  # out of range becomes +-inf, as a cast in a kernel does
        if d == dtypes.bfloat16:
            return float(np.float32(bf16_to_f32(f32_to_bf16(np.float32(x)))))
        return float(np.array(x, dtype=d.np))


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits (uint16), round to nearest even, NaN kept NaN."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, np.float32))
    return np.where(nan, np.uint16(0x7FC0), rounded)


def bf16_to_f32(x: np.ndarray) -> np.ndarray:
    """bfloat16 bits (uint16) -> float32, exactly; an array of x's shape, 0-d too (an operator on a 0-d array gives
    a numpy scalar, which `__array__` must not return)."""
    bits = np.asarray(x, np.uint16).astype(np.uint32)
    bits <<= 16
    return bits.view(np.float32)


# ---- machine limits (numpy's finfo/iinfo, for tgfx's types; bfloat16 too) ----
@dataclass(frozen=True)
class finfo_result:  # noqa: N801 - the standard's lower-case result type
    """The limits of a float type: `bits`, `eps`, `max`, `min`, `smallest_normal`, `tiny` (the same), `resolution`,
    `dtype`, as Python floats (the array API standard's fields, numpy's names)."""

    bits: int
    eps: float
    max: float  # noqa: A003 - the standard's field name
    min: float  # noqa: A003
    smallest_normal: float
    resolution: float
    dtype: DType

    @property
    def tiny(self) -> float:
        return self.smallest_normal


@dataclass(frozen=True)
class iinfo_result:  # noqa: N801
    """The limits of an integer type: `bits`, `max`, `min`, `dtype`."""

    bits: int
    max: int  # noqa: A003
    min: int  # noqa: A003
    dtype: DType


def _dtype_of(x: Any, fn: str) -> DType:
    """The DType of a dtype argument, or of a Tensor's (`finfo(x)` as `finfo(x.dtype)`), not canonicalised: the limits
    of float64 are float64's whatever the x64 mode."""
    d = getattr(x, "dtype", x) if not isinstance(x, (DType, str, type)) else x
    if isinstance(d, DType):
        return d.scalar
    if isinstance(d, str) and d in _BY_NAME:
        return _BY_NAME[d]
    try:
        return from_numpy(np.dtype(d))
    except TypeError:
        raise TypeError(f"{fn}: {x!r} is not a dtype or an array; pass e.g. tnp.float32") from None


def finfo(x: Any) -> finfo_result:
    """Machine limits of a float dtype (or of a float Tensor's dtype), as numpy.finfo.

    >>> tnp.finfo(tnp.float32).eps
    1.1920928955078125e-07
    """
    d = _dtype_of(x, "finfo")
    d = d.real  # a complex type's limits are those of its parts, as numpy's
    if not d.is_float:
        raise TypeError(f"finfo: {d.name} is not a float type; use iinfo for integers")
    if d == dtypes.bfloat16:  # 8 exponent bits as float32, 7 fraction bits
        big = float(bf16_to_f32(np.uint16(0x7F7F)))
        return finfo_result(16, 2.0 ** -7, big, -big, 2.0 ** -126, 0.01, d)
    fi = np.finfo(d.np)
    return finfo_result(fi.bits, float(fi.eps), float(fi.max), float(fi.min), float(fi.smallest_normal),
                        float(fi.resolution), d)


def iinfo(x: Any) -> iinfo_result:
    """Machine limits of an integer dtype (or of an integer Tensor's dtype), as numpy.iinfo.

    >>> tnp.iinfo(tnp.int8).max
    127
    """
    d = _dtype_of(x, "iinfo")
    if not d.is_int:
        raise TypeError(f"iinfo: {d.name} is not an integer type; use finfo for floats")
    return iinfo_result(d.bits, int(max_value(d)), int(min_value(d)), d)


def fits(value: int, d: DType) -> bool:
    """Whether a Python int is a value of integer type `d`."""
    return int(min_value(d)) <= value <= int(max_value(d))


# (min, max) of each integer dtype, for `cast_scalar`'s first test (bool, an integer too, is not here)
_INT_BOUNDS: dict[DType, tuple[int, int]] = {d: _int_range(d) for d in vars(dtypes).values()
                                             if isinstance(d, DType) and d.is_int and not d.is_bool}

# jax.dtypes is a module: its helpers and bfloat16 are this module's names too (`from tgfx.dtypes import
# canonicalize_dtype`), the same functions as tg.dtypes' (`tg.dtypes` is the namespace class above)
issubdtype = dtypes.issubdtype
result_type = dtypes.result_type
canonicalize_dtype = dtypes.canonicalize_dtype
bfloat16 = dtypes.bfloat16

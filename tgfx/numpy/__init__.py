"""`tgfx.numpy`: numpy's names and semantics on lazy Tensors (broadcasting, `axis`/`keepdims`, JAX promotion)."""
from tgfx.dtypes import dtypes as _dtypes
from tgfx.dtypes import finfo as finfo
from tgfx.dtypes import iinfo as iinfo
from tgfx.numpy import _methods  # noqa: F401 - attaches operators and methods to Tensor
from tgfx.numpy import fft as fft
from tgfx.numpy import linalg as linalg
from tgfx.numpy._complex import angle as angle
from tgfx.numpy._complex import iscomplex as iscomplex
from tgfx.numpy._complex import iscomplexobj as iscomplexobj
from tgfx.numpy._complex import isreal as isreal
from tgfx.numpy._complex import isrealobj as isrealobj
from tgfx.numpy._creation import (
                                  arange,
                                  array,
                                  asarray,
                                  empty,
                                  eye,
                                  full,
                                  full_like,
                                  identity,
                                  linspace,
                                  meshgrid,
                                  ones,
                                  ones_like,
                                  tri,
                                  tril,
                                  triu,
                                  zeros,
                                  zeros_like,
)
from tgfx.numpy._data_dependent import (
                                  argwhere,
                                  flatnonzero,
                                  nonzero,
                                  searchsorted,
                                  unique_all,
                                  unique_counts,
                                  unique_inverse,
                                  unique_values,
)
from tgfx.numpy._einsum import einsum as einsum
from tgfx.numpy._einsum import tensordot as tensordot
from tgfx.numpy._elementwise import (
                                  abs,
                                  absolute,
                                  acos,
                                  acosh,
                                  add,
                                  arccos,
                                  arccosh,
                                  arcsin,
                                  arcsinh,
                                  arctan,
                                  arctan2,
                                  arctanh,
                                  around,
                                  asin,
                                  asinh,
                                  atan,
                                  atan2,
                                  atanh,
                                  bitwise_and,
                                  bitwise_invert,
                                  bitwise_left_shift,
                                  bitwise_not,
                                  bitwise_or,
                                  bitwise_right_shift,
                                  bitwise_xor,
                                  ceil,
                                  clip,
                                  copysign,
                                  cos,
                                  cosh,
                                  divide,
                                  equal,
                                  exp,
                                  exp2,
                                  expm1,
                                  floor,
                                  floor_divide,
                                  fmod,
                                  greater,
                                  greater_equal,
                                  hypot,
                                  invert,
                                  isfinite,
                                  isinf,
                                  isnan,
                                  left_shift,
                                  less,
                                  less_equal,
                                  log,
                                  log1p,
                                  log2,
                                  log10,
                                  logaddexp,
                                  logaddexp2,
                                  logical_and,
                                  logical_not,
                                  logical_or,
                                  logical_xor,
                                  maximum,
                                  minimum,
                                  mod,
                                  multiply,
                                  negative,
                                  nextafter,
                                  not_equal,
                                  positive,
                                  pow,
                                  power,
                                  reciprocal,
                                  remainder,
                                  right_shift,
                                  rint,
                                  round,
                                  sign,
                                  signbit,
                                  sin,
                                  sinh,
                                  sqrt,
                                  square,
                                  subtract,
                                  tan,
                                  tanh,
                                  true_divide,
                                  trunc,
                                  where,
)
from tgfx.numpy._indexing import take as take
from tgfx.numpy._indexing import take_along_axis as take_along_axis
from tgfx.numpy._info import get_printoptions, ndim, printoptions, set_printoptions, shape, size
from tgfx.numpy._interop import from_dlpack as from_dlpack
from tgfx.numpy._linalg import diag, diagonal, dot, inner, matmul, outer, trace, vdot
from tgfx.numpy._movement import (
                                  array_split,
                                  atleast_2d,
                                  broadcast_arrays,
                                  broadcast_to,
                                  concatenate,
                                  expand_dims,
                                  flip,
                                  fliplr,
                                  flipud,
                                  hstack,
                                  moveaxis,
                                  pad,
                                  ravel,
                                  repeat,
                                  reshape,
                                  roll,
                                  split,
                                  squeeze,
                                  stack,
                                  swapaxes,
                                  tile,
                                  transpose,
                                  vstack,
)
from tgfx.numpy._reduce import (
                                  all,
                                  amax,
                                  amin,
                                  any,
                                  argmax,
                                  argmin,
                                  cumprod,
                                  cumsum,
                                  max,
                                  mean,
                                  min,
                                  prod,
                                  std,
                                  sum,
                                  var,
)
from tgfx.numpy._sort import argsort as argsort
from tgfx.numpy._sort import sort as sort
from tgfx.numpy._standard import (
                                  __array_api_version__,
                                  __array_namespace_info__,
                                  astype,
                                  can_cast,
                                  concat,
                                  conj,
                                  conjugate,
                                  count_nonzero,
                                  cumulative_prod,
                                  cumulative_sum,
                                  diff,
                                  empty_like,
                                  imag,
                                  isdtype,
                                  matrix_transpose,
                                  permute_dims,
                                  real,
                                  result_type,
                                  unstack,
                                  vecdot,
)
from tgfx.tensor import Tensor as ndarray

float16, bfloat16, float32, float64 = _dtypes.float16, _dtypes.bfloat16, _dtypes.float32, _dtypes.float64
int8, int16, int32, int64 = _dtypes.int8, _dtypes.int16, _dtypes.int32, _dtypes.int64
uint8, uint16, uint32, uint64 = _dtypes.uint8, _dtypes.uint16, _dtypes.uint32, _dtypes.uint64
complex64, complex128 = _dtypes.complex64, _dtypes.complex128
bool_ = bool = _dtypes.bool  # noqa: A001 - the standard's name for the dtype
newaxis = None
pi, e, inf, nan = 3.141592653589793, 2.718281828459045, float("inf"), float("nan")

"""tgfx: a JAX-style functional array compiler on tinygrad's ideas. The public API, as explicit re-exports."""
from tgfx import dtypes as _dtypes_module  # noqa: F401
from tgfx import lax as lax
from tgfx import numpy as numpy
from tgfx import tree as tree
from tgfx.config import Context as Context
from tgfx.counters import counters as counters
from tgfx.dtypes import DType as DType
from tgfx.dtypes import dtypes as dtypes
from tgfx.function import ConcretizationError as ConcretizationError
from tgfx.function import function as function
from tgfx.ir.ops import Ops as Ops
from tgfx.ir.uop import UOp as UOp
from tgfx.kernel import custom_kernel as custom_kernel
from tgfx.numpy import asarray as asarray
from tgfx.profile import profile as profile
from tgfx.tensor import Tensor as Tensor
from tgfx.tensor import realize as realize
from tgfx.transforms.grad import grad as grad
from tgfx.transforms.grad import stop_gradient as stop_gradient
from tgfx.transforms.grad import value_and_grad as value_and_grad
from tgfx.transforms.grad import vjp as vjp
from tgfx.transforms.jit import jit as jit
from tgfx.transforms.jvp import hessian as hessian
from tgfx.transforms.jvp import jacfwd as jacfwd
from tgfx.transforms.jvp import jacrev as jacrev
from tgfx.transforms.jvp import jvp as jvp

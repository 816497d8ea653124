"""`tgfx.nn`: activations, losses, initialisers and layers as pure functions over parameter pytrees.

Activations and losses follow `jax.nn` and optax; layers are `Module`s with `init(key, x) -> params` and
`apply(params, x) -> y` (see `_modules.py`), each a thin shell over a function in `_functional.py`.
"""
from tgfx.nn import initializers as initializers
from tgfx.nn._activations import celu as celu
from tgfx.nn._activations import elu as elu
from tgfx.nn._activations import gelu as gelu
from tgfx.nn._activations import glu as glu
from tgfx.nn._activations import hard_sigmoid as hard_sigmoid
from tgfx.nn._activations import hard_silu as hard_silu
from tgfx.nn._activations import hard_swish as hard_swish
from tgfx.nn._activations import hard_tanh as hard_tanh
from tgfx.nn._activations import identity as identity
from tgfx.nn._activations import leaky_relu as leaky_relu
from tgfx.nn._activations import log1mexp as log1mexp
from tgfx.nn._activations import log_sigmoid as log_sigmoid
from tgfx.nn._activations import log_softmax as log_softmax
from tgfx.nn._activations import logmeanexp as logmeanexp
from tgfx.nn._activations import logsumexp as logsumexp
from tgfx.nn._activations import mish as mish
from tgfx.nn._activations import one_hot as one_hot
from tgfx.nn._activations import relu as relu
from tgfx.nn._activations import relu6 as relu6
from tgfx.nn._activations import selu as selu
from tgfx.nn._activations import sigmoid as sigmoid
from tgfx.nn._activations import silu as silu
from tgfx.nn._activations import soft_sign as soft_sign
from tgfx.nn._activations import softmax as softmax
from tgfx.nn._activations import softplus as softplus
from tgfx.nn._activations import sparse_plus as sparse_plus
from tgfx.nn._activations import sparse_sigmoid as sparse_sigmoid
from tgfx.nn._activations import squareplus as squareplus
from tgfx.nn._activations import standardize as standardize
from tgfx.nn._activations import swish as swish
from tgfx.nn._functional import avg_pool2d as avg_pool2d
from tgfx.nn._functional import conv2d as conv2d
from tgfx.nn._functional import dot_product_attention as dot_product_attention
from tgfx.nn._functional import dropout as dropout
from tgfx.nn._functional import layer_norm as layer_norm
from tgfx.nn._functional import max_pool2d as max_pool2d
from tgfx.nn._functional import rms_norm as rms_norm
from tgfx.nn._losses import mse as mse
from tgfx.nn._losses import softmax_cross_entropy as softmax_cross_entropy
from tgfx.nn._losses import softmax_cross_entropy_with_integer_labels as softmax_cross_entropy_with_integer_labels
from tgfx.nn._losses import squared_error as squared_error
from tgfx.nn._modules import Conv2d as Conv2d
from tgfx.nn._modules import Dropout as Dropout
from tgfx.nn._modules import Embedding as Embedding
from tgfx.nn._modules import LayerNorm as LayerNorm
from tgfx.nn._modules import Linear as Linear
from tgfx.nn._modules import Module as Module
from tgfx.nn._modules import ModuleError as ModuleError
from tgfx.nn._modules import MultiHeadAttention as MultiHeadAttention
from tgfx.nn._modules import RMSNorm as RMSNorm
from tgfx.nn._modules import Sequential as Sequential
from tgfx.numpy import tanh as tanh

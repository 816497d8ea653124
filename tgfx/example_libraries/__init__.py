"""`tgfx.example_libraries`: JAX's `jax.example_libraries` -- `optimizers` (optimisers as (init, update,
get_params) triples) and `stax` (layers as (init_fun, apply_fun) pairs) -- which JAX's own examples are written
with, so that they port by spelling (`from tgfx.example_libraries import optimizers, stax`)."""
from tgfx.example_libraries import optimizers as optimizers
from tgfx.example_libraries import stax as stax

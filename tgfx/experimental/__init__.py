"""`tg.experimental`: the names JAX keeps under `jax.experimental` that tgfx has (`shard_map`, `ode`)."""
from tgfx.experimental import ode as ode
from tgfx.experimental import shard_map as shard_map

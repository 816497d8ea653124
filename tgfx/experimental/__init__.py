"""`tg.experimental`: the names JAX keeps under `jax.experimental` that tgfx has (`shard_map`)."""
from tgfx.experimental import shard_map as shard_map

"""`jax.experimental.shard_map.shard_map(f, mesh, in_specs, out_specs)`: `tg.shard_map`
(`tgfx/transforms/shard_map.py`)."""
from tgfx.transforms.shard_map import shard_map as shard_map

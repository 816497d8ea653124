"""`tg.experimental`: the names JAX keeps under `jax.experimental` that tgfx has (`shard_map`, `ode`,
`multihost_utils`, `io_callback`, which is `tg.io_callback`)."""
from tgfx.callback import io_callback as io_callback
from tgfx.experimental import multihost_utils as multihost_utils
from tgfx.experimental import ode as ode
from tgfx.experimental import shard_map as shard_map

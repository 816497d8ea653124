"""`tg.experimental.multihost_utils`: JAX's helpers for host values across processes, here from `tg.distributed`
(every process calls each of them; see `tgfx/distributed.py`)."""
from tgfx.distributed import broadcast_one_to_all as broadcast_one_to_all
from tgfx.distributed import process_allgather as process_allgather
from tgfx.distributed import sync_global_devices as sync_global_devices

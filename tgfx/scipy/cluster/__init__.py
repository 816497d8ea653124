"""`tgfx.scipy.cluster`: vector quantisation (`vq.vq`), as `jax.scipy.cluster` has it.

>>> from tgfx.scipy.cluster import vq
>>> code, dist = vq.vq(obs, code_book)
"""
from tgfx.scipy.cluster import vq as vq

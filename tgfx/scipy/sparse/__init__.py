"""`tgfx.scipy.sparse`: the matrix-free iterative solvers of `jax.scipy.sparse.linalg` (`cg`, `bicgstab`).

>>> from tgfx.scipy.sparse.linalg import cg
>>> x, _ = cg(laplacian, b, tol=1e-6)
"""
from tgfx.scipy.sparse import linalg as linalg

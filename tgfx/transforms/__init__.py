"""Transforms: functions from graphs to graphs, each built from `PatternMatcher`s over the UOp IR.

- `grad.py`: reverse mode (`pm_gradient`, `compute_gradient`) and the differentiation API (`grad`, `vjp`, ...).
- `jvp.py`: forward mode and Jacobians (`jvp`, `jacfwd`, `jacrev`, `hessian`), derived from reverse mode.
- `vmap.py`: vectorisation (`pm_batch`, `batch_graph`) and `vmap`.
"""

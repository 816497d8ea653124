"""optimize: a kernel's options (`kernel_opts.py`) chosen and applied: forced (`use_opts`), found by a timed search
(`BEAM=n`, `search.py`) or the defaults for the target (`heuristics.py`)."""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence

from tgfx import config
from tgfx.devices.target import Target
from tgfx.ir.uop import UOp
from tgfx.lowering.heuristics import hand_coded_opts
from tgfx.lowering.kernel_opts import KernelOptError, Opt, apply_opt, apply_opts, simplify_after_opts

_forced: contextvars.ContextVar[tuple[Opt, ...] | None] = contextvars.ContextVar("forced_opts", default=None)


@contextlib.contextmanager
def use_opts(opts: Sequence[Opt]) -> Iterator[None]:
    """Lower every kernel compiled inside the block with exactly `opts` (no heuristics, no search).

    An option that does not fit a kernel raises `KernelOptError` when that kernel is lowered, so run one kernel at a
    time. Kernels compiled with forced options are cached apart from the default ones.

    >>> import numpy as np, tgfx as tg
    >>> a, b = tg.asarray(np.ones((10, 3), np.float32)), tg.asarray(np.ones((3, 1000), np.float32))
    >>> with use_opts([Opt("PADTO", 1, 16), Opt("UPCAST", 1, 16)]):
    ...     float((a @ b).numpy().sum())
    30000.0
    """
    token = _forced.set(tuple(opts))
    try:
        yield
    finally:
        _forced.reset(token)


# `forced_opts()`: the options `use_opts` forces here, or None (the variable's own `get`: an eager op asks once, and
# a Python function around it was a call of its ~50)
forced_opts: Callable[[], tuple[Opt, ...] | None] = _forced.get


def opt_mode(opts: Sequence[Opt] | None, target: Target) -> str:
    """What decides a kernel's options, as part of its compiled-program cache key: the options themselves when they
    are given (forced, or found by a search), else the heuristics or the search width; and the target, which the
    heuristics read and the code is compiled for."""
    if opts is not None:
        what = "opts:" + ",".join(f"{o.op}.{o.axis}.{o.amount}" for o in opts)
    elif config.NOOPT:
        what = "noopt"
    else:
        what = f"beam{int(config.BEAM)}" if config.BEAM > 0 else "hand"
    return f"{what}@{target.key}"


def apply_hand_coded(sink: UOp, target: Target) -> tuple[UOp, list[Opt]]:
    """Apply the default options for `target`, skipping any that does not fit."""
    applied = []
    opts = hand_coded_opts(sink, target)
    # a THREAD split of a loop no other option touches goes first: the same kernel, but its substitution then walks
    # the graph before the upcasts copy it lane by lane
    early = [o for o in opts if o.op == "THREAD" and all(p.axis != o.axis for p in opts if p is not o)]
    for opt in early + [o for o in opts if o not in early]:
        try:  # the index arithmetic is simplified once, after the last option (each pass is a whole-graph rewrite)
            sink = apply_opt(sink, opt, simplify=False)
            applied.append(opt)
        except KernelOptError:
            continue
    return (simplify_after_opts(sink) if applied else sink), applied


def optimize(sink: UOp, target: Target, name: str = "", kernel_key: str | None = None,
             opts: Sequence[Opt] | None = None) -> tuple[UOp, list[Opt]]:
    """The kernel with its options applied, and them: `opts` exactly when given; else with `BEAM=n` those a timed
    search finds for `kernel_key` (cached on disk), else the defaults for `target`."""
    if opts is not None:
        return apply_opts(sink, opts), list(opts)
    if config.BEAM > 0 and not config.NOOPT and kernel_key is not None:
        from tgfx.lowering.search import beam_search
        return beam_search(sink, kernel_key, name, int(config.BEAM), target)
    return apply_hand_coded(sink, target)

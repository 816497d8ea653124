"""What a long run keeps, by counts: registries that gained an entry per new kernel, per closure or per step and
never lost one (found by 12,000 eager steps of a new shape each, tracing every module-level container of tgfx)."""
from __future__ import annotations

import gc

from tgfx.devices import programs


def test_the_names_of_collected_device_programs_are_bounded() -> None:
    """Profile events and faults read after a program was collected name it (`_PROGRAM_NAMES`): the last
    `COLLECTED_NAMES` collected keep their names, older ones go (an eager run over 12,000 shapes kept 12,000)."""
    made = []
    for i in range(programs.COLLECTED_NAMES + 300):
        p = programs.Program(f"growth_{i}", lambda bufs, vals, core: None)
        made.append(p.id)
        del p
    gc.collect()
    assert len(programs._PROGRAM_NAMES) <= len(programs._PROGRAMS) + programs.COLLECTED_NAMES
    assert programs._PROGRAM_NAMES[made[-1]] == f"growth_{len(made) - 1}"   # the latest collected still named
    assert made[0] not in programs._PROGRAM_NAMES
    live = programs.Program("growth_live", lambda bufs, vals, core: None)
    for i in range(programs.COLLECTED_NAMES + 1):   # a live program keeps its name however many are collected
        programs.Program(f"growth_more_{i}", lambda bufs, vals, core: None)
    gc.collect()
    assert programs._PROGRAM_NAMES[live.id] == "growth_live"


def device_copies_of(nbytes: int) -> int:
    """Device memory blocks of exactly `nbytes` alive (a constant's copies)."""
    from tgfx.ir.uop import buffers
    return len({id(m._mem) for m in list(buffers.values()) if m._mem is not None and m.nbytes == nbytes})


def test_a_jitted_function_closing_over_a_large_array_copies_it_once_over_its_retraces() -> None:
    """`lambda v: v @ W` over 8 batch sizes: 8 traces read W, one device copy of it (each held its own: +4 MiB of a
    1024 x 1024 W per signature, 40 signatures +247 MB -> +91 MB of device memory). W written in place is read anew
    by the next trace, as JAX reads a constant when it traces; the programs traced before keep the value they read."""
    import numpy as np

    import tgfx as tg
    w = np.linspace(0.5, 1, 256 * 1024, dtype=np.float32).reshape(1024, 256)   # 1 MiB, an odd size
    gc.collect()
    before = device_copies_of(w.nbytes)
    g = tg.jit(lambda v: v @ w)
    for n in range(1, 9):
        x = np.full((n, 1024), 0.5, np.float32)
        np.testing.assert_allclose(g(tg.asarray(x)).numpy(), x @ w.astype(np.float64), rtol=1e-5)
    gc.collect()
    assert g.trace_count == 8
    assert device_copies_of(w.nbytes) == before + 1
    old = w.copy()
    w *= 2   # the next trace reads the new values; the first signature's program keeps the old ones
    x9 = np.full((9, 1024), 0.5, np.float32)
    np.testing.assert_allclose(g(tg.asarray(x9)).numpy(), x9 @ w.astype(np.float64), rtol=1e-5)
    x1 = np.full((1, 1024), 0.5, np.float32)
    np.testing.assert_allclose(g(tg.asarray(x1)).numpy(), x1 @ old.astype(np.float64), rtol=1e-5)
    assert g.trace_count == 9
    del g
    gc.collect()
    assert device_copies_of(w.nbytes) == before   # released with the function's programs

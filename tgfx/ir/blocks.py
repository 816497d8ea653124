"""Block layouts: how a sharded value's parts tile it, for a MULTI's `arg` (SPEC §6).

A sharded value has one part per device of a device tuple of n devices. Its layout is one of

- `None`: every device holds the whole value (replicated);
- an int `axis`: the value split evenly along `axis`, part i the i-th piece (every device a distinct piece);
- `Blocks`, a tuple with one `(ways, stride)` per array axis: along axis a, device i holds block
  `(i // stride) % ways` of `ways` equal blocks (`(1, 1)`: the axis whole). Device i's index is read as a mixed-radix
  number whose digits are the axes of a device grid, so this is a mesh's layout: on a 2 x 2 ("data", "model") mesh
  laid out row-major, P("data", None) is `((2, 2), (1, 1))` (devices 0, 1 hold rows 0:B/2, devices 2, 3 the rest: each
  piece replicated over "model"), P(None, "model") is `((1, 1), (2, 1))`, and dp x tp's activations
  P("data", "model") are `((2, 2), (2, 1))`.

The int and None forms are the canonical spellings of the Blocks that mean the same (`canonical`), so a value laid out
over a device tuple keeps the arg it always had and only grid layouts carry a tuple. Two split axes use disjoint
digits; devices that differ only in digits no axis uses hold equal parts (replicas).
"""
from __future__ import annotations

import math

Split = tuple[int, int]            # (ways, stride) of one array axis
Blocks = tuple[Split, ...]         # one per array axis
Layout = int | None | Blocks       # a MULTI's arg
WHOLE: Split = (1, 1)


def splits(layout: Layout, ndim: int, n: int) -> Blocks:
    """`layout` as one (ways, stride) per axis of a rank-`ndim` value over `n` devices."""
    if layout is None:
        return (WHOLE,) * ndim
    if isinstance(layout, int):
        return tuple((n, 1) if a == layout else WHOLE for a in range(ndim))
    return layout


def canonical(blocks: Blocks, n: int) -> Layout:
    """The int or None spelling of `blocks` where there is one (an axis split n ways with stride 1; nothing split)."""
    split = [a for a, s in enumerate(blocks) if s[0] > 1]
    if not split:
        return None
    if len(split) == 1 and blocks[split[0]] == (n, 1):
        return split[0]
    return tuple(s if s[0] > 1 else WHOLE for s in blocks)


def is_valid(blocks: Blocks, n: int) -> bool:
    """Every split's digits lie inside the device index (stride * ways divides n) and no two splits share a digit."""
    below = 1
    for lo, hi in sorted((st, st * w) for w, st in blocks if w > 1):
        if lo % below or n % hi:
            return False
        below = hi
    return True


def block_of(blocks: Blocks, i: int) -> tuple[int, ...]:
    """Device i's block index along each axis."""
    return tuple((i // st) % w for w, st in blocks)


def ways(blocks: Blocks) -> tuple[int, ...]:
    return tuple(w for w, _ in blocks)


def part_shape(shape: tuple[int, ...], blocks: Blocks) -> tuple[int, ...]:
    return tuple(s // w for s, (w, _) in zip(shape, blocks, strict=True))


def whole_shape(part: tuple[int, ...], blocks: Blocks) -> tuple[int, ...]:
    return tuple(s * w for s, (w, _) in zip(part, blocks, strict=True))


def overlap(a: Split, b: Split) -> bool:
    """Whether two splits read a common digit of the device index."""
    return a[0] > 1 and b[0] > 1 and not (a[1] * a[0] <= b[1] or b[1] * b[0] <= a[1])


def join(layouts: list[Layout], ndim: int, n: int) -> Layout:
    """The finest layout the operands of an elementwise op agree on: the first's splits, and another's split of an
    axis the first leaves whole where its digits are free (each device then takes its block of that operand: a view)."""
    out = list(splits(layouts[0], ndim, n))
    for lay in layouts[1:]:
        for a, s in enumerate(splits(lay, ndim, n)):
            if out[a] == WHOLE and s != WHOLE and not any(overlap(s, o) for o in out):
                out[a] = s
    return canonical(tuple(out), n)


def group_key(blocks: Blocks, axes: tuple[int, ...], i: int) -> int:
    """Device i's index with the digits of `axes`' splits zeroed: devices with one key hold the blocks that a reduce
    over `axes` combines (an all-reduce over that subgroup)."""
    for a in axes:
        w, st = blocks[a]
        i -= ((i // st) % w) * st
    return i


def describe(layout: Layout, n: int) -> str:
    """`layout` in words, as an error names it."""
    if layout is None:
        return "replicated"
    if isinstance(layout, int):
        return f"split along axis {layout}"
    parts = [f"axis {a} {w} ways" for a, (w, _) in enumerate(layout) if w > 1]
    reps = n // math.prod(w for w, _ in layout)
    return "split along " + ", ".join(parts) + (f", each block on {reps} devices" if reps > 1 else "")

"""`tg.debug.draw`: a picture of a UOp graph, for a person to look at; and JAX's `tg.debug.print` and
`tg.debug.callback`, host callbacks that run when the computation runs (`tgfx/callback.py`).

Every UOp is one box labelled with its op, dtype, shape and arg, coloured by its op group; an edge runs from each
source to its user; the body of every FUNCTION (and of a CALL of a traced body) is drawn as a cluster around the
nodes only it uses, nested as the calls nest. The picture is Graphviz `dot` text, rendered by the `dot` program
when it is installed, or a self-contained HTML page (an inline SVG laid out in layers here, no scripts) when not:

>>> y = tnp.exp(x) * 2
>>> tg.debug.draw(y, "graph.svg")     # dot -Tsvg, or without Graphviz our own SVG layout
>>> tg.debug.draw(y, "graph.html")    # always the built-in page
>>> tg.debug.draw(y, "graph.dot")     # the dot text

Graphs are walked iteratively (deep graphs are fine), and beyond `max_nodes` only the nodes nearest the outputs
are drawn, with a note saying how many were left out and a `+k inputs not drawn` line on the cut nodes.
"""
from __future__ import annotations

import html
import os
import shutil
import subprocess
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp

MAX_NODES = 2000      # drawn by tgfx's own layout (.html, .dot text, .svg without Graphviz)
MAX_DOT_NODES = 600   # rendered by Graphviz, whose layout time grows much faster than the graph
BIG_DOT = 150         # above this many nodes the dot text merges parallel edges and drops edge labels, to stay fast
DOT_TIMEOUT_S = 60

# op groups and their colours (fill, as Graphviz and SVG both read them)
_CALLS = frozenset({Ops.FUNCTION, Ops.CALL, Ops.TUPLE, Ops.GETTUPLE})
_MEMORY = frozenset({Ops.CONTIGUOUS, Ops.COPY, Ops.AFTER, Ops.STORE, Ops.LOAD, Ops.INDEX})
_MULTI = frozenset({Ops.MULTI, Ops.MSELECT, Ops.MSTACK, Ops.ALLREDUCE, Ops.NETWORK})
_KERNEL = frozenset({Ops.RANGE, Ops.END, Ops.REDUCE, Ops.SINK, Ops.SPECIAL, Ops.DEFINE_ACC})
_PROGRAM = frozenset({Ops.LINEAR})
GROUPS: tuple[tuple[str, frozenset[Ops], str], ...] = (
    ("defines", GroupOp.Defines | {Ops.BIND}, "#ffe0b2"),
    ("movement", GroupOp.Movement | GroupOp.DynamicView, "#c8e6c9"),
    ("elementwise", GroupOp.Elementwise, "#bbdefb"),
    ("reduce", frozenset({Ops.REDUCE_AXIS}), "#f8bbd0"),
    ("calls", _CALLS, "#e1bee7"),
    ("memory", _MEMORY, "#fff59d"),
    ("multi-device", _MULTI, "#b2dfdb"),
    ("kernel", _KERNEL, "#d7ccc8"),
    ("program", _PROGRAM, "#cfd8dc"),
)
_OTHER = "#eeeeee"


def group_of(op: Ops) -> tuple[str, str]:
    """(group name, fill colour) of an op."""
    for name, ops, color in GROUPS:
        if op in ops:
            return name, color
    return "other", _OTHER


# ---- the graph to draw: nodes, the cut, and which call body owns each node ----
@dataclass
class Picture:
    nodes: list[UOp]                       # sources before users
    ids: dict[UOp, str]
    hidden_inputs: dict[UOp, int]          # node -> how many of its sources were cut off
    total: int                             # nodes in the whole graph
    owner: dict[UOp, UOp | None]           # node -> the FUNCTION/CALL whose body it is drawn in (None: top level)
    clusters: dict[UOp | None, list[UOp]]  # level -> the calls whose bodies are drawn directly inside it

    @property
    def note(self) -> str:
        if len(self.nodes) == self.total:
            return ""
        return (f"{self.total} nodes; drawing the {len(self.nodes)} nearest the outputs "
                f"({self.total - len(self.nodes)} not drawn)")


def _roots(x: Any) -> list[UOp]:
    from tgfx.tensor import Tensor
    items = list(x) if isinstance(x, (list, tuple)) else [x]
    out = []
    for i, it in enumerate(items):
        u = it.uop if isinstance(it, Tensor) else it
        if not isinstance(u, UOp):
            where = f" (item {i})" if len(items) > 1 else ""
            raise TypeError(f"draw: expected a Tensor or a UOp{where}, got {type(it).__name__}")
        out.append(u)
    return out


def _has_body(u: UOp) -> bool:
    return u.op in (Ops.FUNCTION, Ops.CALL) and bool(u.src) and u.src[0].op is Ops.TUPLE


def picture(x: Any, max_nodes: int = MAX_NODES) -> Picture:
    """The nodes of the graph of `x` (Tensors or UOps) to draw, at most `max_nodes` of them, nearest the outputs."""
    roots = _roots(x)
    # breadth first from the outputs: when the graph is too big, what is near the result is what a person reads
    seen: set[UOp] = set(roots)
    order: list[UOp] = []
    queue = deque(roots)
    while queue:
        u = queue.popleft()
        order.append(u)
        for s in u.src:
            if s not in seen:
                seen.add(s)
                queue.append(s)
    kept = set(order[:max_nodes])
    nodes = [u for r in roots for u in r.toposort(lambda u: tuple(s for s in u.src if s in kept))]
    nodes = list(dict.fromkeys(nodes))
    hidden = {u: sum(1 for s in u.src if s not in kept) for u in nodes}
    owner = _owners(roots, kept)
    clusters: dict[UOp | None, list[UOp]] = {None: []}
    bodies = set(owner.values())
    for u in nodes:
        if u in bodies:
            clusters.setdefault(u, [])
            clusters.setdefault(owner[u], []).append(u)
    return Picture(nodes, {u: f"n{i}" for i, u in enumerate(nodes)}, {u: k for u, k in hidden.items() if k}, len(order),
                   owner, clusters)


def _owners(roots: list[UOp], kept: set[UOp]) -> dict[UOp, UOp | None]:
    """Each node's innermost drawing level: a node reachable without entering a call body is top level; the nodes
    a body reaches (without entering the bodies of calls inside it) belong to that call. Outer levels claim first,
    so a constant shared with the caller is drawn outside."""
    owner: dict[UOp, UOp | None] = {}
    levels: deque[tuple[UOp | None, list[UOp]]] = deque([(None, roots)])
    while levels:
        call, starts = levels.popleft()
        stack = [s for s in starts if s in kept]
        while stack:
            u = stack.pop()
            if u in owner:
                continue
            owner[u] = call
            srcs = u.src
            if _has_body(u):
                levels.append((u, [u.src[0]]))
                srcs = u.src[1:]
            stack.extend(s for s in srcs if s in kept and s not in owner)
    return owner


def _arg_text(u: UOp, limit: int = 48) -> str:
    arg = u.arg
    if u.op in (Ops.FUNCTION, Ops.CALL) and isinstance(arg, tuple) and arg and isinstance(arg[0], str):
        arg = arg[0]
    if arg is None:
        return ""
    text = arg if isinstance(arg, str) else repr(arg)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def label_lines(u: UOp, hidden: int = 0) -> list[str]:
    """The text of a node's box: op; dtype and shape; arg; how many inputs were cut off."""
    lines = [u.op.name]
    typ = " ".join(p for p in (u.dtype.name if u.dtype is not None else "",
                                str(u.shape) if u.shape is not None else "") if p)
    if typ:
        lines.append(typ)
    if (a := _arg_text(u)):
        lines.append(a)
    if hidden:
        lines.append(f"+{hidden} inputs not drawn")
    return lines


def _cluster_title(call: UOp) -> str:
    return f"{call.op.name} {_arg_text(call)}".strip()


# ---- Graphviz ----
def _dot_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(x: Any, max_nodes: int = MAX_NODES) -> str:
    """The Graphviz dot text of the graph of `x`: one node per UOp, an edge per source, a cluster per call body."""
    pic = picture(x, max_nodes)
    big = len(pic.nodes) > BIG_DOT
    lines = ["digraph tgfx {", '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
             '  edge [color="#555555", arrowsize=0.6];']
    if big:  # a node used by many others far below makes dot route every edge through every layer between
        lines.append("  concentrate=true;")
    if pic.note:
        lines.append(f"  label={_dot_str(pic.note)}; labelloc=t;")
    by_owner: dict[UOp | None, list[UOp]] = {}
    for u in pic.nodes:
        by_owner.setdefault(pic.owner.get(u), []).append(u)
    # each level's nodes, then its call bodies as nested clusters; an explicit stack, so deep nesting is fine
    work: list[tuple[bool, UOp | None, str]] = [(False, None, "  ")]  # (closes a cluster, call, indent)
    while work:
        close, call, indent = work.pop()
        if close:
            lines.append(indent + "}")
            continue
        inner = indent
        if call is not None:
            lines.append(f"{indent}subgraph cluster_{pic.ids[call]} {{")
            lines.append(f"{indent}  label={_dot_str(_cluster_title(call))}; style=dashed; color=\"#7b1fa2\";")
            work.append((True, call, indent))
            inner = indent + "  "
        for u in by_owner.get(call, []):
            label = "\n".join(label_lines(u, pic.hidden_inputs.get(u, 0)))
            lines.append(f"{inner}{pic.ids[u]} [label={_dot_str(label)}, fillcolor=\"{group_of(u.op)[1]}\"];")
        work.extend((False, c, inner) for c in reversed(pic.clusters.get(call, [])))
    for u in pic.nodes:
        numbered = not big and len(u.src) > 1 and u.op not in GroupOp.Commutative  # where the order matters
        for i, s in enumerate(u.src):
            if s in pic.ids:
                attrs = f' [label="{i}", fontsize=8]' if numbered else ""
                lines.append(f"  {pic.ids[s]} -> {pic.ids[u]}{attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---- the built-in layered layout ----
BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 190, 56, 40, 46, 30


@dataclass
class Layout:
    xy: dict[UOp, tuple[float, float]]                           # top-left corner of each node's box
    boxes: list[tuple[UOp, tuple[float, float, float, float]]]   # (call, (x0, y0, x1, y1)) per body, outer first
    size: tuple[float, float]


def layout(pic: Picture) -> Layout:
    """Boxes in layers, outputs at the bottom: a node sits one layer above its lowest user (longest path to an
    output), so an input is drawn next to where it is used. Each call body gets its own columns, to the right of
    the nodes of the level around it, so its dashed box holds its nodes and nothing else. Within a layer and body,
    nodes are ordered by the mean position of their neighbours (sweeps down and up)."""
    depth: dict[UOp, int] = {u: 0 for u in pic.nodes}
    for u in reversed(pic.nodes):  # users before sources
        for s in u.src:
            if s in depth:
                depth[s] = max(depth[s], depth[u] + 1)
    top = max(depth.values(), default=0)
    layer = {u: top - d for u, d in depth.items()}
    rows: dict[tuple[UOp | None, int], list[UOp]] = {}  # (level, layer) -> the level's own nodes in that layer
    for u in pic.nodes:
        rows.setdefault((pic.owner.get(u), layer[u]), []).append(u)
    users: dict[UOp, list[UOp]] = {}
    for u in pic.nodes:
        for s in u.src:
            if s in layer:
                users.setdefault(s, []).append(u)
    # column blocks: a level's own nodes first, then each nested body's block; widths bottom up, offsets top down
    levels = [None, *[c for c in pic.nodes if c in pic.clusters]]
    own = {lv: max((len(r) for (lv2, _), r in rows.items() if lv2 == lv), default=0) for lv in levels}
    width: dict[UOp | None, int] = {}
    nesting = {lv: -1 if lv is None else len(_callers(pic, lv)) for lv in levels}
    for lv in sorted(levels, key=lambda c: -nesting[c]):  # innermost first
        width[lv] = max(1, own[lv] + sum(width[c] for c in pic.clusters.get(lv, [])))
    offset: dict[UOp | None, int] = {None: 0}
    for lv in sorted(levels, key=lambda c: nesting[c]):  # outermost first
        col = offset[lv] + own[lv]
        for c in pic.clusters.get(lv, []):
            offset[c] = col
            col += width[c]
    pos = {u: float(i) for r in rows.values() for i, u in enumerate(r)}
    for sweep in range(4):
        down = sweep % 2 == 0
        for key in sorted(rows, key=lambda k: k[1], reverse=not down):
            row = rows[key]
            near = {u: [offset[pic.owner.get(v)] + pos[v] for v in (u.src if down else users.get(u, [])) if v in layer]
                    for u in row}
            bary = {u: sum(nb) / len(nb) if nb else offset[key[0]] + pos[u] for u, nb in near.items()}
            row.sort(key=lambda u: bary[u])
            for i, u in enumerate(row):
                pos[u] = float(i)
    xy = {u: (_col_x(offset[pic.owner.get(u)] + pos[u]), _row_y(layer[u])) for u in pic.nodes}
    inside: dict[UOp, list[UOp]] = {}
    for u in pic.nodes:
        for c in _callers(pic, u):
            inside.setdefault(c, []).append(u)
    boxes = []
    for c in sorted(inside, key=lambda c: len(_callers(pic, c))):
        below = max(len(_callers(pic, u)) for u in inside[c]) - len(_callers(pic, c)) - 1
        m = 6 + 8 * below  # outer boxes get wider margins so nested ones stay visible
        lo, hi = min(layer[u] for u in inside[c]), max(layer[u] for u in inside[c])
        boxes.append((c, (_col_x(offset[c]) - m, _row_y(lo) - 20 - m, _col_x(offset[c] + width[c]) - GAP_X + m,
                          _row_y(hi) + BOX_H + m)))
    return Layout(xy, boxes, (_col_x(width[None]) + PAD, _row_y(top + 1) + PAD))


def _col_x(col: float) -> float:
    return PAD + col * (BOX_W + GAP_X)


def _row_y(layer: int) -> float:
    return PAD + 30 + layer * (BOX_H + GAP_Y)


def _callers(pic: Picture, u: UOp) -> list[UOp]:
    """The calls whose bodies hold `u`, innermost first."""
    out, c = [], pic.owner.get(u)
    while c is not None:
        out.append(c)
        c = pic.owner.get(c)
    return out


def to_svg(x: Any, max_nodes: int = MAX_NODES) -> str:
    """A standalone SVG of the graph of `x`, laid out by `layout` (no Graphviz needed)."""
    pic = picture(x, max_nodes)
    lay = layout(pic)
    xy = lay.xy
    w, h = lay.size
    esc = html.escape
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" viewBox="0 0 {w:.0f} {h:.0f}" '
           f'font-family="Helvetica, Arial, sans-serif" font-size="11">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
           'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>']
    if pic.note:
        out.append(f'<text x="{PAD}" y="20" font-weight="bold">{esc(pic.note)}</text>')
    for call, (x0, y0, x1, y1) in lay.boxes:
        out.append(f'<g class="cluster"><rect x="{x0:.0f}" y="{y0:.0f}" width="{x1 - x0:.0f}" height="{y1 - y0:.0f}" '
                   f'fill="none" stroke="#7b1fa2" stroke-dasharray="6 3" rx="6"/><text x="{x0 + 6:.0f}" '
                   f'y="{y0 + 14:.0f}" fill="#7b1fa2">{esc(_cluster_title(call))}</text></g>')
    for u in pic.nodes:
        for s in u.src:
            if s in xy:
                (sx, sy), (ux, uy) = xy[s], xy[u]
                a, b = (sx + BOX_W / 2, sy + BOX_H), (ux + BOX_W / 2, uy)
                mid = (a[1] + b[1]) / 2
                out.append(f'<path d="M {a[0]:.0f} {a[1]:.0f} C {a[0]:.0f} {mid:.0f} {b[0]:.0f} {mid:.0f} {b[0]:.0f} '
                           f'{b[1]:.0f}" fill="none" stroke="#555" marker-end="url(#arrow)"/>')
    for u in pic.nodes:
        x0, y0 = xy[u]
        lines = label_lines(u, pic.hidden_inputs.get(u, 0))
        full = esc(f"{u.op.name} {u.dtype.name if u.dtype else ''} {u.shape if u.shape is not None else ''} "
                   f"arg={u.arg!r}"[:2000])
        out.append(f'<g class="node" id="{pic.ids[u]}"><title>{full}</title><rect x="{x0:.0f}" y="{y0:.0f}" '
                   f'width="{BOX_W}" height="{BOX_H}" rx="6" fill="{group_of(u.op)[1]}" stroke="#333"/>')
        for i, line in enumerate(lines):
            weight = ' font-weight="bold"' if i == 0 else ""
            out.append(f'<text x="{x0 + 8:.0f}" y="{y0 + 14 + i * 12:.0f}"{weight}>{esc(line)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def to_html(x: Any, max_nodes: int = MAX_NODES) -> str:
    """A self-contained HTML page (inline SVG and CSS, no scripts or external files) with the graph of `x`."""
    svg = to_svg(x, max_nodes)
    legend = "".join(f'<span class="key" style="background:{c}">{html.escape(n)}</span>' for n, _, c in GROUPS)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><title>tgfx graph</title>\n"
            "<style>body{font-family:Helvetica,Arial,sans-serif;margin:12px} .key{display:inline-block;"
            "padding:2px 8px;margin:2px;border:1px solid #333;border-radius:4px;font-size:12px} "
            ".scroll{overflow:auto;border:1px solid #ccc}</style></head>\n"
            f"<body><div>{legend}</div>\n<div class=\"scroll\">\n{svg}</div></body></html>\n")


# ---- draw ----
_DOT_FORMATS = (".svg", ".png", ".pdf")


def draw(x: Any, path: str | os.PathLike, max_nodes: int | None = None) -> str:
    """Draw the graph of `x` (a Tensor, a UOp, or a list of them) to `path`; returns the path written.

    By suffix: `.dot` writes the Graphviz text and `.html` a self-contained page; `.svg`, `.png` and `.pdf` run
    Graphviz's `dot` when it is installed. Without it (or when it fails or takes over a minute), an `.svg` gets the
    built-in layered layout and a `.png` or `.pdf` becomes an `.html` page next to it, with a warning saying so.
    At most `max_nodes` nodes are drawn, those nearest the outputs (default 2000, and 600 for Graphviz to render).

    >>> tg.debug.draw(tg.grad(loss)(w), "grad.svg")
    'grad.svg'
    """
    p = os.fspath(path)
    ext = os.path.splitext(p)[1].lower()
    cap = MAX_NODES if max_nodes is None else max_nodes
    if ext == ".dot":
        return _write(p, to_dot(x, cap))
    if ext == ".html":
        return _write(p, to_html(x, cap))
    if ext not in _DOT_FORMATS:
        raise ValueError(f"draw: cannot tell what to write for {p!r}; use a path ending in .svg, .png, .pdf "
                         f"(Graphviz), .html or .dot")
    dot = shutil.which("dot")
    if dot is not None:
        text = to_dot(x, MAX_DOT_NODES if max_nodes is None else max_nodes)
        try:
            subprocess.run([dot, f"-T{ext[1:]}", "-o", p], input=text.encode(), check=True, capture_output=True,
                           timeout=DOT_TIMEOUT_S)
            return p
        except subprocess.TimeoutExpired:
            reason = f"Graphviz `dot` took over {DOT_TIMEOUT_S} s (pass a smaller max_nodes)"
        except subprocess.CalledProcessError as e:
            reason = f"Graphviz `dot` failed: {e.stderr.decode(errors='replace').strip()[:300]}"
    else:
        reason = "Graphviz `dot` is not installed (install graphviz to render with it)"
    if ext == ".svg":
        warnings.warn(f"draw: {reason}; wrote {p} with tgfx's own layout instead", stacklevel=2)
        return _write(p, to_svg(x, cap))
    out = os.path.splitext(p)[0] + ".html"
    warnings.warn(f"draw: {reason}; cannot make a {ext[1:].upper()} without it, wrote the HTML page {out} instead",
                  stacklevel=2)
    return _write(out, to_html(x, cap))


def _write(path: str, text: str) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path



def print(fmt: str, *args: Any, ordered: bool = False, **kwargs: Any) -> None:  # noqa: A001 - JAX's name
    """`jax.debug.print`: print `fmt.format(*args, **kwargs)` with the values the arguments have when the computation
    runs (at every run of a jitted function, every step of a loop; see `tgfx.callback.debug_print`).

    >>> tg.debug.print("step {i}: x={x}", i=i, x=x)
    """
    from tgfx.callback import debug_print
    debug_print(fmt, *args, ordered=ordered, **kwargs)


def callback(callback: Callable[..., Any], *args: Any, ordered: bool = False, **kwargs: Any) -> None:
    """`jax.debug.callback`: call `callback(*args, **kwargs)` on the host with the arguments' values (numpy arrays)
    when the computation runs (see `tgfx.callback.debug_callback`)."""
    from tgfx.callback import debug_callback
    debug_callback(callback, *args, ordered=ordered, **kwargs)

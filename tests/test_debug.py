"""tg.debug.draw: the dot text has a node per UOp, an edge per source and a cluster per FUNCTION body; the HTML page
is well-formed and self-contained; without Graphviz the picture falls back with a clear warning; huge and deep
graphs are cut to the nodes nearest the output, with a note, in bounded time."""
from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import debug
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp

SVG = "{http://www.w3.org/2000/svg}"


@tg.function
def inner(a: tg.Tensor) -> tg.Tensor:
    return tnp.exp(a) + 1.0


@tg.function
def outer(a: tg.Tensor, b: tg.Tensor) -> tg.Tensor:
    return inner(a) * b - 1.0


def nested() -> tg.Tensor:
    x = tg.asarray(np.ones((2, 3), np.float32))
    y = tg.asarray(np.full((2, 3), 2.0, np.float32))
    return outer(x, y) / 3.0


def node_ids(dot: str) -> list[str]:
    return re.findall(r"^\s*(n\d+) \[label=", dot, flags=re.M)


def edges(dot: str) -> list[tuple[str, str]]:
    return re.findall(r"^\s*(n\d+) -> (n\d+)", dot, flags=re.M)


def test_dot_has_a_node_per_uop_and_an_edge_per_source() -> None:
    y = nested()
    nodes = y.uop.toposort()
    dot = debug.to_dot(y)
    ids = node_ids(dot)
    assert len(ids) == len(set(ids)) == len(nodes)
    assert len(edges(dot)) == sum(len(u.src) for u in nodes)
    # labels carry op, dtype, shape and arg; colours follow the op group
    assert re.search(r'\[label="EXP\\nfloat32 \(2, 3\)", fillcolor="#bbdefb"\]', dot)
    assert f'label="CONST\\nfloat32 ()\\n3.0", fillcolor="{debug.group_of(Ops.CONST)[1]}"' in dot
    assert 'label="FUNCTION\\nouter"' in dot
    # the source order is shown where it matters (the divide), not on commutative ops
    assert re.search(r"n\d+ -> n\d+ \[label=\"1\"", dot)


def test_function_bodies_are_nested_clusters() -> None:
    dot = debug.to_dot(nested())
    assert dot.count("subgraph cluster_") == 2
    lines = dot.splitlines()
    start = {t: next(i for i, line in enumerate(lines) if f'label="FUNCTION {t}"; style=dashed' in line)
             for t in ("outer", "inner")}
    depth = 0
    depth_at = {}
    for i, line in enumerate(lines):  # how deep in clusters each line sits
        if "subgraph cluster_" in line:
            depth += 1
        elif line.strip() == "}":
            depth -= 1
        depth_at[i] = depth
    assert depth_at[start["outer"]] == 1 and depth_at[start["inner"]] == 2
    # the EXP (only in inner's body) sits in the inner cluster, the MUL in outer's, the final divide at the top
    where = {re.search(r'label="(\w+)', line).group(1): depth_at[i] for i, line in enumerate(lines)
             if re.match(r"\s*n\d+ \[label=", line)}
    assert where["EXP"] == 2 and where["MUL"] == 1 and where["FDIV"] == 0


def test_graphviz_renders_the_dot(tmp_path: Path) -> None:
    if shutil.which("dot") is None:
        pytest.skip("Graphviz is not installed")
    out = debug.draw(nested(), tmp_path / "g.svg")
    titles = [t.text or "" for t in ET.parse(out).getroot().iter(f"{SVG}title")]
    assert len([t for t in titles if t.startswith("cluster_")]) == 2
    assert len([t for t in titles if re.fullmatch(r"n\d+", t)]) == len(nested().uop.toposort())
    assert debug.draw(nested(), tmp_path / "g.png") == str(tmp_path / "g.png")
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"


def _parse_html(text: str) -> ET.Element:
    assert text.startswith("<!DOCTYPE html>")
    return ET.fromstring(text.split("\n", 1)[1])  # the rest is well-formed XML


def test_html_is_well_formed_and_self_contained(tmp_path: Path) -> None:
    y = nested()
    nodes = y.uop.toposort()
    path = debug.draw(y, tmp_path / "g.html")
    text = Path(path).read_text(encoding="utf-8")
    root = _parse_html(text)
    for el in root.iter():
        assert el.tag.split("}")[-1] not in ("script", "link", "img", "iframe", "object")
        for k, v in el.attrib.items():
            assert not (k.endswith("href") or k == "src") or v.startswith("#"), (k, v)
            assert "http" not in v or k == "xmlns", (k, v)
    svg = next(root.iter(f"{SVG}svg"))
    groups = [g for g in svg.iter(f"{SVG}g")]
    assert len([g for g in groups if g.get("class") == "node"]) == len(nodes)
    assert len([g for g in groups if g.get("class") == "cluster"]) == 2
    assert len([p for p in svg.iter(f"{SVG}path") if p.get("marker-end")]) == sum(len(u.src) for u in nodes)
    # every node box lies inside the dashed box of each call body that holds it
    boxes = {g.find(f"{SVG}text").text: g.find(f"{SVG}rect") for g in groups if g.get("class") == "cluster"}
    exp = next(g for g in groups if g.get("class") == "node" and g.find(f"{SVG}text").text == "EXP")
    r = exp.find(f"{SVG}rect")
    for title in ("FUNCTION outer", "FUNCTION inner"):
        b = boxes[title]
        assert float(b.get("x")) <= float(r.get("x")) and float(r.get("x")) + float(r.get("width")) <= \
            float(b.get("x")) + float(b.get("width"))


def test_missing_dot_falls_back_with_a_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(debug.shutil, "which", lambda name: None)
    y = nested()
    with pytest.warns(UserWarning, match=r"Graphviz `dot` is not installed.*wrote the HTML page .*g\.html instead"):
        out = debug.draw(y, tmp_path / "g.png")
    assert out == str(tmp_path / "g.html") and not (tmp_path / "g.png").exists()
    _parse_html(Path(out).read_text(encoding="utf-8"))
    with pytest.warns(UserWarning, match=r"not installed.*wrote .*g\.svg with tgfx's own layout"):
        out = debug.draw(y, tmp_path / "g.svg")
    svg = ET.parse(out).getroot()
    assert svg.tag == f"{SVG}svg" and len([g for g in svg.iter(f"{SVG}g") if g.get("class") == "node"]) == \
        len(y.uop.toposort())


def test_failing_dot_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    false = shutil.which("false")
    if false is None:
        pytest.skip("no `false` program")
    monkeypatch.setattr(debug.shutil, "which", lambda name: false)
    with pytest.warns(UserWarning, match="Graphviz `dot` failed"):
        assert debug.draw(nested(), tmp_path / "g.pdf") == str(tmp_path / "g.html")


def test_dot_file_and_bad_arguments(tmp_path: Path) -> None:
    y = nested()
    out = debug.draw(y, tmp_path / "g.dot")
    assert Path(out).read_text() == debug.to_dot(y)
    with pytest.raises(ValueError, match=r"g\.jpeg.*\.svg, \.png, \.pdf \(Graphviz\), \.html or \.dot"):
        debug.draw(y, tmp_path / "g.jpeg")
    with pytest.raises(TypeError, match=r"expected a Tensor or a UOp \(item 1\), got int"):
        debug.draw([y, 3], tmp_path / "g.dot")
    # a UOp, and several outputs at once
    u = UOp.const(tg.dtypes.float32, 1.0)
    assert len(node_ids(debug.to_dot(u))) == 1
    two = debug.to_dot([y, tnp.exp(y)])
    assert len(node_ids(two)) == len(tnp.exp(y).uop.toposort())


def test_huge_deep_graph_is_cut_with_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tgfx.tensor
    monkeypatch.setattr(tgfx.tensor, "LAZY_DEPTH", 10**9)   # kept lazy: a graph to draw, not computed as it grows
    x = tg.asarray(np.ones(3, np.float32))
    y = x
    for i in range(5000):  # 5,000 levels deep: nothing may recurse
        y = y * 1.0001 + float(i)
    total = len(y.uop.toposort())
    assert total > 20_000
    dot = debug.to_dot(y)
    assert len(node_ids(dot)) == debug.MAX_NODES
    assert f"{total} nodes; drawing the {debug.MAX_NODES} nearest the outputs" in dot
    assert "inputs not drawn" in dot and "concentrate=true" in dot
    page = Path(debug.draw(y, tmp_path / "big.html", max_nodes=300)).read_text(encoding="utf-8")
    svg = next(_parse_html(page).iter(f"{SVG}svg"))
    assert len([g for g in svg.iter(f"{SVG}g") if g.get("class") == "node"]) == 300
    assert f"{total} nodes; drawing the 300 nearest" in page
    if shutil.which("dot") is not None:  # Graphviz gets a smaller default cut, so it finishes in seconds
        assert debug.draw(y, tmp_path / "big.svg") == str(tmp_path / "big.svg")


def test_every_cut_draws_exactly_the_kept_nodes() -> None:
    y = nested()
    total = len(y.uop.toposort())
    for k in range(1, total + 1):  # cuts through call bodies, between a call and its body, ...
        assert len(node_ids(debug.to_dot(y, k))) == k
        svg = ET.fromstring(debug.to_svg(y, k))
        assert len([g for g in svg.iter(f"{SVG}g") if g.get("class") == "node"]) == k

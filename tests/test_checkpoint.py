"""tg.save / tg.load: exact round trips of every dtype and of pytree structure, `like=` checking, and a clear
CheckpointError for every way a file can be malformed; interoperability with the `safetensors` package if present."""
from __future__ import annotations

import collections
import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tgfx as tg
from tgfx.dtypes import ALL_DTYPES, DType, dtypes


def raw_bits(t: tg.Tensor) -> np.ndarray:
    """A Tensor's exact stored bits (bfloat16 as its uint16 pattern)."""
    return (t.bitcast(dtypes.uint16) if t.dtype == dtypes.bfloat16 else t).numpy()


def random_tensor(d: DType, shape: tuple[int, ...], seed: int = 0) -> tg.Tensor:
    """Random bit patterns of dtype d: every float bit pattern (NaN payloads, -0.0, subnormals) must survive."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if d.is_bool:
        return tg.asarray(rng.integers(0, 2, shape).astype(bool))
    bits = rng.integers(0, 256, n * d.itemsize, dtype=np.uint8)
    if d == dtypes.bfloat16:
        return tg.Tensor(bits.view(np.uint16).reshape(shape), dtypes.bfloat16)
    return tg.asarray(bits.view(d.np).reshape(shape))


def header(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])


@pytest.mark.x64
@pytest.mark.parametrize("d", [d for d in ALL_DTYPES if d != dtypes.complex128], ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (5,), (2, 3)])
def test_every_dtype_round_trips_exactly(tmp_path: Path, d: DType, shape: tuple[int, ...]) -> None:
    x = random_tensor(d, shape)
    tg.save(tmp_path / "x.safetensors", {"x": x})
    y = tg.load(tmp_path / "x.safetensors")["x"]
    assert y.dtype == d and y.shape == shape
    np.testing.assert_array_equal(raw_bits(y).reshape(-1).view(np.uint8), raw_bits(x).reshape(-1).view(np.uint8))


@pytest.mark.x64
def test_complex128_has_no_safetensors_dtype(tmp_path: Path) -> None:
    x = tg.asarray(np.array([1 + 2j], np.complex128))
    with pytest.raises(TypeError, match="complex128.*no safetensors equivalent"):
        tg.save(tmp_path / "x.safetensors", {"x": x})


@pytest.mark.x64
def test_structure_round_trips_with_dotted_names(tmp_path: Path) -> None:
    w = tg.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    tree = {"params": {"w": w, "layers": [tg.asarray(np.ones(2, np.float16)), None, (1, 2.5, "relu", True)]},
            "step": 10, "inf": float("-inf"), 3: np.int64(-7), "empty": [], "nothing": None}
    p = tmp_path / "m.safetensors"
    tg.save(p, tree)
    h = header(p)
    assert set(h) == {"params.w", "params.layers.0", "3", "__metadata__"}
    assert h["params.w"] == {"dtype": "F32", "shape": [2, 3], "data_offsets": h["params.w"]["data_offsets"]}
    out = tg.load(p)
    assert tg.tree.tree_structure(out) == tg.tree.tree_structure(tree)
    np.testing.assert_array_equal(out["params"]["w"].numpy(), w.numpy())
    assert out["params"]["layers"][2] == (1, 2.5, "relu", True) and out["step"] == 10 and out["inf"] == -np.inf
    assert out[3].dtype == dtypes.int64 and out[3].item() == -7
    # a single Tensor is a tree too
    tg.save(p, w)
    np.testing.assert_array_equal(tg.load(p).numpy(), w.numpy())
    assert set(header(p)) == {"value", "__metadata__"}


def test_data_is_aligned_and_offsets_are_contiguous(tmp_path: Path) -> None:
    p = tmp_path / "a.safetensors"
    tg.save(p, [tg.asarray(np.ones(3, np.int8)), tg.asarray(np.ones((2, 2), np.float64)), tg.asarray(np.ones(0))])
    raw = p.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    assert (8 + n) % 8 == 0
    spans = sorted(tuple(v["data_offsets"]) for k, v in header(p).items() if k != "__metadata__")
    assert spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert spans[-1][1] == len(raw) - 8 - n


@given(st.recursive(st.integers(-3, 3) | st.booleans() | st.text(max_size=3),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text("ab", max_size=2), c, max_size=3)
                    | st.lists(c, max_size=2).map(tuple), max_leaves=8))
def test_python_trees_round_trip(tree: object) -> None:
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.safetensors")
        tg.save(p, tree)
        assert tg.load(p) == tree


Params = collections.namedtuple("Params", "w b")


def test_like_checks_structure_shapes_and_dtypes(tmp_path: Path) -> None:
    p = tmp_path / "p.safetensors"
    saved = {"net": Params(tg.asarray(np.ones((2, 3), np.float32)), tg.asarray(np.zeros(3, np.float32))), "step": 4}
    tg.save(p, saved)
    with pytest.raises(tg.CheckpointError, match="Params at \\['net'\\].*pass like="):
        tg.load(p)  # a NamedTuple cannot be rebuilt without knowing the class; nothing is imported by name
    like = {"net": Params(np.zeros((2, 3), np.float32), np.zeros(3, np.float32)), "step": 0}
    out = tg.load(p, like=like)
    assert isinstance(out["net"], Params) and out["step"] == 4
    np.testing.assert_array_equal(out["net"].w.numpy(), np.ones((2, 3)))
    with pytest.raises(tg.CheckpointError, match=r"p\.safetensors.*\['net'\]\.w is float32\[2, 3\], but `like` "
                                                 r"expects float32\[3, 2\]"):
        tg.load(p, like={"net": Params(np.zeros((3, 2), np.float32), np.zeros(3, np.float32)), "step": 0})
    with pytest.raises(tg.CheckpointError, match=r"\['net'\]\.b is float32\[3\], but `like` expects float16\[3\]"):
        tg.load(p, like={"net": Params(np.zeros((2, 3), np.float32), np.zeros(3, np.float16)), "step": 0})
    with pytest.raises(tg.CheckpointError, match=r"`like` has \['lr'\], which the checkpoint lacks"):
        tg.load(p, like={**like, "lr": 0.1})
    with pytest.raises(tg.CheckpointError, match=r"the checkpoint has \['step'\], which `like` lacks"):
        tg.load(p, like={"net": like["net"]})


def test_save_errors_name_the_path(tmp_path: Path) -> None:
    p = tmp_path / "bad.safetensors"
    with pytest.raises(TypeError, match=r"leaf at path \['f'\]\[1\] is a function"):
        tg.save(p, {"f": [1, lambda: 0]})
    with pytest.raises(ValueError, match=r"\['a'\]\['b'\] and path \['a\.b'\] both get the tensor name 'a\.b'"):
        tg.save(p, {"a.b": np.ones(1), "a": {"b": np.ones(1)}})
    with pytest.raises(TypeError, match=r"dict at the root has the key \(1, 2\)"):
        tg.save(p, {(1, 2): np.ones(1)})
    assert not p.exists() and os.listdir(tmp_path) == []  # nothing half-written


def test_save_replaces_atomically(tmp_path: Path) -> None:
    p = tmp_path / "c.safetensors"
    tg.save(p, {"a": np.ones(2, np.float32)})
    tg.save(p, {"b": np.zeros(3, np.int32)}, metadata={"note": "second"})
    assert os.listdir(tmp_path) == ["c.safetensors"]
    assert header(p)["__metadata__"]["note"] == "second"
    assert tg.load(p)["b"].tolist() == [0, 0, 0]


# ---- malformed files: each is a CheckpointError naming the file and the fault ----
def _file(tmp_path: Path, head: dict | bytes, data: bytes = b"", length: int | None = None) -> Path:
    text = head if isinstance(head, bytes) else json.dumps(head).encode()
    p = tmp_path / "f.safetensors"
    p.write_bytes((len(text) if length is None else length).to_bytes(8, "little") + text + data)
    return p


def _raw(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "f.safetensors"
    p.write_bytes(data)
    return p


T = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize("make,match", [
    (lambda d: _raw(d, b"\x05\x00"), "too short"),
    (lambda d: _file(d, {"x": T}, length=10**6), "header length 1000000 runs past the end"),
    (lambda d: _file(d, {"x": T}, length=2**63), "runs past the end"),
    (lambda d: _file(d, b"{not json", b""), "header is not valid JSON"),
    (lambda d: _file(d, b"\xff\xfe{}", b""), "header is not valid JSON"),
    (lambda d: _file(d, b"[1, 2]", b""), "header is a JSON list"),
    (lambda d: _file(d, {"x": T}, b"\0" * 4), r"'x' has data_offsets \[0, 8\] out of range.*holds 4 bytes"),
    (lambda d: _file(d, {"x": {**T, "data_offsets": [0, 4]}}, b"\0" * 8), "spans 4 bytes, but shape"),
    (lambda d: _file(d, {"x": {**T, "data_offsets": [8, 0]}}, b"\0" * 8), "not \\[begin, end\\]"),
    (lambda d: _file(d, {"x": {**T, "data_offsets": [-8, 0]}}, b"\0" * 8), "not \\[begin, end\\]"),
    (lambda d: _file(d, {"x": T, "y": {**T, "data_offsets": [4, 12]}}, b"\0" * 12), "'x'.*and 'y'.*overlap"),
    (lambda d: _file(d, {"x": {**T, "dtype": "F8_E4M3"}}, b"\0" * 8), "dtype 'F8_E4M3'.*not support"),
    (lambda d: _file(d, {"x": {**T, "shape": [-2]}}, b"\0" * 8), "not a list of non-negative ints"),
    (lambda d: _file(d, {"x": {"dtype": "F32"}}, b""), "needs dtype, shape and data_offsets"),
    (lambda d: _file(d, {"x": {**T, "dtype": "BOOL", "shape": [8]}}, b"\2" * 8), "bytes other than 0 and 1"),
    (lambda d: _file(d, {"__metadata__": {"a": 1}}), "__metadata__ must be an object of strings"),
    (lambda d: _file(d, {"__metadata__": {"tgfx.tree": "{"}}), "stored tree structure .* is malformed"),
    (lambda d: _file(d, {"__metadata__": {"tgfx.tree": '{"version":1,"tree":{"tensor":"w"}}'}}),
     "names tensor 'w', which the file does not hold"),
    (lambda d: _file(d, {"__metadata__": {"tgfx.tree": '{"version":1,"tree":{"node":"os.system","keys":["[0]"],'
                                                       '"children":[{"str":"echo hi"}]}}'}}),
     "holds a os.system at the root, which load cannot rebuild"),
    (lambda d: _file(d, {"__metadata__": {"tgfx.tree": '{"version":1,"tree":{"pickle":"gASV"}}'}}),
     "unreadable leaf at the root"),
    (lambda d: d / "missing.safetensors", "cannot read the checkpoint"),
])
def test_malformed_files_raise(tmp_path: Path, make, match: str) -> None:  # noqa: ANN001
    p = make(tmp_path)
    with pytest.raises(tg.CheckpointError, match=match) as e:
        tg.load(p)
    assert str(e.value).startswith(str(p) + ":")


def test_truncated_checkpoint(tmp_path: Path) -> None:
    p = tmp_path / "t.safetensors"
    tg.save(p, {"a": np.arange(100, dtype=np.float32), "b": np.arange(10, dtype=np.int64)})
    raw = p.read_bytes()
    for cut in (len(raw) - 1, len(raw) - 300, 40, 7):
        p.write_bytes(raw[:cut])
        with pytest.raises(tg.CheckpointError, match="truncated"):
            tg.load(p)


# ---- the safetensors package, when installed ----
def test_safetensors_package_interop(tmp_path: Path) -> None:
    stn = pytest.importorskip("safetensors.numpy")
    safetensors = pytest.importorskip("safetensors")
    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "i": np.array([-1, 2], np.int64),
              "m": np.array([True, False]), "h": np.ones((2, 0), np.float16), "s": np.array(7, np.uint8)}
    theirs = tmp_path / "theirs.safetensors"
    stn.save_file(arrays, str(theirs), metadata={"who": "safetensors"})
    got = tg.load(theirs)  # no tgfx structure: a dict of names to Tensors
    assert set(got) == set(arrays)
    for k, v in arrays.items():
        assert got[k].shape == v.shape and got[k].dtype.name == v.dtype.name
        np.testing.assert_array_equal(got[k].numpy(), v)
    ours = tmp_path / "ours.safetensors"
    tg.save(ours, {"layer": {k: tg.asarray(v) for k, v in arrays.items()}, "bf": random_tensor(dtypes.bfloat16, (3,))})
    with safetensors.safe_open(str(ours), framework="numpy") as f:  # per tensor: numpy has no bfloat16
        assert "tgfx.tree" in f.metadata()
        for k, v in arrays.items():
            np.testing.assert_array_equal(f.get_tensor(f"layer.{k}"), v)
    # and through `like`, the other library's flat file loads into a structure
    like = {k: np.zeros(v.shape, v.dtype) for k, v in arrays.items()}
    assert set(tg.load(theirs, like=like)) == set(arrays)

"""Checkpoints: `tg.save(path, tree)` and `tg.load(path)` in the safetensors format, written and read directly.

A safetensors file is an 8-byte little-endian header length, a JSON header, then the raw little-endian bytes of
every tensor. The header maps each tensor's name to its `dtype` ("F32", "BF16", ...), `shape` and `data_offsets`
(begin, end) into the data section, plus a `__metadata__` object of strings. Any safetensors reader (PyTorch's,
JAX's, the `safetensors` package) can read what `save` writes, and `load` reads their files.

Tensor names come from the pytree key paths, dotted: `{"params": {"w": w, "layers": [a, b]}}` stores `params.w`,
`params.layers.0` and `params.layers.1`. The tree's structure (dicts, lists, tuples, None, and Python scalars kept
as leaves) goes into `__metadata__["tgfx.tree"]` as JSON, so `load` gives back the same structure. Reading never
unpickles anything, and every malformed file is a `CheckpointError` that names the file and what is wrong with it.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from tgfx._realize import realize
from tgfx.dtypes import DType, dtypes, to_dtype
from tgfx.tensor import Tensor
from tgfx.tree import DictKey, KeyPath, PyTreeDef, SequenceKey, keystr, tree_flatten_with_path, tree_unflatten

PathLike = str | os.PathLike

_ST_DTYPES: dict[str, DType] = {
    "BOOL": dtypes.bool, "U8": dtypes.uint8, "I8": dtypes.int8, "U16": dtypes.uint16, "I16": dtypes.int16,
    "F16": dtypes.float16, "BF16": dtypes.bfloat16, "U32": dtypes.uint32, "I32": dtypes.int32, "F32": dtypes.float32,
    "U64": dtypes.uint64, "I64": dtypes.int64, "F64": dtypes.float64, "C64": dtypes.complex64,
}
_ST_NAMES = {d: n for n, d in _ST_DTYPES.items()}
_NUMPY_NAMES = {d.name for d in _ST_DTYPES.values() if d != dtypes.bfloat16}  # numpy has no bfloat16
TREE_KEY = "tgfx.tree"  # the __metadata__ entry holding the pytree structure
MAX_HEADER = 100 * 1024 * 1024  # the safetensors limit: a longer "header" is a corrupt length, not a header


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read as written, or a tree that does not match what was expected."""


# ---- save ----
def save(path: PathLike, tree: Any, metadata: dict[str, str] | None = None) -> None:
    """Write the pytree `tree` to `path` as a safetensors file.

    Leaves may be Tensors, numpy arrays and numpy scalars (stored as tensors, every tgfx dtype exactly, bfloat16
    included) and Python `int`/`float`/`bool`/`str` (kept in the stored structure). `metadata` adds string entries
    to the header's `__metadata__`. The file is written to a temporary name and renamed into place, so a crash never
    leaves a half-written checkpoint under `path`.

    >>> params = {"w": tg.asarray(np.ones((3, 2), np.float32)), "b": tg.asarray(np.zeros(2, np.float32))}
    >>> tg.save("model.safetensors", {"params": params, "step": 10})
    >>> tg.load("model.safetensors")["params"]["w"].shape
    (3, 2)
    """
    pairs, treedef = tree_flatten_with_path(tree)
    names: dict[str, KeyPath] = {}
    arrays: list[tuple[str, Tensor | np.ndarray]] = []
    leaf_codes: list[dict[str, Any]] = []
    for p, leaf in pairs:
        code = _scalar_code(leaf)
        if code is None:
            if not isinstance(leaf, (Tensor, np.ndarray, np.generic)):
                raise TypeError(f"save: the leaf at {_where(p)} is a {type(leaf).__qualname__}; a checkpoint holds "
                                f"Tensors, numpy arrays and Python int/float/bool/str leaves")
            if isinstance(leaf, Tensor) and leaf.dtype not in _ST_NAMES:
                raise TypeError(f"save: the Tensor at {_where(p)} has dtype {leaf.dtype.name}, which has no "
                                f"safetensors equivalent; save its real and imaginary parts (tnp.real, tnp.imag)")
            if not isinstance(leaf, Tensor) and np.asarray(leaf).dtype.name not in _NUMPY_NAMES:
                raise TypeError(f"save: the numpy leaf at {_where(p)} has dtype {np.asarray(leaf).dtype}, which has no "
                                f"safetensors equivalent")
            name = tensor_name(p)
            if name in names:
                raise ValueError(f"save: the leaves at {_where(names[name])} and {_where(p)} both get the tensor name "
                                 f"{name!r}; rename a key so the dotted paths differ")
            names[name] = p
            arrays.append((name, leaf))
            code = {"tensor": name}
        leaf_codes.append(code)
    structure = _encode(treedef, iter(leaf_codes), ())
    header: dict[str, Any] = {}
    chunks: list[bytes] = []
    offset = 0
    for (name, _), raw in zip(arrays, _host_bytes([a for _, a in arrays]), strict=True):
        data, d, shape = raw
        header[name] = {"dtype": _ST_NAMES[d], "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    meta = dict(metadata or {})
    if any(not isinstance(k, str) or not isinstance(v, str) for k, v in meta.items()):
        raise TypeError("save: `metadata` must map strings to strings")
    meta[TREE_KEY] = json.dumps({"version": 1, "tree": structure}, separators=(",", ":"))
    header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)  # pad so the data starts 8-byte aligned, as the safetensors writer does
    _write_atomic(os.fspath(path), [len(text).to_bytes(8, "little"), text, *chunks])


def tensor_name(path: KeyPath) -> str:
    """The dotted tensor name of a leaf's key path: `['params']['w']` -> `params.w`, a root leaf -> `value`."""
    return keystr(path, simple=True, separator=".") if path else "value"


def _where(path: KeyPath) -> str:
    return f"path {keystr(path)}" if path else "the root"


def _scalar_code(leaf: Any) -> dict[str, Any] | None:
    if isinstance(leaf, bool):
        return {"bool": leaf}
    if isinstance(leaf, int):
        return {"int": str(leaf)}
    if isinstance(leaf, float):
        return {"float": repr(leaf)}  # repr keeps nan/inf, which JSON numbers cannot hold
    if isinstance(leaf, str):
        return {"str": leaf}
    return None


def _host_bytes(leaves: list[Tensor | np.ndarray]) -> Iterator[tuple[bytes, DType, tuple[int, ...]]]:
    """Each leaf's little-endian bytes, dtype and shape; the Tensors are computed together in one schedule."""
    tensors = [t for t in leaves if isinstance(t, Tensor)]
    if tensors:
        realize(*tensors)
    for leaf in leaves:
        if isinstance(leaf, Tensor):
            d = leaf.dtype
            arr = (leaf.bitcast(dtypes.uint16) if d == dtypes.bfloat16 else leaf).numpy()
        else:
            arr = np.asarray(leaf)
            d = to_dtype(arr.dtype)
        yield np.ascontiguousarray(arr, arr.dtype.newbyteorder("<")).tobytes(), d, tuple(arr.shape)


def _encode(d: PyTreeDef, leaves: Iterator[dict[str, Any]], path: KeyPath) -> Any:
    """The structure as JSON: leaves as their codes, None as null, dict/list/tuple as themselves; any other node
    as its type's name and its children's keys (only `load(like=...)` can rebuild those)."""
    t = d.node_type
    if t is None:
        return next(leaves)
    if t is type(None):
        return None
    if t is dict:
        keys = d.node_data
        for k in keys:
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"save: the dict at {_where(path)} has the key {k!r}; checkpoints keep str and int "
                                f"keys")
        return {"dict": [[k, _encode(c, leaves, (*path, DictKey(k)))] for k, c in zip(keys, d.children(),
                                                                                        strict=True)]}
    if t is list or t is tuple:
        return {t.__name__: [_encode(c, leaves, (*path, SequenceKey(i))) for i, c in enumerate(d.children())]}
    from tgfx.tree import _registration
    reg = _registration(t)
    assert reg is not None
    keys = reg.keys(t, d.node_data, len(d.children()))
    return {"node": f"{t.__module__}.{t.__qualname__}", "keys": [str(k) for k in keys],
            "children": [_encode(c, leaves, (*path, k)) for k, c in zip(keys, d.children(), strict=True)]}


def _write_atomic(path: str, parts: list[bytes]) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            for p in parts:
                f.write(p)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


# ---- load ----
def load(path: PathLike, like: Any = None, device: str | None = None) -> Any:
    """Read a safetensors file written by `save` (or by any safetensors writer) back into a pytree of Tensors.

    A file `save` wrote comes back in the structure it was saved in; any other safetensors file comes back as a
    dict from tensor names to Tensors. With `like`, a pytree of the expected structure (e.g. freshly initialised
    parameters), the stored tree must have exactly its leaf paths, and each stored tensor the shape and dtype of the
    matching leaf of `like` where that leaf has them; the result is built with `like`'s node types (so NamedTuples,
    dataclasses and other registered nodes come back too). A mismatch is a `CheckpointError` naming the pytree path.

    >>> params = tg.load("model.safetensors", like=init_params)   # same structure, shapes and dtypes, or an error
    """
    where = os.fspath(path)
    header, data = _read(where)
    meta = header.pop("__metadata__", {})
    tensors = {name: _tensor(where, name, entry, data, device) for name, entry in header.items()}
    if TREE_KEY not in meta:
        if like is not None:
            return _match_like(where, {f"[{name!r}]": t for name, t in tensors.items()}, like)
        return tensors
    try:
        stored = json.loads(meta[TREE_KEY])
        tree = stored["tree"]
    except (json.JSONDecodeError, TypeError, KeyError) as e:
        raise CheckpointError(f"{where}: the stored tree structure (__metadata__[{TREE_KEY!r}]) is malformed: "
                              f"{e}") from None
    leaves: dict[str, Any] = {}
    _collect(where, tree, "", tensors, leaves)
    if like is not None:
        return _match_like(where, leaves, like)
    return _decode(where, tree, "", tensors)


def _read(where: str) -> tuple[dict[str, Any], memoryview]:
    try:
        with open(where, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise CheckpointError(f"{where}: cannot read the checkpoint: {e.strerror or e}") from None
    if len(raw) < 8:
        raise CheckpointError(f"{where}: the file is {len(raw)} bytes, too short for a safetensors header length "
                              f"(8 bytes); it is truncated or not a safetensors file")
    n = int.from_bytes(raw[:8], "little")
    if n > MAX_HEADER or 8 + n > len(raw):
        raise CheckpointError(f"{where}: the header length {n} runs past the end of the {len(raw)}-byte file; it is "
                              f"truncated or not a safetensors file")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{where}: the header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{where}: the header is a JSON {type(header).__name__}, not an object of tensors")
    meta = header.get("__metadata__", {})
    if not isinstance(meta, dict) or any(not isinstance(v, str) for v in meta.values()):
        raise CheckpointError(f"{where}: __metadata__ must be an object of strings")
    data = memoryview(raw)[8 + n:]
    _check_offsets(where, {k: v for k, v in header.items() if k != "__metadata__"}, len(data))
    return header, data


def _check_offsets(where: str, entries: dict[str, Any], size: int) -> None:
    spans = []
    for name, e in entries.items():
        if not isinstance(e, dict) or not {"dtype", "shape", "data_offsets"} <= set(e):
            raise CheckpointError(f"{where}: tensor {name!r} needs dtype, shape and data_offsets, got {e!r}")
        if e["dtype"] not in _ST_DTYPES:
            raise CheckpointError(f"{where}: tensor {name!r} has dtype {e['dtype']!r}, which tgfx does not support "
                                  f"(supported: {', '.join(_ST_DTYPES)})")
        shape, offs = e["shape"], e["data_offsets"]
        if not isinstance(shape, list) or any(not _is_int(s) or s < 0 for s in shape):
            raise CheckpointError(f"{where}: tensor {name!r} has shape {shape!r}, not a list of non-negative ints")
        if not isinstance(offs, list) or len(offs) != 2 or not all(_is_int(o) for o in offs) or \
                not 0 <= offs[0] <= offs[1]:
            raise CheckpointError(f"{where}: tensor {name!r} has data_offsets {offs!r}, not [begin, end] with "
                                  f"0 <= begin <= end")
        if offs[1] > size:
            raise CheckpointError(f"{where}: tensor {name!r} has data_offsets {offs!r} out of range: the data "
                                  f"section holds {size} bytes (the file is truncated?)")
        need = math.prod(shape) * _ST_DTYPES[e["dtype"]].itemsize
        if offs[1] - offs[0] != need:
            raise CheckpointError(f"{where}: tensor {name!r} spans {offs[1] - offs[0]} bytes, but shape {shape} of "
                                  f"{e['dtype']} needs {need}")
        spans.append((offs[0], offs[1], name))
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:], strict=False):
        if b1 < e0 and b1 < e1:  # zero-size tensors occupy nothing and overlap nothing
            raise CheckpointError(f"{where}: tensors {n0!r} (bytes {b0}..{e0}) and {n1!r} (bytes {b1}..{e1}) overlap")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _tensor(where: str, name: str, e: dict[str, Any], data: memoryview, device: str | None) -> Tensor:
    d = _ST_DTYPES[e["dtype"]]
    b, end = e["data_offsets"]
    arr = np.frombuffer(data[b:end], dtype=np.dtype(d.np_name).newbyteorder("<")).reshape(e["shape"])
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if d.is_bool and arr.size and arr.view(np.uint8).max() > 1:
        raise CheckpointError(f"{where}: bool tensor {name!r} holds bytes other than 0 and 1")
    return Tensor(arr, d, device)


def _container(where: str, node: Any, path: str) -> tuple[str, list[tuple[str, Any, Any]]] | None:
    """A stored container node as (kind, [(key path suffix, key, child)]), or None for a leaf or None."""
    if not isinstance(node, dict):
        return None
    if len(node) == 1 and next(iter(node)) in ("dict", "list", "tuple"):
        kind, children = next(iter(node.items()))
        if not isinstance(children, list):
            raise CheckpointError(f"{where}: the stored structure is malformed at {path or 'the root'}")
        if kind != "dict":
            return kind, [(f"[{i}]", i, c) for i, c in enumerate(children)]
        if any(not isinstance(kc, list) or len(kc) != 2 or not isinstance(kc[0], (str, int)) for kc in children):
            raise CheckpointError(f"{where}: the stored structure is malformed at {path or 'the root'}")
        return kind, [(f"[{k!r}]", k, c) for k, c in children]
    if "node" in node:
        keys, children = node.get("keys"), node.get("children")
        if not isinstance(keys, list) or not isinstance(children, list) or len(keys) != len(children) or \
                any(not isinstance(k, str) for k in keys):
            raise CheckpointError(f"{where}: the stored structure is malformed at {path or 'the root'}")
        return str(node["node"]), [(k, k, c) for k, c in zip(keys, children, strict=True)]
    return None


def _collect(where: str, node: Any, path: str, tensors: dict[str, Tensor], out: dict[str, Any]) -> None:
    """Every leaf of the stored structure by its key path, as `keystr` renders it."""
    if node is None:
        return
    container = _container(where, node, path)
    if container is None:
        out[path] = _leaf(where, node, path, tensors)
        return
    for suffix, _, child in container[1]:
        _collect(where, child, path + suffix, tensors, out)


def _decode(where: str, node: Any, path: str, tensors: dict[str, Tensor]) -> Any:
    """The stored structure rebuilt from dicts, lists, tuples, None and leaves."""
    if node is None:
        return None
    container = _container(where, node, path)
    if container is None:
        return _leaf(where, node, path, tensors)
    kind, children = container
    if kind not in ("dict", "list", "tuple"):
        raise CheckpointError(f"{where}: the tree holds a {kind} at {path or 'the root'}, which load cannot rebuild "
                              f"on its own; pass like= a tree of the expected structure")
    items = [(k, _decode(where, c, path + suffix, tensors)) for suffix, k, c in children]
    if kind == "dict":
        return dict(items)
    return [v for _, v in items] if kind == "list" else tuple(v for _, v in items)


def _leaf(where: str, node: Any, path: str, tensors: dict[str, Tensor]) -> Any:
    if isinstance(node, dict) and len(node) == 1:
        (kind, v), = node.items()
        if kind == "tensor" and isinstance(v, str):
            if v not in tensors:
                raise CheckpointError(f"{where}: the leaf at {path or 'the root'} names tensor {v!r}, which the file "
                                      f"does not hold")
            return tensors[v]
        try:
            if kind == "int" and isinstance(v, str):
                return int(v)
            if kind == "float" and isinstance(v, str):
                return float(v)
        except ValueError:
            pass
        if kind == "bool" and isinstance(v, bool) or kind == "str" and isinstance(v, str):
            return v
    raise CheckpointError(f"{where}: the stored structure has an unreadable leaf at {path or 'the root'}: {node!r}")


def _match_like(where: str, leaves: dict[str, Any], like: Any) -> Any:
    pairs, treedef = tree_flatten_with_path(like)
    want = [keystr(p) for p, _ in pairs]
    missing = [p for p in want if p not in leaves]
    extra = [p for p in leaves if p not in set(want)]
    if missing or extra:
        first = f"`like` has {missing[0] or 'the root'}, which the checkpoint lacks" if missing else \
            f"the checkpoint has {extra[0] or 'the root'}, which `like` lacks"
        raise CheckpointError(f"{where}: the stored tree does not match `like`: {first} ({len(missing)} path(s) "
                              f"missing, {len(extra)} unexpected)")
    out = []
    for (_, expect), key in zip(pairs, want, strict=True):
        got = leaves[key]
        if hasattr(expect, "shape") and hasattr(expect, "dtype") and isinstance(got, Tensor):
            e_shape, e_dtype = tuple(expect.shape), _dtype_of(expect)
            if got.shape != e_shape or (e_dtype is not None and got.dtype != e_dtype):
                raise CheckpointError(f"{where}: the tensor at {key or 'the root'} is {got.dtype.name}{list(got.shape)}"
                                      f", but `like` expects {e_dtype.name if e_dtype else '?'}{list(e_shape)}")
        out.append(got)
    return tree_unflatten(treedef, out)


def _dtype_of(x: Any) -> DType | None:
    try:
        return to_dtype(x.dtype)
    except TypeError:
        return None

"""Top-level jax names of tgfx: `tgfx.tree_util`, `linearize`, `linear_transpose`, `custom_gradient`,
`closure_convert` (tgfx/transforms/linear.py), the small names of tgfx/api_more.py, and the orthogonal
initialisers: their values against jvp/vjp identities, finite differences, numpy and (where installed) JAX, under
jit and vmap, and their error messages."""
import dataclasses
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
import tgfx.tree_util as tu


def close(got: object, want: object, tol: float = 1e-5) -> None:
    g = np.asarray(got)
    assert g.shape == np.shape(want), (g.shape, np.shape(want))
    np.testing.assert_allclose(g, want, rtol=tol, atol=tol)


def vec(n: int) -> st.SearchStrategy:
    return st.lists(st.floats(-2, 2, width=32), min_size=n, max_size=n).map(lambda v: np.array(v, np.float32))


# ---- tree_util ----
def test_tree_util_is_importable_both_ways_and_reexports_tree() -> None:
    assert tg.tree_util is tu
    for name in ("tree_map", "tree_leaves", "tree_structure", "tree_flatten", "tree_unflatten", "tree_map_with_path",
                 "tree_flatten_with_path", "tree_leaves_with_path", "tree_reduce", "tree_all", "tree_transpose",
                 "register_pytree_node", "register_pytree_node_class", "register_pytree_with_keys",
                 "register_dataclass", "keystr", "DictKey", "GetAttrKey", "SequenceKey", "FlattenedIndexKey",
                 "PyTreeDef", "tree_broadcast"):
        assert getattr(tu, name) is getattr(tg.tree, name), name
    assert tu.tree_map(lambda x: x + 1, {"a": 1, "b": (2,)}) == {"a": 2, "b": (3,)}


def test_partial_is_a_pytree_that_crosses_jit() -> None:
    scale = tu.Partial(lambda s, x: s * x, tnp.asarray(2.0))
    leaves, treedef = tu.tree_flatten(scale)
    assert len(leaves) == 1 and leaves[0].tolist() == 2.0
    rebuilt = tu.tree_unflatten(treedef, [tnp.asarray(3.0)])
    assert isinstance(rebuilt, tu.Partial) and rebuilt(tnp.ones(2)).tolist() == [3.0, 3.0]
    f = tg.jit(lambda g, x: g(x))
    assert f(scale, tnp.ones(2)).tolist() == [2.0, 2.0]
    assert f(tu.Partial(scale.func, tnp.asarray(5.0)), tnp.ones(2)).tolist() == [5.0, 5.0]
    assert f.trace_count == 1   # same function, new leaf value: no retrace
    # a functools.partial inside stays whole (its bound value is static, not merged into the outer leaves)
    nested = tu.Partial(functools.partial(tnp.add, tnp.ones(2)), tnp.ones(2))
    assert len(tu.tree_leaves(nested)) == 1 and nested().tolist() == [2.0, 2.0]
    with pytest.raises(TypeError, match="Partial: the first argument must be callable"):
        tu.Partial(3)


def test_structure_helpers() -> None:
    assert tu.treedef_is_leaf(tu.tree_structure(1)) and tu.treedef_is_leaf(tu.tree_structure(None))
    assert not tu.treedef_is_leaf(tu.tree_structure([1]))
    assert tu.treedef_children(tu.tree_structure((1, [2, 3]))) == [tu.tree_structure(0), tu.tree_structure([0, 0])]
    td = tu.treedef_tuple([tu.tree_structure(1), tu.tree_structure({"a": 1})])
    assert td == tu.tree_structure((0, {"a": 0}))
    assert tu.all_leaves([1, tnp.ones(2)]) and not tu.all_leaves([1, (2,)]) and not tu.all_leaves([None])
    assert tu.all_leaves([(1, 2)], is_leaf=lambda x: isinstance(x, tuple))
    assert tu.is_tree_node(list) and tu.is_tree_node(type(None)) and not tu.is_tree_node(int)
    assert tu.flatten_one_level({"b": 1, "a": 2}) == ((2, 1), ("a", "b"))
    assert tu.flatten_one_level_with_keys([5]) == (((tu.SequenceKey(0), 5),), None)
    with pytest.raises(ValueError, match="can't tree-flatten type"):
        tu.flatten_one_level(1)
    with pytest.raises(TypeError, match="treedef_tuple: element 0 is a int"):
        tu.treedef_tuple([1])


def test_reduce_associative_is_balanced() -> None:
    assert tu.tree_reduce_associative(lambda a, b: (a, b), [1, 2, 3, 4, 5]) == ((1, 2), (3, (4, 5)))
    assert tg.tree.reduce_associative(lambda a, b: a + b, {"a": 1, "b": [2, 3]}) == 6
    assert tu.tree_reduce_associative(lambda a, b: a + b, [], identity=0) == 0
    with pytest.raises(TypeError, match="needs an `identity`"):
        tu.tree_reduce_associative(lambda a, b: a + b, [])


def test_register_static_and_with_keys_class() -> None:
    @tu.register_static
    @dataclasses.dataclass(frozen=True)
    class Config:
        depth: int

    assert tu.tree_leaves([Config(2), 1]) == [1]
    out = tg.jit(lambda c, x: x * c.depth)(Config(3), tnp.ones(2))
    assert out.tolist() == [3.0, 3.0]

    @tu.register_pytree_with_keys_class
    class Pair:
        def __init__(self, a: object, b: object) -> None:
            self.a, self.b = a, b

        def tree_flatten_with_keys(self) -> tuple:
            return ((tu.GetAttrKey("a"), self.a), (tu.GetAttrKey("b"), self.b)), None

        @classmethod
        def tree_unflatten(cls, aux: object, children: list) -> "Pair":
            return cls(*children)

    paths = [tu.keystr(p) for p, _ in tu.tree_flatten_with_path(Pair(1, [2]))[0]]
    assert paths == [".a", ".b[0]"]
    with pytest.raises(TypeError, match="must define tree_flatten_with_keys"):
        tu.register_pytree_with_keys_class(type("Bare", (), {}))


# ---- linearize ----
def _f(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    return tnp.sin(x) * y + x ** 2


@settings(max_examples=15)
@given(vec(3), vec(3), vec(3), vec(3))
def test_linearize_matches_jvp(x: np.ndarray, y: np.ndarray, tx: np.ndarray, ty: np.ndarray) -> None:
    out, f_jvp = tg.linearize(_f, x, y)
    want_out, want_t = tg.jvp(_f, (x, y), (tx, ty))
    close(out, np.asarray(want_out))
    close(f_jvp(tx, ty), np.asarray(want_t), 1e-4)
    close(f_jvp(2 * tx, 2 * ty), 2 * np.asarray(want_t), 1e-4)   # linear in the tangents


def test_linearize_finite_differences_jit_vmap() -> None:
    x = np.array([0.3, -1.2, 2.0], np.float32)
    f = lambda x: tnp.tanh(x) * tnp.exp(0.5 * x)   # noqa: E731
    f64 = lambda x: np.tanh(x) * np.exp(0.5 * x)   # noqa: E731 - the same in float64, for central differences
    _, f_jvp = tg.linearize(f, x)
    t = np.array([1.0, -0.5, 0.25], np.float32)
    x64, t64, eps = x.astype(np.float64), t.astype(np.float64), 1e-6
    close(f_jvp(t), (f64(x64 + eps * t64) - f64(x64 - eps * t64)) / (2 * eps), 1e-5)
    close(tg.jit(f_jvp)(t), np.asarray(f_jvp(t)))
    jac = tg.vmap(f_jvp)(np.eye(3, dtype=np.float32))      # rows: J e_i = column i of the diagonal Jacobian
    close(jac, np.asarray(tg.jacfwd(f)(x)).T, 1e-5)
    inside = tg.jit(lambda x, t: tg.linearize(f, x)[1](t))(x, t)
    close(inside, np.asarray(f_jvp(t)))


def test_linearize_pytrees_aux_and_errors() -> None:
    params = {"w": np.array([1.0, 2.0], np.float32), "b": np.float32(0.5)}
    out, f_jvp, aux = tg.linearize(lambda p: ((p["w"] * p["b"]).sum(), "note"), params, has_aux=True)
    assert aux == "note" and out.tolist() == 1.5
    close(f_jvp({"w": np.ones(2, np.float32), "b": np.float32(1.0)}), 0.5 * 2 + 3.0)
    with pytest.raises(ValueError, match=r"takes one tangent per primal \(1\), got 2"):
        f_jvp(params, params)
    with pytest.raises(ValueError, match="linearize: primal 0 has structure"):
        f_jvp([1.0])
    with pytest.raises(ValueError, match=r"tangent leaf 1 should have shape \(2,\)"):
        f_jvp({"w": np.ones(3, np.float32), "b": np.float32(1.0)})
    with pytest.raises(TypeError, match="linearize: expected a function"):
        tg.linearize(3, 1.0)


# ---- linear_transpose ----
@settings(max_examples=15)
@given(vec(4), vec(3))
def test_linear_transpose_inner_product_identity(x: np.ndarray, c: np.ndarray) -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    f = lambda x: a @ tnp.cumsum(x)   # noqa: E731 - linear
    (xt,) = tg.linear_transpose(f, tg.ShapeDtypeStruct((4,), tnp.float32))(c)
    close(np.dot(np.asarray(f(x)), c), float(np.dot(x, np.asarray(xt))), 1e-3)
    close(xt, np.cumsum((a.T @ c)[::-1])[::-1], 1e-4)


def test_linear_transpose_pytrees_jit_and_errors() -> None:
    f = lambda p: (p["a"] * 2.0 + p["b"].sum(), 3.0 * p["b"])   # noqa: E731
    primals = {"a": tnp.zeros(2), "b": tnp.zeros(3)}
    f_t = tg.linear_transpose(f, primals)
    (ct,) = f_t((tnp.ones(2), tnp.ones(3)))
    close(ct["a"], [2.0, 2.0])
    close(ct["b"], [5.0, 5.0, 5.0])   # 2 from the sum broadcast into both outputs of a, 3 from the second output
    (ct_jit,) = tg.jit(f_t)((tnp.ones(2), tnp.ones(3)))
    close(ct_jit["b"], [5.0, 5.0, 5.0])
    with pytest.raises(TypeError, match="only supports float or complex inputs, but got int32"):
        tg.linear_transpose(lambda x: x, tnp.arange(3))
    with pytest.raises(ValueError, match="linear_transpose: the cotangent has structure"):
        f_t(tnp.ones(2))
    with pytest.raises(TypeError, match="cotangent leaf 1 has dtype float16, the output has float32"):
        f_t((tnp.ones(2), tnp.ones(3, tnp.float16)))


# ---- custom_gradient, closure_convert ----
@tg.custom_gradient
def _clip_grad(x: tg.Tensor) -> tuple:
    return x, lambda g: (tnp.clip(g, -1.0, 1.0),)


@tg.custom_gradient
def _softplus(x: tg.Tensor) -> tuple:
    e = tnp.exp(x)
    return tnp.log1p(e), lambda g: g * e / (1 + e)     # a single cotangent for one argument: no tuple needed


def test_custom_gradient_uses_the_rule() -> None:
    loss = lambda x: (5.0 * _clip_grad(x)).sum()   # noqa: E731
    close(tg.grad(loss)(tnp.ones(2)), [1.0, 1.0])   # 5 clipped to 1
    close(tg.jit(tg.grad(loss))(tnp.ones(2)), [1.0, 1.0])
    close(tg.vmap(tg.grad(lambda x: _clip_grad(x) * 3.0))(tnp.ones(3)), [1.0, 1.0, 1.0])
    x = np.array([-1.0, 0.0, 2.0], np.float32)
    close(_softplus(x), np.log1p(np.exp(x)))
    close(tg.grad(lambda x: _softplus(x).sum())(x), 1 / (1 + np.exp(-x)))


def test_custom_gradient_errors() -> None:
    bad = tg.custom_gradient(lambda x: x)
    with pytest.raises(TypeError, match="must return a pair \\(value, vjp_rule\\)"):
        tg.grad(lambda x: bad(x).sum())(tnp.ones(2))
    two = tg.custom_gradient(lambda x, y: (x * y, lambda g: g))
    with pytest.raises(TypeError, match="must return a tuple of 2 cotangents"):
        tg.grad(lambda x: two(x, x).sum())(tnp.ones(2))


def test_closure_convert_hoists_differentiated_values() -> None:
    c = tnp.asarray([1.0, 2.0, 3.0])
    f, consts = tg.closure_convert(lambda x: x * c, tnp.ones(3))
    assert consts == []          # outside any transform nothing is hoisted, as in JAX
    close(f(tnp.ones(3)), [1.0, 2.0, 3.0])

    seen = []

    def apply_plain(fun: object, x: tg.Tensor, *consts: tg.Tensor) -> tg.Tensor:
        return fun(x, *consts)

    def fwd(fun: object, x: tg.Tensor, *consts: tg.Tensor) -> tuple:
        return fun(x, *consts), (x, consts)

    def bwd(fun: object, res: tuple, g: tg.Tensor) -> tuple:
        x, consts = res
        return (g * consts[0], *(10.0 * g * x for _ in consts))   # scaled by 10: the rule, not autodiff, ran

    apply = tg.custom_vjp(apply_plain, nondiff_argnums=(0,))
    apply.defvjp(fwd, bwd)

    def outer(c: tg.Tensor) -> tg.Tensor:
        fun, consts = tg.closure_convert(lambda x: x * c, tnp.ones(3))
        seen.append(len(consts))
        return apply(fun, tnp.full(3, 2.0), *consts).sum()

    close(tg.grad(outer)(c), [20.0, 20.0, 20.0])   # 10 d/dc (2 c), by the rule's cotangent for the hoisted c
    assert seen == [1]

    # the converted function computes with the constants it is given, not the ones it closed over
    def swapped(c: tg.Tensor) -> tg.Tensor:
        fun, consts = tg.closure_convert(lambda x: x * c, tnp.ones(3))
        return fun(tnp.ones(3), *[k * 0 + 7.0 for k in consts]).sum()
    close(tg.grad(swapped)(c), [0.0, 0.0, 0.0])
    with pytest.raises(TypeError, match=r"takes 1 argument\(s\) then 0 hoisted"):
        f(tnp.ones(3), tnp.ones(3))


def test_closure_convert_in_a_bwd_keeps_the_arguments_computed_from_the_constants() -> None:
    # a custom_vjp whose bwd differentiates the converted function at a residual computed from the hoisted constant
    # (an ODE solver's adjoint differentiates its dynamics at states that depend on the parameters): the cotangent of
    # the argument must survive, eagerly (the bwd runs after the forward is computed) and under jit
    def apply_plain(fun: object, y: tg.Tensor, *consts: tg.Tensor) -> tg.Tensor:
        return fun(y, *consts)

    def fwd(fun: object, y: tg.Tensor, *consts: tg.Tensor) -> tuple:
        return fun(y, *consts), (y, consts)

    def bwd(fun: object, res: tuple, g: tg.Tensor) -> tuple:
        y, consts = res
        return tg.vjp(fun, y, *consts)[1](g)

    apply = tg.custom_vjp(apply_plain, nondiff_argnums=(0,))
    apply.defvjp(fwd, bwd)

    def loss(w: tg.Tensor, y: tg.Tensor, custom: bool = True) -> tg.Tensor:
        fun, consts = tg.closure_convert(lambda v: tnp.tanh(w @ v), y)
        z = y * w.sum()                       # the argument depends on w too
        return (apply(fun, z, *consts) if custom else tnp.tanh(w @ z)).sum()

    w, y = tnp.asarray([[0.5, -1.0], [1.0, 0.2]]), tnp.asarray([1.0, 0.5])
    want = tg.grad(functools.partial(loss, custom=False), argnums=(0, 1))(w, y)
    for got in (tg.grad(loss, argnums=(0, 1))(w, y), tg.jit(tg.grad(loss, argnums=(0, 1)))(w, y)):
        close(got[0], want[0])
        close(got[1], want[1])


# ---- small names ----
def test_named_scope_and_named_call() -> None:
    with tg.named_scope("block"):
        y = tnp.ones(2) * 2
    assert y.tolist() == [2.0, 2.0]
    step = tg.named_call(lambda x: x + 1, name="step")
    assert step.__name__ == "step" and step(1) == 2
    with pytest.raises(TypeError, match="named_scope: the name must be a string, got int"):
        with tg.named_scope(3):
            pass
    with pytest.raises(TypeError, match="named_call: expected a function"):
        tg.named_call(None)


def test_clear_caches_forces_a_retrace() -> None:
    f = tg.jit(lambda x: x * 2 + 1)
    f(tnp.ones(3))
    f(tnp.ones(3))
    assert f.trace_count == 1
    tg.clear_caches()
    assert f(tnp.ones(3)).tolist() == [3.0, 3.0, 3.0]
    assert f.trace_count == 2


def test_default_backend_typeof_enable_x64_compile_time_eval() -> None:
    assert tg.default_backend() in ("cpu", "gpu")
    t = tg.typeof(tnp.ones((2, 3)))
    assert str(t) == "float32[2,3]" and t.shape == (2, 3) and t.dtype == tnp.float32 and not t.weak_type
    assert str(tg.typeof(1.0)) == "~float32[]" and str(tg.typeof(True)) == "bool[]"
    assert str(tg.typeof(np.zeros(2, np.int32))) == "int32[2]"
    assert tg.typeof(tnp.ones(2)) == tg.ShapeDtypeStruct((2,), tnp.float32)
    with pytest.raises(TypeError, match="typeof: str is not an array"):
        tg.typeof("x")
    with tg.enable_x64():
        assert tnp.asarray(1.0, tnp.float64).dtype == tnp.float64
        with tg.enable_x64(False):
            assert tnp.ones(2).dtype == tnp.float32
    assert tnp.ones(2).dtype == tnp.float32

    @tg.jit
    def f(x: tg.Tensor) -> tg.Tensor:
        with tg.ensure_compile_time_eval():
            n = int(tnp.arange(4).sum())    # a constant: concrete while tracing
        return x * n
    assert f(tnp.ones(2)).tolist() == [6.0, 6.0]


# ---- initializers ----
@pytest.mark.parametrize("shape,axis", [((4, 3), -1), ((3, 5), -1), ((2, 3, 4), 0), ((2, 3, 4), 1)])
def test_orthogonal_initializer(shape: tuple, axis: int) -> None:
    w = np.asarray(tg.nn.initializers.orthogonal(2.0, axis)(tg.random.key(3), shape), np.float64)
    assert w.shape == shape
    m = np.moveaxis(w, axis, -1).reshape(-1, shape[axis]) / 2.0
    gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    close(gram, np.eye(min(m.shape)), 1e-5)


def test_delta_orthogonal_initializer_and_errors() -> None:
    w = np.asarray(tg.nn.initializers.delta_orthogonal()(tg.random.key(1), (3, 3, 2, 5)), np.float64)
    centre = w[1, 1]
    close(centre @ centre.T, np.eye(2), 1e-5)
    w[1, 1] = 0
    assert not w.any()
    with pytest.raises(ValueError, match="requires a 3D, 4D or 5D shape"):
        tg.nn.initializers.delta_orthogonal()(tg.random.key(0), (3, 3))
    with pytest.raises(ValueError, match="`fan_in` must be less or equal than `fan_out`"):
        tg.nn.initializers.delta_orthogonal()(tg.random.key(0), (3, 5, 2))
    with pytest.raises(ValueError, match="requires at least a 2D shape"):
        tg.nn.initializers.orthogonal()(tg.random.key(0), (3,))
    assert tg.nn.initializers.orthogonal()(tg.random.key(0), (0, 3)).shape == (0, 3)


def test_matches_jax_where_jax_is_installed() -> None:
    jax = pytest.importorskip("jax")
    for shape, axis in [((4, 3), -1), ((2, 3, 4), 1)]:
        got = tg.nn.initializers.orthogonal(1.5, axis)(tg.random.key(7), shape)
        want = jax.nn.initializers.orthogonal(1.5, axis)(jax.random.key(7), shape, jax.numpy.float32)
        close(got, np.asarray(want), 1e-5)
    got = tg.nn.initializers.delta_orthogonal()(tg.random.key(2), (3, 4, 4))
    close(got, np.asarray(jax.nn.initializers.delta_orthogonal()(jax.random.key(2), (3, 4, 4), jax.numpy.float32)),
          1e-5)
    x, t = np.array([0.5, -1.0], np.float32), np.array([1.0, 2.0], np.float32)
    f = lambda x: x * x * x   # noqa: E731
    close(tg.linearize(f, x)[1](t), np.asarray(jax.linearize(f, x)[1](t)))
    close(tg.linear_transpose(lambda v: 3.0 * v, x)(t)[0], np.asarray(jax.linear_transpose(lambda v: 3.0 * v, x)(t)[0]))
    assert str(tg.typeof(tnp.ones((2, 3)))) == str(jax.typeof(jax.numpy.ones((2, 3))))
    assert tu.tree_reduce_associative(lambda a, b: (a, b), list(range(6))) == \
        jax.tree_util.tree_reduce_associative(lambda a, b: (a, b), list(range(6)))


def test_tg_devices_lists_and_is_the_devices_package() -> None:
    """`tg.devices()` lists the devices (JAX's `jax.devices()`), and the same name is the `tgfx.devices` package: its
    submodules import (`import tgfx.devices.target` failed when the attribute was the listing function)."""
    import importlib

    import tgfx as tg
    target = importlib.import_module("tgfx.devices.target")
    import tgfx.devices.cpu as cpu
    from tgfx.devices import DEFAULT_DEVICE, canonical_device
    default = canonical_device(DEFAULT_DEVICE)
    assert tg.devices("cpu")[0] == "CPU:0" and default in tg.devices()
    assert tg.devices() == tg.devices(default.split(":")[0].lower())   # the default device's backend
    assert tg.devices.target is target and cpu.CPUDevice is tg.devices.CPUDevice
    with pytest.raises(ValueError, match="tpu"):
        tg.devices("tpu")


def test_dtypes_helpers_as_jax_dtypes() -> None:
    d = tg.dtypes
    assert d.issubdtype(d.bfloat16, tnp.floating) and not d.issubdtype(d.int8, tnp.unsignedinteger)
    assert d.issubdtype(np.float32, np.inexact)
    assert d.result_type(1.0, d.int8) == d.float32 and d.result_type(d.int8, 1) == d.int8
    assert d.result_type(tnp.ones(2, d.bfloat16), 1) == d.bfloat16
    assert d.result_type(1.0, 2, return_weak_type_flag=True) == (d.float32, True)
    assert d.result_type(d.int8, 1, return_weak_type_flag=True) == (d.int8, False)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a query, not a request: no x64 warning
        assert d.canonicalize_dtype(np.float64) == d.float32 and d.canonicalize_dtype(float) == d.float32
        assert d.canonicalize_dtype("bfloat16") == d.bfloat16 and d.canonicalize_dtype(d.int64) == d.int32
        assert d.canonicalize_dtype(np.ones(2, np.int16)) == d.int16
    assert d.float32 in d.all() and len(d.all()) == 15   # the helpers are not dtypes
    # jax.dtypes is a module: `from jax.dtypes import canonicalize_dtype` (tg.dtypes is the namespace class)
    from tgfx.dtypes import bfloat16, canonicalize_dtype, issubdtype, result_type
    assert (canonicalize_dtype, issubdtype, result_type) == (d.canonicalize_dtype, d.issubdtype, d.result_type)
    assert bfloat16 is d.bfloat16

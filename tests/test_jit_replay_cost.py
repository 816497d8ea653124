"""What a jitted call's replay costs in Python per leaf of its arguments and results, by counts (`sys.setprofile`'s
call events, as tests/test_eager_cost.py counts an eager op's): a training step's hundreds of parameters, moments and
results are flattened, bound and built again every call, and a Python call per node or leaf more is a step's host time
(realnvp's step: 218 leaves in, 218 results out in 166 lists and dicts)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import as_in_a_fresh_process, count_calls, count_opcodes, run_threads

import tgfx as tg
from tgfx import config
from tgfx.ir.ops import Ops


def _params(n: int) -> list[dict[str, tg.Tensor]]:
    """n layers of {"b", "w"}: 2n leaves in n + 1 nodes, on the CPU whatever the default device (the bound counts
    the CPU queue's submission)."""
    rng = np.random.default_rng(n)
    return [{"b": tg.Tensor(rng.standard_normal(3).astype(np.float32), device="CPU"),
             "w": tg.Tensor(rng.standard_normal((2, 3)).astype(np.float32), device="CPU")} for _ in range(n)]


@tg.jit
def _step(p: list, m: list, lr: float) -> tuple:
    new_m = tg.tree_util.tree_map(lambda m, p: 0.9 * m + p, m, p)
    return tg.tree_util.tree_map(lambda p, m: p - lr * m, p, new_m), new_m


def _replay_calls(n: int) -> int:
    """The Python calls of one replay of `_step` on n layers (traced and replayed before), its results read."""
    p, m = _params(n), _params(n)
    for _ in range(2):
        tg.block_until_ready(_step(p, m, 0.1))
    with as_in_a_fresh_process():
        calls, out = count_calls(lambda: _step(p, m, 0.1))
    want_m = [{k: 0.9 * m[i][k].numpy() + p[i][k].numpy() for k in ("b", "w")} for i in range(n)]
    for i in (0, n - 1):
        for k in ("b", "w"):
            np.testing.assert_allclose(out[1][i][k].numpy(), want_m[i][k], rtol=1e-6)
            np.testing.assert_allclose(out[0][i][k].numpy(), p[i][k].numpy() - 0.1 * want_m[i][k], rtol=1e-6)
    assert type(out) is tuple and type(out[0]) is list and type(out[0][0]) is dict and list(out[0][0]) == ["b", "w"]
    return calls


def test_a_replays_python_calls_grow_by_few_per_leaf(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per leaf of the arguments and its result (8 leaves in and out, against 800): two calls, the result's Tensor and
    the flatten of the dict holding the leaf and its sibling. Before: 4.5, the results' tree built node by node
    (`tree_unflatten`: `PyTreeDef._build`, its registration, its unflatten, per dict of two leaves; now one call for
    the whole tree, `tree_compiled`) and a flatten call per Tensor leaf (now taken by its container's loop)."""
    monkeypatch.setattr(config.SPEC, "value", 0)
    few, many = _replay_calls(2), _replay_calls(200)
    per_leaf = (many - few) / 792
    assert per_leaf <= 2.1, (few, many, per_leaf)


def test_a_compiled_builder_makes_what_tree_unflatten_makes() -> None:
    import collections

    from tgfx.tree import tree_flatten, tree_unflatten
    from tgfx.tree_compiled import unflattener
    Point = collections.namedtuple("Point", "x y")
    trees = [1, (), (1,), [1, (2, 3)], {"b": 1, "a": [2, None, 3]}, None, Point(1, {"z": (2,)}),
             collections.OrderedDict([("z", 1), ("a", 2)]), collections.defaultdict(list, {"k": [1, 2]}),
             [[[[[[[[1]]]]]]]], [(i, {"w": i}) for i in range(50)]]
    for tree in trees:
        leaves, treedef = tree_flatten(tree)
        for leaf in (None, str):
            got = unflattener(treedef, leaf)(leaves)
            want = tree_unflatten(treedef, leaves if leaf is None else [leaf(v) for v in leaves])
            assert got == want and type(got) is type(want), (tree, got)
            assert tree_flatten(got)[1] == treedef
    deep: object = 1
    for _ in range(300):   # nested past what Python's parser takes: built by tree_unflatten
        deep = [deep]
    leaves, treedef = tree_flatten(deep)
    assert unflattener(treedef, str)(leaves) == tree_unflatten(treedef, ["1"])


def _chain(n: int, devices: tuple[str, ...] = ("CPU",)) -> tg.jit:
    """A jitted function of n steps, each a reduction that reads an argument and a kernel writing the next value:
    about 1.5 kernels a step, each reading an argument's buffer (a patch word of the replay's). With several
    arguments (one per device), the steps run on their devices in turn, a run of steps on each."""
    @tg.jit
    def f(*xs: tg.Tensor) -> tg.Tensor:
        h = xs[0]
        for k in range(n):
            j = k * len(xs) // n
            h = tg.device_put(h, devices[j]) if len(xs) > 1 else h
            h = h * 0.5 + (h * xs[j]).sum()
        return h
    return f


def _chain_reference(n: int, xs: list[np.ndarray]) -> np.ndarray:
    h = xs[0].astype(np.float64)
    for k in range(n):
        h = h * 0.5 + (h * xs[k * len(xs) // n]).sum()
    return h


def _replay_opcodes(n: int, devices: tuple[str, ...]) -> tuple[int, int]:
    """The bytecodes (and kernels) of one replay of `_chain(n)` on arguments on `devices` (traced, replayed before)."""
    from tgfx.counters import counters
    f = _chain(n, devices)
    xs = [tg.Tensor(np.linspace(-1, 1, 64, dtype=np.float32) / 64 * (i + 1), device=d) for i, d in enumerate(devices)]
    for _ in range(2):
        tg.block_until_ready(f(*xs))
    before = counters.kernel_count
    with as_in_a_fresh_process():
        ops, out = count_opcodes(lambda: f(*xs))
    kernels = counters.kernel_count - before
    with as_in_a_fresh_process():   # the least of three: a collection or a finalizer may run during one
        for _ in range(2):
            tg.block_until_ready(out)
            ops = min(ops, count_opcodes(lambda: f(*xs))[0])
    np.testing.assert_allclose(out.numpy(), _chain_reference(n, [x.numpy() for x in xs]), rtol=1e-4)
    return ops, kernels


@pytest.mark.parametrize("devices", [("CPU",), ("CPU:0", "CPU:1")])
def test_a_replays_bind_costs_no_python_per_kernel(devices: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay points the words of its command buffers that name its arguments and results at this call's buffers:
    one per kernel reading an argument (realnvp's step, 275 kernels: 663 words). Bound word by word, each cost ~10
    bytecodes (48 us of realnvp's step); a long list is now one numpy write of an index array (17 us), so the
    bytecodes of a replay do not grow with its kernels (one device: 15 more for 58 more kernels; before, 600)."""
    monkeypatch.setattr(config.SPEC, "value", 0)
    # (run by the devices' threads: a segment run inline, where its device happens to be idle, takes other steps)
    monkeypatch.setattr(config.INLINE_BYTES, "value", 0)
    (few, k_few), (many, k_many) = _replay_opcodes(4, devices), _replay_opcodes(64, devices)
    assert k_many - k_few >= 60, (k_few, k_many)
    assert many - few <= k_many - k_few, (few, many, k_few, k_many)


@pytest.mark.parametrize("inline", [True, False])
def test_bulk_bound_replays_in_flight_and_on_threads(inline: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Replays of one program queued behind each other (none waited for), and from threads at once, each on its own
    arguments: every result is its own call's (the bulk-bound words of one call are copied into the device's ring
    before the next call rewrites them). Not inline, the device's thread runs them while later calls bind and lease
    their outputs: what a queued call holds (its buffers' memory) is neither handed out nor overwritten meanwhile."""
    monkeypatch.setattr(config.INLINE_BYTES, "value", -1 if inline else 0)
    n = 40
    f = _chain(n)
    xs = [np.linspace(-1, 1, 64, dtype=np.float32) * (i + 1) / 64 for i in range(8)]
    outs = [f(tg.Tensor(x, device="CPU")) for x in xs]   # queued, then read
    for x, out in zip(xs, outs, strict=True):
        np.testing.assert_allclose(out.numpy(), _chain_reference(n, [x]), rtol=1e-4)
    bad = []

    def work(t: int) -> None:
        for i in range(10):
            x = xs[(t + i) % len(xs)]
            got = f(tg.Tensor(x, device="CPU")).numpy()
            if not np.allclose(got, _chain_reference(n, [x]), rtol=1e-4):
                bad.append((t, i))
    assert run_threads(work, 4, switch_interval=1e-5) and not bad, bad


@tg.jit
def _sgd(p: list, lr: float) -> tuple:
    loss = sum((layer["w"] * layer["w"]).sum() for layer in p)
    return [{k: v - lr * v for k, v in layer.items()} for layer in p], loss


def _step_calls(read: bool) -> int:
    """The Python calls of a replay of `_sgd` on 50 layers, its parameters carried from call to call, the loss read
    (`float`) after each call or not."""
    p = _params(50)
    for _ in range(4):
        p, loss = _sgd(p, 0.01)
        if read:
            float(loss)
    with as_in_a_fresh_process():
        calls, (p, loss) = count_calls(lambda: _sgd(p, 0.01))
    want = sum(((0.99 ** 4 * layer["w"].numpy()) ** 2).sum() for layer in _params(50))   # (of the 4th step's p)
    assert np.isclose(float(loss), want, rtol=1e-4)
    return calls


def test_a_step_whose_loss_is_read_takes_back_its_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """`float(loss)` after each step read the loss's element through a view of its buffer (`Buffer.view`), which
    marked the buffer shared for good: the step could then take back none of its results (`Program._reuse`) and
    made each of them again, every step (realnvp's training loop: 1,966 us of host time per step, 508 now)."""
    monkeypatch.setattr(config.SPEC, "value", 0)
    quiet, read = _step_calls(False), _step_calls(True)
    assert read <= quiet + 2, (quiet, read)


def test_reading_an_element_marks_no_buffer_shared() -> None:
    from tgfx.lowering.execute import memory_of
    x = tg.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device="CPU") * 2
    x.realize()
    assert float(x[1, 2]) == 10.0 and float(x[0, 1]) == 2.0
    assert not memory_of(x.uop.src[0] if x.uop.op is not Ops.BUFFER else x.uop).shared


def test_recycling_many_reshaped_results_never_overwrites_one_still_held() -> None:
    """A step of 12 matrices (results that are reshapes of their buffers, tested in bulk by `Program._reuse`): a
    result kept as a Tensor, read by a lazy graph, viewed (`y[1:]`), or flattened (`reshape(-1)`: the buffer itself,
    held without the reshape) keeps its value while the loop goes on recycling the results it drops."""
    f = tg.jit(lambda ps: [p + 1 for p in ps])
    held: list[tuple[str, int, tg.Tensor]] = []
    for i in range(12):
        ys = f([tg.Tensor(np.full((2, 3), i + k, np.float32), device="CPU") for k in range(12)])
        kind = ("tensor", "lazy", "view", "flat")[i % 4]
        k = i % 12
        held.append((kind, i + k, ys[k] if kind == "tensor" else ys[k] * 10 if kind == "lazy" else
                     ys[k][1:] if kind == "view" else ys[k].reshape(-1)))
        del ys
    for i in range(20):   # plenty of chances to reuse whatever was dropped
        f([tg.Tensor(np.full((2, 3), 100 + i, np.float32), device="CPU") for _ in range(12)])
    for kind, v, t in held:
        want = {"tensor": np.full((2, 3), v + 1), "lazy": np.full((2, 3), 10 * (v + 1)),
                "view": np.full((1, 3), v + 1), "flat": np.full(6, v + 1)}[kind]
        np.testing.assert_array_equal(t.numpy(), want, err_msg=kind)


def _carried_opcodes(layers: int) -> int:
    """The bytecodes of a replay of a step carrying `layers` {"b", "w"} layers (run by the device's thread, not
    inline), the least of three, its values checked."""
    @tg.jit
    def step(p: list) -> list:
        return [{k: v * 0.5 for k, v in layer.items()} for layer in p]
    p0 = _params(layers)
    p = p0
    for _ in range(3):
        p = step(p)
    counts = []
    with as_in_a_fresh_process():
        for _ in range(3):
            ops, p = count_opcodes(lambda p=p: step(p))
            counts.append(ops)
    for i in (0, layers - 1):
        np.testing.assert_allclose(p[i]["w"].numpy(), p0[i]["w"].numpy() * 0.5 ** 6, rtol=1e-6)
    return min(counts)


def test_a_submission_holds_its_buffers_without_python_per_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a replay's submission holds until it completes is its buffers' memory: a leased output's raw allocation,
    so that the Python side dropping a result hands it back at once. It was picked buffer by buffer (a type test of
    each Buffer's owner, ~22 bytecodes a buffer: realnvp's 436, 9,600 of its 31,000); a program whose buffers are all
    its one device's now holds every Buffer's `_mem` (`_Leased` keeps the raw allocation there), one C loop. Per
    layer (two leaves in, two results out) of the whole replay: 256 bytecodes before, 180 now."""
    monkeypatch.setattr(config.SPEC, "value", 0)
    monkeypatch.setattr(config.INLINE_BYTES, "value", 0)
    few, many = _carried_opcodes(4), _carried_opcodes(204)
    assert (many - few) / 200 <= 200, (few, many)

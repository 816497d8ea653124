"""Control-flow packets of the HCQ runtime: BLOCK, JUMP, WRITE, ADD and indexed COPY, run by the native processor.

Each test builds a queue by hand, so the packets are checked below the compiler: loops replay packets on the device
(the host submits once), branches pick packets by a device word, indexed copies move slice i of a stack.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from helpers import native_programs

from tgfx.devices import get_device
from tgfx.devices.hcq import Buffer, HCQDevice, HCQError, Program
from tgfx.devices.packets import Op
from tgfx.devices.queue import HWQueue, Label

KERNELS_IR = r"""
; bufs[0][0] += 1.0 (float)
define void @inc(ptr %bufs, ptr %vals, i64 %core) {
  %b0 = load ptr, ptr %bufs
  %x = load float, ptr %b0
  %y = fadd float %x, 1.0
  store float %y, ptr %b0
  ret void
}

; bufs[0][0] = bufs[1][0] * 2 (float)
define void @double(ptr %bufs, ptr %vals, i64 %core) {
  %b0 = load ptr, ptr %bufs
  %b1p = getelementptr ptr, ptr %bufs, i64 1
  %b1 = load ptr, ptr %b1p
  %x = load float, ptr %b1
  %y = fmul float %x, 2.0
  store float %y, ptr %b0
  ret void
}
"""


@pytest.fixture(scope="module")
def k() -> dict[str, Program]:
    return native_programs(KERNELS_IR, ("inc", "double"))


@pytest.fixture
def dev() -> Iterator[HCQDevice]:
    d = get_device("CPU:0")
    yield d
    d.synchronize()


def upload(d: HCQDevice, arr: np.ndarray) -> Buffer:
    buf = d.allocator.alloc(max(arr.nbytes, 8))
    d.allocator.copyin(buf, arr)
    return buf


def download(buf: Buffer, dtype: type, n: int) -> np.ndarray:
    out = np.empty(n, dtype=dtype)
    buf.device.allocator.copyout(out, buf)
    return out


def counted_loop(q: HWQueue, counter: Buffer, n: int, body: callable) -> HWQueue:
    top = Label("top")
    with q.block():
        q.write(counter, 0).place(top)
        body(q)
        q.add(counter, 1).jump(top, counter, "<", n)
    return q


@pytest.mark.parametrize("n", [1, 10, 1000])
def test_counted_loop_runs_body_n_times_from_one_submission(dev: HCQDevice, k: dict, n: int) -> None:
    x, counter = upload(dev, np.zeros(1, np.float32)), dev.allocator.alloc(8)
    q = counted_loop(HWQueue(), counter, n, lambda q: q.exec(k["inc"], [x]))
    cb = q.encode()
    assert cb.words.size < 40                   # the program does not grow with the trip count
    cb.submit(dev).wait()
    assert download(x, np.float32, 1)[0] == n
    assert download(counter, np.int64, 1)[0] == n


def test_loop_replays_on_resubmit_and_nested_loops(dev: HCQDevice, k: dict) -> None:
    x, i, j = upload(dev, np.zeros(1, np.float32)), dev.allocator.alloc(8), dev.allocator.alloc(8)
    q = counted_loop(HWQueue(), i, 7, lambda q: counted_loop(q, j, 5, lambda q: q.exec(k["inc"], [x])))
    cb = q.encode()
    cb.submit(dev)
    cb.submit(dev).wait()
    assert download(x, np.float32, 1)[0] == 2 * 35


@pytest.mark.parametrize("dtype,width", [(np.bool_, 1), (np.int16, 2), (np.int32, 4), (np.int64, 8)])
@pytest.mark.parametrize("pred", [0, 1])
def test_branch_on_device_word(dev: HCQDevice, k: dict, dtype: type, width: int, pred: int) -> None:
    """if (word == 0) x = 2 * y else x += 1, decided by the processor from device memory."""
    x, y = upload(dev, np.full(1, 5, np.float32)), upload(dev, np.full(1, 4, np.float32))
    word = upload(dev, np.array([pred], dtype))
    other, end = Label("other"), Label("end")
    q = HWQueue()
    with q.block():
        q.jump(other, word, "!=", 0, width=width).exec(k["double"], [x, y]).jump(end)
        q.place(other).exec(k["inc"], [x]).place(end)
    q.submit(dev).wait()
    assert download(x, np.float32, 1)[0] == (8.0 if pred == 0 else 6.0)


@pytest.mark.parametrize("cmp,value,taken", [("==", 3, True), ("==", 4, False), ("!=", 4, True), ("<", 4, True),
                                             ("<", 3, False), (">=", 3, True), (">=", 4, False)])
def test_jump_comparisons(dev: HCQDevice, k: dict, cmp: str, value: int, taken: bool) -> None:
    x, word = upload(dev, np.zeros(1, np.float32)), upload(dev, np.array([3], np.int64))
    skip = Label()
    q = HWQueue()
    with q.block():
        q.jump(skip, word, cmp, value).exec(k["inc"], [x]).place(skip)
    q.submit(dev).wait()
    assert download(x, np.float32, 1)[0] == (0.0 if taken else 1.0)


def test_negative_words_compare_signed(dev: HCQDevice, k: dict) -> None:
    x, word = upload(dev, np.zeros(1, np.float32)), upload(dev, np.array([-1], np.int8))
    skip = Label()
    q = HWQueue()
    with q.block():
        q.jump(skip, word, "<", 0, width=1).exec(k["inc"], [x]).place(skip)
    q.submit(dev).wait()
    assert download(x, np.float32, 1)[0] == 0.0


def test_indexed_copies_gather_and_scatter_slices(dev: HCQDevice) -> None:
    """ys[i] = xs[n - 1 - i] for a counter counting down: the copy reads the counter when it runs."""
    n, row = 6, 3
    xs = upload(dev, np.arange(n * row, dtype=np.float32))
    ys, tmp, i = dev.allocator.alloc(n * row * 4), dev.allocator.alloc(row * 4), dev.allocator.alloc(8)
    j = dev.allocator.alloc(8)
    top = Label()
    q = HWQueue()
    with q.block():
        q.write(i, n - 1).write(j, 0).place(top)
        q.copy(tmp, xs, row * 4, index=i, src_stride=row * 4, count=n)
        q.copy(ys, tmp, row * 4, index=j, dst_stride=row * 4, count=n)
        q.add(i, -1).add(j, 1).jump(top, i, ">=", 0)
    q.submit(dev).wait()
    want = np.arange(n * row, dtype=np.float32).reshape(n, row)[::-1].reshape(-1)
    np.testing.assert_array_equal(download(ys, np.float32, n * row), want)


def test_indexed_copy_out_of_range_faults(dev: HCQDevice) -> None:
    src, dst, i = dev.allocator.alloc(16), dev.allocator.alloc(16), upload(dev, np.array([4], np.int64))
    q = HWQueue().copy(dst, src, 4, index=i, src_stride=4, count=4)
    with pytest.raises(HCQError, match=r"index 4, outside \[0, 4\)"):
        q.submit(dev).wait()


def test_encoder_rejects_malformed_control_flow(dev: HCQDevice, k: dict) -> None:
    w = dev.allocator.alloc(8)
    with pytest.raises(ValueError, match="inside a block"):
        HWQueue().jump(Label(), w, "==", 0).encode()
    with pytest.raises(ValueError, match="never placed"):
        HWQueue().begin_block().jump(Label()).end_block().encode()
    inner = Label()
    q = HWQueue().begin_block().jump(inner).begin_block().place(inner).end_block().end_block()
    with pytest.raises(ValueError, match="another block"):
        q.encode()
    with pytest.raises(ValueError, match="never closed"):
        HWQueue().begin_block().encode()
    with pytest.raises(ValueError, match="comparison"):
        HWQueue().jump(Label(), w, "<=", 0)
    with pytest.raises(ValueError, match="needs a word"):
        HWQueue().jump(Label(), None, "==", 0)


def test_block_is_one_ring_packet_and_runs_after_wrap(dev: HCQDevice, k: dict) -> None:
    """Many submissions of a loop wrap the ring; a BLOCK is never split across the wrap."""
    x, counter = upload(dev, np.zeros(1, np.float32)), dev.allocator.alloc(8)
    cb = counted_loop(HWQueue(), counter, 3, lambda q: q.exec(k["inc"], [x])).encode()
    tops = [int(cb.words[s]) & 255 for s in cb.starts[:-1]]
    assert tops == [Op.WAIT, Op.BLOCK, Op.SIGNAL]
    for _ in range(20_000 // len(cb.words) + 3):
        cb.submit(dev)
    dev.synchronize()
    assert download(x, np.float32, 1)[0] == 3 * (20_000 // len(cb.words) + 3)


def test_patch_buffers_reaches_packets_inside_blocks(dev: HCQDevice, k: dict) -> None:
    a, b, counter = upload(dev, np.zeros(1, np.float32)), upload(dev, np.zeros(1, np.float32)), dev.allocator.alloc(8)
    cb = counted_loop(HWQueue(), counter, 4, lambda q: q.exec(k["inc"], [a])).encode()
    cb.submit(dev)
    cb.patch_buffers({cb.slot_of(a): b}).submit(dev).wait()
    assert (download(a, np.float32, 1)[0], download(b, np.float32, 1)[0]) == (4.0, 4.0)

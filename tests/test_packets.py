"""The packet table (`tgfx/devices/packets.py`) is the one description of the packet format: the encoder's words for
every packet type decode, field by field, to what the queue was built with, and every packet type runs through the
native processor (whose IR reads its field offsets from the same table) with the effect the table documents."""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from helpers import native_programs

from tgfx.devices import get_device, native, packets
from tgfx.devices.hcq import Buffer, HCQDevice, Program, Sym
from tgfx.devices.packets import (
    COPY_INDEXED,
    EXEC_HOST_FN,
    FLAGS_SHIFT,
    JUMP_LT,
    JUMP_WIDTH_SHIFT,
    NWORDS_MASK,
    NWORDS_SHIFT,
    OP_MASK,
    PACKETS,
    Arg,
    Op,
    header,
    packet_offsets,
    packet_table_doc,
)
from tgfx.devices.queue import CommandBuffer, HWQueue, Label

# bufs[0][0] = bufs[1][0] + vals[0] (int64), for core id 0
KERNELS_IR = r"""
define void @addv(ptr %bufs, ptr %vals, i64 %core) {
entry:
  %first = icmp eq i64 %core, 0
  br i1 %first, label %run, label %done
run:
  %out = load ptr, ptr %bufs
  %inp.p = getelementptr ptr, ptr %bufs, i64 1
  %inp = load ptr, ptr %inp.p
  %x = load i64, ptr %inp
  %v = load i64, ptr %vals
  %y = add i64 %x, %v
  store i64 %y, ptr %out
  br label %done
done:
  ret void
}
"""


@pytest.fixture(scope="module")
def k() -> dict[str, Program]:
    return native_programs(KERNELS_IR, ("addv",))


@pytest.fixture
def dev() -> Iterator[HCQDevice]:
    d = get_device("CPU:0")
    yield d
    d.synchronize()


def words_of(dev: HCQDevice, values: list[int]) -> Buffer:
    buf = dev.allocator.alloc(8 * len(values))
    dev.allocator.copyin(buf, np.array(values, np.int64))
    return buf


def read(buf: Buffer) -> list[int]:
    out = np.empty(buf.nbytes // 8, np.int64)
    buf.device.allocator.copyout(out, buf)
    return out.tolist()


def decode(words: np.ndarray, at: int) -> tuple[Op, int, dict[str, Any]]:
    """The packet whose header is at `at`, read with the table alone: (opcode, flags, {field: word or words})."""
    hdr = int(words[at])
    op, n, flags = Op(hdr & OP_MASK), (hdr >> NWORDS_SHIFT) & NWORDS_MASK, hdr >> FLAGS_SHIFT << FLAGS_SHIFT
    payload = [int(w) for w in words[at + 1:at + 1 + n]]
    if op in (Op.NOP, Op.BLOCK):                     # payload words without fields: filler, nested packets
        return op, flags, {"words": payload}
    fields: dict[str, Any] = {}
    pos = 0
    for f in PACKETS[op].fields:
        if f.flag and not flags & f.flag:
            continue
        if f.count is None:
            assert f.word == pos, f"{op.name}.{f.name}: the table says word {f.word}, the fields before it end at {pos}"
            fields[f.name] = payload[f.word]
            pos += 1
        else:
            fields[f.name] = payload[pos:pos + fields[f.count]]
            pos += fields[f.count]
    assert pos == n, f"{op.name}: {n} payload words, the table accounts for {pos}"
    return op, flags, fields


def packets_of(cb: CommandBuffer) -> list[tuple[Op, int, dict[str, Any]]]:
    """Every top-level packet between the runtime's leading WAIT and trailing SIGNAL."""
    return [decode(cb.words, int(at)) for at in cb.starts[1:-2]]


def test_the_table_names_every_opcode_once_with_consecutive_words() -> None:
    assert list(PACKETS) == list(Op)
    for p in PACKETS.values():
        fixed = [f.word for f in p.fields if f.count is None]
        assert fixed == list(range(len(fixed))), p.op
        assert all(f.word == len(fixed) for f in p.fields if f.count is not None), p.op
        assert len({f.name for f in p.fields}) == len(p.fields), p.op
    # the rendered table (the module's docstring) lists every opcode and field
    doc = packet_table_doc()
    for p in PACKETS.values():
        assert re.search(rf"^    {p.op.name} ", doc, re.M), p.op
        for f in p.fields:
            assert f.name in doc
    assert doc in packets.__doc__


def test_the_processor_ir_reads_payload_words_from_the_table() -> None:
    ir = native._IR
    names = set(re.findall(r"\$((?:exec|copy|wait|signal|timestamp|jump|write|add)_[a-z_]+)", ir))
    offsets = packet_offsets()
    fields = {n for n in names if n in offsets}
    # every payload word the IR reads is a table field; no literal offset is left after `%at` / `%pat`
    assert {"exec_program_id", "exec_fn", "exec_global_size", "exec_nbufs", "exec_arrays", "copy_dst", "copy_src",
            "copy_nbytes", "copy_index_ptr", "copy_dst_stride", "copy_src_stride", "copy_count", "wait_signal",
            "wait_value", "wait_timeout_ns", "signal_signal", "signal_value", "timestamp_signal", "jump_word_ptr",
            "jump_value", "jump_offset", "write_word_ptr", "write_value", "add_word_ptr", "add_value"} <= fields
    assert not re.findall(r"ptr %p?at, i64 [0-9]+\)?$", ir, re.M)


def test_encoder_words_match_the_table_for_every_packet_type(dev: HCQDevice, k: dict[str, Program]) -> None:
    out, inp, word, sig = words_of(dev, [0]), words_of(dev, [5]), words_of(dev, [0]), dev.new_signal()
    stack = words_of(dev, [0, 0, 0, 0])
    top = Label("top")
    q = (HWQueue()
         .exec(k["addv"], [out, inp], vals=(Sym("v", 37),), global_size=3)
         .copy(out, inp, 8, dst_offset=0, src_offset=0)
         .copy(stack, inp, 8, index=word, dst_stride=8, count=4)
         .wait(sig, 0, timeout=2.5)
         .signal(sig, 9)
         .timestamp(sig)
         .barrier()
         .write(word, -4)
         .add(word, 6))
    with q.block():
        q.place(top).add(word, 1).jump(top, word, "<", 3, width=4)
    cb = q.encode()
    pkts = packets_of(cb)
    assert [p[0] for p in pkts] == [Op.EXEC, Op.COPY, Op.COPY, Op.WAIT, Op.SIGNAL, Op.TIMESTAMP, Op.BARRIER, Op.WRITE,
                                    Op.ADD, Op.BLOCK]
    ex, cp, icp, wt, sg, ts, br, wr, ad, blk = pkts
    prog = k["addv"]
    assert ex[1] == 0 and ex[2] == {"program_id": prog.id, "fn": prog.fn_addr, "global_size": 3, "nbufs": 2,
                                    "nvals": 1, "buf_ptr": [out.ptr, inp.ptr], "val": [37]}
    assert cp[1] == 0 and cp[2] == {"dst": out.ptr, "src": inp.ptr, "nbytes": 8}
    assert icp[1] == COPY_INDEXED and icp[2] == {"dst": stack.ptr, "src": inp.ptr, "nbytes": 8, "index_ptr": word.ptr,
                                                 "dst_stride": 8, "src_stride": 0, "count": 4}
    assert wt[2] == {"signal": sig.addr, "value": 0, "timeout_ns": 2_500_000_000}
    assert sg[2] == {"signal": sig.addr, "value": 9}
    assert ts[2] == {"signal": sig.addr}
    assert br[2] == {}
    assert wr[2] == {"word_ptr": word.ptr, "value": -4} and ad[2] == {"word_ptr": word.ptr, "value": 6}
    # the block's payload is packets again: ADD, then a JUMP back to it (offset from the packet after the jump)
    block_at = int(cb.starts[-3])
    inner_add = decode(cb.words, block_at + 1)
    jump_at = block_at + 1 + 1 + PACKETS[Op.ADD].fixed_words
    op, flags, jump = decode(cb.words, jump_at)
    assert inner_add[0] == Op.ADD and op == Op.JUMP
    assert flags == (JUMP_LT | 4 << JUMP_WIDTH_SHIFT) << FLAGS_SHIFT
    assert jump == {"word_ptr": word.ptr, "value": 3, "offset": (block_at + 1) - (jump_at + 1 + 3)}
    # the patchable words are the table's VALUE and BUFFER fields
    val_word = int(cb.starts[1]) + 1 + PACKETS[Op.EXEC].word("val") + 2      # after the header and 2 buf_ptr
    assert cb.words[val_word] == 37 and cb.patch_vals({"v": 40}).words[val_word] == 40


def test_a_host_program_sets_exec_host_fn(dev: HCQDevice) -> None:
    prog = Program("host", lambda bufs, vals, core: None)
    (op, flags, fields), = packets_of(HWQueue().exec(prog, []).encode())
    assert op == Op.EXEC and flags == EXEC_HOST_FN and fields["fn"] == prog.fn_addr and fields["buf_ptr"] == []


def _run(dev: HCQDevice, q: HWQueue | CommandBuffer, inline: bool) -> None:
    cb = q if isinstance(q, CommandBuffer) else q.encode()
    cb.submit(dev, inline=inline).wait()


@pytest.mark.parametrize("inline", [False, True])
def test_every_packet_type_runs_on_the_processor(dev: HCQDevice, k: dict[str, Program], inline: bool) -> None:
    """One effect per opcode, through the ring and inline (the processor's own packet code on this thread)."""
    out, inp = words_of(dev, [0]), words_of(dev, [5])
    dev.exec_sync(k["addv"], [out, inp], vals=(37,), global_size=4)            # EXEC
    assert read(out) == [42]

    stack, index = words_of(dev, [0, 0, 0]), words_of(dev, [2])
    _run(dev, HWQueue().copy(out, inp, 8).copy(stack, inp, 8, index=index, dst_stride=8, count=3), inline)  # COPY
    assert read(out) == [5] and read(stack) == [0, 0, 5]

    sig = dev.new_signal(3)
    _run(dev, HWQueue().wait(sig, 3).signal(sig, 11), inline=False)          # WAIT (satisfied), SIGNAL
    assert sig.value == 11
    _run(dev, HWQueue().timestamp(sig).barrier(), inline)                   # TIMESTAMP, BARRIER
    assert sig.value > 11

    word = words_of(dev, [100])
    _run(dev, HWQueue().write(word, 7).add(word, 5), inline)               # WRITE, ADD
    assert read(word) == [12]

    counter, total = dev.allocator.alloc(8), words_of(dev, [0])
    top, skip = Label("top"), Label("skip")
    q = HWQueue()
    with q.block():                                                         # BLOCK, JUMP (backward and forward)
        q.write(counter, 0).place(top).add(total, 10).add(counter, 1).jump(top, counter, "<", 4)
        q.jump(skip).add(total, 1000).place(skip)
    _run(dev, q, inline)
    assert read(total) == [40]

    # NOP: a packet turned into filler of the same length is skipped, the packets around it run
    a, b = words_of(dev, [0]), words_of(dev, [0])
    cb = HWQueue().write(a, 1).write(b, 2).encode()
    first = int(cb.starts[1])
    cb.words[first] = header(Op.NOP, PACKETS[Op.WRITE].fixed_words)
    _run(dev, cb, inline)
    assert read(a) == [0] and read(b) == [2]


def test_every_field_kind_is_encoded() -> None:
    # a new kind of field needs a case in the encoder (CommandBuffer's `put`): this lists the kinds it has
    assert {f.arg for p in PACKETS.values() for f in p.fields} == set(Arg)


def test_timeline_words_are_where_submit_writes_them(dev: HCQDevice) -> None:
    # HCQDevice.submit writes words[1:3] and words[-2:] without looking at the table: they must be these fields
    cb = HWQueue().barrier().encode()
    cb.submit(dev).wait()
    _, _, wait = decode(cb.words, 0)
    _, _, signal = decode(cb.words, int(cb.starts[-2]))
    assert wait["signal"] == signal["signal"] == dev.timeline.addr
    assert wait["value"] == dev.timeline_value - 1 and signal["value"] == dev.timeline_value

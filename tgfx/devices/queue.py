"""Queues: `HWQueue` builds a queue program packet by packet, `CommandBuffer` encodes it into words from the packet
table (`tgfx/devices/packets.py`), with the slots and `Sym` values a replay patches. `QueueAllocator` and
`QueueDevice` implement the interface's copies and launches with them, for backends whose processors run these
packets."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from tgfx.devices.hcq import (
    DEFAULT_TIMEOUT_S,
    FOREVER_NS,
    Allocator,
    Buffer,
    Engine,
    Fence,
    HCQDevice,
    Program,
    Signal,
    Sym,
    host_buffer,
    word_view,
)
from tgfx.devices.packets import (
    COPY_INDEXED,
    EXEC_HOST_FN,
    FLAGS_SHIFT,
    JUMP_CMP,
    JUMP_WIDTH_SHIFT,
    OP_MASK,
    PACKETS,
    RING_WORDS,
    Arg,
    Field,
    Op,
    header,
)

# `HCQDevice.submit` fills in the timeline WAIT that leads every command buffer and the SIGNAL that ends it at fixed
# words (`words[1:3]` and `words[-2:]`, on every submit: no lookups), which follow these layouts
assert [f.name for f in PACKETS[Op.WAIT].fields] == ["signal", "value", "timeout_ns"]
assert [f.name for f in PACKETS[Op.SIGNAL].fields] == ["signal", "value"]


class _Ref(NamedTuple):
    """A BUFFER field's value: `buf`'s address plus `offset`; the packet touches its first `extent` bytes."""
    buf: Buffer
    offset: int
    extent: int


class HWQueue:
    """A builder for one queue program; every method appends a packet and returns the queue.

    Example::

        fence = HWQueue().wait(other.timeline, 3).exec(prog, [out, inp], vals=(n,), global_size=8).submit(dev)
        fence.wait()

    A loop the device runs n times, reading slice i of `xs` into `x` each time (see "Control flow" in
    `tgfx/devices/packets.py`)::

        top = Label("top")
        with q.block():
            q.write(i, 0).place(top)
            q.copy(x, xs, x.nbytes, index=i, src_stride=x.nbytes, count=n).exec(body, [y, x])
            q.add(i, 1).jump(top, i, "<", n)

    Values in `exec` vals, `global_size`, `wait` and `signal` may be `Sym`s, patchable after encoding. Any packet
    may go to either engine; copies usually go to `Engine.COPY`.
    """

    def __init__(self, engine: Engine = Engine.COMPUTE) -> None:
        self.engine = engine
        self.packets: list[tuple[Any, ...]] = []

    def exec(self, program: Program | Any, bufs: Sequence[Buffer], vals: Sequence[int | Sym] = (),
             global_size: int | Sym = 1) -> HWQueue:
        """Run `program` with core_id 0..global_size-1 on `bufs` (all on the submitting device) and `vals`.

        `program` is a Program, or anything `Program.of` accepts (an object with `name` and `addr`).
        """
        program = Program.of(program)
        gs = global_size.value if isinstance(global_size, Sym) else global_size
        if gs < 1:
            raise ValueError(f"exec of {program.name!r}: global_size must be >= 1, got {gs}")
        bufs = [_check_buffer(b, program.name) for b in bufs]
        self.packets.append((Op.EXEC, EXEC_HOST_FN if program.addr is None else 0, {
            "program_id": program, "fn": program.fn_addr, "global_size": global_size, "nbufs": len(bufs),
            "nvals": len(vals), "buf_ptr": [_Ref(b, 0, b.nbytes) for b in bufs], "val": list(vals)}))
        return self

    def copy(self, dst: Buffer, src: Buffer, nbytes: int, dst_offset: int = 0, src_offset: int = 0, *,
             index: Buffer | None = None, dst_stride: int = 0, src_stride: int = 0, count: int = 1) -> HWQueue:
        """Copy `nbytes` from `src[src_offset:]` to `dst[dst_offset:]`; the buffers may be on any devices.

        With `index` (a device word holding an int64 i, e.g. a loop counter), the offsets advance by
        `i * dst_stride` and `i * src_stride` bytes, read when the packet runs; i must be in [0, count), else the
        packet faults and copies nothing.
        """
        if index is not None:
            _check_word(index, 8, "copy index")
            if count < 1:
                raise ValueError(f"an indexed copy needs count >= 1, got {count}")
        for what, buf, off, stride in (("destination", dst, dst_offset, dst_stride),
                                       ("source", src, src_offset, src_stride)):
            _check_buffer(buf, "copy")
            end = off + nbytes + ((count - 1) * stride if index is not None else 0)
            if off < 0 or nbytes < 0 or stride < 0 or end > buf.nbytes:
                raise ValueError(f"copy of {nbytes} B at offset {off}" + (f" + i * {stride} for i < {count}" if index
                                                                         is not None else "") +
                                 f" is outside the {what} {buf!r}")
        n = count - 1 if index is not None else 0
        self.packets.append((Op.COPY, COPY_INDEXED if index is not None else 0, {
            "dst": _Ref(dst, dst_offset, dst_offset + nbytes + n * dst_stride),
            "src": _Ref(src, src_offset, src_offset + nbytes + n * src_stride), "nbytes": nbytes,
            "index_ptr": _Ref(index, 0, 8) if index is not None else None, "dst_stride": dst_stride,
            "src_stride": src_stride, "count": count}))
        return self

    # ---- control flow (see "Control flow" in `tgfx/devices/packets.py`) ----
    def begin_block(self) -> HWQueue:
        """Open a BLOCK: the packets until the matching `end_block` run as one, and may jump among themselves."""
        self.packets.append(("begin",))
        return self

    def end_block(self) -> HWQueue:
        """Close the innermost open BLOCK."""
        self.packets.append(("end",))
        return self

    @contextlib.contextmanager
    def block(self) -> Iterator[HWQueue]:
        """`with q.block(): ...` brackets the packets added inside with `begin_block` / `end_block`."""
        self.begin_block()
        yield self
        self.end_block()

    def place(self, label: Label) -> HWQueue:
        """Mark the position of the next packet as `label`'s (a jump target in the same block)."""
        self.packets.append(("label", label))
        return self

    def jump(self, label: Label, word: Buffer | None = None, cmp: str = "always", value: int = 0,
             width: int = 8) -> HWQueue:
        """Continue at `label` (in the same block): always, or if the signed `width`-byte integer at the start of
        `word` compares true with `value`; cmp is one of "always", "==", "!=", "<", ">="."""
        if cmp not in JUMP_CMP:
            raise ValueError(f"jump comparison must be one of {sorted(JUMP_CMP)}, got {cmp!r}")
        if (cmp == "always") != (word is None):
            raise ValueError("jump: a conditional jump needs a word to compare, an unconditional one none")
        if width not in (1, 2, 4, 8):
            raise ValueError(f"jump: the word width must be 1, 2, 4 or 8 bytes, got {width}")
        if word is not None:
            _check_word(word, width, "jump")
        self.packets.append((Op.JUMP, (JUMP_CMP[cmp] | width << JUMP_WIDTH_SHIFT) << FLAGS_SHIFT, {
            "word_ptr": _Ref(word, 0, width) if word is not None else None, "value": value, "offset": label}))
        return self

    def write(self, word: Buffer, value: int | Sym) -> HWQueue:
        """Store the int64 `value` at the start of `word` (e.g. reset a loop counter)."""
        self.packets.append((Op.WRITE, 0, {"word_ptr": _Ref(_check_word(word, 8, "write"), 0, 8), "value": value}))
        return self

    def add(self, word: Buffer, value: int | Sym) -> HWQueue:
        """Add `value` to the int64 at the start of `word` (e.g. step a loop counter)."""
        self.packets.append((Op.ADD, 0, {"word_ptr": _Ref(_check_word(word, 8, "add"), 0, 8), "value": value}))
        return self

    def wait(self, signal: Signal, value: int | Sym, timeout: float | None = None) -> HWQueue:
        """Block this engine until `signal` >= `value`; after `timeout` s (default 30) the queue faults."""
        timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
        self.packets.append((Op.WAIT, 0, {"signal": signal, "value": value,
                                          "timeout_ns": int(min(timeout * 1e9, FOREVER_NS))}))
        return self

    def signal(self, signal: Signal, value: int | Sym) -> HWQueue:
        """Write `value` to `signal` once every earlier packet of this queue is done."""
        self.packets.append((Op.SIGNAL, 0, {"signal": signal, "value": value}))
        return self

    def timestamp(self, signal: Signal) -> HWQueue:
        """Write the device clock (`time.perf_counter_ns` on the CPU) to `signal`."""
        self.packets.append((Op.TIMESTAMP, 0, {"signal": signal}))
        return self

    def barrier(self) -> HWQueue:
        """Make the memory writes of earlier packets visible to later ones."""
        self.packets.append((Op.BARRIER, 0, {}))
        return self

    def encode(self) -> CommandBuffer:
        """Encode the packets into a re-submittable, patchable `CommandBuffer`."""
        return CommandBuffer(self)

    def submit(self, device: HCQDevice, inline: bool = False) -> Fence:
        """Encode and submit to `device`'s engine; returns at once with the submission's `Fence` (see
        `CommandBuffer.submit` for `inline`)."""
        return self.encode().submit(device, inline)


class Label:
    """A jump target in a queue: made by the user, placed once with `HWQueue.place`."""

    __slots__ = ("name",)

    def __init__(self, name: str = "") -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<Label {self.name or hex(id(self))}>"


def _check_word(buf: Buffer, width: int, user: str) -> Buffer:
    _check_buffer(buf, user)
    if buf.nbytes < width or buf.ptr % width:
        raise ValueError(f"{user}: {buf!r} cannot hold an aligned {width}-byte word")
    return buf


def _check_buffer(buf: Buffer, user: str) -> Buffer:
    if not isinstance(buf, Buffer):
        raise TypeError(f"{user}: expected a Buffer, got {type(buf).__name__}")
    if buf._mem is None:
        raise ValueError(f"{user}: {buf!r} was freed")
    return buf


class CommandBuffer:
    """An encoded queue: packet words plus where each buffer slot and `Sym` lives in them.

    Buffer slots are the queue's distinct Buffers in order of first use (`buffers`, `slot_of`). To replay with
    other memory, `patch_buffers({slot: new_buffer})` (same device, at least as large); to change values,
    `patch_vals({"name": value})`. Both rewrite words in place and return self, so a replay is
    `cb.patch_buffers({0: x, 3: y}).submit(dev)`. Not thread-safe: patch and submit from one thread.

    `words[0:4]` and `words[-3:]` are the WAIT and SIGNAL on the device timeline that `submit` fills in.
    """

    def __init__(self, queue: HWQueue) -> None:
        self.engine = queue.engine
        words: list[int] = [header(Op.WAIT, 3), 0, 0, int(DEFAULT_TIMEOUT_S * 1e9)]
        starts: list[int] = [0]
        slot_of: dict[int, int] = {}
        self.buffers: list[Buffer] = []
        buf_words: list[list[tuple[int, int]]] = []      # per slot: (word index, byte offset added to ptr)
        self._min_nbytes: list[int] = []
        sym_words: dict[str, list[int]] = {}
        self.syms: dict[str, int] = {}
        self.programs: list[Program] = []
        self.signals: list[Signal] = []
        self._signals_written: list[Signal] = []
        self._exec_slots: set[int] = set()

        def put_buf(ref: _Ref | None, local: bool) -> None:
            if ref is None:
                words.append(0)
                return
            buf, offset, extent = ref
            slot = slot_of.get(id(buf))
            if slot is None:
                slot = slot_of[id(buf)] = len(self.buffers)
                self.buffers.append(buf)
                buf_words.append([])
                self._min_nbytes.append(0)
            buf_words[slot].append((len(words), offset))
            self._min_nbytes[slot] = max(self._min_nbytes[slot], extent)
            if local:
                self._exec_slots.add(slot)
            words.append(buf.ptr + offset)

        def put_val(v: int | Sym) -> None:
            if isinstance(v, Sym):
                if self.syms.setdefault(v.name, v.value) != v.value:
                    raise ValueError(f"Sym {v.name!r} is used with two values, {self.syms[v.name]} and {v.value}")
                sym_words.setdefault(v.name, []).append(len(words))
                v = v.value
            if not -(1 << 63) <= v < (1 << 63):
                raise ValueError(f"value {v} does not fit in a 64-bit packet word")
            words.append(int(v))

        def put_signal(sig: Signal, written: bool) -> None:
            if not isinstance(sig, Signal):
                raise TypeError(f"expected a Signal, got {type(sig).__name__}")
            self.signals.append(sig)
            if written:
                if sig.is_timeline:
                    raise ValueError(f"{sig.name} is written only by the runtime (at the end of each submission); "
                                     f"signal a signal of your own, e.g. from device.new_signal()")
                self._signals_written.append(sig)
            words.append(sig.addr)

        def put_program(program: Program) -> None:
            self.programs.append(program)
            words.append(program.id)

        def put(field: Field, value: Any) -> None:
            arg = field.arg
            if arg is Arg.WORD:
                words.append(int(value))
            elif arg is Arg.VALUE:
                put_val(value)
            elif arg is Arg.BUFFER:
                put_buf(value, field.local)
            elif arg is Arg.SIGNAL:
                put_signal(value, field.writes)
            elif arg is Arg.PROGRAM:
                put_program(value)
            else:                                             # Arg.OFFSET: resolved once every label is placed
                jumps.append((blocks[-1], len(words), value))
                words.append(0)

        blocks: list[int] = []                         # the header positions of the open BLOCKs, innermost last
        placed: dict[Label, tuple[int, int]] = {}       # label -> (its block's header, its word position)
        jumps: list[tuple[int, int, Label]] = []        # (block header, offset word, label)
        for pkt in queue.packets:
            op = pkt[0]
            if op == "label":                                 # the position of the next packet
                if pkt[1] in placed:
                    raise ValueError(f"{pkt[1]!r} is placed twice")
                placed[pkt[1]] = (blocks[-1] if blocks else -1, len(words))
                continue
            if op == "begin":                                 # a BLOCK's header, written at its end
                blocks.append(len(words))
                words.append(0)
                continue
            if op == "end":                                   # the end of a block: its header counts its words
                if not blocks:
                    raise ValueError("end_block without a matching begin_block")
                at = blocks.pop()
                words[at] = header(Op.BLOCK, len(words) - at - 1)
                if not blocks:
                    self._top_level_end(words, at, starts)
                continue
            _, flags, args = pkt
            if op is Op.JUMP and not blocks:
                raise ValueError("a jump must be inside a block (HWQueue.begin_block)")
            at = len(words)
            words.append(0)                                   # the header, once the payload is counted
            for field in PACKETS[op].fields:                  # in word order: fixed fields, then the arrays
                if field.flag and not flags & field.flag:
                    continue
                if field.count is None:
                    put(field, args[field.name])
                else:
                    for item in args[field.name]:
                        put(field, item)
            words[at] = header(op, len(words) - at - 1, flags)
            if not blocks:
                self._top_level_end(words, at, starts)
        if blocks:
            raise ValueError(f"{len(blocks)} block(s) opened with begin_block were never closed")
        for block, at, label in jumps:
            if label not in placed:
                raise ValueError(f"jump to {label!r}, which was never placed")
            if placed[label][0] != block:
                raise ValueError(f"jump to {label!r}, which is placed in another block; jumps stay in their block")
            words[at] = placed[label][1] - (at + 1)
        starts.append(len(words))
        words.extend((header(Op.SIGNAL, 2), 0, 0))
        starts.append(len(words))

        self.words = np.array(words, dtype=np.int64)
        self.word_view = word_view(self.words)          # (`Submission.word_view`)
        self.starts = np.array(starts, dtype=np.int64)     # packet boundaries, ending with len(words)
        self._buf_words = buf_words
        self._buf_idx = [np.array([w for w, _ in occ], dtype=np.int64) for occ in buf_words]
        self._buf_off = [np.array([o for _, o in occ], dtype=np.int64) for occ in buf_words]
        self._mems = [b._mem for b in self.buffers]
        self._sym_idx = {name: np.array(idx, dtype=np.int64) for name, idx in sym_words.items()}
        self._checked_devices: set[str] = set()
        # may run inline: no WAIT but the runtime's leading one (a wait could block the calling thread)
        self.inline_ok = not any(pkt[0] is Op.WAIT for pkt in queue.packets)
        self._body_addr = self.words.ctypes.data + 8 * int(self.starts[1])   # the packets after the leading WAIT
        self._body_words = len(self.words) - int(self.starts[1])

    @staticmethod
    def _top_level_end(words: list[int], at: int, starts: list[int]) -> None:
        """A packet of the ring ends here: it must fit in a ring, and the ring may wrap before it."""
        if len(words) - at > RING_WORDS:
            op = Op(words[at] & OP_MASK).name
            raise ValueError(f"a {op} packet of {len(words) - at} words does not fit in a ring")
        starts.append(at)

    def __repr__(self) -> str:
        return (f"<CommandBuffer {self.engine.value} {len(self.starts) - 1} packets, {len(self.words)} words, "
                f"{len(self.buffers)} buffer slots, syms {sorted(self.syms)}>")

    def slot_of(self, buf: Buffer) -> int:
        """The slot number of `buf` (one of `buffers`)."""
        for i, b in enumerate(self.buffers):
            if b is buf:
                return i
        raise KeyError(f"{buf!r} is not used by this command buffer")

    def slot_words(self, slot: int) -> list[tuple[int, int]]:
        """Where slot `slot` lives: (word index, byte offset added to the buffer's address) per occurrence. A replayer
        that knows its buffers fit (jit: the same signature) writes `words[i] = buffer.ptr + offset` itself."""
        return list(self._buf_words[slot])

    def patch_buffers(self, updates: Mapping[int, Buffer]) -> CommandBuffer:
        """Point slots at other buffers: `{slot: buffer}`. Offsets of copies into the slot are kept."""
        for slot, buf in updates.items():
            if not 0 <= slot < len(self.buffers):
                raise KeyError(f"buffer slot {slot} does not exist; this command buffer has {len(self.buffers)}")
            _check_buffer(buf, f"patch of buffer slot {slot}")
            old = self.buffers[slot]
            if buf.device is not old.device:
                raise ValueError(f"buffer slot {slot} is on {_dev_name(old.device)}; cannot patch in {buf!r}")
            if buf.nbytes < self._min_nbytes[slot]:
                raise ValueError(f"buffer slot {slot} needs at least {self._min_nbytes[slot]} B, got {buf!r}")
            if len(occ := self._buf_words[slot]) <= 4:       # a replay's common case: scalar stores are faster
                for i, off in occ:
                    self.words[i] = buf.ptr + off
            else:
                self.words[self._buf_idx[slot]] = self._buf_off[slot] + buf.ptr
            self.buffers[slot], self._mems[slot] = buf, buf._mem
        return self

    def patch_vals(self, updates: Mapping[str, int]) -> CommandBuffer:
        """Give `Sym`s new values: `{"name": value}`."""
        for name, value in updates.items():
            if name not in self._sym_idx:
                raise KeyError(f"no Sym named {name!r}; this command buffer has {sorted(self.syms)}")
            self.words[self._sym_idx[name]] = value
            self.syms[name] = value
        return self

    def submit(self, device: HCQDevice, inline: bool = False) -> Fence:
        """Submit to `device`'s engine of this queue's kind; returns at once with the submission's `Fence`.
        With `inline`, run it on this thread if the device is idle (see "Inline submissions" in
        `tgfx/devices/hcq.py`)."""
        if device.name not in self._checked_devices and not getattr(device, "executes_on_host_memory", False):
            # (a device whose EXECs are host programs on other devices' host memory, the network engine, skips this)
            for slot in sorted(self._exec_slots):
                if self.buffers[slot].device is not device:
                    raise ValueError(f"exec on {device.name} uses {self.buffers[slot]!r} (slot {slot}) from another "
                                     f"device; copy it to {device.name} first")
            self._checked_devices.add(device.name)
        refs = (tuple(self._mems), tuple(self.programs), tuple(self.signals))
        return device.submit(self, refs, inline)


def _dev_name(device: HCQDevice | None) -> str:
    return device.name if device is not None else "the host"


class QueueAllocator(Allocator):
    """An allocator whose host copies are COPY packets on the device's copy engine (host memory is device-visible),
    ordered after everything submitted before."""

    def copyin(self, buf: Buffer, src: np.ndarray | memoryview | bytes, timeout: float | None = None) -> None:
        """Copy host bytes into the start of `buf`; returns when the copy is done."""
        host = host_buffer(np.ascontiguousarray(src) if isinstance(src, np.ndarray) else src)
        if host.nbytes > buf.nbytes:
            raise ValueError(f"copyin of {host.nbytes} B does not fit in {buf!r}")
        HWQueue(Engine.COPY).copy(buf, host, host.nbytes).submit(self.device, inline=True).wait(timeout)

    def fill(self, buf: Buffer, src: np.ndarray) -> None:
        """`copyin` (a backend whose memory the host can write stores directly instead)."""
        self.copyin(buf, src)

    def copyout(self, dst: np.ndarray | memoryview, buf: Buffer, timeout: float | None = None) -> None:
        """Copy the first `dst.nbytes` bytes of `buf` into writable host memory `dst`, after all earlier work."""
        host = self.copyout_destination(dst, buf)
        HWQueue(Engine.COPY).copy(host, buf, host.nbytes).submit(self.device, inline=True).wait(timeout)

    @staticmethod
    def copyout_destination(dst: np.ndarray | memoryview, buf: Buffer) -> Buffer:
        """`dst` as a host Buffer that a copy of the start of `buf` may write (checked: writable, not too long)."""
        host = host_buffer(dst)
        if not host._mem.flags.writeable:
            raise ValueError("copyout destination is read-only")
        if host.nbytes > buf.nbytes:
            raise ValueError(f"copyout of {host.nbytes} B reads past the end of {buf!r}")
        return host


class QueueDevice(HCQDevice):
    """A device whose launches and copies are queues of packets (the CPU's; see `HCQDevice` for the hooks left)."""

    def exec_sync(self, program: Program | Any, bufs: Sequence[Buffer], vals: Sequence[int] = (), global_size: int = 1,
                  timeout: float | None = None) -> None:
        """Run one kernel and wait for it: the simplest way to launch (tests, eager, BEAM timing)."""
        HWQueue().exec(program, bufs, vals, global_size).submit(self, inline=True).wait(timeout)

    def copy(self, dst: Buffer, src: Buffer, nbytes: int, dst_offset: int = 0, src_offset: int = 0) -> Fence:
        """Copy on this device's copy engine, after all work submitted so far to `src`'s device; returns at once.

        Later submissions to this device are ordered after it; wait on the fence before reading `dst` elsewhere.
        """
        q = HWQueue(Engine.COPY)
        if src.device is not None and src.device is not self and src.device.timeline_value:
            q.wait(src.device.timeline, src.device.timeline_value)
        fence = q.copy(dst, src, nbytes, dst_offset, src_offset).submit(self)
        if src.device is not None and src.device is not self:
            # the source device's later work (which may overwrite or free `src`) waits until the copy has read it
            HWQueue().wait(self.timeline, fence.value).submit(src.device)
        return fence

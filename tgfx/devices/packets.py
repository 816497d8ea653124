"""The packet format of the command processors: one table, `PACKETS`, that the encoder (`tgfx/devices/queue.py`)
writes packets from and the CPU processor's IR (`tgfx/devices/native.py`) reads its field offsets from.

A command buffer and a ring are arrays of little-endian int64 words. Every packet is one header word followed
by `n` payload words::

    header = opcode | (n << 8) | (flags << 40)   # bits 0..7: `Op`, 8..39: payload words, 40..63: flags

The payloads, rendered from `PACKETS` (`packet_table_doc()`; a field in brackets is there only with its flag)::

$packet_table

Control flow: a BLOCK is one packet to the ring (it is consumed, and its words reused, only when all of it is
done), so JUMPs inside it may go backwards and the processor replays the packets in between with no host in the
loop: a counted loop is `WRITE i, 0; top: ...; ADD i, 1; JUMP i < n -> top`, a device-side branch is
`JUMP pred == 0 -> else; ...; JUMP -> end; else: ...; end:`. A JUMP's flags (header bits 40..) hold the comparison
(`JUMP_*`: always, ==, !=, <, >=) and the width of the word in bytes (1, 2, 4 or 8, at bit 44); a target
outside its block faults. A COPY with the flag `COPY_INDEXED` has four more payload words, `index_ptr, dst_stride,
src_stride, count`: it copies from `src + i * src_stride` to `dst + i * dst_stride` for the int64 `i = *index_ptr`,
which faults unless 0 <= i < count; that is how a loop reads slice i of a stacked input and writes slice i of a
stacked output.

An EXEC names its kernel twice: `fn` is the address the processor calls, `program_id` (`Program.id`) names it in
profiles and errors. Its flag `EXEC_HOST_FN` marks `fn` as a host callback (a `Program` of a Python function) that
returns an int64 status: 0, or a token for the exception it raised.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

RING_WORDS = 1 << 16                # 512 KiB of packets per engine ring; a top-level packet must fit in one


class Op(enum.IntEnum):
    """Packet opcodes, the low byte of a packet's header word."""
    NOP = 0
    EXEC = 1
    COPY = 2
    WAIT = 3
    SIGNAL = 4
    TIMESTAMP = 5
    BARRIER = 6
    BLOCK = 7
    JUMP = 8
    WRITE = 9
    ADD = 10


# the header word: bits 0..7 the opcode, 8..39 the payload words, 40..63 the flags
OP_MASK, NWORDS_SHIFT, NWORDS_MASK, FLAGS_SHIFT = 0xFF, 8, 0xFFFFFFFF, 40
EXEC_HOST_FN = 1 << FLAGS_SHIFT      # EXEC: fn is a host callback `int64 fn(bufs, vals, core)` (a Python Program)
COPY_INDEXED = 1 << FLAGS_SHIFT      # COPY: offsets advance by a device word times a stride (4 more payload words)
# JUMP flags (above bit 40): bits 0..3 the comparison, bits 4..7 the bytes of the word compared (1, 2, 4, 8)
JUMP_ALWAYS, JUMP_EQ, JUMP_NE, JUMP_LT, JUMP_GE = 0, 1, 2, 3, 4
JUMP_WIDTH_SHIFT = 4
JUMP_CMP = {"always": JUMP_ALWAYS, "==": JUMP_EQ, "!=": JUMP_NE, "<": JUMP_LT, ">=": JUMP_GE}


def header(op: Op, nwords: int, flags: int = 0) -> int:
    """The header word of a packet with opcode `op`, `nwords` payload words and `flags` (e.g. `EXEC_HOST_FN`)."""
    return int(op) | (nwords << NWORDS_SHIFT) | flags


class Arg(enum.Enum):
    """What a payload word holds, which says how the encoder writes it and what a replay may patch."""
    WORD = "word"        # a constant, written as is (a count, a stride, a timeout, a code address)
    VALUE = "value"      # an int64 or a `Sym` (patchable: `CommandBuffer.patch_vals`)
    BUFFER = "buffer"    # a buffer's address plus a byte offset, 0 for none (a slot: `CommandBuffer.patch_buffers`)
    SIGNAL = "signal"    # a `Signal`'s address
    PROGRAM = "program"  # a `Program`'s id (the encoder keeps the program alive)
    OFFSET = "offset"    # a jump distance in words from the next packet, resolved once its label is placed


@dataclass(frozen=True)
class Field:
    """One payload field of a packet.

    Attributes:
        name: the field's name; the processor's IR refers to its word as `$<op>_<name>`, e.g. `$copy_nbytes`.
        arg: what the word holds.
        word: its payload word (0 is the word after the header); an array's is the first word after the fixed
            fields (the arrays of a packet follow one another).
        doc: what it means.
        count: for an array, the name of the fixed field that holds its length.
        flag: the header flag without which the field is absent (0: always there).
        local: a BUFFER that must be on the submitting device (the processor dereferences it).
        writes: a SIGNAL the packet writes (so not a device timeline: only the runtime writes those).
    """
    name: str
    arg: Arg
    word: int
    doc: str = ""
    count: str | None = None
    flag: int = 0
    local: bool = False
    writes: bool = False


@dataclass(frozen=True)
class Packet:
    """The layout of one opcode's packet: its payload fields in word order, and what the processor does."""
    op: Op
    fields: tuple[Field, ...]
    doc: str

    def word(self, name: str) -> int:
        """The payload word of field `name`."""
        return next(f.word for f in self.fields if f.name == name)

    @property
    def fixed_words(self) -> int:
        """The payload words before the arrays (with every flag's fields)."""
        return sum(1 for f in self.fields if f.count is None)

    @property
    def min_words(self) -> int:
        """The words of the shortest such packet: the header and the fields no flag adds, with empty arrays."""
        return 1 + sum(1 for f in self.fields if f.count is None and not f.flag)


def _packet(op: Op, doc: str, *fields: tuple[str, Arg, str] | tuple[str, Arg, str, dict[str, Any]]) -> Packet:
    """A layout whose fields take consecutive words in the order given; arrays start after the fixed fields."""
    out: list[Field] = []
    for name, arg, fdoc, *extra in fields:
        kw = extra[0] if extra else {}
        word = len(out) if "count" not in kw else sum(1 for f in out if f.count is None)
        out.append(Field(name, arg, word, fdoc, **kw))
    return Packet(op, tuple(out), doc)


_B, _V, _W, _S = Arg.BUFFER, Arg.VALUE, Arg.WORD, Arg.SIGNAL
PACKETS: dict[Op, Packet] = {p.op: p for p in (
    _packet(Op.NOP, "skipped with its n filler words (pads the end of the ring before a wrap)"),
    _packet(Op.EXEC, "fn(buf_ptr, val, core) for core = 0..global_size-1, in parallel",
            ("program_id", Arg.PROGRAM, "`Program.id`: names the kernel in profiles and errors"),
            ("fn", _W, "the address the processor calls"),
            ("global_size", _V, "the number of core ids"),
            ("nbufs", _W, "the length of buf_ptr"),
            ("nvals", _W, "the length of val"),
            ("buf_ptr", _B, "the kernel's `bufs` argument, in place", {"count": "nbufs", "local": True}),
            ("val", _V, "the kernel's `vals` argument, in place", {"count": "nvals"})),
    _packet(Op.COPY, "memmove(dst (+ i * dst_stride), src (+ i * src_stride), nbytes), i = *index_ptr",
            ("dst", _B, "the destination"),
            ("src", _B, "the source"),
            ("nbytes", _W, "bytes to copy"),
            ("index_ptr", _B, "the index word", {"flag": COPY_INDEXED, "local": True}),
            ("dst_stride", _W, "destination bytes per index step", {"flag": COPY_INDEXED}),
            ("src_stride", _W, "source bytes per index step", {"flag": COPY_INDEXED}),
            ("count", _W, "indices in range: 0 <= i < count, else a fault", {"flag": COPY_INDEXED})),
    _packet(Op.WAIT, "block this engine until *signal >= value (a fault after timeout_ns with no progress)",
            ("signal", _S, "the awaited signal"),
            ("value", _V, "the awaited value"),
            ("timeout_ns", _W, "how long a stall may last")),
    _packet(Op.SIGNAL, "*signal = value, once everything before it is done",
            ("signal", _S, "the signal written", {"writes": True}),
            ("value", _V, "the value written")),
    _packet(Op.TIMESTAMP, "*signal = the device clock (ns)",
            ("signal", _S, "the signal written", {"writes": True})),
    _packet(Op.BARRIER, "order memory (a full fence; packets already run in order)"),
    _packet(Op.BLOCK, "run the n payload words as packets; its JUMPs move within it"),
    _packet(Op.JUMP, "move offset words from the next packet, always or if the word compares true (in a BLOCK)",
            ("word_ptr", _B, "the signed word compared (0 for an unconditional jump)", {"local": True}),
            ("value", _V, "what it is compared with"),
            ("offset", Arg.OFFSET, "words from the next packet")),
    _packet(Op.WRITE, "*(int64 *)word_ptr = value",
            ("word_ptr", _B, "the word written", {"local": True}),
            ("value", _V, "the value")),
    _packet(Op.ADD, "*(int64 *)word_ptr += value",
            ("word_ptr", _B, "the word added to", {"local": True}),
            ("value", _V, "the addend")),
)}
assert list(PACKETS) == list(Op), "every opcode has exactly one layout"


def packet_table_doc() -> str:
    """`PACKETS` as text: per opcode, its payload words (a flag's in brackets, arrays with their length) and what
    the processor does."""
    lines = []
    for p in PACKETS.values():
        names = [f"{f.name}[{f.count}]" if f.count else f"[{f.name}]" if f.flag else f.name for f in p.fields]
        lines.append(f"    {p.op.name:<10} {', '.join(names) or '(none)'}")
        lines.append(f"{'':15}{p.doc}")
    return "\n".join(lines)


def packet_offsets() -> dict[str, int]:
    """The payload word of every fixed field as `<op>_<field>`, and `<op>_arrays`, the word its arrays start at:
    the names the processor's IR uses."""
    out: dict[str, int] = {}
    for p in PACKETS.values():
        op = p.op.name.lower()
        out.update({f"{op}_{f.name}": f.word for f in p.fields if f.count is None})
        out[f"{op}_arrays"] = p.fixed_words
    return out


__doc__ = (__doc__ or "").replace("$packet_table", packet_table_doc())

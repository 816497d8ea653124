"""The op set of the IR, grouped. A new op is added here first, then its spec rule, then its rules in each pass."""
from __future__ import annotations

import itertools
from collections.abc import Iterator

_values = itertools.count(1)


def auto() -> int:
    """The next op's number (its `value`), as `enum.auto`."""
    return next(_values)


class _OpsType(type):
    """`Ops` as an enum without `enum`: each number in the class body becomes the one `Ops` instance of that name.
    Python 3.11's EnumType defines `__getattr__`, which makes every `Ops.X` read 4x slower (55 ns): the compiler and
    each eager op read ops by name tens of times a node."""

    def __new__(mcs, name: str, bases: tuple, ns: dict) -> _OpsType:
        numbered = {k: v for k, v in ns.items() if k.isupper() and isinstance(v, int)}
        cls = super().__new__(mcs, name, bases, {k: v for k, v in ns.items() if k not in numbered})
        cls._members = {}
        for k, v in numbered.items():
            member = object.__new__(cls)
            member.name, member.value = k, v
            setattr(cls, k, member)
            cls._members[k] = member
        return cls

    def __iter__(cls) -> Iterator[Ops]:
        return iter(cls._members.values())

    def __len__(cls) -> int:
        return len(cls._members)

    def __getitem__(cls, name: str) -> Ops:
        return cls._members[name]


class Ops(metaclass=_OpsType):
    # defines
    PARAM = auto()          # arg: (slot, shape, device); a function's k-th argument
    BUFFER = auto()         # arg: (uid, device, size); concrete flat storage
    CONST = auto()          # arg: Python scalar; shape ()
    VARIABLE = auto()       # arg: (name, min, max); a symbolic integer
    BIND = auto()           # src: (VARIABLE, CONST); its bound value
    DEFINE_GLOBAL = auto()  # arg: slot; a kernel's buffer argument (pointer to dtype)
    DEFINE_ACC = auto()     # a kernel register that accumulates a REDUCE
    DEFINE_REG = auto()     # arg: (id, size); a kernel's register buffer of size elements (a row, on the stack)
    DEFINE_LOCAL = auto()   # arg: (id, size); a GPU block's shared buffer of size elements (addrspace 3)
    IOTA = auto()           # arg: n; the index values 0..n-1 along one axis (arange, masks, one-hot)

    # movement: views, no arithmetic until rangeify
    RESHAPE = auto()        # arg: new shape
    PERMUTE = auto()        # arg: permutation
    EXPAND = auto()         # arg: new shape (size-1 axes grow)
    PAD = auto()            # arg: ((before, after), ...)
    SHRINK = auto()         # arg: ((start, end), ...)
    FLIP = auto()           # arg: axes flipped (tuple of ints)
    # views at offsets known only when the graph runs (eager `x[i]`, `x[i:i+k]`, `.at[i]`): src (x, *starts), one
    # integer scalar start per axis in arg[0]; one schedule and one kernel serve every offset (the starts are kernel
    # arguments, lifted as eager scalar constants are). Each start lies in [0, longer - shorter] along its axis.
    DYNAMIC_SHRINK = auto()  # arg: (axes, output shape); out[j] = x[j + start] along each axis in arg[0]
    DYNAMIC_PAD = auto()     # arg: (axes, output shape); out[j] = x[j - start] where that is inside x, else 0

    # unary elementwise
    NEG = auto(); EXP2 = auto(); LOG2 = auto(); EXP = auto(); LOG = auto(); SIN = auto(); COS = auto()  # noqa: E702
    TAN = auto(); SQRT = auto(); RECIP = auto(); TRUNC = auto(); FLOOR = auto(); CEIL = auto()  # noqa: E702
    RINT = auto(); TANH = auto(); ASIN = auto(); ACOS = auto(); ATAN = auto(); EXPM1 = auto()  # noqa: E702
    LOG1P = auto(); SINH = auto(); COSH = auto(); ERF = auto()  # noqa: E702
    CAST = auto(); BITCAST = auto()  # noqa: E702
    # complex values (tgfx/numpy/_complex.py): views between a complex value and its interleaved (re, im) pairs,
    # a float value with a last axis of 2; the schedule removes them (tgfx/lowering/complex.py), kernels stay real
    AS_COMPLEX = auto(); AS_PAIRS = auto()  # noqa: E702

    # binary elementwise (IDIV and MOD truncate toward zero, as C does; numpy's floor forms are built on them)
    ADD = auto(); MUL = auto(); FDIV = auto(); IDIV = auto(); MOD = auto(); MAX = auto(); POW = auto()  # noqa: E702
    ATAN2 = auto(); CMPLT = auto(); CMPNE = auto(); CMPEQ = auto()  # noqa: E702
    AND = auto(); OR = auto(); XOR = auto(); SHL = auto(); SHR = auto()  # noqa: E702

    # ternary elementwise
    WHERE = auto(); MULACC = auto()  # noqa: E702 - MULACC: a * b + c, for floats rounded once (an FMA)

    # reduce
    REDUCE_AXIS = auto()    # arg: (op, axes); reduced axes keep size 1

    # call ops
    FUNCTION = auto()       # src: (TUPLE body, a0, a1, ...); arg: name
    CALL = auto()           # src: (body, a0, a1, ...); opaque invocation
    TUPLE = auto()
    GETTUPLE = auto()       # arg: index
    # a host callback (tgfx/callback.py) as the body of a CALL: arg a HostCallback. The CALL's arg is
    # (name, None, ((shape, dtype, device) of each result, the effect token first), chained); its sources are the
    # previous effect token when `chained`, then the arguments. In a LINEAR, a command (results, [token], args)
    # that the device's command processor runs as a Python program between kernels
    CALLBACK = auto()

    # control flow (tgfx/ir/control.py): bodies are TUPLEs over PARAMs of their own, opaque to passes outside them
    LOOP = auto()           # src: (body, [cond], *operands); arg: LoopSpec. scan, fori_loop and while_loop
    SWITCH = auto()         # src: (*branch bodies, index, *operands); arg: SwitchSpec. cond and switch
    # control flow in a schedule: the first source of a LINEAR's CALL, lowered to BLOCK/JUMP/WRITE/ADD packets
    BLOCK = auto()          # arg: (True, device) opens, (False, device) closes; jumps stay inside their block
    LABEL = auto()          # arg: id; a jump target
    JUMP = auto()           # arg: (cmp, value, label id); src bufs: (word,) compared with value, or () always
    WORD = auto()           # arg: ("set" | "add", value); src bufs: (word,), an int64

    # memory
    CONTIGUOUS = auto()     # materialise
    COPY = auto()           # arg: destination device
    AFTER = auto()
    STORE = auto()          # src: (INDEX or DEFINE_GLOBAL, value)
    LOAD = auto()           # src: (INDEX,)
    INDEX = auto()          # src: (DEFINE_GLOBAL, offset)

    # multi-device
    MULTI = auto(); MSELECT = auto(); MSTACK = auto(); ALLREDUCE = auto()  # noqa: E702
    # a collective between processes (tgfx/lowering/multi_process.py): src (value,), arg (kind, op, processes, shape)
    # with kind "allreduce", "allgather" or "reduce_scatter"; in a LINEAR, the body of a CALL (out, in) that the
    # network engine runs
    NETWORK = auto()

    # kernel structure (only inside lowering)
    RANGE = auto()          # src: (CONST end,); arg: (id, kind)
    END = auto()
    REDUCE = auto()         # src: (value, *ranges); arg: op
    SINK = auto()
    SPECIAL = auto()        # arg: name ('core'); a core/thread id
    BARRIER = auto()        # src: what every thread of a GPU block has done before any goes on (a shared fill)
    # one warp's m16n8k16 tensor-core multiply-accumulate (tgfx/lowering/tensor_cores.py), as one lane sees it: src
    # (a0..a7, b0..b3, c0..c3), the lane's fragments of A (16x16), B (16x8) in float16 or bfloat16, C (16x8) in
    # float32; arg i: element i of the lane's fragment of D = A @ B + C, a float32
    WMMA = auto()

    # program
    LINEAR = auto()         # src: the commands of a schedule, in order (CALLs of kernels and copies, BLOCK, ...)

    __slots__ = ("name", "value")
    name: str
    value: int

    def __repr__(self) -> str:
        return f"Ops.{self.name}"

    __str__ = __repr__

    def __reduce__(self) -> tuple:   # by name: the same member in any process, as an enum's
        return (getattr, (Ops, self.name))

    def __copy__(self) -> Ops:
        return self

    def __deepcopy__(self, memo: dict) -> Ops:
        return self

    # members are singletons: equality and hash are identity's (in C)


class GroupOp:
    Unary = frozenset({Ops.NEG, Ops.EXP2, Ops.LOG2, Ops.EXP, Ops.LOG, Ops.SIN, Ops.COS, Ops.TAN, Ops.SQRT, Ops.RECIP,
                       Ops.TRUNC, Ops.FLOOR, Ops.CEIL, Ops.RINT, Ops.TANH, Ops.ASIN, Ops.ACOS, Ops.ATAN, Ops.EXPM1,
                       Ops.LOG1P, Ops.SINH, Ops.COSH, Ops.ERF})
    Binary = frozenset({Ops.ADD, Ops.MUL, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.POW, Ops.ATAN2, Ops.CMPLT,
                        Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR})
    Ternary = frozenset({Ops.WHERE, Ops.MULACC})
    ALU = Unary | Binary | Ternary
    Elementwise = ALU | {Ops.CAST, Ops.BITCAST}
    Movement = frozenset({Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP})
    # not in Movement: they have sources besides the value they view, which movement passes do not expect
    DynamicView = frozenset({Ops.DYNAMIC_SHRINK, Ops.DYNAMIC_PAD})
    Comparison = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})
    Commutative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR})
    Associative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.AND, Ops.OR, Ops.XOR})
    FloatOnly = frozenset({Ops.EXP2, Ops.LOG2, Ops.EXP, Ops.LOG, Ops.SIN, Ops.COS, Ops.TAN, Ops.SQRT, Ops.RECIP,
                           Ops.TANH, Ops.ASIN, Ops.ACOS, Ops.ATAN, Ops.EXPM1, Ops.LOG1P, Ops.SINH, Ops.COSH, Ops.ERF,
                           Ops.FDIV, Ops.POW, Ops.ATAN2, Ops.FLOOR, Ops.CEIL, Ops.RINT})
    # transcendentals and divisions: many instructions an element (rounding ops are one)
    Costly = FloatOnly - {Ops.FLOOR, Ops.CEIL, Ops.RINT}
    # ... of which those a polynomial or a library call computes (a division or a root is one vector instruction)
    Transcendental = Costly - {Ops.FDIV, Ops.SQRT, Ops.RECIP}
    IntOnly = frozenset({Ops.IDIV, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR})
    Reduce = frozenset({Ops.ADD, Ops.MUL, Ops.MAX})
    Defines = frozenset({Ops.PARAM, Ops.BUFFER, Ops.CONST, Ops.VARIABLE, Ops.DEFINE_GLOBAL, Ops.IOTA})

"""os.fork after tgfx ran: the child fails at once with a message saying why (its device threads stayed in the
parent); a child forked before tgfx computed anything works."""
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    import os
    import tgfx.numpy as tnp

    pid = os.fork()                      # before any computation: the child starts its own devices
    if pid == 0:
        os._exit(0 if (tnp.arange(4.0) * 2).numpy().tolist() == [0, 2, 4, 6] else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, "a child forked before tgfx ran failed"

    x = tnp.arange(4.0) * 3
    x.numpy()
    pid = os.fork()                      # after: the child's devices would wait on threads it does not have
    if pid == 0:
        try:
            (x + 1).numpy()
        except RuntimeError as e:
            os._exit(0 if "fork" in str(e) and "'spawn'" in str(e) and str(os.getppid()) in str(e) else 2)
        os._exit(3)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    assert code == 0, f"the forked child exited with {code}"
    print((x + 1).numpy().tolist())     # the parent carries on
""")


def test_fork_after_tgfx_ran_fails_at_once_in_the_child_and_the_parent_carries_on() -> None:
    run = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "[1.0, 4.0, 7.0, 10.0]"



HELD_LOCKS = textwrap.dedent("""
    import faulthandler
    import os
    import sys
    import threading

    import llvmlite.binding.ffi as llvm_ffi
    import numpy as np

    import tgfx as tg
    import tgfx.numpy as tnp
    from tgfx.devices.hcq import ForkedRuntimeError

    f = tg.jit(lambda v: v * 2 + 1)
    x = tg.asarray(np.arange(4, dtype=np.float32))
    f(x).block_until_ready()
    program = f._cache.values()[0][0]
    held, release = threading.Event(), threading.Event()

    def busy() -> None:   # a thread of the parent replaying the program and compiling a kernel as it forks
        with program.lock, llvm_ffi.lib._lock:
            held.set()
            release.wait()

    thread = threading.Thread(target=busy)
    thread.start()
    held.wait()
    pid = os.fork()
    if pid == 0:          # no thread of the child will ever release those locks
        faulthandler.dump_traceback_later(30, exit=True)
        failed = []
        for name, compute in [("a replay", lambda: f(x)), ("a new trace", lambda: f(tg.asarray(np.ones(3)))),
                              ("an eager graph", lambda: (tnp.sin(x) * 3.5).numpy())]:
            try:
                compute()
                failed.append(f"{name} ran")
            except ForkedRuntimeError:
                pass
        print("; ".join(failed) or "ok", flush=True)
        sys.exit(0)       # (an ordinary exit: the atexit handlers run in the child)
    release.set()
    thread.join()
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, "the forked child failed"
    print(f(x).tolist())  # the parent carries on
""")


def test_a_child_forked_while_a_parent_thread_held_a_program_or_compile_lock_fails_at_once() -> None:
    # a child forked while another thread of the parent replayed a jitted program (its lock) or compiled a kernel
    # (llvmlite's lock) hung on that lock, which no thread of the child releases: it must fail at once instead, and
    # exit without the parent's devices in its atexit handlers
    run = subprocess.run([sys.executable, "-c", HELD_LOCKS], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split("\n")[:2] == ["ok", "[1.0, 3.0, 5.0, 7.0]"]
    assert "Exception ignored" not in run.stderr, run.stderr[-3000:]


BEFORE_THE_DEVICES = textwrap.dedent("""
    import faulthandler
    import gc
    import os
    import threading

    import tgfx.numpy as tnp
    from tgfx.devices import _devices_lock, runtime
    from tgfx.devices.hcq import ForkedRuntimeError
    from tgfx.lowering import constants, gc_paused, schedule

    def fork_while_held(locks, child):
        held, release = threading.Event(), threading.Event()

        def busy() -> None:   # a thread of the parent in tgfx as it forks, before the devices started
            for lock in locks:
                lock.acquire()
            with gc_paused():
                held.set()
                release.wait()
            for lock in locks:
                lock.release()

        thread = threading.Thread(target=busy)
        thread.start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            faulthandler.dump_traceback_later(30, exit=True)
            os._exit(child())
        release.set()
        thread.join()
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

    def computes() -> int:
        if (tnp.arange(4.0) * 2.5).numpy().tolist() != [0, 2.5, 5, 7.5]:
            return 3
        return 0 if gc.isenabled() else 2   # (off for good: the thread that paused it is in the parent)

    def fails_at_once() -> int:
        try:
            (tnp.arange(4.0) * 2.5).numpy()
        except ForkedRuntimeError:
            return 0
        return 4

    # the first device being made, a constant interned, a schedule cached: the child makes its own devices
    print(fork_while_held([_devices_lock, constants._pool_lock, schedule._templates._lock], computes))
    # the runtime being started (LLVM in use on that thread): the child is a fork of a process whose devices run
    print(fork_while_held([runtime._runtime_lock], fails_at_once))
    print((tnp.arange(3.0) + 1).numpy().tolist())   # the parent carries on
""")


def test_a_child_forked_while_a_parent_thread_was_in_tgfx_before_the_devices_started_computes() -> None:
    # a fork copies only the forking thread: locks another thread of the parent held stay held in the child (it hung
    # on the first of them) and a garbage collector it paused stays off; a child forked while the runtime itself was
    # starting fails at once, as one forked after (LLVM's own locks may be held)
    run = subprocess.run([sys.executable, "-c", BEFORE_THE_DEVICES], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split("\n")[:3] == ["0", "0", "[1.0, 2.0, 3.0]"], run.stdout + run.stderr[-3000:]


ROWS = textwrap.dedent("""
    import os
    import numpy as np
    import tgfx.numpy as tnp
    from tgfx.devices.hcq import ForkedRuntimeError

    data = (tnp.arange(12.0) * 2).reshape(3, 4)
    data.block_until_ready()
    pid = os.fork()       # a DataLoader worker: reads rows of a dataset its parent computed
    if pid == 0:
        got = [np.asarray(data[1]).tolist(), np.asarray(data[1:3]).sum().item(), data.numpy()[2, 3].item()]
        try:
            (data[0] * 2).numpy()     # a value to compute: the devices are the parent's
            got.append("computed")
        except ForkedRuntimeError:
            got.append("refused")
        print(got, flush=True)
        os._exit(0)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    print(np.asarray(data[1] + 1).tolist())
""")


def test_a_child_forked_after_tgfx_ran_reads_rows_of_computed_values_and_refuses_to_compute() -> None:
    # a row of a computed buffer (`x[1]`, `x[1:3]`) is a range of its memory: the child reads it as it reads the
    # whole buffer (it raised ForkedRuntimeError, as if it needed the parent's devices); computing anything still does
    run = subprocess.run([sys.executable, "-c", ROWS], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split("\n")[:2] == ["[[8.0, 10.0, 12.0, 14.0], 120.0, 22.0, 'refused']",
                                          "[9.0, 11.0, 13.0, 15.0]"]

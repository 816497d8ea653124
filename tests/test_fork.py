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


"""A computation longer than the wait timeout is healthy: waits give up only when no device makes progress."""
import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    import numpy as np, tgfx as tg, tgfx.numpy as tnp
    from tgfx.devices.hcq import DEFAULT_TIMEOUT_S
    assert DEFAULT_TIMEOUT_S == 0.05
    rng = np.random.default_rng(0)
    a = tg.asarray(rng.standard_normal((2048, 2048)).astype(np.float32) / 45)
    big = (a @ a).numpy()            # one kernel longer than the timeout
    np.testing.assert_allclose(big[:4, :4], (a.numpy() @ a.numpy())[:4, :4], rtol=1e-3, atol=1e-4)
    w = tg.asarray(rng.standard_normal((512, 512)).astype(np.float32) / 23)
    step = tg.jit(lambda x: tg.lax.fori_loop(0, 60, lambda i, x: tnp.tanh(x @ w), x))
    x = tg.asarray(rng.standard_normal((512, 512)).astype(np.float32))
    out = step(x).numpy()            # a device loop of many kernels, far longer than the timeout
    ref = x.numpy()
    for _ in range(60):
        ref = np.tanh(ref @ w.numpy())
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-4)
    print("ok")
""")


def test_a_computation_longer_than_the_wait_timeout_completes() -> None:
    env = {**os.environ, "TGFX_WAIT_TIMEOUT": "0.05"}
    run = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]

import tgfx as tg, tgfx.numpy as tnp, numpy as np
from tgfx.counters import counters
rng=np.random.default_rng(0)
for n in [64, 1024, 97]:
    x=tnp.asarray((rng.standard_normal((8,n))+1j*rng.standard_normal((8,n))).astype(np.complex64)).realize()
    f = tg.jit(lambda x: tnp.fft.fft(x))
    f(x).block_until_ready()
    counters.reset(); f(x).block_until_ready(); print(n, 'jit kernels', counters.kernel_count)
    counters.reset(); tnp.fft.fft(x).block_until_ready(); print(n, 'eager kernels', counters.kernel_count)
# grads
try:
    import jax, jax.numpy as jnp
except ImportError: jax=None
x0=(rng.standard_normal((5,))+1j*rng.standard_normal((5,))).astype(np.complex64)
w0=(rng.standard_normal((5,))+1j*rng.standard_normal((5,))).astype(np.complex64)
f = lambda x, w, fft, np_: np_.real(np_.sum(fft(x) * w)) + np_.sum(np_.abs(fft(x))**2)
print(tg.grad(lambda x: f(x, tnp.asarray(w0), tnp.fft.fft, tnp))(tnp.asarray(x0)).numpy())
if jax: print(jax.grad(lambda x: f(x, jnp.asarray(w0), jnp.fft.fft, jnp))(jnp.asarray(x0)))
r0 = rng.standard_normal(6).astype(np.float32)
g = lambda x, rfft, np_: np_.sum(np_.abs(rfft(x))**1.5) 
print(tg.grad(lambda x: g(x, tnp.fft.rfft, tnp))(tnp.asarray(r0)).numpy())
if jax: print(jax.grad(lambda x: g(x, jnp.fft.rfft, jnp))(jnp.asarray(r0)))
c0 = (rng.standard_normal(4)+1j*rng.standard_normal(4)).astype(np.complex64)
h = lambda c, irfft, np_: np_.sum(irfft(c, 6) * np_.arange(6.0))
print(tg.grad(lambda c: h(c, tnp.fft.irfft, tnp))(tnp.asarray(c0)).numpy())
if jax: print(jax.grad(lambda c: h(c, jnp.fft.irfft, jnp))(jnp.asarray(c0)))

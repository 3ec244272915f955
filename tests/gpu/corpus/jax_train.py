#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""jax_train.py - corpus: a JAX jit training loop (an MLP classifier on synthetic data with
jax.example_libraries' Adam), as in JAX's own examples: XLA launches through the driver API,
dispatch is asynchronous (no host sync per iteration; the loss is read every 50 iterations), and
the first iterations compile and autotune."""
import sys

import jax
import jax.numpy as jnp
from jax.example_libraries import optimizers, stax

import truth

ITERS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
init, apply = stax.serial(stax.Dense(1024), stax.Relu, stax.Dense(1024), stax.Relu, stax.Dense(10), stax.LogSoftmax)
key = jax.random.PRNGKey(0)
_, params = init(key, (-1, 784))
opt_init, opt_update, get_params = optimizers.adam(1e-3)
state = opt_init(params)


def loss_fn(p, x, y):
    return -jnp.mean(jnp.sum(apply(p, x) * y, axis=1))


@jax.jit
def update(i, st, x, y):
    g = jax.grad(loss_fn)(get_params(st), x, y)
    return opt_update(i, g, st)


xs = jax.random.normal(key, (8, 128, 784))
ys = jax.nn.one_hot(jax.random.randint(key, (8, 128), 0, 10), 10)
for i in range(ITERS):
    truth.mark()
    state = update(i, state, xs[i % 8], ys[i % 8])
    if i % 50 == 0:
        print(f"iter {i} loss {float(loss_fn(get_params(state), xs[0], ys[0])):.4f}")
jax.block_until_ready(state)
print(f"jax_train ok iters={ITERS}")

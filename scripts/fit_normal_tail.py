#!/usr/bin/env python3
"""Fits R(t) = erfc(z) e^(z^2) / (2t), t = 1 / (1 + z/2), for z in [0, 13/sqrt 2]:
the polynomial normal_tail_poly in ops/include/loom/kernels/vec_math.h.
Weighted least squares of the relative error on Chebyshev nodes, reweighted
(Lawson) toward the minimax fit. Needs numpy. Prints the coefficients c0..c8."""
import math

import numpy as np

DEG = 8
t_min = 1 / (1 + 13 / (2 * math.sqrt(2)))


def target(t):
    z = 2 * (1 / t - 1)
    return math.erfc(z) * math.exp(z * z) / (2 * t)


n = 4000
nodes = (t_min + 1) / 2 + (1 - t_min) / 2 * np.cos(np.pi * (np.arange(n) + 0.5) / n)
f = np.array([target(t) for t in nodes])
a = np.vander(nodes, DEG + 1, increasing=True) / f[:, None]  # rows: relative error per coefficient
w = np.ones(n)
for _ in range(60):
    c, *_ = np.linalg.lstsq(a * np.sqrt(w)[:, None], np.sqrt(w), rcond=None)
    err = np.abs(a @ c - 1)
    w = w * err
    w /= w.sum()
print("max relative error %.3g" % np.max(np.abs(a @ c - 1)))
print(", ".join("%.9e" % v for v in c))

# --exp: the degree-6 minimax of e^r on |r| <= ln2/2 used by exp_minus_half_square.
import sys

if "--exp" in sys.argv:
    h = math.log(2) / 2 * 1.0005
    r = np.cos(np.pi * (np.arange(n) + 0.5) / n) * h
    a = np.vander(r, 7, increasing=True) / np.exp(r)[:, None]
    w = np.ones(n)
    for _ in range(80):
        c, *_ = np.linalg.lstsq(a * np.sqrt(w)[:, None], np.sqrt(w), rcond=None)
        err = np.abs(a @ c - 1)
        w = w * err
        w /= w.sum()
    print("exp: max relative error %.3g" % np.max(np.abs(a @ c - 1)))
    print(", ".join("%.9e" % v for v in c))

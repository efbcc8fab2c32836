#!/usr/bin/python3
"""Python call overhead, loom against PyTorch in the same run: microseconds per call of
`a + b` on 1 and 1,000 elements, of `x.relu()` and `x.sum(1, keepdim=True)` on a [4, 7]
tensor (methods bound from the ops' schemas: argument parsing by name), and of a
2-layer MLP's forward + backward (batch 32,
64 -> 128 -> 10), float32, the same thread count. Median of ROUNDS rounds, alternated so
both libraries share the machine's drift; ratio > 1: loom faster.

    PYTHONPATH=build/python bench/python_overhead.py [--threads 2] [--rounds 5]
"""
import argparse
import os
import statistics
import time


def per_call(fn, seconds=0.3):
    """Microseconds per call: calls repeated until `seconds` have passed."""
    fn()
    n, start = 0, time.perf_counter()
    while True:
        for _ in range(100):
            fn()
        n += 100
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / n * 1e6


def cases(lib, np):
    rng = np.random.default_rng(0)
    tensor = (lambda a, grad=False: lib.tensor(a, requires_grad=grad))
    one_a, one_b = tensor(np.float32([1.0])), tensor(np.float32([2.0]))
    k_a, k_b = tensor(rng.standard_normal(1000, dtype=np.float32)), tensor(rng.standard_normal(1000, dtype=np.float32))
    x = tensor(rng.standard_normal((32, 64), dtype=np.float32))
    w1 = tensor(rng.standard_normal((64, 128), dtype=np.float32) * 0.1, True)
    w2 = tensor(rng.standard_normal((128, 10), dtype=np.float32) * 0.1, True)

    def mlp():
        loss = ((x @ w1).relu() @ w2).sum()
        loss.backward()
        w1.grad = None
        w2.grad = None

    small = tensor(rng.standard_normal((4, 7), dtype=np.float32))
    return {"a + b, 1 element": lambda: one_a + one_b, "a + b, 1,000 elements": lambda: k_a + k_b,
            "x.relu(), [4, 7]": lambda: small.relu(), "x.sum(1, keepdim=True)": lambda: small.sum(1, keepdim=True),
            "MLP forward + backward": mlp}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import numpy as np
    import torch

    import loom
    torch.set_num_threads(args.threads)
    print(f"bench/python_overhead.py: {args.threads} threads, torch {torch.__version__}, "
          f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}")
    libs = {"loom": cases(loom, np), "torch": cases(torch, np)}
    times = {name: {lib: [] for lib in libs} for name in libs["loom"]}
    for _ in range(args.rounds):
        for name in times:
            for lib in libs:
                times[name][lib].append(per_call(libs[lib][name]))
    print(f"{'case':<26}{'loom us':>10}{'torch us':>10}{'torch/loom':>12}")
    for name, by_lib in times.items():
        lm, tm = statistics.median(by_lib["loom"]), statistics.median(by_lib["torch"])
        print(f"{name:<26}{lm:>10.2f}{tm:>10.2f}{tm / lm:>12.2f}")


if __name__ == "__main__":
    main()

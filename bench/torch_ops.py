#!/usr/bin/python3
"""The cases of `loom bench ops`, timed in PyTorch (float32, CPU).

Same names (the join key) and shapes as the op registrations' benchmark cases
(OpInfo::bench in ops/src/<op>.cpp), same timing method as tools/bench_command.cpp:
per case and direction, warm-up calls (at least one, then until 20% of --seconds
is spent), then timed calls until --seconds is spent and at least 3 were made;
the median is reported.
  forward  = the op on inputs that require grad, grad mode on (graph recorded)
  backward = torch.autograd.grad(out, inputs, G, retain_graph=True) on one
             recorded forward, G a fixed random tensor of out's shape (the loss: 1)
Rates (GFLOP/s, GB/s) are computed by bench/join.py from loom's work counts.

Needs the system interpreter with Debian's python3-torch: /usr/bin/python3.
"""
import argparse
import json
import math
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch_ops.py: PyTorch is not installed for this interpreter "
          f"({sys.executable}); install python3-torch (scripts/setup --bench)", file=sys.stderr)
    sys.exit(3)

N, V, H, B, T = 64 * 24, 8000, 8, 64, 24


def time_call(f, seconds, min_reps=3):
    warm = time.perf_counter()
    while True:
        f()
        if time.perf_counter() - warm >= 0.2 * seconds:
            break
    times = []
    start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - start < seconds and len(times) < 100000):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    times.sort()
    n = len(times)
    median = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    return median, times[0], n


def leaf(*shape):
    return torch.randn(*shape).requires_grad_()


def dims(*d):
    return "x".join(str(v) for v in d)


def autograd_case(forward, inputs):
    def fwd():
        forward()

    state = {}

    def bwd():
        if "out" not in state:  # first call (a warm-up): record the graph once
            out = forward()
            state["out"] = out
            state["seed"] = torch.ones(()) if out.dim() == 0 else torch.randn(out.shape)
        torch.autograd.grad(state["out"], inputs, state["seed"], retain_graph=True)

    return fwd, bwd


def cases():
    """(name, prepare) pairs; prepare() -> (forward, backward)."""
    out = []

    def matmul_case(m, k, n, ta, tb):
        a = f"({dims(k, m)})^T" if ta else dims(m, k)
        b = f"({dims(n, k)})^T" if tb else dims(k, n)

        def prepare():
            A = leaf(*((k, m) if ta else (m, k)))
            Bm = leaf(*((n, k) if tb else (k, n)))
            return autograd_case(lambda: (A.t() if ta else A) @ (Bm.t() if tb else Bm), [A, Bm])

        out.append((f"matmul {a} @ {b}", prepare))

    for d in (512, 256):
        ff = 4 * d
        kn = [(d, d), (d, ff), (ff, d), (d, V)]
        for k, n in kn:
            matmul_case(N, k, n, False, False)
        if d != 512:
            continue
        for k, n in kn:
            matmul_case(k, N, n, True, False)
        for k, n in kn:
            matmul_case(N, k, n, False, True)

    def bmm_case(batch, m, k, n, tb):
        b = f"({dims(batch, n, k)})^T" if tb else dims(batch, k, n)

        def prepare():
            A = leaf(batch, m, k)
            Bm = leaf(*((batch, n, k) if tb else (batch, k, n)))
            return autograd_case(lambda: A @ (Bm.transpose(-1, -2) if tb else Bm), [A, Bm])

        out.append((f"bmm {dims(batch, m, k)} @ {b}", prepare))

    for dk in (64, 32):
        if dk == 64:
            bmm_case(B * H, T, dk, T, False)
        bmm_case(B * H, T, dk, T, True)
        bmm_case(B * H, T, T, dk, False)

    def two(shape_a, shape_b, op):
        def prepare():
            a, b = leaf(*shape_a), leaf(*shape_b)
            return autograd_case(lambda: op(a, b), [a, b])
        return prepare

    def one(shape, op):
        def prepare():
            x = leaf(*shape)
            return autograd_case(lambda: op(x), [x])
        return prepare

    out.append(("add 1536x512 + 1536x512", two((N, 512), (N, 512), torch.add)))
    for c in (512, 2048):
        out.append((f"add {dims(N, c)} + {c} (row broadcast)", two((N, c), (c,), torch.add)))
    out.append(("mul 1536x512 * 1536x512", two((N, 512), (N, 512), torch.mul)))
    out.append(("relu 1536x2048", one((N, 2048), torch.relu)))
    out.append(("gelu 1536x2048", one((N, 2048), F.gelu)))
    out.append(("sum 1536x512 over last dim", one((N, 512), lambda x: x.sum(-1))))

    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # true = masked (future)
    for log in (False, True):
        fn = torch.log_softmax if log else torch.softmax
        name = "log_softmax" if log else "softmax"
        out.append((f"{name} 64x8x24x24 causal mask",
                    one((B, H, T, T), lambda x, fn=fn: fn(x.masked_fill(causal, float("-inf")), -1))))
    for log in (False, True):
        fn = torch.log_softmax if log else torch.softmax
        name = "log_softmax" if log else "softmax"
        out.append((f"{name} 1536x8000", one((N, V), lambda x, fn=fn: fn(x, -1))))

    for d in (512, 256):
        def prepare(d=d):
            x, w, b = leaf(N, d), leaf(d), leaf(d)
            return autograd_case(lambda: F.layer_norm(x, (d,), w, b, 1e-5), [x, w, b])
        out.append((f"layer_norm {dims(N, d)}", prepare))

    out.append(("dropout p=0.1 1536x2048", one((N, 2048), lambda x: F.dropout(x, 0.1, training=True))))

    def ce():
        logits = leaf(N, V)
        target = torch.randint(1, V, (N,))
        target[9::10] = 0  # every 10th target is padding (ignored)
        return autograd_case(lambda: F.cross_entropy(logits, target, ignore_index=0, label_smoothing=0.1),
                             [logits])
    out.append(("cross_entropy 1536x8000 ls=0.1 ignore", ce))

    def emb():
        w = leaf(V, 512)
        ids = torch.randint(0, V, (B, T))
        return autograd_case(lambda: F.embedding(ids, w), [w])
    out.append(("embedding 8000x512 [64x24 ids]", emb))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seconds", type=float, default=0.3)
    p.add_argument("--filter", default="")
    p.add_argument("--json", default="")
    p.add_argument("--list", action="store_true")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    all_cases = cases()
    if args.list:
        for name, _ in all_cases:
            print(name)
        return
    print(f"torch {torch.__version__}: float32, CPU, threads {torch.get_num_threads()}, "
          f"{args.seconds:g} s per case and direction, median after warm-up")
    print(f"{'case':<44} {'fwd ms':>10} {'bwd ms':>10}")
    results = []
    for name, prepare in all_cases:
        if args.filter and args.filter not in name:
            continue
        fwd, bwd = prepare()
        f_s, f_min, f_n = time_call(fwd, args.seconds)
        b_s, b_min, b_n = time_call(bwd, args.seconds)
        del fwd, bwd
        print(f"{name:<44} {f_s * 1e3:>10.3f} {b_s * 1e3:>10.3f}", flush=True)
        results.append({"name": name, "fwd_s": f_s, "fwd_min_s": f_min, "fwd_reps": f_n,
                        "bwd_s": b_s, "bwd_min_s": b_min, "bwd_reps": b_n})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tool": "torch", "version": torch.__version__, "threads": torch.get_num_threads(),
                       "seconds": args.seconds, "cases": results}, f, indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Joins `loom bench ops --json` and bench/torch_ops.py --json into one table.

usage: join.py LOOM_JSON [TORCH_JSON]
Plain Python (no torch needed). Rates use loom's work counts (flops or minimal
bytes, stated by each op's registration, ops/src/<op>.cpp) for both tools.
"""
import json
import sys


def ms(s):
    return f"{s * 1e3:.3f}" if s and s > 0 else "-"


def noisy(c, key):
    """'~' when the median is over 1.5x the fastest run: the machine was busy."""
    med, low = c.get(f"{key}_s"), c.get(f"{key}_min_s")
    return "~" if med and low and med > 1.5 * low else ""


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    loom = json.load(open(sys.argv[1]))
    torch = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else None
    tcases = {c["name"]: c for c in torch["cases"]} if torch else {}
    bw = loom["bandwidth"]["triad_GBps"]

    print(f"OPENBLAS_CORETYPE={loom['openblas_coretype'] or '(unset)'} (OpenBLAS core {loom['openblas_corename']}), "
          f"threads: loom {loom['threads']}" + (f", torch {torch['threads']} (torch {torch['version']})" if torch else "")
          + f", {loom['seconds']:g} s per case and direction, median after warm-up")
    print(f"memory bandwidth: triad {bw:.1f} GB/s, copy {loom['bandwidth']['copy_GBps']:.1f} GB/s (3 x 256 MiB arrays)")
    print()
    head = (f"{'case':<40} {'loom fwd':>9} {'loom bwd':>9} {'torch fwd':>9} {'torch bwd':>9} {'t/l fwd':>7} "
            f"{'t/l bwd':>7} {'fwd rate':>9} {'bwd rate':>9} {'fwd %bw':>7} {'bwd %bw':>7} {'sgemm':>8} {'mm/sg':>6}")
    print(head)
    print("-" * len(head))
    kind = None
    for c in loom["cases"]:
        if kind is not None and c["kind"] != kind:
            print()
        kind = c["kind"]
        gemm = kind == "gemm"
        t = tcases.get(c["name"])
        fw, bw_ = ("fwd_flops", "bwd_flops") if gemm else ("fwd_bytes", "bwd_bytes")

        def rate(work, s):
            return f"{work / s / 1e9:.1f}{'GF' if gemm else 'GB'}" if work and s else "-"

        def pct(work, s):
            return f"{100 * work / s / 1e9 / bw:.0f}%" if (not gemm and work and s) else "-"

        def ratio(d):
            return f"{t[d + '_s'] / c[d + '_s']:.2f}" if t and t.get(d + "_s") and c.get(d + "_s") else "-"

        sg = c.get("sgemm_s")
        print(f"{c['name']:<40} {ms(c['fwd_s']) + noisy(c, 'fwd'):>9} {ms(c['bwd_s']) + noisy(c, 'bwd'):>9} "
              f"{(ms(t['fwd_s']) + noisy(t, 'fwd')) if t else '-':>9} "
              f"{(ms(t['bwd_s']) + noisy(t, 'bwd')) if t else '-':>9} {ratio('fwd'):>7} {ratio('bwd'):>7} "
              f"{rate(c.get(fw), c['fwd_s']):>9} {rate(c.get(bw_), c['bwd_s']):>9} "
              f"{pct(c.get(fw), c['fwd_s']):>7} {pct(c.get(bw_), c['bwd_s']):>7} "
              f"{(ms(sg) + noisy(c, 'sgemm')) if sg else '-':>8} {('%.2f' % (c['fwd_s'] / sg)) if sg else '-':>6}")
    only_torch = [n for n in tcases if n not in {c["name"] for c in loom["cases"]}]
    for n in only_torch:
        t = tcases[n]
        print(f"{n:<40} {'-':>9} {'-':>9} {ms(t['fwd_s']) + noisy(t, 'fwd'):>9} {ms(t['bwd_s']) + noisy(t, 'bwd'):>9}"
              f"  (not in this loom build)")
    print()
    print("times in ms (median); t/l = torch time / loom time (>1: loom faster); rates are loom's: GF = GFLOP/s "
          "(2MNK per product, bwd = dA + dB),")
    print("GB = GB/s of minimal traffic (inputs read + outputs written once); %bw = loom GB/s / triad GB/s "
          "(inputs of a few MiB stay in cache: >100% is possible);")
    print("sgemm = raw cblas_sgemm on the same product (bmm: one single-threaded sgemm per batch item in an OpenMP loop); "
          "mm/sg = loom fwd / sgemm;")
    print("~ = median over 1.5x the fastest run (machine busy: treat with care). backward = autograd grad of out "
          "with a fixed random G.")


if __name__ == "__main__":
    main()

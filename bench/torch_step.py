#!/usr/bin/env python3
"""The peer of `loom bench step`: the same Transformer training step in PyTorch.

Same architecture as loom's models::Transformer: post-norm encoder/decoder layers
(torch.nn.TransformerEncoderLayer / DecoderLayer, ReLU, layer-norm eps 1e-6),
one embedding table shared by source, target and the output projection, scaled
by sqrt(d_model), sinusoidal positions, dropout everywhere loom has it,
label-smoothed cross-entropy (0.1, ignore_index = pad 0), Adam (0.9, 0.98, 1e-9).
"""
import argparse
import json
import resource
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {"tiny": (64, 256, 4, 2), "small": (256, 1024, 4, 3), "base": (512, 2048, 8, 6), "big": (1024, 4096, 16, 6)}


class Transformer(nn.Module):
    def __init__(self, vocab, d, ff, heads, layers, p, max_len=1024):
        super().__init__()
        self.d = d
        self.embed = nn.Embedding(vocab, d, padding_idx=0)
        nn.init.normal_(self.embed.weight, 0.0, d ** -0.5)
        pos = torch.arange(max_len, dtype=torch.float64)[:, None]
        i = torch.arange(d)
        angle = pos / torch.pow(10000.0, (i - i % 2).double() / d)
        pe = torch.where(i % 2 == 0, torch.sin(angle), torch.cos(angle)).float()
        self.register_buffer("pe", pe)
        self.drop = nn.Dropout(p)
        self.enc = nn.ModuleList(
            [nn.TransformerEncoderLayer(d, heads, ff, p, batch_first=True, layer_norm_eps=1e-6) for _ in range(layers)])
        self.dec = nn.ModuleList(
            [nn.TransformerDecoderLayer(d, heads, ff, p, batch_first=True, layer_norm_eps=1e-6) for _ in range(layers)])

    def embed_at(self, ids):
        return self.drop(self.embed(ids) * math.sqrt(self.d) + self.pe[: ids.shape[1]])

    def forward(self, src, tgt):
        src_pad = src == 0
        x = self.embed_at(src)
        for layer in self.enc:
            x = layer(x, src_key_padding_mask=src_pad)
        t = tgt.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=tgt.device), 1)
        y = self.embed_at(tgt)
        for layer in self.dec:
            y = layer(y, x, tgt_mask=causal, memory_key_padding_mask=src_pad)
        return y @ self.embed.weight.t()


def print_profile(profiler, steps, step_s):
    """The ops' self time per step (slowest first), and the matrix products' share of the step."""
    events = profiler.key_averages()
    print(events.table(sort_by="self_cpu_time_total", row_limit=12))
    products = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_mkldnn_linear")
    matmul_s = sum(e.self_cpu_time_total for e in events if e.key in products) * 1e-6 / steps
    print(f"matrix products ({', '.join(products)}: self time) {100 * matmul_s / step_s:.1f}% of the step "
          f"({step_s * 1e3:.1f} ms, profiled)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="small")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--src-len", type=int, default=24)
    ap.add_argument("--tgt-len", type=int, default=24)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json")
    # loom's --precision bf16 against PyTorch's mixed precision: autocast to bf16 (forward and loss)
    ap.add_argument("--precision", default="float32", choices=["float32", "bf16", "mixed"])  # mixed: autocast too
    ap.add_argument("--device", default="cpu")  # cpu, cuda or cuda:N, as for loom
    ap.add_argument("--peak-tflops", type=float, default=0)  # loom's MFU flag; bench/step.sh prints both MFUs
    ap.add_argument("--profile", action="store_true")  # torch.profiler over the timed steps, as loom's --profile
    a = ap.parse_args()
    device = torch.device(a.device)
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    d, ff, heads, layers = PRESETS[a.preset]
    model = Transformer(a.vocab, d, ff, heads, layers, a.dropout).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    src = torch.randint(3, a.vocab, (a.batch, a.src_len)).to(device)
    tgt_in = torch.randint(3, a.vocab, (a.batch, a.tgt_len)).to(device)
    tgt_out = torch.randint(3, a.vocab, (a.batch, a.tgt_len)).to(device)
    params = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__} bench step: '{a.preset}' (d_model {d}, d_ff {ff}, heads {heads}, "
          f"{layers}+{layers} layers, dropout {a.dropout}), vocabulary {a.vocab}, {params} parameters, {a.threads} threads, device {device}, {'float32' if a.precision == 'float32' else 'bf16 autocast'}")
    times = []
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) if a.profile else None
    for s in range(a.warmup + a.steps):
        if profiler and s == a.warmup:
            profiler.start()
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.precision != "float32"):
            logits = model(src, tgt_in)
            loss = F.cross_entropy(logits.reshape(-1, a.vocab), tgt_out.reshape(-1), label_smoothing=0.1, ignore_index=0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        value = loss.item()  # waits for the device: the step is done
        if s >= a.warmup:
            times.append(time.perf_counter() - t0)
    if profiler:
        profiler.stop()
        print_profile(profiler, a.steps, sum(times) / len(times))
    times.sort()
    median, best = times[len(times) // 2], times[0]
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    print(f"step: median {median * 1e3:.1f} ms, min {best * 1e3:.1f} ms "
          f"({a.batch * a.tgt_len / median:.0f} target tokens/s at the median); last loss {value:.4f}")
    print(f"memory: peak RSS {peak_rss_mb:.0f} MB")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"tool": "torch", "preset": a.preset, "threads": a.threads, "parameters": params,
                       "median_s": median, "min_s": best, "steps": a.steps, "peak_rss_mb": peak_rss_mb,
                       "device": str(device)}, f, indent=2)


if __name__ == "__main__":
    main()

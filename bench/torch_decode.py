#!/usr/bin/env python3
"""The peer of `loom translate --beam 1 --alpha 0`: greedy decoding of a loom model in PyTorch.

Loads loom's model.safetensors and its SentencePiece vocabulary, rebuilds the same
Transformer from the weights (post- or pre-norm, tied embeddings, sinusoidal
positions, ReLU feed-forward, layer-norm eps from the config) and decodes the way
loom does: batches of up to --batch lines of one length (no padding), the source cut to max_len - 1
pieces plus eos, at most source length + --extra-len tokens (and max_len - 1), keys
and values cached per decoder layer, the source's projected once, finished
sentences dropped from the batch. Prints the seconds it took (loading and
tokenizing included, as for the loom command) and writes the translations.
"""
import argparse
import gzip
import json
import math
import struct
import time

import sentencepiece
import torch
import torch.nn.functional as F

PAD, BOS, EOS = 0, 2, 3  # loom's Vocabulary ids


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        if entry["dtype"] != "F32":
            raise SystemExit(f"torch_decode.py: {path}: {name} is {entry['dtype']}, only F32 is read")
        begin, end = entry["data_offsets"]
        tensors[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.float32).reshape(entry["shape"])
    return tensors, meta


class Model:
    def __init__(self, w, config):
        known = {"src_vocab", "tgt_vocab", "d_model", "d_ff", "heads", "encoder_layers", "decoder_layers", "dropout",
                 "attention_dropout", "relu_dropout", "max_len", "pad_id", "share_embeddings", "pre_norm", "layer_norm_eps"}
        for key, value in config.items():
            if key not in known and value not in (False, 0, None, "sinusoidal"):
                raise SystemExit(f"torch_decode.py: config field {key}={value} is not modelled here")
        self.w, self.c = w, config
        self.d, self.h = config["d_model"], config["heads"]
        self.src_table = w["src_embed.weight"]
        self.tgt_table = w.get("tgt_embed.weight", self.src_table)
        pos = torch.arange(config["max_len"], dtype=torch.float64)[:, None]
        i = torch.arange(self.d)
        angle = pos / torch.pow(10000.0, (i - i % 2).double() / self.d)
        self.pe = torch.where(i % 2 == 0, torch.sin(angle), torch.cos(angle)).float()

    def linear(self, x, name):
        return F.linear(x, self.w[name + ".weight"], self.w.get(name + ".bias"))

    def norm(self, x, name):
        return F.layer_norm(x, (self.d,), self.w[name + ".weight"], self.w[name + ".bias"], self.c["layer_norm_eps"])

    def heads(self, x):  # [B, T, d] -> [B, h, T, d / h]
        return x.reshape(x.shape[0], x.shape[1], self.h, self.d // self.h).transpose(1, 2)

    def attend(self, name, q_in, k, v, mask):
        q = self.heads(self.linear(q_in, name + ".w_q"))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d // self.h)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        context = torch.softmax(scores, -1) @ v
        return self.linear(context.transpose(1, 2).reshape(q_in.shape[0], q_in.shape[1], self.d), name + ".w_o")

    def kv(self, name, x):
        return self.heads(self.linear(x, name + ".w_k")), self.heads(self.linear(x, name + ".w_v"))

    def sublayer(self, x, name, norm, fn):
        if self.c["pre_norm"]:
            return x + fn(self.norm(x, norm))
        return self.norm(x + fn(x), norm)

    def ff(self, name):
        return lambda x: self.linear(torch.relu(self.linear(x, name + ".w_1")), name + ".w_2")

    def embed(self, table, ids, first=0):
        return F.embedding(ids, table) * math.sqrt(self.d) + self.pe[first:first + ids.shape[1]]

    def encode(self, src):
        mask = (src == PAD)[:, None, None, :]
        x = self.embed(self.src_table, src)
        for l in range(self.c["encoder_layers"]):
            p = f"encoder.layers.{l}"
            x = self.sublayer(x, p, p + ".norm1", lambda h: self.attend(p + ".self_attn", h, *self.kv(p + ".self_attn", h), mask))
            x = self.sublayer(x, p, p + ".norm2", self.ff(p + ".feed_forward"))
        if self.c["pre_norm"]:
            x = self.norm(x, "encoder.norm")
        return x, mask

    def greedy(self, src, max_len):
        memory, mask = self.encode(src)
        layers = range(self.c["decoder_layers"])
        source = [self.kv(f"decoder.layers.{l}.cross_attn", memory) for l in layers]
        cache = [None for _ in layers]
        live = torch.arange(src.shape[0])
        out = [[] for _ in range(src.shape[0])]
        last = torch.full((src.shape[0], 1), BOS, dtype=torch.long)
        for step in range(max_len):
            x = self.embed(self.tgt_table, last, step)
            for l in layers:
                p = f"decoder.layers.{l}"

                def self_attn(h):
                    k, v = self.kv(p + ".self_attn", h)
                    if cache[l] is not None:
                        k, v = torch.cat([cache[l][0], k], 2), torch.cat([cache[l][1], v], 2)
                    cache[l] = (k, v)
                    return self.attend(p + ".self_attn", h, k, v, None)

                x = self.sublayer(x, p, p + ".norm1", self_attn)
                x = self.sublayer(x, p, p + ".norm2", lambda h: self.attend(p + ".cross_attn", h, *source[l], mask))
                x = self.sublayer(x, p, p + ".norm3", self.ff(p + ".feed_forward"))
            if self.c["pre_norm"]:
                x = self.norm(x, "decoder.norm")
            next_ids = (x[:, 0] @ self.tgt_table.t()).argmax(-1)
            if step == max_len - 1:  # as loom's beam search: the last token allowed is eos
                next_ids.fill_(EOS)
            for row, sentence in enumerate(live.tolist()):
                out[sentence].append(int(next_ids[row]))
            keep = (next_ids != EOS).nonzero()[:, 0]
            if keep.numel() == 0:
                break
            if keep.numel() < live.numel():  # finished sentences leave the batch
                live, mask = live[keep], mask[keep]
                source = [(k[keep], v[keep]) for k, v in source]
                cache = [(k[keep], v[keep]) for k, v in cache]
            last = next_ids[keep][:, None]
        return out


def read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--extra-len", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write {seconds, sentences, tokens} here")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    start = time.perf_counter()
    weights, meta = load_safetensors(a.model + "/model.safetensors")
    config = json.loads(meta["config"])
    model = Model(weights, config)
    spm = sentencepiece.SentencePieceProcessor(model_file=a.model + "/" + meta["vocabulary"])
    lines = read_lines(a.input)
    tokens = 0
    ids = [spm.encode(line)[: config["max_len"] - 1] + [EOS] for line in lines]
    order = sorted(range(len(lines)), key=lambda i: len(ids[i]))  # stable, like loom's
    batches, first = [], 0
    while first < len(order):  # up to --batch lines of the same length, as loom batches them
        last = first
        while last < len(order) and last - first < a.batch and len(ids[order[last]]) == len(ids[order[first]]):
            last += 1
        batches.append(order[first:last])
        first = last
    translations = [""] * len(lines)
    with torch.inference_mode():
        for batch in batches:
            longest = max(len(ids[i]) for i in batch)
            src = torch.tensor([ids[i] + [PAD] * (longest - len(ids[i])) for i in batch], dtype=torch.long)
            for i, hyp in zip(batch, model.greedy(src, min(longest + a.extra_len, config["max_len"] - 1))):
                tokens += len(hyp)
                translations[i] = spm.decode([t for t in hyp if t != EOS])
    with open(a.output, "w", encoding="utf-8") as out:
        out.writelines(t + "\n" for t in translations)
    seconds = time.perf_counter() - start
    print(f"torch greedy: {len(lines)} sentences, {tokens} tokens in {seconds:.2f} s ({a.threads} threads)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"seconds": seconds, "sentences": len(lines), "tokens": tokens}, f)


if __name__ == "__main__":
    main()

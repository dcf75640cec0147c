#!/usr/bin/python3
"""Reference forward pass in float32 with Hugging Face transformers semantics, for checking the
engine's numerics.  Written from the modeling_llama / modeling_mistral / modeling_qwen2 /
modeling_qwen3 definitions, with weights widened exactly to float32 (so it equals HF run with
torch_dtype=float32 on the same stored weights):

  x = embed[ids]
  per layer:  h = RMSNorm(x)                          (x * rsqrt(mean(x^2) + eps) * w)
              q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)        bias: Qwen2
              q, k = RMSNorm_head(q), RMSNorm_head(k)                    Qwen3, before RoPE
              q, k = RoPE(q), RoPE(k)                 rotate_half, llama3 rope_scaling
              attention with GQA (kv head = q head // (heads / kv_heads)), causal, 1/sqrt(head_dim)
              x = x + o Wo^T
              h = RMSNorm(x);  x = x + (silu(h Wg^T) * (h Wu^T)) Wd^T
  logits = RMSNorm(x) lm_head^T                       (lm_head = embed when tied)

usage: /usr/bin/python3 ref_torch.py MODEL_DIR --ids 1,2,3 [--out FILE] [--generate N] [--top K]
  --out FILE     float32 little-endian logits [n_ids x vocab], the layout of `llm logits`
  --generate N   greedy generation of N tokens after the ids (stops at an eos id of
                 generation_config.json); prints JSON {"prompt_ids", "ids", "gaps"} where
                 gaps[i] is the top-1 minus top-2 logit of step i
  --top K        print the top K ids per position
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hfmodel  # noqa: E402


def llama3_inv_freq(inv_freq, rs):
    """transformers' _compute_llama3_parameters: long wavelengths slowed down by `factor`,
    short ones kept, a smooth blend in between."""
    factor, lf, hf = rs['factor'], rs['low_freq_factor'], rs['high_freq_factor']
    old = rs['original_max_position_embeddings']
    low_wl, high_wl = old / lf, old / hf
    wl = 2 * math.pi / inv_freq
    inv_l = torch.where(wl > low_wl, inv_freq / factor, inv_freq)
    smooth = (old / wl - lf) / (hf - lf)
    smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
    is_medium = ~(wl < high_wl) * ~(wl > low_wl)
    return torch.where(is_medium, smoothed, inv_l)


def linear(x, w, w_mkldnn=None):
    """x @ w.T.  Debian's torch uses the reference BLAS (~3 GFLOP/s); its oneDNN (mkldnn) path
    is 5x faster for the vocab projection of many positions and still accumulates in float32."""
    if w_mkldnn is not None and x.dim() == 2 and x.shape[0] > 8:
        return torch._C._nn.mkldnn_linear(x.contiguous().to_mkldnn(), w_mkldnn).to_dense()
    return x @ w.T


class RefModel:
    def __init__(self, model_dir, rope_scaling=True):
        cfg = self.cfg = hfmodel.load_config(model_dir)
        self.arch = hfmodel.arch_of(cfg)
        self.H = cfg['hidden_size']
        self.NH = cfg['num_attention_heads']
        self.NKV = cfg.get('num_key_value_heads') or self.NH
        self.HD = hfmodel.head_dim_of(cfg)
        self.L = cfg['num_hidden_layers']
        self.eps = cfg['rms_norm_eps']
        self.eos = hfmodel.eos_ids(model_dir)
        self.W = {k: torch.from_numpy(np.ascontiguousarray(t.f32()))
                  for k, t in hfmodel.load_tensors(model_dir).items()}
        self.lm_head = self.W.get('lm_head.weight')
        if self.lm_head is None or cfg.get('tie_word_embeddings'):
            self.lm_head = self.W['model.embed_tokens.weight']
        self.lm_head_mkldnn = self.lm_head.to_mkldnn() if torch.backends.mkldnn.is_available() else None
        theta = cfg.get('rope_theta', 10000.0)
        inv = 1.0 / (theta ** (torch.arange(0, self.HD, 2, dtype=torch.int64).float() / self.HD))
        rs = cfg.get('rope_scaling')
        if rs and rope_scaling:
            kind = rs.get('rope_type', rs.get('type'))
            if kind == 'llama3':
                inv = llama3_inv_freq(inv, rs)
            elif kind != 'default':
                raise ValueError(f'rope_scaling type {kind} not implemented in the reference')
        self.inv_freq = inv

    def rmsnorm(self, x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def rope(self, x, pos):
        """x: [heads, T, HD]; rotate_half convention (first half / second half pairs)."""
        freqs = torch.outer(pos.float(), self.inv_freq)
        emb = torch.cat([freqs, freqs], -1)
        h = self.HD // 2
        rot = torch.cat([-x[..., h:], x[..., :h]], -1)
        return x * emb.cos() + rot * emb.sin()

    def new_cache(self):
        return [[None, None] for _ in range(self.L)]

    @torch.no_grad()
    def forward(self, ids, cache, start):
        """Runs ids at positions start.. with the KV cache; returns float32 logits [T, vocab]."""
        W, T = self.W, len(ids)
        NH, NKV, HD = self.NH, self.NKV, self.HD
        pos = torch.arange(start, start + T)
        x = W['model.embed_tokens.weight'][torch.tensor(ids)]
        for l in range(self.L):
            p = f'model.layers.{l}.'
            h = self.rmsnorm(x, W[p + 'input_layernorm.weight'])
            q = h @ W[p + 'self_attn.q_proj.weight'].T
            k = h @ W[p + 'self_attn.k_proj.weight'].T
            v = h @ W[p + 'self_attn.v_proj.weight'].T
            if self.arch == 'qwen2':
                q = q + W[p + 'self_attn.q_proj.bias']
                k = k + W[p + 'self_attn.k_proj.bias']
                v = v + W[p + 'self_attn.v_proj.bias']
            q, k, v = q.view(T, NH, HD), k.view(T, NKV, HD), v.view(T, NKV, HD)
            if self.arch == 'qwen3':
                q = self.rmsnorm(q, W[p + 'self_attn.q_norm.weight'])
                k = self.rmsnorm(k, W[p + 'self_attn.k_norm.weight'])
            q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
            q, k = self.rope(q, pos), self.rope(k, pos)
            if cache[l][0] is not None:
                k = torch.cat([cache[l][0], k], 1)
                v = torch.cat([cache[l][1], v], 1)
            cache[l] = [k, v]
            S = k.shape[1]
            k = k.repeat_interleave(NH // NKV, 0)
            v = v.repeat_interleave(NH // NKV, 0)
            # query i (absolute position start+i) sees keys 0..start+i
            mask = torch.full((T, S), float('-inf')).triu(start + 1)
            att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(HD) + mask, -1)
            o = (att @ v).transpose(0, 1).reshape(T, NH * HD)
            x = x + o @ W[p + 'self_attn.o_proj.weight'].T
            h = self.rmsnorm(x, W[p + 'post_attention_layernorm.weight'])
            g = torch.nn.functional.silu(h @ W[p + 'mlp.gate_proj.weight'].T)
            x = x + (g * (h @ W[p + 'mlp.up_proj.weight'].T)) @ W[p + 'mlp.down_proj.weight'].T
        x = self.rmsnorm(x, W['model.norm.weight'])
        return linear(x, self.lm_head, self.lm_head_mkldnn)

    def logits(self, ids):
        return self.forward(ids, self.new_cache(), 0).numpy()

    def generate(self, ids, n):
        """Greedy decoding: returns (generated ids, top1-top2 gap of each step)."""
        cache = self.new_cache()
        logits = self.forward(ids, cache, 0)[-1]
        out, gaps = [], []
        for _ in range(n):
            top = torch.topk(logits, 2)
            tok = int(top.indices[0])
            out.append(tok)
            gaps.append(float(top.values[0] - top.values[1]))
            if tok in self.eos:
                break
            logits = self.forward([tok], cache, len(ids) + len(out) - 1)[-1]
        return out, gaps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('model')
    ap.add_argument('--ids', required=True, help='comma-separated token ids')
    ap.add_argument('--out', help='write float32 logits [n_ids x vocab] here')
    ap.add_argument('--generate', type=int, default=0)
    ap.add_argument('--top', type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    m = RefModel(a.model)
    ids = [int(x) for x in a.ids.split(',') if x]
    if a.generate:
        gen, gaps = m.generate(ids, a.generate)
        print(json.dumps({'prompt_ids': ids, 'ids': gen, 'gaps': gaps}))
        return
    logits = m.logits(ids)
    if a.out:
        logits.astype('<f4').tofile(a.out)
    for t in range(len(ids) if a.top else 0):
        top = np.argsort(-logits[t])[:a.top]
        print(f'pos {t} id {ids[t]}: top {top.tolist()} logits '
              f'{[round(float(logits[t][i]), 4) for i in top]}')
    if not a.out and not a.top:
        print(f'{logits.shape[0]} x {logits.shape[1]} logits, max |logit| '
              f'{np.abs(logits).max():.3f}, argmax {logits.argmax(1).tolist()}')


if __name__ == '__main__':
    main()

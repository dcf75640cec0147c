#!/usr/bin/python3
"""Minimal Hugging Face -> GGUF converter for the llama.cpp cross-check and benchmark, built on
llama.cpp's own gguf-py (llama.cpp's convert_hf_to_gguf.py needs transformers, which Debian 12
does not package).  Handles what `llm make-model` writes: Llama, Mistral (both GGUF arch
"llama"), Qwen2 (qkv bias) and Qwen3 (q/k norm); tied embeddings; llama3 rope scaling.

Facts taken from llama.cpp's converter (conversion/llama.py, qwen.py, base.py):
- GGUF arch "llama" applies RoPE to adjacent pairs (GPT-J style), HF to the two halves of each
  head (rotate_half).  The converter therefore permutes the rows of q_proj (with n_head) and
  k_proj (with n_kv_head) within each head: row order [0, d/2, 1, d/2+1, ...] becomes
  [0, 1, 2, ...], i.e. reshape(n, 2, d/2, cols).swapaxes(1, 2).  Qwen2/Qwen3 run "NEOX" RoPE
  (the halves, like HF), so their weights are copied unpermuted.
- llama3 rope scaling is not a GGUF key: the converter writes a tensor rope_freqs.weight of
  per-frequency divisors (1 for short wavelengths, factor for long ones, a smooth blend between).
- 1-D tensors (norms, biases, rope_freqs) stay float32.
- A SentencePiece-style tokenizer ("llama") has scores, not merges: each piece's score is minus
  the rank of the first tokenizer.json merge that makes it, so that merging by score merges in
  tokenizer.json's order (llama.cpp's own converter writes -1000 for every piece of an HF-only
  tokenizer, which loses the order).

usage: PYTHONPATH=LLAMA_CPP_SRC/gguf-py /usr/bin/python3 hf_to_gguf.py MODEL_DIR OUT.gguf
           [--outtype f32|f16|bf16]
  f32 (default) widens bf16/f16 weights exactly, for tight logit comparisons; f16/bf16 copy the
  stored bits when they already have that dtype (the benchmark compares equal weight bytes).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hfmodel  # noqa: E402

GGUF_ARCH = {'llama': 'llama', 'mistral': 'llama', 'qwen2': 'qwen2', 'qwen3': 'qwen3'}


def permute_rows(w, n_head):
    """llama.cpp's LlamaModel.permute: HF half-split RoPE rows -> interleaved pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def rope_freqs(cfg, head_dim):
    rs = cfg['rope_scaling']
    base = cfg.get('rope_theta', 10000.0)
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    factor, lf, hf = rs['factor'], rs['low_freq_factor'], rs['high_freq_factor']
    old = rs['original_max_position_embeddings']
    low_wl, high_wl = old / lf, old / hf
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            s = (old / wl - lf) / (hf - lf)
            out.append(1.0 / ((1 - s) / factor + s))
    return np.array(out, dtype=np.float32)


def encode(t, outtype, rows_permute=None):
    """A stored tensor in the output dtype: (array, raw_dtype or None)."""
    if t.raw.ndim == 1 or outtype == 'f32':
        a = t.f32()
        raw_dtype = None
    elif outtype == 'f16':
        a = t.raw if t.dtype == 'F16' else t.f32().astype(np.float16)
        raw_dtype = None
    else:  # bf16: copy the bits, or round float32 to nearest even
        if t.dtype == 'BF16':
            a = t.raw
        else:
            u = t.f32().view(np.uint32)
            a = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        raw_dtype = gguf.GGMLQuantizationType.BF16
    if rows_permute:
        a = permute_rows(a, rows_permute)
    a = np.ascontiguousarray(a)
    if raw_dtype is not None:
        a = a.view(np.uint8)
    return a, raw_dtype


def write_vocab(w, model_dir, n_vocab):
    with open(os.path.join(model_dir, 'tokenizer.json')) as f:
        tj = json.load(f)
    with open(os.path.join(model_dir, 'tokenizer_config.json')) as f:
        tc = json.load(f)
    vocab = tj['model']['vocab']
    rev = {i: s for s, i in vocab.items()}
    added = {t['id']: t for t in tj.get('added_tokens', [])}
    spm = bool(tj['model'].get('byte_fallback'))  # SentencePiece-style BPE: Mistral / Llama 2
    # SentencePiece merges the adjacent pair whose union has the highest score: the rank of the
    # first merge that makes a piece, negated, gives the tokenizer.json's merge order.
    first_merge = {}
    for r, m in enumerate(tj['model'].get('merges', [])):
        first_merge.setdefault(''.join(m.split(' ', 1) if isinstance(m, str) else m), r)
    tokens, types, scores = [], [], []
    for i in range(n_vocab):
        if i in added:
            tokens.append(added[i]['content'])
            types.append(gguf.TokenType.CONTROL if added[i].get('special') else gguf.TokenType.USER_DEFINED)
        elif i in rev:
            s = rev[i]
            tokens.append(s)
            byte = spm and len(s) == 6 and s.startswith('<0x') and s.endswith('>')
            types.append(gguf.TokenType.BYTE if byte else gguf.TokenType.NORMAL)
        else:  # rows beyond the tokenizer (padded vocab)
            tokens.append(f'[PAD{i}]')
            types.append(gguf.TokenType.UNUSED)
        scores.append(-float(first_merge.get(tokens[-1], len(first_merge) + i)))
    if spm:
        w.add_tokenizer_model('llama')
        w.add_tokenizer_pre('default')
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
    else:
        merges = [m if isinstance(m, str) else ' '.join(m) for m in tj['model'].get('merges', [])]
        w.add_tokenizer_model('gpt2')
        w.add_tokenizer_pre('qwen2' if '<|im_end|>' in [t['content'] for t in added.values()] else 'llama-bpe')
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)

    def tid(x):
        if isinstance(x, dict):
            x = x.get('content')
        if x is None:
            return None
        return next((t['id'] for t in added.values() if t['content'] == x), vocab.get(x))
    if tid(tc.get('bos_token')) is not None:
        w.add_bos_token_id(tid(tc.get('bos_token')))
    if tid(tc.get('eos_token')) is not None:
        w.add_eos_token_id(tid(tc.get('eos_token')))
    if isinstance(tc.get('chat_template'), str):
        w.add_chat_template(tc['chat_template'])
    pp = json.dumps(tj.get('post_processor'))
    w.add_add_bos_token(bool(tc.get('add_bos_token', '<|begin_of_text|>' in pp)))


def convert(model_dir, out, outtype='f32'):
    cfg = hfmodel.load_config(model_dir)
    arch = hfmodel.arch_of(cfg)
    W = hfmodel.load_tensors(model_dir)
    H, NH = cfg['hidden_size'], cfg['num_attention_heads']
    NKV = cfg.get('num_key_value_heads') or NH
    HD, L = hfmodel.head_dim_of(cfg), cfg['num_hidden_layers']
    V = W['model.embed_tokens.weight'].shape[0]
    permute = GGUF_ARCH[arch] == 'llama'

    w = gguf.GGUFWriter(out, GGUF_ARCH[arch])
    w.add_name(os.path.basename(os.path.abspath(model_dir)))
    w.add_context_length(cfg.get('max_position_embeddings', 4096))
    w.add_embedding_length(H)
    w.add_block_count(L)
    w.add_feed_forward_length(cfg['intermediate_size'])
    w.add_head_count(NH)
    w.add_head_count_kv(NKV)
    w.add_rope_freq_base(cfg.get('rope_theta', 10000.0))
    w.add_layer_norm_rms_eps(cfg['rms_norm_eps'])
    w.add_rope_dimension_count(HD)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_vocab_size(V)
    w.add_file_type({'f32': gguf.LlamaFileType.ALL_F32, 'f16': gguf.LlamaFileType.MOSTLY_F16,
                     'bf16': gguf.LlamaFileType.MOSTLY_BF16}[outtype])
    write_vocab(w, model_dir, V)

    def add(name, t, rows_permute=None):
        a, raw = encode(t, outtype, rows_permute)
        w.add_tensor(name, a, raw_dtype=raw)

    rs = cfg.get('rope_scaling')
    if rs and rs.get('rope_type', rs.get('type')) == 'llama3':
        w.add_tensor('rope_freqs.weight', rope_freqs(cfg, HD))
    add('token_embd.weight', W['model.embed_tokens.weight'])
    for l in range(L):
        p, b = f'model.layers.{l}.', f'blk.{l}.'
        add(b + 'attn_norm.weight', W[p + 'input_layernorm.weight'])
        add(b + 'attn_q.weight', W[p + 'self_attn.q_proj.weight'], NH if permute else None)
        add(b + 'attn_k.weight', W[p + 'self_attn.k_proj.weight'], NKV if permute else None)
        add(b + 'attn_v.weight', W[p + 'self_attn.v_proj.weight'])
        for x in ('q', 'k', 'v'):
            if p + f'self_attn.{x}_proj.bias' in W:
                add(b + f'attn_{x}.bias', W[p + f'self_attn.{x}_proj.bias'])
        if p + 'self_attn.q_norm.weight' in W:
            add(b + 'attn_q_norm.weight', W[p + 'self_attn.q_norm.weight'])
            add(b + 'attn_k_norm.weight', W[p + 'self_attn.k_norm.weight'])
        add(b + 'attn_output.weight', W[p + 'self_attn.o_proj.weight'])
        add(b + 'ffn_norm.weight', W[p + 'post_attention_layernorm.weight'])
        add(b + 'ffn_gate.weight', W[p + 'mlp.gate_proj.weight'])
        add(b + 'ffn_up.weight', W[p + 'mlp.up_proj.weight'])
        add(b + 'ffn_down.weight', W[p + 'mlp.down_proj.weight'])
    add('output_norm.weight', W['model.norm.weight'])
    if 'lm_head.weight' in W and not cfg.get('tie_word_embeddings'):
        add('output.weight', W['lm_head.weight'])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('model')
    ap.add_argument('out')
    ap.add_argument('--outtype', default='f32', choices=['f32', 'f16', 'bf16'])
    a = ap.parse_args()
    convert(a.model, a.out, a.outtype)


if __name__ == '__main__':
    main()

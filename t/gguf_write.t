#!/usr/bin/python3
"""GGUF files written by the engine (issue 16): `llm quantize --model DIR|FILE.gguf --type T --out
FILE.gguf` (engine/model/gguf_write.c, model_gguf_write.c, gguf_tokenizer_write.c) against what
llama.cpp's own tools write: t/ref/hf_to_gguf.py (llama.cpp's gguf-py, its converter's facts) for
f32/f16, and llama.cpp's quantizer (t/ref/llama_quantize.c) on that f32 file for Q8_0, Q4_0 and
Q4_K, asked for the same pure mixture with the token embedding kept at the directory's bf16
(which the f32 file holds exactly, so rounding it back is exact).

For the random models of t/gguf_quant.t (a Llama 3.1 with llama3 rope scaling and GQA, a tied
Qwen3, a Qwen2 with biases; 2 layers) and a Mistral (SentencePiece tokenizer, f16):

  * our file and llama.cpp's hold the same tensors (names, shapes, types) with the same bytes --
    the q/k row permutation, rope_freqs and the quantizers' blocks -- and the same key/value
    pairs, byte for byte (hyperparameters, general.file_type, tokenizer.ggml.* with tokens,
    types, merges or scores, special ids, add_bos, the chat template);
  * `llm logits` on our file equals `llm logits --weights T` on the directory bit for bit (the
    same quantizer: quantize on load's code); with llama3 rope scaling within 1e-4 relative, as
    in t/gguf.t (the file's rope_freqs are float32 divisors, the directory's scaling is computed
    in double; measured up to 2.9e-6 absolute on logits of max 19);
  * llama.cpp loads our file and its logits equal its logits on its own file bit for bit;
  * the tokenizer embedded in our file gives Hugging Face's ids on the tokenizer corpus
    (npm tokenizers on the original tokenizer.json), with and without special tokens;
  * from a GGUF file: our Q8_0 file of the f32 one equals llama.cpp's quantizer's (embedding
    F32), and our f32 file of our Q8_0 one equals llama.cpp's dequantization of it;
  * `make-model --quantize T` writes the file `llm quantize` writes;
  * bad inputs (an unknown type, rows not a whole number of blocks, an already quantized source,
    an unwritable path, an --out not named .gguf, a missing model, an unknown option) fail with
    one clear message, a non-zero exit and no file left behind.
"""
import filecmp
import glob
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

ROOT = os.environ.get('LLM_ROOT') or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 't', 'ref'))
import compare  # noqa: E402
from refcheck import (LLM, TOKENIZERS, run, llamacpp_setup, llamacpp_run,  # noqa: E402
                      check_tokenizer, random_model)
from tap import ok, bail_out, done_testing  # noqa: E402

POSITIONS = 64
SHAPE = '--layers 2 --hidden 256 --heads 4 --kv-heads 2 --intermediate 512'

# name, tokenizer, make-model options, pure types, float types (against hf_to_gguf.py)
CASES = [
    ('llama31', 'llama3_1', f'{SHAPE} --rope-llama3 --seed 71', ['q8_0', 'q4_0', 'q4_k'],
     ['f32']),
    ('qwen3-tied', 'qwen3', f'{SHAPE} --arch qwen3 --tie --seed 72', ['q8_0', 'q4_k'], ['f32']),
    ('qwen2-bias', 'qwen3', f'{SHAPE} --arch qwen2 --seed 73', ['q4_0'], ['f32']),
    ('mistral', 'mistral', '--arch mistral --dtype f16 --seed 21', ['q8_0'], ['f16']),
]


# ggml types: (elements, bytes) of a block
BLOCKS = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34), 2: (32, 18), 12: (256, 144),
          13: (256, 176), 14: (256, 210)}
NAMES = {0: 'F32', 1: 'F16', 30: 'BF16', 8: 'Q8_0', 2: 'Q4_0', 12: 'Q4_K', 13: 'Q5_K', 14: 'Q6_K'}
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def gguf_parts(path):
    """{key: the bytes of its type and value}, {tensor name: (ggml type, dims, data bytes)}, read
    with struct alone (gguf-py's reader takes seconds on a 150k-token vocabulary)."""
    with open(path, 'rb') as f:
        b = f.read()
    n_t, n_kv = struct.unpack_from('<QQ', b, 8)
    pos = 24

    def string(pos):
        n, = struct.unpack_from('<Q', b, pos)
        return b[pos + 8:pos + 8 + n].decode(), pos + 8 + n

    def value_end(t, pos):
        if t == 8:
            return string(pos)[1]
        if t != 9:
            return pos + SCALAR[t]
        et, n = struct.unpack_from('<IQ', b, pos)
        pos += 12
        if et != 8:
            return pos + n * SCALAR[et]
        for _ in range(n):
            pos += 8 + struct.unpack_from('<Q', b, pos)[0]
        return pos

    kv = {}
    for _ in range(n_kv):
        key, pos = string(pos)
        end = value_end(struct.unpack_from('<I', b, pos)[0], pos + 4)
        kv[key], pos = b[pos:end], end
    align = struct.unpack_from('<I', kv['general.alignment'], 4)[0] \
        if 'general.alignment' in kv else 32
    infos = []
    for _ in range(n_t):
        name, pos = string(pos)
        nd, = struct.unpack_from('<I', b, pos)
        dims = struct.unpack_from(f'<{nd}Q', b, pos + 4)
        t, off = struct.unpack_from('<IQ', b, pos + 4 + 8 * nd)
        pos += 4 + 8 * nd + 12
        infos.append((name, t, dims, off))
    start = pos + (-pos % align)
    ts = {}
    for name, t, dims, off in infos:
        el, size = BLOCKS[t]
        n = size * (dims[0] // el) * int(np.prod(dims[1:], dtype=np.int64))
        ts[name] = (t, dims, b[start + off:start + off + n])
    return kv, ts


def check_same_file(label, ours, ref):
    """Every pair and tensor of llama.cpp's file REF in OURS, equal byte for byte, and no
    more."""
    kv_a, ts_a = gguf_parts(ours)
    kv_b, ts_b = gguf_parts(ref)
    bad_kv = sorted(k for k in set(kv_a) | set(kv_b) if kv_a.get(k) != kv_b.get(k))
    ok(not bad_kv, f'{label}: the same {len(kv_b)} key/value pairs as llama.cpp\'s file',
       f'differ or missing: {bad_kv[:10]}')
    shape = {k: v[:2] for k, v in ts_a.items()} == {k: v[:2] for k, v in ts_b.items()}
    bad = sorted(k for k in ts_b if k in ts_a and ts_a[k][2] != ts_b[k][2])
    types = sorted(set(NAMES[v[0]] for v in ts_b.values()))
    ok(shape and not bad, f'{label}: the same {len(ts_b)} tensors ({", ".join(types)}) with '
       'the same bytes', f'names/types/shapes equal: {shape}; bytes differ: {bad[:10]}\n'
       f'ours only: {sorted(set(ts_a) - set(ts_b))[:5]}; '
       f'llama.cpp only: {sorted(set(ts_b) - set(ts_a))[:5]}')


def logits(cmd, out, vocab, env=None):
    p = run(cmd + ['--out', out] if os.path.basename(cmd[0]) == 'llm' else cmd, env=env)
    if p.returncode != 0:
        return None, f'{os.path.basename(cmd[0])}: {p.stderr.strip()[-800:]}'
    return compare.load(out, vocab), None


def check_logits_equal(label, a, b):
    (x, why_x), (y, why_y) = a, b
    same = x is not None and y is not None and np.array_equal(x, y)
    ok(same, f'{label}: bit for bit', why_x or why_y or f'max |d| {np.abs(x - y).max():.3g}')


def quantize(model, t, out):
    p = run([LLM, 'quantize', '--model', model, '--type', t, '--out', out, '--threads', '2'])
    return ok(p.returncode == 0 and os.path.exists(out), f'llm quantize {os.path.basename(model)}'
              f' --type {t}: {p.stdout.strip()}', p.stderr.strip())


def check_pure(name, t, d, f32, vocab, ids, lc, tmp, embd, rope):
    label = f'{name} {t}'
    ref = os.path.join(tmp, f'{name}-{t}-llama.gguf')
    ours = os.path.join(tmp, f'{name}-{t}.gguf')
    p = run([lc['LLAMA_QUANTIZE'], f32, ref, t, '2', embd], env=lc['env'])
    if not ok(p.returncode == 0, f'{label}: llama.cpp quantized the f32 file',
              p.stderr.strip()[-800:]):
        return None
    if not quantize(d, t, ours):
        return None
    check_same_file(label, ours, ref)
    ids_s = ','.join(map(str, ids))
    a = logits([LLM, 'logits', '--model', ours, '--ids', ids_s], os.path.join(tmp, 'a.f32'),
               vocab)
    b = logits([LLM, 'logits', '--model', d, '--weights', t, '--ids', ids_s],
               os.path.join(tmp, 'b.f32'), vocab)
    label_d = f'{label}: llm logits on our file = llm logits --weights {t} on the directory'
    if rope and a[0] is not None and b[0] is not None:
        # rope_freqs holds float32 divisors where the directory's llama3 scaling is computed
        # in double (t/gguf.t): a frequency may differ in its last bit
        d_max = float(np.abs(a[0] - b[0]).max())
        ok(d_max <= 1e-4 * float(np.abs(b[0]).max()),
           f'{label_d}: max |d| {d_max:.3g} <= 1e-4 x max |logit| (rope_freqs)')
    else:
        check_logits_equal(label_d, a, b)
    env = dict(os.environ, GGML_BACKEND_DIR=lc['GGML_BACKEND_DIR'])
    check_logits_equal(f'{label}: llama.cpp\'s logits on our file = on its own',
                       logits([lc['LLAMA_LOGITS'], ours, ids_s, ours + '.f32', '2'],
                              ours + '.f32', vocab, env),
                       logits([lc['LLAMA_LOGITS'], ref, ids_s, ref + '.f32', '2'],
                              ref + '.f32', vocab, env))
    os.unlink(ref)
    return ours


def expect_fail(label, args, want, leftover=None):
    p = run([LLM] + args)
    msg = p.stderr.strip()
    left = leftover and glob.glob(leftover + '*')
    ok(p.returncode != 0 and p.returncode < 128 and all(w in msg for w in want)
       and '\n' not in msg and not left, f'{label}: exit {p.returncode}, {msg}',
       f'want {want}; left behind: {left}')


def check_errors(lc, tmp, d, ours_q8):
    out = os.path.join(tmp, 'bad.gguf')
    expect_fail('an unknown type', ['quantize', '--model', d, '--type', 'q5_1', '--out', out],
                ["--type 'q5_1'", 'expected q8_0, q4_0, q4_k, f32, f16 or bf16'], out)
    small = os.path.join(tmp, 'small')
    p = run([LLM, 'make-model', '--tokenizer', TOKENIZERS['qwen3'], '--out', small, '--arch',
             'qwen3', '--hidden', '96', '--heads', '2', '--kv-heads', '1'])
    if ok(p.returncode == 0, 'a model whose rows are 96 wide', p.stderr.strip()):
        expect_fail('rows not a whole number of blocks', ['quantize', '--model', small, '--type',
                    'q4_k', '--out', out], ['model.layers.0.self_attn.q_proj.weight',
                    '96 columns', "not a multiple of Q4_K's block of 256"], out)
        expect_fail('make-model --quantize, rows not a whole number of blocks',
                    ['make-model', '--tokenizer', TOKENIZERS['qwen3'], '--out', small, '--arch',
                     'qwen3', '--hidden', '96', '--heads', '2', '--kv-heads', '1', '--quantize',
                     'q4_k'], ['96 columns', "Q4_K's block of 256"],
                    os.path.join(small, 'model-q4_k.gguf'))
    expect_fail('an already quantized source', ['quantize', '--model', ours_q8, '--type', 'q4_0',
                '--out', out], ['already Q8_0'], out)
    expect_fail('an unwritable path', ['quantize', '--model', d, '--type', 'q8_0', '--out',
                '/nonexistent/dir/x.gguf'], ['/nonexistent/dir/x.gguf', 'No such file'])
    expect_fail('an --out not named .gguf', ['quantize', '--model', d, '--type', 'q8_0', '--out',
                os.path.join(tmp, 'x.bin')], ['must end in .gguf'])
    expect_fail('a missing model', ['quantize', '--model', os.path.join(tmp, 'nope'), '--type',
                'q8_0', '--out', out], ['nope'], out)
    expect_fail('an unknown option', ['quantize', '--model', d, '--type', 'q8_0', '--out', out,
                '--pure', '1'], ["unknown option '--pure'"], out)
    expect_fail('no --type', ['quantize', '--model', d, '--out', out], ['usage'], out)


def main():
    lc, why = llamacpp_setup()
    if lc is None:
        bail_out(f't/ref/setup_llamacpp.sh: {why}')
    lc['env'] = dict(os.environ, GGML_BACKEND_DIR=lc['GGML_BACKEND_DIR'])
    tmp = tempfile.mkdtemp(prefix='gguf-write-t.')
    tokenizers_checked = set()
    for name, tok, opts, pure, floats in CASES:
        d, vocab, ids = random_model(tmp, name, TOKENIZERS[tok], opts, POSITIONS)
        with open(os.path.join(d, 'config.json')) as f:
            embd = {'bfloat16': 'bf16', 'float16': 'f16', 'float32': 'f32'}[
                json.load(f)['torch_dtype']]
        f32 = os.path.join(tmp, name + '.gguf')
        lc['convert'](d, f32, 'f32')
        for t in floats:
            ref = f32 if t == 'f32' else os.path.join(tmp, f'{name}-{t}-hf.gguf')
            if t != 'f32':
                lc['convert'](d, ref, t)
            ours = os.path.join(tmp, f'{name}-{t}.gguf')
            if quantize(d, t, ours):
                check_same_file(f'{name} {t} (hf_to_gguf.py)', ours, ref)
                os.unlink(ours)
        q8 = None
        for t in pure:
            ours = check_pure(name, t, d, f32, vocab, ids, lc, tmp, embd, '--rope-llama3' in opts)
            if ours and t == 'q8_0':
                q8 = ours
            elif ours:
                os.unlink(ours)
        if q8 and tok not in tokenizers_checked:
            tokenizers_checked.add(tok)
            check_tokenizer(f'{name} q8_0', q8, d, tmp)
        if name == 'llama31':
            ours = os.path.join(tmp, 'from-gguf.gguf')
            ref = os.path.join(tmp, 'from-gguf-llama.gguf')
            p = run([lc['LLAMA_QUANTIZE'], f32, ref, 'q8_0', '2'], env=lc['env'])
            if ok(p.returncode == 0, 'llama.cpp quantized the f32 file, embedding F32',
                  p.stderr.strip()[-800:]) and quantize(f32, 'q8_0', ours):
                check_same_file(f'{name} q8_0 from the f32 GGUF', ours, ref)
            # and back: our Q8_0 file dequantized, against ggml's to_float
            ours = os.path.join(tmp, 'dequantized.gguf')
            ref = os.path.join(tmp, 'dequantized-llama.gguf')
            p = run([lc['LLAMA_QUANTIZE'], q8, ref, 'f32', '2'], env=lc['env'])
            if ok(p.returncode == 0, 'llama.cpp dequantized our Q8_0 file',
                  p.stderr.strip()[-800:]) and quantize(q8, 'f32', ours):
                check_same_file(f'{name} f32 from our Q8_0 file', ours, ref)
            p = run([LLM, 'make-model', '--tokenizer', TOKENIZERS[tok], '--out', d] +
                    opts.split() + ['--quantize', 'q4_0'])
            mm = os.path.join(d, 'model-q4_0.gguf')
            ours = os.path.join(tmp, f'{name}-q4_0-again.gguf')
            ok(p.returncode == 0 and quantize(d, 'q4_0', ours) and filecmp.cmp(mm, ours, False),
               f'{name}: make-model --quantize q4_0 writes what llm quantize writes',
               p.stderr.strip())
            check_errors(lc, tmp, d, q8)
        for f in glob.glob(os.path.join(tmp, '*.gguf*')):
            os.unlink(f)
        shutil.rmtree(d, ignore_errors=True)
    run(['rm', '-rf', tmp])
    done_testing()


main()

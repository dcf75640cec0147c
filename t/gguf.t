#!/usr/bin/python3
"""GGUF files (issue 16): the engine on a GGUF file against the engine on the Hugging Face
directory it was converted from, and against llama.cpp on the same file.

For random models of every architecture (`llm make-model`: Llama 3.1 with llama3 rope scaling and
GQA, Mistral, Qwen2, Qwen3 with an explicit head_dim, a tied Llama), converted by
t/ref/hf_to_gguf.py (llama.cpp's gguf-py) to f32 and to f16 or bf16 GGUFs:

  * `llm logits` on the GGUF equals `llm logits` on the directory bit for bit when the GGUF holds
    the directory's values (f32 from any dtype, which widens exactly; f16/bf16 from the same
    dtype, which copies the bits): the q/k rows of "llama" files are un-permuted exactly.  With
    llama3 rope scaling, within 1e-4 relative instead: the file stores the scaling as float32
    divisors per frequency (rope_freqs), HF computes the scaled frequencies in double, so a
    frequency may differ in its last bit (measured: 4.4e-7 relative on the logits);
  * the same on the CUDA backend, run on its CPU emulator (build/emu/libllm_cuda.so), for the
    files of the directory's own type, where the head size allows it (a multiple of 16);
  * within a stated tolerance of llama.cpp's logits on the same file (t/ref/llama_logits.c),
    argmax equal except where llama.cpp's top two are within 2 x the tolerance;
  * greedy: 32 tokens of `llm generate --temperature 0` equal llama.cpp's greedy continuation of
    the same prompt ids (which are Hugging Face's ids of the prompt), up to a near-tie;
  * the chat template from the file renders as the directory's;
  * the tokenizer from the file gives Hugging Face's ids (npm tokenizers on the original
    tokenizer.json) over the tokenizer corpus, with and without special tokens;
  * truncated, corrupt, unknown-type and unsupported-type (Q4_1) files, and files with an
    unsupported architecture, rope scaling or tokenizer, a missing key or tensor, fail with one
    clear message;
  * (quantized files: t/gguf_quant.t)
  * a bounded libFuzzer run of the GGUF reader (t/fuzz.sh gguf).

Tolerances, max |delta| <= rel x max|llama.cpp logit|: f32 1e-4 (float32 on both sides up to
summation order; see t/logits.t).  For f16 and bf16 weights llama.cpp's CPU matmul rounds the
activations to the weights' type before the dot product (11 and 8 significant bits: relative
errors up to 4.9e-4 and 3.9e-3 per element), the engine keeps them in float32: f16 1e-3, bf16
1e-2 (measured here: f16 up to 2.1e-4, bf16 up to 3.7e-3 relative).
"""
import json
import os
import random
import shutil
import struct
import sys
import tempfile

import numpy as np

ROOT = os.environ.get('LLM_ROOT') or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 't', 'ref'))
import compare  # noqa: E402
from refcheck import (BUILD, LLM, TOKENIZERS, run, llamacpp_setup, llamacpp_run,  # noqa: E402
                      engine_logits, check_logits, check_greedy_steps, check_tokenizer)
from tap import ok, note, bail_out, done_testing  # noqa: E402

TOL_REL = {'f32': 1e-4, 'f16': 1e-3, 'bf16': 1e-2}
GEN_TOKENS = 32
POSITIONS = 64
PROMPT = 'The llama (🦙) grazes near Cusco; 東京 is far away. Count: 1, 2, 3,'
NODE_ENV = dict(os.environ, NODE_PATH=os.path.join(ROOT, 'node_modules'))

# name, tokenizer, make-model options, GGUF types, generate?
CASES = [
    ('llama31-rope-gqa', 'llama3_1', '--rope-llama3 --heads 8 --kv-heads 2 --seed 12',
     ['f32', 'bf16'], True),
    ('mistral-f16', 'mistral', '--arch mistral --dtype f16 --seed 21', ['f32', 'f16'], True),
    ('qwen2', 'qwen3', '--arch qwen2 --seed 31', ['f32', 'bf16'], True),
    ('qwen3-f32-hd32', 'qwen3', '--arch qwen3 --head-dim 32 --dtype f32 --seed 41',
     ['f32', 'f16'], True),
    ('llama3-f32-tied', 'llama3_1', '--tie --dtype f32 --seed 13', ['f32'], False),
]


def hf_dtype(opts):
    o = opts.split()
    return o[o.index('--dtype') + 1] if '--dtype' in o else 'bf16'


def test_ids(name, vocab, bos, n):
    r = random.Random(name)
    ids = [r.randrange(vocab) for _ in range(n)]
    if bos is not None:
        ids[0] = bos
    return ids


EMU_LIB = os.path.join(BUILD, 'emu', 'libllm_cuda.so')
EMU_ENV = dict(os.environ, LLM_CUDA_LIBRARY=EMU_LIB, LLM_EMU_MEM=str(1 << 30))


def emu_usable(cfg):
    """The CUDA backend built against its CPU emulator (make unit), for head sizes it runs."""
    hd = cfg.get('head_dim') or cfg['hidden_size'] // cfg['num_attention_heads']
    return os.path.exists(EMU_LIB) and hd % 16 == 0


def check_emulated_cuda(label, gguf, model_dir, ids, vocab):
    out = []
    for m in (gguf, model_dir):
        p = run([LLM, 'logits', '--model', m, '--device', 'cuda:0', '--ids',
                 ','.join(map(str, ids)), '--out', m + '.emu.f32'], env=EMU_ENV)
        out.append(compare.load(m + '.emu.f32', vocab) if p.returncode == 0 else p.stderr)
    ok(all(isinstance(x, np.ndarray) for x in out) and np.array_equal(out[0], out[1]),
       f'{label}: the CUDA backend (emulated) gives the directory\'s logits bit for bit',
       str(out[0] if not isinstance(out[0], np.ndarray) else out[1])[:500])


def check_greedy(label, lc, gguf, tol_rel, hf_ids):
    p = run([LLM, 'generate', '--model', gguf, '--prompt', PROMPT, '--max-tokens',
             str(GEN_TOKENS), '--temperature', '0', '--ignore-eos', '--json'])
    if not ok(p.returncode == 0, f'{label}: llm generate exits 0', p.stderr.strip()):
        return
    got = json.loads(p.stdout)
    ok(got.get('prompt_ids') == hf_ids, f'{label}: prompt ids from the file\'s tokenizer are '
       'Hugging Face\'s', f"engine {got.get('prompt_ids')}\nhf     {hf_ids}")
    q = llamacpp_run(lc, gguf, hf_ids, gguf + '.prompt.f32', GEN_TOKENS)
    if not ok(q.returncode == 0, f'{label}: llama.cpp greedy', q.stderr.strip()):
        return
    check_greedy_steps(label, got.get('ids') or [], json.loads(q.stdout)['steps'], GEN_TOKENS,
                       tol_rel)


def check_template(label, gguf, model_dir, tmp):
    msgs = os.path.join(tmp, 'messages.json')
    with open(msgs, 'w') as f:
        json.dump([{'role': 'system', 'content': 'Be brief.'},
                   {'role': 'user', 'content': 'Hi there'},
                   {'role': 'assistant', 'content': 'Hello!'},
                   {'role': 'user', 'content': 'Bye'}], f)
    a = run([LLM, 'template', '--model', model_dir, '--messages', msgs, '--add-generation-prompt'])
    b = run([LLM, 'template', '--model', gguf, '--messages', msgs, '--add-generation-prompt'])
    if 'no chat template' in a.stderr:
        ok(b.returncode != 0 and 'no chat template' in b.stderr,
           f'{label}: no chat template in the directory, none in the file', b.stderr)
        return
    ok(a.returncode == 0 and b.returncode == 0 and a.stdout == b.stdout and a.stdout,
       f'{label}: chat template from tokenizer.chat_template renders as the directory\'s',
       f'{a.stderr}{b.stderr}\ndir  {a.stdout!r}\ngguf {b.stdout!r}')


def tensor_type_offset(path, name):
    """Byte offset of the ggml type field in tensor NAME's info (gguf-py's reader)."""
    import gguf
    r = gguf.GGUFReader(path)
    t = next(t for t in r.tensors if t.name == name)
    return t.field.offset + 8 + len(name.encode()) + 4 + 8 * len(t.shape)


def expect_error(label, path, want):
    p = run([LLM, 'logits', '--model', path, '--ids', '1,2', '--out', path + '.f32'])
    msg = p.stderr.strip()
    ok(p.returncode != 0 and path in msg and all(w in msg for w in want) and '\n' not in msg,
       f'{label}: one clear message: {msg}', f'rc {p.returncode}, want {want}')


def check_errors(gguf, tmp):
    with open(gguf, 'rb') as f:
        data = f.read()

    def variant(name, b):
        path = os.path.join(tmp, name + '.gguf')
        with open(path, 'wb') as f:
            f.write(b)
        return path

    expect_error('truncated in the header', variant('cut-header', data[:20]), ['truncated'])
    expect_error('truncated in the vocabulary', variant('cut-vocab', data[:100000]),
                 ['truncated'])
    expect_error('truncated in the tensor data', variant('cut-data', data[:-4096]),
                 ['output.weight', 'beyond the end of the file'])
    expect_error('not GGUF', variant('magic', b'GGML' + data[4:]), ['not a GGUF file'])
    expect_error('an empty file', variant('empty', b''), ['not a regular, non-empty file'])
    off = tensor_type_offset(gguf, 'blk.0.attn_v.weight')
    b = bytearray(data)
    b[off:off + 4] = struct.pack('<I', 23)
    expect_error('an unsupported tensor type', variant('iq4xs', bytes(b)),
                 ['blk.0.attn_v.weight', 'IQ4_XS', 'not supported'])
    b[off:off + 4] = struct.pack('<I', 3)
    expect_error('a block format without kernels', variant('q4_1', bytes(b)),
                 ['blk.0.attn_v.weight', 'Q4_1', 'not supported'])
    b[off:off + 4] = struct.pack('<I', 1000)
    expect_error('an unknown tensor type', variant('t1000', bytes(b)),
                 ['blk.0.attn_v.weight', 'type 1000', 'not supported'])


def small_gguf(path, arch='llama', keys=None, drop=(), tensors=('token_embd.weight',),
               tok=None):
    """A metadata-only GGUF of a 1-layer model (gguf-py): KEYS added, DROP left out."""
    import gguf
    w = gguf.GGUFWriter(path, arch)
    kv = {'embedding_length': 8, 'block_count': 1, 'feed_forward_length': 16,
          'attention.head_count': 2}
    for k, v in kv.items():
        if k not in drop:
            w.add_uint32(f'{arch}.{k}', v)
    for k, v in (keys or {}).items():
        w.add_string(k, v) if isinstance(v, str) else w.add_uint32(k, v)
    tokens = ['a', 'b', 'c', 'ab']
    w.add_tokenizer_model(tok or 'gpt2')
    w.add_tokenizer_pre('llama-bpe')
    w.add_token_list(tokens)
    w.add_token_merges(['a b'])
    for name in tensors:
        w.add_tensor(name, np.zeros((len(tokens), 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def check_metadata_errors(tmp):
    p = lambda name: os.path.join(tmp, name + '.gguf')  # noqa: E731
    expect_error('an unsupported architecture', small_gguf(p('gemma'), arch='gemma'),
                 ['unsupported architecture "gemma"'])
    expect_error('a missing key', small_gguf(p('nolayers'), drop=('block_count',)),
                 ['the metadata has no llama.block_count'])
    expect_error('a rope scaling other than llama3\'s',
                 small_gguf(p('yarn'), keys={'llama.rope.scaling.type': 'yarn'}),
                 ['llama.rope.scaling.type "yarn" is not supported'])
    expect_error('no token embedding', small_gguf(p('noembd'), tensors=()),
                 ['token_embd.weight is missing'])
    expect_error('a missing tensor', small_gguf(p('notensor')),
                 ['tensor blk.0.attn_norm.weight is missing from the file'])
    q = run([LLM, 'tokenize', '--model', small_gguf(p('bert'), tok='bert'), 'x'])
    ok(q.returncode != 0 and 'tokenizer.ggml.model "bert" is not supported' in q.stderr,
       f'an unsupported tokenizer model: {q.stderr.strip()}')


def main():
    if not os.access(LLM, os.X_OK):
        bail_out(f'{LLM} not built')
    lc, why = llamacpp_setup()
    if not ok(lc is not None, 'llama.cpp reference ready (t/ref/setup_llamacpp.sh)', why):
        done_testing()
    tmp_root = tempfile.mkdtemp(prefix='llm-gguf-', dir=BUILD)
    tokenizers_checked = set()
    try:
        for name, tok, opts, types, gen in CASES:
            d = os.path.join(tmp_root, name)
            p = run([LLM, 'make-model', '--tokenizer', TOKENIZERS[tok], '--out', d] + opts.split())
            if not ok(p.returncode == 0, f'{name}: make-model {opts}', p.stderr.strip()):
                continue
            with open(os.path.join(d, 'config.json')) as f:
                cfg = json.load(f)
            ids = test_ids(name, cfg['vocab_size'], cfg.get('bos_token_id'), POSITIONS)
            vocab = cfg['vocab_size']
            hf, err = engine_logits(d, ids, os.path.join(d, 'hf.f32'), vocab)
            ok(hf is not None, f'{name}: llm logits on the directory', err)
            h = run(['node', os.path.join(ROOT, 't', 'ref', 'hf_tokenize.js'), d, PROMPT],
                    env=NODE_ENV)
            hf_ids = json.loads(h.stdout) if h.returncode == 0 else None
            for t in types:
                label = f'{name} {t} GGUF'
                gguf = os.path.join(d, f'{t}.gguf')
                lc['convert'](d, gguf, t)
                got, err = engine_logits(gguf, ids, gguf + '.f32', vocab)
                if not ok(got is not None, f'{label}: llm logits', err):
                    continue
                if (t == 'f32' or t == hf_dtype(opts)) and '--rope-llama3' in opts:
                    # rope_freqs holds float32 divisors where HF scales in double: the
                    # frequencies may differ in their last bit
                    check_logits(f'{label}: engine vs the directory (rel 1e-4)', got, hf,
                                 1e-4 * float(np.abs(hf).max()))
                elif t == hf_dtype(opts):
                    ok(hf is not None and np.array_equal(got, hf),
                       f'{label}: logits bit-identical to the directory\'s',
                       None if hf is None else f'max |d| {np.abs(got - hf).max():.3g}')
                    # the device keeps the stored type: the same type, the same logits
                    if emu_usable(cfg):
                        check_emulated_cuda(label, gguf, d, ids, vocab)
                elif t == 'f32':
                    # the same values in f32: a bf16 directory's batched steps run on AMX
                    # tiles (f32 semantics, docs/architecture.md#numerics), f32 weights on
                    # FMA tiles, so the two agree up to f32 summation order
                    check_logits(f'{label}: engine vs the directory (rel 1e-5)', got, hf,
                                 1e-5 * float(np.abs(hf).max()))
                ref = llamacpp_run(lc, gguf, ids, gguf + '.llama.f32')
                if ok(ref.returncode == 0, f'{label}: llama.cpp logits', ref.stderr.strip()):
                    want = compare.load(gguf + '.llama.f32', vocab)
                    tol = TOL_REL[t] * float(np.abs(want).max())
                    r = check_logits(f'{label}: engine vs llama.cpp (rel {TOL_REL[t]:g})', got,
                                     want, tol)
                    note(f'{label}: relative max |d| {r["max_abs"] / max(r["max_ref"], 1e-9):.3g}')
                if gen:
                    check_greedy(label, lc, gguf, TOL_REL[t], hf_ids)
                if t == 'f32':
                    check_template(label, gguf, d, d)
                    if tok not in tokenizers_checked:
                        tokenizers_checked.add(tok)
                        check_tokenizer(label, gguf, d, d)
                    if name.startswith('mistral'):
                        check_errors(gguf, d)
                        check_metadata_errors(d)
            shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)

    runs = int(os.environ.get('LLM_GGUF_FUZZ_RUNS', '4000'))
    if runs:
        p = run([os.path.join(ROOT, 't', 'fuzz.sh'), 'gguf', BUILD, f'runs:{runs}',
                 os.environ.get('LLM_FUZZ_SEED', '1')])
        ok(p.returncode == 0, f'libFuzzer on the GGUF reader and tokenizer, {runs} inputs: no '
           'crash, sanitizer report, leak or failed property',
           '\n'.join((p.stdout + p.stderr).splitlines()[-30:]))
    done_testing()


if __name__ == '__main__':
    main()

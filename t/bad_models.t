#!/usr/bin/python3
"""Broken model directories must fail cleanly (issue 2): `llm logits` exits non-zero without
crashing and prints one line on stderr that names the file and the problem (the tensor, the
dtype, the architecture ...).  Each case starts from a valid random model (`llm make-model`) and
breaks exactly one thing; safetensors files are rewritten consistently except for that defect.
When the AddressSanitizer build exists (`make asan` -> build/asan/llm), every case runs under it
too, so an out-of-bounds read on a hostile header is caught even when it happens not to crash.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.environ.get('LLM_ROOT') or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 't', 'ref'))
from tap import ok, note, bail_out, done_testing  # noqa: E402

BUILD = os.environ.get('LLM_BUILD') or os.path.join(ROOT, 'build')
TOKENIZER = os.path.join(ROOT, 'node_modules', '@lenml', 'tokenizer-llama2', 'models')
ST = 'model.safetensors'


# --- safetensors rewriting -------------------------------------------------------------------

def st_read(path):
    """[(name, info, bytes)] in file order, and the __metadata__."""
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    meta = hdr.pop('__metadata__', None)
    items = sorted(hdr.items(), key=lambda kv: kv[1]['data_offsets'][0])
    return [(k, v, data[v['data_offsets'][0]:v['data_offsets'][1]]) for k, v in items], meta


def st_write(path, tensors, meta={'format': 'pt'}, raw_header=None):
    """Writes tensors with contiguous offsets; raw_header replaces the JSON verbatim."""
    hdr, off = {'__metadata__': meta}, 0
    for name, info, data in tensors:
        hdr[name] = {'dtype': info['dtype'], 'shape': info['shape'],
                     'data_offsets': info.get('force_offsets') or [off, off + len(data)]}
        off += len(data)
    h = raw_header if raw_header is not None else json.dumps(hdr, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for _, _, data in tensors:
            f.write(data)


def edit_tensors(d, fn):
    """Applies fn to the tensor list of d/model.safetensors and writes it back."""
    tensors, meta = st_read(os.path.join(d, ST))
    st_write(os.path.join(d, ST), fn(tensors), meta)


def edit_json(d, name, fn):
    p = os.path.join(d, name)
    with open(p) as f:
        j = json.load(f)
    fn(j)
    with open(p, 'w') as f:
        json.dump(j, f, indent=2)


def write(d, name, data):
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


def set_info(tensors, name, **kw):
    for t, info, _ in tensors:
        if t == name:
            info.update(kw)
    return tensors


UP = 'model.layers.0.mlp.up_proj.weight'
V1 = 'model.layers.1.self_attn.v_proj.weight'


def truncate(d, size):
    with open(os.path.join(d, ST), 'r+b') as f:
        f.truncate(size)


def set_header_len(d, n):
    with open(os.path.join(d, ST), 'r+b') as f:
        f.write(struct.pack('<Q', n))


def shard(d, missing):
    """Splits model.safetensors in two shards with an index; missing: drop shard 2's file."""
    tensors, meta = st_read(os.path.join(d, ST))
    os.unlink(os.path.join(d, ST))
    half = len(tensors) // 2
    names = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']
    st_write(os.path.join(d, names[0]), tensors[:half], meta)
    if not missing:
        st_write(os.path.join(d, names[1]), tensors[half:], meta)
    wm = {t[0]: names[0] for t in tensors[:half]}
    wm.update({t[0]: names[1] for t in tensors[half:]})
    with open(os.path.join(d, 'model.safetensors.index.json'), 'w') as f:
        json.dump({'metadata': {}, 'weight_map': wm}, f)


# (name, how to break the directory, words the error line must contain: each entry is a word
# or a tuple of alternatives)
CASES = [
    ('missing config.json', lambda d: os.unlink(os.path.join(d, 'config.json')), ['config.json']),
    ('config.json not JSON', lambda d: write(d, 'config.json', b'{"architectures": ['), ['config.json']),
    ('config.json without hidden_size',
     lambda d: edit_json(d, 'config.json', lambda j: j.pop('hidden_size')), ['config.json', 'hidden_size']),
    ('unsupported architecture',
     lambda d: edit_json(d, 'config.json', lambda j: j.update(architectures=['GPT2LMHeadModel'], model_type='gpt2')),
     ['config.json', ('GPT2LMHeadModel', 'gpt2')]),
    ('heads not a multiple of kv heads',
     lambda d: edit_json(d, 'config.json', lambda j: j.update(num_key_value_heads=3)), ['config.json']),
    ('unsupported rope_scaling type',
     lambda d: edit_json(d, 'config.json', lambda j: j.update(rope_scaling={'rope_type': 'yarn', 'factor': 4.0,
                                                                              'original_max_position_embeddings': 4096})),
     ['config.json', 'yarn']),
    ('missing model.safetensors', lambda d: os.unlink(os.path.join(d, ST)), [ST]),
    ('empty model.safetensors', lambda d: truncate(d, 0), [ST]),
    ('safetensors cut inside the header', lambda d: truncate(d, 20), [ST]),
    ('truncated safetensors', lambda d: truncate(d, os.path.getsize(os.path.join(d, ST)) // 2), [ST]),
    ('header length beyond the file',
     lambda d: set_header_len(d, 1 << 40), [ST]),
    ('header JSON garbage',
     lambda d: edit_tensors_raw(d, b'{"model.embed_tokens.weight": {"dtype": "BF16", "shape": [1, '), [ST]),
    ('header not an object', lambda d: edit_tensors_raw(d, b'[1, 2, 3]'), [ST]),
    ('wrong tensor shape',
     lambda d: edit_tensors(d, lambda t: set_info(t, UP, shape=list(reversed(next(i for n, i, _ in t if n == UP)['shape'])))),
     [UP]),
    ('unsupported dtype I16', lambda d: edit_tensors(d, lambda t: set_info(t, UP, dtype='I16')), [ST, 'I16']),
    ('unknown dtype', lambda d: edit_tensors(d, lambda t: set_info(t, UP, dtype='Q9_X')), [ST, 'Q9_X']),
    ('missing tensor', lambda d: edit_tensors(d, lambda t: [x for x in t if x[0] != V1]), [V1]),
    ('data_offsets beyond the data',
     lambda d: edit_tensors(d, lambda t: set_info(t, UP, force_offsets=[0, 1 << 33])), [ST]),
    ('data_offsets not matching the shape',
     lambda d: edit_tensors(d, lambda t: set_info(t, UP, shape=[3, 5])), [UP]),
    ('shard file missing', lambda d: shard(d, missing=True), ['model-00002-of-00002.safetensors']),
    ('index not JSON',
     lambda d: (shard(d, missing=False), write(d, 'model.safetensors.index.json', b'{"weight_map": ')),
     ['model.safetensors.index.json']),
    ('missing tokenizer.json', lambda d: os.unlink(os.path.join(d, 'tokenizer.json')), ['tokenizer.json']),
]


def edit_tensors_raw(d, header):
    tensors, _ = st_read(os.path.join(d, ST))
    st_write(os.path.join(d, ST), tensors, raw_header=header)


def run_llm(llm, d, out):
    env = dict(os.environ, ASAN_OPTIONS='detect_leaks=1:abort_on_error=0')
    return subprocess.run([llm, 'logits', '--model', d, '--ids', '1,2,3', '--out', out],
                          capture_output=True, text=True, timeout=120, env=env)


def check(llm, tag, base, tmp):
    out = os.path.join(tmp, 'logits.f32')
    p = run_llm(llm, base, out)
    ok(p.returncode == 0, f'{tag}: the intact model loads', p.stderr.strip())
    for name, breakit, words in CASES:
        d = os.path.join(tmp, 'bad')
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(base, d)
        breakit(d)
        p = run_llm(llm, d, out)
        lines = p.stderr.strip().splitlines()
        ok(0 < p.returncode < 128, f'{tag}: {name}: exits {p.returncode}, no crash',
           '\n'.join(lines[:20]))
        missing = [w for w in words
                   if not any(a in p.stderr for a in (w if isinstance(w, tuple) else (w,)))]
        ok(len(lines) == 1 and not missing, f'{tag}: {name}: one line naming the cause',
           f'stderr ({len(lines)} lines): ' + '\n'.join(lines[:20]) +
           (f'\nmissing: {missing}' if missing else ''))
        if len(lines) == 1 and not missing:
            note(lines[0])


def main():
    llm = os.path.join(BUILD, 'llm')
    if not os.access(llm, os.X_OK):
        bail_out(f'{llm} not built')
    tmp = tempfile.mkdtemp(prefix='llm-bad-', dir=BUILD)
    try:
        base = os.path.join(tmp, 'good')
        p = subprocess.run([llm, 'make-model', '--tokenizer', TOKENIZER, '--out', base, '--seed', '5'],
                           capture_output=True, text=True)
        if p.returncode != 0:
            bail_out(f'make-model failed: {p.stderr.strip()}')
        check(llm, 'llm', base, tmp)
        asan = os.path.join(ROOT, 'build', 'asan', 'llm')
        if os.access(asan, os.X_OK):
            check(asan, 'asan', base, tmp)
        else:
            note('build/asan/llm not built (make asan): AddressSanitizer pass skipped')
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    done_testing()


if __name__ == '__main__':
    main()

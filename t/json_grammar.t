#!/usr/bin/python3
"""json_grammar.t -- the JSON recognizer behind structured output
(engine/json_grammar.c) against Python's json module, a parser we did not
write.

Random JSON objects (seeded) are written the ways the grammar allows
(compact, one space after ':' and ',', indented by newlines), ASCII-escaped
or raw UTF-8; each must be accepted whole and complete.  Then each is
mutated (a byte deleted, replaced or inserted, never whitespace, so the
grammar's own whitespace rules stay out of it): where Python's
json.loads (strict, no NaN) accepts the result as an object, so must we,
and where it refuses, we must not call it complete.

The verdicts come from build/t/test_json_grammar FILE.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.environ.get("LLM_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BUILD = os.environ.get("LLM_BUILD", os.path.join(ROOT, "build"))
N = int(os.environ.get("LLM_JSON_CASES", "20000"))

sys.path.insert(0, os.path.join(ROOT, "t", "ref"))
from tap import ok, done_testing  # noqa: E402


def rand_string(r):
    alphabet = ["a", "b", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u00e9", "\u4f60",
                "\U0001F99E", "\u0001", "\u007f", "\u2028"]
    return "".join(r.choice(alphabet) for _ in range(r.randint(0, 8)))


def rand_value(r, depth):
    k = r.randint(0, 7 if depth < 6 else 4)
    if k == 0:
        return r.choice([True, False, None])
    if k == 1:
        return r.randint(-10 ** r.randint(0, 12), 10 ** r.randint(0, 12))
    if k == 2:
        return r.choice([0.0, -0.0, 1.5, -2.25e-7, 3e30, r.uniform(-1e6, 1e6)])
    if k in (3, 4):
        return rand_string(r)
    if k == 5:
        return [rand_value(r, depth + 1) for _ in range(r.randint(0, 4))]
    return rand_object(r, depth + 1)


def rand_object(r, depth):
    return {rand_string(r): rand_value(r, depth) for _ in range(r.randint(0, 4))}


def dump(r, obj):
    style = r.randint(0, 2)
    ascii_ = r.random() < 0.5
    if style == 0:
        return json.dumps(obj, ensure_ascii=ascii_, separators=(",", ":"))
    if style == 1:
        return json.dumps(obj, ensure_ascii=ascii_)
    return json.dumps(obj, ensure_ascii=ascii_, indent=r.choice([1, 2, "\t"]))


def python_object(data):
    def no_constant(name):
        raise ValueError(name)
    try:
        v = json.loads(data.decode("utf-8"), parse_constant=no_constant)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(v, dict)


def mutate(r, data):
    b = bytearray(data)
    i = r.randrange(len(b) + 1)
    op = r.randint(0, 2)
    pool = b'{}[]":,-+.0123456789eEtrufalsn\\/x\x00\x1f\x80\xc3\xa9\xff'
    if op == 0 and i < len(b) and b[i] not in b" \n\t":
        del b[i]
    elif op == 1 and i < len(b) and b[i] not in b" \n\t":
        b[i] = r.choice(pool)
    else:
        b.insert(i, r.choice(pool))
    return bytes(b)


def main():
    r = random.Random(2026)
    texts = []
    for _ in range(N):
        doc = dump(r, rand_object(r, 0)).encode("utf-8")
        texts.append(("valid", doc))
        texts.append(("mutated", mutate(r, doc)))
    with tempfile.NamedTemporaryFile("w", suffix=".hex", delete=False) as f:
        for _, data in texts:
            f.write(data.hex() + "\n")
        path = f.name
    try:
        out = subprocess.run([os.path.join(BUILD, "t", "test_json_grammar"), path],
                             capture_output=True, check=True).stdout.decode().split()
    finally:
        os.unlink(path)
    ours = [int(v) for v in out]
    ok(len(ours) == len(texts), "a verdict for each of %d texts" % len(texts))

    bad_valid, bad_mut, n_mut_ok, n_mut_refused = [], [], 0, 0
    for (kind, data), v in zip(texts, ours):
        if kind == "valid":
            if v != 1 or not python_object(data):
                bad_valid.append(data)
            continue
        if python_object(data):
            n_mut_ok += 1
            if v != 1:
                bad_mut.append((data, v, "Python: an object"))
        else:
            n_mut_refused += 1
            if v == 1:
                bad_mut.append((data, v, "Python: refused"))
    ok(not bad_valid, "%d random objects in several layouts: all complete" % N,
       "\n".join(repr(d) for d in bad_valid[:5]))
    ok(not bad_mut and n_mut_ok > 0 and n_mut_refused > 0,
       "%d mutations: the same verdict as Python's json (%d objects, %d refused)"
       % (N, n_mut_ok, n_mut_refused),
       "\n".join("%r: ours %d, %s" % m for m in bad_mut[:5]))
    done_testing()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Compares two float32 logit dumps [n x vocab] (the layout of `llm logits`, ref_torch.py --out
and llama_logits): max |delta| against a tolerance, and argmax agreement per position.

Ties.  If every logit agrees within tol, the argmaxes can still differ where the reference's two
best logits are within 2*tol of each other.  So a position agrees when the argmaxes are equal, or
when the other side's argmax has a reference logit within 2*tol of the reference maximum; such
positions are counted as ties, and the random models are built so that they are rare.

usage: /usr/bin/python3 compare.py GOT.f32 REF.f32 VOCAB [--tol-rel 1e-4]
"""
import argparse
import sys

import numpy as np


def load(path, vocab):
    a = np.fromfile(path, dtype='<f4')
    if a.size % vocab:
        raise ValueError(f'{path}: {a.size} floats is not a multiple of vocab {vocab}')
    return a.reshape(-1, vocab)


def compare(got, ref, tol):
    """Returns a dict: max_abs (max |got - ref|), max_ref (max |ref|), positions, argmax_equal,
    ties, bad (positions whose argmax differs beyond a tie)."""
    if got.shape != ref.shape:
        return {'shape': f'{got.shape} vs {ref.shape}', 'max_abs': float('inf'), 'bad': [-1],
                'positions': 0, 'argmax_equal': 0, 'ties': 0, 'max_ref': 0.0}
    ga, ra = got.argmax(1), ref.argmax(1)
    rows = np.arange(len(ref))
    ref_top = ref[rows, ra]
    equal = ga == ra
    tie = ~equal & (ref[rows, ga] >= ref_top - 2 * tol)
    return {
        'max_abs': float(np.abs(got - ref).max()) if got.size else 0.0,
        'max_ref': float(np.abs(ref).max()) if ref.size else 0.0,
        'positions': len(ref),
        'argmax_equal': int(equal.sum()),
        'ties': int(tie.sum()),
        'bad': [int(i) for i in np.nonzero(~equal & ~tie)[0]],
        'finite': bool(np.isfinite(got).all()),
    }


def summary(r):
    return (f"max|d| {r['max_abs']:.3g} (max|logit| {r['max_ref']:.3g}), argmax "
            f"{r['argmax_equal']}/{r['positions']}" + (f", {r['ties']} ties" if r['ties'] else ''))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('got')
    ap.add_argument('ref')
    ap.add_argument('vocab', type=int)
    ap.add_argument('--tol-rel', type=float, default=1e-4)
    a = ap.parse_args()
    got, ref = load(a.got, a.vocab), load(a.ref, a.vocab)
    tol = a.tol_rel * float(np.abs(ref).max())
    r = compare(got, ref, tol)
    print(summary(r) + f'; tol {tol:.3g}')
    sys.exit(0 if r['max_abs'] <= tol and not r['bad'] else 1)


if __name__ == '__main__':
    main()

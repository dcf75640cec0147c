#!/usr/bin/python3
"""Summarizes the runs of bench/cpu_vs_llamacpp.sh: medians per side, and the ratios
ngx_llm / llama.cpp for prefill and decode (goals: decode >= 1.0x, prefill >= 0.8x).

usage: bench_report.py DTYPE RUNS.jsonl
  RUNS.jsonl: lines {"side": "ngx_llm"|"llama.cpp", "run": N, "result": ...} where result is
  `llm bench --json` output or one llama-bench -o jsonl record (n_prompt > 0: prefill,
  n_gen > 0: decode).
"""
import json
import statistics
import sys


def main():
    dtype, path = sys.argv[1], sys.argv[2]
    v = {'ngx_llm': {'pp': [], 'tg': []}, 'llama.cpp': {'pp': [], 'tg': []}}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            res = r['result']
            if r['side'] == 'ngx_llm':
                v['ngx_llm']['pp'].append(res['prefill_tokens_per_s'])
                v['ngx_llm']['tg'].append(res['decode_tokens_per_s'])
            elif res.get('n_gen', 0) > 0:
                v['llama.cpp']['tg'].append(res['avg_ts'])
            else:
                v['llama.cpp']['pp'].append(res['avg_ts'])
    med = {s: {k: statistics.median(x) for k, x in d.items()} for s, d in v.items()}
    ratio = {k: med['ngx_llm'][k] / med['llama.cpp'][k] for k in ('pp', 'tg')}
    spread = {s: {k: (min(x), max(x)) for k, x in d.items()} for s, d in v.items()}
    print(f'{dtype}: prefill tok/s  ngx_llm {med["ngx_llm"]["pp"]:8.1f}  llama.cpp '
          f'{med["llama.cpp"]["pp"]:8.1f}  ratio {ratio["pp"]:.2f}x (goal >= 0.8)'
          f'   [ranges {spread["ngx_llm"]["pp"][0]:.0f}-{spread["ngx_llm"]["pp"][1]:.0f} / '
          f'{spread["llama.cpp"]["pp"][0]:.0f}-{spread["llama.cpp"]["pp"][1]:.0f}]')
    print(f'{dtype}: decode  tok/s  ngx_llm {med["ngx_llm"]["tg"]:8.1f}  llama.cpp '
          f'{med["llama.cpp"]["tg"]:8.1f}  ratio {ratio["tg"]:.2f}x (goal >= 1.0)'
          f'   [ranges {spread["ngx_llm"]["tg"][0]:.1f}-{spread["ngx_llm"]["tg"][1]:.1f} / '
          f'{spread["llama.cpp"]["tg"][0]:.1f}-{spread["llama.cpp"]["tg"][1]:.1f}]')
    print(json.dumps({'dtype': dtype, 'median': med, 'ratio': ratio,
                      'runs': len(v['ngx_llm']['pp'])}))


if __name__ == '__main__':
    main()

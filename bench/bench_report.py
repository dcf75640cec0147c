#!/usr/bin/python3
"""Summarizes the runs of bench/cpu_vs_llamacpp.sh: medians per side, and the ratios
ngx_llm / llama.cpp (native build) for prefill and decode (goals: decode >= 1.0x, prefill >= 0.8x),
plus the same against node-llama-cpp's prebuilt libraries.

usage: bench_report.py DTYPE RUNS.jsonl
  RUNS.jsonl: lines {"side": "ngx_llm"|"llama.cpp"|"llama.cpp-npm", "run": N, "result": ...}
  where result is `llm bench --json` or llama_prebuilt_bench output, or one llama-bench -o jsonl
  record (n_prompt > 0: prefill, n_gen > 0: decode).
"""
import json
import statistics
import sys


def main():
    dtype, path = sys.argv[1], sys.argv[2]
    v = {s: {'pp': [], 'tg': []} for s in ('ngx_llm', 'llama.cpp', 'llama.cpp-npm')}
    with open(path) as f:
        runs = [json.loads(line) for line in f]
    for r in runs:
        res = r['result']
        if r['side'] in ('ngx_llm', 'llama.cpp-npm'):
            v[r['side']]['pp'].append(res['prefill_tokens_per_s'])
            v[r['side']]['tg'].append(res['decode_tokens_per_s'])
        elif res.get('n_gen', 0) > 0:
            v['llama.cpp']['tg'].append(res['avg_ts'])
        else:
            v['llama.cpp']['pp'].append(res['avg_ts'])
    v = {s: d for s, d in v.items() if d['pp'] and d['tg']}
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
    if 'llama.cpp-npm' in med:
        npm = med['llama.cpp-npm']
        print(f'{dtype}: llama.cpp prebuilt npm libraries: prefill {npm["pp"]:.1f} tok/s (ratio '
              f'{med["ngx_llm"]["pp"] / npm["pp"]:.2f}x), decode {npm["tg"]:.1f} tok/s (ratio '
              f'{med["ngx_llm"]["tg"] / npm["tg"]:.2f}x)')
    loads = [r['load'] for r in runs if 'load' in r]
    if loads:
        print(f'{dtype}: 1-minute load average at the start of each run: {loads}')
    print(json.dumps({'dtype': dtype, 'median': med, 'ratio': ratio,
                      'runs': len(v['ngx_llm']['pp'])}))


if __name__ == '__main__':
    main()

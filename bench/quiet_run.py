#!/usr/bin/python3
"""Runs one benchmark command and keeps its output only if nothing else used the CPU meanwhile.

On a shared 2-core machine another process taking a core for a second halves a 2-thread
benchmark's speed (and llama.cpp, whose threads spin at barriers, loses far more).  So every run
measures the CPU time the whole machine spent (/proc/stat) minus the time the command itself
spent (wait4's rusage); when the others used more than --max-other cores on average the run is
discarded and repeated after a pause.  Prints the command's stdout, and on stderr how much CPU
the others took.

usage: quiet_run.py [--max-other 0.1] [--tries 20] -- CMD ARG...
"""
import argparse
import os
import subprocess
import sys
import time

TICK = os.sysconf('SC_CLK_TCK')


def busy_seconds():
    with open('/proc/stat') as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]                      # idle + iowait
    return (sum(v[:8]) - idle) / TICK       # user..steal, without guest (counted in user)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--max-other', type=float, default=0.1,
                    help='cores the other processes may use on average')
    ap.add_argument('--tries', type=int, default=20)
    ap.add_argument('cmd', nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == '--' else a.cmd
    for attempt in range(1, a.tries + 1):
        b0, t0 = busy_seconds(), time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        others = (busy_seconds() - b0 - ru.ru_utime - ru.ru_stime) / wall
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f'quiet_run: {cmd[0]} failed')
        if others <= a.max_other:
            print(f'quiet_run: {os.path.basename(cmd[0])}: others used {others:.2f} cores '
                  f'(try {attempt})', file=sys.stderr)
            sys.stdout.buffer.write(out)
            return
        print(f'quiet_run: {os.path.basename(cmd[0])}: others used {others:.2f} cores, '
              'repeating', file=sys.stderr)
        time.sleep(min(60, 5 * attempt))
    sys.exit(f'quiet_run: the machine never stayed quiet for {cmd[0]} ({a.tries} tries)')


if __name__ == '__main__':
    main()

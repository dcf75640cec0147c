"""A few TAP helpers for the Python test scripts in t/ (run by prove)."""
import sys

_n = 0
_failed = 0


def ok(cond, name, diag=None):
    global _n, _failed
    _n += 1
    print(f"{'ok' if cond else 'not ok'} {_n} - {name}", flush=True)
    if not cond:
        _failed += 1
        if diag:
            note(diag)
    return cond


def note(msg):
    for line in str(msg).splitlines() or ['']:
        print(f'# {line}', flush=True)


def skip_all(reason):
    print(f'1..0 # SKIP {reason}', flush=True)
    sys.exit(0)


def bail_out(reason):
    print(f'Bail out! {reason}', flush=True)
    sys.exit(255)


def done_testing():
    print(f'1..{_n}', flush=True)
    sys.exit(1 if _failed else 0)

#!/usr/bin/env python3
"""check_trace.py TRACE.json [--min-events N] [--names a,b] [--cat C]

Validates a Chrome trace written by `rly run/bench --profile` (Trace Event Format, JSON object
form): it loads with json; "traceEvents" is a list; every event has name, ph, pid, tid; every
complete ("X") event has numeric ts and dur >= 0 and args with "inputs" and "output"; events of
one thread do not overlap (ts + dur <= next ts, beyond 1 us of rounding); at least N X events;
the names given occur; a pool worker's track (tid >= 100000) is named by thread_name metadata and
its events are named after packed calls of the calling thread. Prints `N passed, N failed`."""
import json
import sys

fails = []


def check(c, what):
    if not c:
        fails.append(what)


path = sys.argv[1]
opts = dict(zip(sys.argv[2::2], sys.argv[3::2]))
with open(path, encoding='utf-8') as f:
    doc = json.load(f)
ev = doc.get('traceEvents') if isinstance(doc, dict) else None
check(isinstance(ev, list), 'traceEvents is a list')
ev = ev or []
xs = []
for e in ev:
    check(all(k in e for k in ('name', 'ph', 'pid', 'tid')), 'fields of %r' % (e,))
    if e.get('ph') == 'X':
        ok = all(k in e for k in ('ts', 'dur')) and isinstance(e['ts'], (int, float)) \
            and isinstance(e['dur'], (int, float)) and e['dur'] >= 0 and e['ts'] >= 0
        check(ok, 'ts and dur of %r' % (e,))
        args = e.get('args', {})
        check('inputs' in args and 'output' in args, 'args inputs/output in %r' % (e,))
        xs.append(e)
check(len(xs) >= int(opts.get('--min-events', 1)), 'at least %s X events (%d)'
      % (opts.get('--min-events', 1), len(xs)))
by_tid = {}
for e in xs:
    by_tid.setdefault(e['tid'], []).append(e)
for tid, es in by_tid.items():
    es.sort(key=lambda e: e['ts'])
    for a, b in zip(es, es[1:]):
        check(a['ts'] + a['dur'] <= b['ts'] + 0.002, 'events of tid %s overlap: %r %r' % (tid, a, b))
# pool workers' tracks (tid 100000 + w): each named by thread_name metadata, each event named
# after a packed call the calling thread recorded
WORKER_TID = 100000
named = set(e['tid'] for e in ev if e.get('ph') == 'M' and e.get('name') == 'thread_name')
callers = set(e['name'] for e in xs if e['tid'] < WORKER_TID)
for e in xs:
    if e['tid'] >= WORKER_TID:
        check(e['tid'] in named, 'a thread_name for worker tid %s' % e['tid'])
        check(e['name'] in callers, 'worker event %r names a packed call' % e['name'])
names = set(e['name'] for e in xs)
for n in filter(None, opts.get('--names', '').split(',')):
    check(n in names, 'an event named %r (have %s)' % (n, sorted(names)[:10]))
if '--cat' in opts:
    check(any(e.get('cat') == opts['--cat'] for e in xs), 'an event of category %r' % opts['--cat'])
for f in fails[:10]:
    print('FAIL %s: %s' % (path, f))
print('%d passed, %d failed' % (0 if fails else 1, 1 if fails else 0))
sys.exit(1 if fails else 0)

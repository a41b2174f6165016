#!/usr/bin/env python3
"""check_graph.py dot|html FILE [--nodes N] [--clusters N] [--labels a,b,...]

Structural checks of `rly viz` output, with the standard library only.
dot:  every statement parses as a node, an edge or a cluster line; braces balance; every edge
      joins declared nodes; node ids are declared once; counts of nodes/clusters at least N.
html: the page parses (html.parser) with balanced tags; it holds one inline <svg>, a <script>,
      no external reference (src=, href= to a URL, @import); node groups and labels present.
Prints `N passed, N failed` and exits 1 on a failure."""
import html.parser
import re
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def check_dot(text, args):
    depth, clusters, nodes, edges = 0, [], {}, []
    node_re = re.compile(r'^\s*(n\d+) \[label="((?:[^"\\]|\\.)*)", .*\];$')
    edge_re = re.compile(r'^\s*(n\d+) -> (n\d+)( \[.*\])?;$')
    lines = text.splitlines()
    check(lines and lines[0] == 'digraph rly {', 'starts with digraph rly {')
    for ln in lines[1:]:
        s = ln.strip()
        if s.startswith('subgraph cluster_'):
            depth += 1
            clusters.append(s)
        elif s == '}':
            depth -= 1
        elif s.startswith(('graph [', 'node [', 'edge [', 'label=')):
            pass
        elif node_re.match(s):
            m = node_re.match(s)
            check(m.group(1) not in nodes, 'node %s declared once' % m.group(1))
            nodes[m.group(1)] = m.group(2)
        elif edge_re.match(s):
            m = edge_re.match(s)
            edges.append((m.group(1), m.group(2)))
        else:
            check(False, 'unparsed DOT line: %r' % s)
    check(depth == -1, 'braces balance (depth %d)' % depth)
    for a, b in edges:
        check(a in nodes and b in nodes, 'edge %s -> %s joins declared nodes' % (a, b))
    return nodes, clusters, edges


class Page(html.parser.HTMLParser):
    VOID = {'meta', 'br', 'img', 'link', 'input', 'hr', 'path', 'rect', 'line', 'marker'}

    def __init__(self):
        super().__init__()
        self.stack, self.count, self.titles, self.bad, self.external = [], {}, [], [], []
        self.in_title = False

    def handle_starttag(self, tag, attrs):
        self.count[tag] = self.count.get(tag, 0) + 1
        for k, v in attrs:
            if k in ('src', 'href') and v and re.match(r'^[a-z]+://', v):
                self.external.append(v)
        if tag not in self.VOID:
            self.stack.append(tag)
        self.in_title = tag == 'title'

    def handle_startendtag(self, tag, attrs):
        self.count[tag] = self.count.get(tag, 0) + 1

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.bad.append('</%s> closes <%s>' % (tag, self.stack[-1] if self.stack else ''))
            return
        self.stack.pop()
        self.in_title = False

    def handle_data(self, data):
        if self.in_title:
            self.titles.append(data)


def check_html(text, args):
    p = Page()
    p.feed(text)
    p.close()
    check(text.startswith('<!DOCTYPE html>'), 'doctype')
    check(not p.bad, 'tags balance: %s' % p.bad[:3])
    check(not p.stack, 'every tag closed: %s' % p.stack[:5])
    check(p.count.get('svg') == 1, 'one inline svg')
    check(p.count.get('script') == 1, 'one inline script')
    check(not p.external and '@import' not in text, 'no external reference: %s' % p.external[:3])
    nodes = re.findall(r'<g class="n s\d" id="(n\d+)">', text)
    clusters = re.findall(r'<g class="cluster">', text)
    check(re.search(r'viewBox="[-0-9. ]+"', text) is not None, 'a viewBox')
    return dict((n, t) for n, t in zip(nodes, p.titles[1:])), clusters, []


def main():
    mode, path = sys.argv[1], sys.argv[2]
    opts = dict(zip(sys.argv[3::2], sys.argv[4::2]))
    text = open(path, encoding='utf-8').read()
    nodes, clusters, edges = (check_dot if mode == 'dot' else check_html)(text, opts)
    if '--nodes' in opts:
        check(len(nodes) >= int(opts['--nodes']), 'at least %s nodes (%d)' % (opts['--nodes'], len(nodes)))
    if '--clusters' in opts:
        check(len(clusters) >= int(opts['--clusters']),
              'at least %s clusters (%d)' % (opts['--clusters'], len(clusters)))
    if '--labels' in opts:
        for lab in opts['--labels'].split(','):
            check(lab in text, 'label %r present' % lab)
    if '--cluster-labels' in opts:
        for lab in opts['--cluster-labels'].split(','):
            check(lab in text, 'cluster %r present' % lab)
    for f in failures:
        print('FAIL %s: %s' % (path, f))
    print('%d passed, %d failed' % (0 if failures else 1, 1 if failures else 0))
    sys.exit(1 if failures else 0)


if __name__ == '__main__':
    main()

#!/usr/bin/env python3
"""Checks the links of README.md and docs/*.md: every link is relative and names a file
(or a heading of one) inside the repository. Nothing may point outside it: no URL, no
absolute path, no ../ that leaves the repository (../shared/ is not shipped to users).
No paragraph (a list item or table row counts alone; code blocks do not count) runs over
PARA_MAX characters, so the pages stay readable.

  links.py ROOT        check ROOT's README.md and ROOT/docs/*.md; exit 1 naming each bad link
  links.py --self-test check that the checker catches each kind of bad link
"""
import os
import re
import sys
import tempfile

LINK = re.compile(r'!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)')
REFDEF = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+["(].*)?$')
HTML = re.compile(r'<(?:a|img)\s[^>]*(?:href|src)\s*=\s*"([^"]*)"', re.I)
SCHEME = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*:')
PARA_MAX = 1000


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    h = re.sub(r'[`*_]', '', heading.strip().lower())
    h = re.sub(r'[^\w\- ]', '', h)
    return h.replace(' ', '-')


def anchors(path):
    out, fence = set(), False
    for line in open(path, encoding='utf-8'):
        if line.lstrip().startswith('```'):
            fence = not fence
        elif not fence and line.startswith('#'):
            out.add(slug(line.lstrip('#')))
    return out


def links(path):
    """(line number, target) of every link outside code blocks and code spans."""
    fence = False
    for n, line in enumerate(open(path, encoding='utf-8'), 1):
        if line.lstrip().startswith('```'):
            fence = not fence
            continue
        if fence:
            continue
        text = re.sub(r'`[^`]*`', '', line)
        for rx in (LINK, HTML):
            for m in rx.finditer(text):
                yield n, m.group(1)
        m = REFDEF.match(text)
        if m:
            yield n, m.group(1)


def long_paragraphs(path):
    """(line, length) of each paragraph over PARA_MAX characters."""
    out, cur, start, fence = [], [], 0, False

    def flush():
        n = len(' '.join(l.strip() for l in cur))
        if cur and n > PARA_MAX:
            out.append((start, n))

    for n, line in enumerate(open(path, encoding='utf-8'), 1):
        if line.lstrip().startswith('```'):
            flush(); cur = []; fence = not fence
        elif fence:
            continue
        elif not line.strip():
            flush(); cur = []
        elif re.match(r'\s*([-*]|\d+\.)\s', line) or line.lstrip().startswith(('|', '#')):
            flush(); cur, start = [line], n
        else:
            if not cur:
                start = n
            cur.append(line)
    flush()
    return out


def check(root):
    root = os.path.realpath(root)
    files = [os.path.join(root, 'README.md')]
    docs = os.path.join(root, 'docs')
    if os.path.isdir(docs):
        files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith('.md'))
    bad, count = [], 0
    for f in files:
        if not os.path.isfile(f):
            bad.append(f'{os.path.relpath(f, root)}: missing')
            continue
        for n, k in long_paragraphs(f):
            bad.append(f'{os.path.relpath(f, root)}:{n}: a paragraph of {k} characters (at most {PARA_MAX})')
        for n, line in enumerate(open(f, encoding='utf-8'), 1):
            if '../shared' in line:
                bad.append(f'{os.path.relpath(f, root)}:{n}: names ../shared, which users do not have')
        for n, target in links(f):
            count += 1
            where = f'{os.path.relpath(f, root)}:{n}: {target or "(empty)"}'
            if not target:
                bad.append(f'{where}: empty link')
                continue
            if SCHEME.match(target) or target.startswith('//'):
                bad.append(f'{where}: points outside the repository (a URL)')
                continue
            if target.startswith('/'):
                bad.append(f'{where}: an absolute path; links must be relative')
                continue
            path, _, frag = target.partition('#')
            dest = os.path.realpath(os.path.join(os.path.dirname(f), path)) if path else f
            if dest != root and not dest.startswith(root + os.sep):
                bad.append(f'{where}: leaves the repository')
                continue
            if not os.path.exists(dest):
                bad.append(f'{where}: no such file in the repository')
                continue
            if frag and dest.endswith('.md') and frag.lower() not in anchors(dest):
                bad.append(f'{where}: no heading #{frag} in {os.path.relpath(dest, root)}')
    return count, bad


def self_test():
    cases = {
        'good': ('[d](docs/a.md) [h](docs/a.md#a-heading) [s](#top) `[x](nowhere.md)`', 0),
        'missing file': ('[d](docs/none.md)', 1),
        'missing heading': ('[d](docs/a.md#no-such-heading)', 1),
        'outside': ('[d](../elsewhere/DESIGN.md)', 1),
        'url': ('see [nccl-tests](https://github.com/NVIDIA/nccl-tests)', 1),
        'absolute': ('[d](/etc/passwd)', 1),
        'shared named': ('the design is in `../shared/DESIGN.md`', 1),
        'long paragraph': ('word ' * 250, 1),
        'long code block': ('```\n' + 'word ' * 250 + '\n```', 0),
        'reference': ('[d]: ../outside.md', 1),
        'image': ('<img src="docs/none.png">', 1),
    }
    failed = 0
    for name, (text, want) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, 'docs'))
            with open(os.path.join(d, 'README.md'), 'w') as fh:
                fh.write('# top\n\n' + text + '\n\n```\n[in a code block](nowhere.md)\n```\n')
            with open(os.path.join(d, 'docs', 'a.md'), 'w') as fh:
                fh.write('# A heading\n')
            _, bad = check(d)
            if len(bad) != want:
                failed += 1
                print(f'self-test {name}: {len(bad)} bad link(s) found, {want} expected: {bad}')
    print('self-test: ' + ('FAILED' if failed else 'ok'))
    return 1 if failed else 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    count, bad = check(sys.argv[1])
    for b in bad:
        print(b)
    print(f'{count} links checked, {len(bad)} bad')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())

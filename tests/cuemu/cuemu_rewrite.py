#!/usr/bin/env python3
"""cuemu_rewrite.py: the one source rewrite the CUDA emulation needs (tests/cuemu, docs/cuda.md).

Input: a .cu file already run through the C++ preprocessor with tests/cuemu/include on the
path (so every macro, DISPATCH_D included, is expanded and GNU line markers say where each
line came from). Three CUDA constructs are not C++ and are rewritten here, on the same line
(line numbers in diagnostics stay the source's):

  K<<<grid, block, smem, stream>>>(args)
      -> cuemu::launch(cuemu::LaunchCfg(grid, block, smem, stream), "K", "file", line, K, args)
  __shared__ T a[N][M], b;            (block-shared, one allocation per block and declaration)
      -> T (&a)[N][M] = *reinterpret_cast<T (*)[N][M]>(cuemu::smem_static(ID, sizeof(T[N][M]), alignof(T))); ...
  extern __shared__ ATTR T s[];       (the launch's dynamic shared memory)
      -> T *s = reinterpret_cast<T *>(cuemu::smem_dynamic());
  __launch_bounds__(N) name(params) { (the kernel refuses blocks of more than N threads)
      -> name(params) { cuemu::launch_bounds_check(N);

Anything it cannot parse is an error naming the file and line: the emulation never
compiles something other than what nvcc would.
Usage: cuemu_rewrite.py IN.ii OUT.ii
"""
import re
import sys

IDENT = re.compile(r'[A-Za-z_][A-Za-z_0-9]*')
MARKER = re.compile(r'^# (\d+) "([^"]*)"', re.M)


def die(where, msg):
    sys.stderr.write('cuemu_rewrite: %s: error: %s\n' % (where, msg))
    sys.exit(1)


class Src:
    def __init__(self, text):
        self.text = text
        # line markers: (offset of the line after the marker, its line number, file)
        self.marks = [(m.end() + 1, int(m.group(1)), m.group(2)) for m in MARKER.finditer(text)]

    def where(self, pos):
        line, fname, start = 1, '?', 0
        for off, ln, f in self.marks:
            if off > pos:
                break
            line, fname, start = ln, f, off
        return fname, line + self.text.count('\n', start, pos)


def in_literal(s, pos):
    """Whether s[pos] lies inside a string or character literal of its line."""
    j = s.rfind('\n', 0, pos) + 1
    q = None
    while j < pos:
        c = s[j]
        if q:
            if c == '\\':
                j += 1
            elif c == q:
                q = None
        elif c in '"\'':
            q = c
        j += 1
    return q is not None


def match_close(s, i, open_ch, close_ch):
    """Index of the bracket closing s[i] == open_ch (skips string and char literals)."""
    depth, j, n = 0, i, len(s)
    while j < n:
        c = s[j]
        if c in '"\'':
            q = c
            j += 1
            while j < n and s[j] != q:
                j += 2 if s[j] == '\\' else 1
        elif c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return -1


def split_top(s, sep=','):
    """Split at separators outside (), [], {}."""
    out, depth, cur = [], 0, ''
    for c in s:
        if c in '([{':
            depth += 1
        elif c in ')]}':
            depth -= 1
        if c == sep and depth == 0:
            out.append(cur)
            cur = ''
        else:
            cur += c
    out.append(cur)
    return out


def rewrite_launches(src):
    s, out, pos = src.text, [], 0
    while True:
        i = s.find('<<<', pos)
        if i < 0:
            break
        if in_literal(s, i):
            out.append(s[pos:i + 3])
            pos = i + 3
            continue
        where = '%s:%d' % src.where(i)
        j = s.find('>>>', i)
        if j < 0:
            die(where, 'kernel launch without >>>')
        # the kernel expression before <<<: an identifier, optionally with template arguments
        k = i
        while k > 0 and s[k - 1] in ' \t':
            k -= 1
        end_k = k
        if s[k - 1] == '>':
            depth = 0
            while k > 0:
                k -= 1
                if s[k] == '>':
                    depth += 1
                elif s[k] == '<':
                    depth -= 1
                    if depth == 0:
                        break
        while k > 0 and (s[k - 1].isalnum() or s[k - 1] in '_:'):
            k -= 1
        kexpr = s[k:end_k].strip()
        if not kexpr or not (kexpr[0].isalpha() or kexpr[0] == '_'):
            die(where, 'cannot find the kernel before <<<')
        cfg = s[i + 3:j]
        p = j + 3
        while p < len(s) and s[p] in ' \t':
            p += 1
        if p >= len(s) or s[p] != '(':
            die(where, 'expected ( after >>>')
        q = match_close(s, p, '(', ')')
        if q < 0:
            die(where, 'unbalanced kernel arguments')
        args = s[p + 1:q]
        fname, line = src.where(i)
        name = ' '.join(kexpr.split())
        call = 'cuemu::launch(cuemu::LaunchCfg(%s), "%s", "%s", %d, %s%s)' % (
            cfg, name, fname, line, kexpr, (', ' + args) if args.strip() else '')
        if '\n' in s[k:q]:
            call += '\n' * s[k:q].count('\n')   # keep the line count
        out.append(s[pos:k])
        out.append(call)
        pos = q + 1
    out.append(s[pos:])
    return ''.join(out)


def rewrite_shared(src):
    s, out, pos, site = src.text, [], 0, 0
    for m in re.finditer(r'\b__shared__\b', s):
        if m.start() < pos or in_literal(s, m.start()):
            continue
        where = '%s:%d' % src.where(m.start())
        # the statement: from after the previous ; { } to the next ;
        a = max(s.rfind(';', 0, m.start()), s.rfind('{', 0, m.start()), s.rfind('}', 0, m.start())) + 1
        e = s.find(';', m.end())
        if e < 0:
            die(where, '__shared__ declaration without ;')
        head = s[a:m.start()]
        lead = head[:len(head) - len(head.lstrip())]
        quals = head.strip()
        body = s[m.end():e]
        while '__attribute__' in body:   # attributes (alignment): dropped, the arenas are 1024-aligned
            i = body.find('__attribute__')
            j = body.find('(', i)
            k = match_close(body, j, '(', ')')
            if j < 0 or k < 0:
                die(where, 'cannot parse attribute in %r' % body)
            body = body[:i] + ' ' + body[k + 1:]
        body = body.strip()
        if quals == 'extern':
            mm = re.match(r'^(.*?)([A-Za-z_][A-Za-z_0-9]*)\s*\[\s*\]$', body, re.S)
            if not mm:
                die(where, 'cannot parse dynamic shared declaration: %r' % body)
            typ, name = mm.group(1).strip(), mm.group(2)
            rep = '%s *%s = reinterpret_cast<%s *>(cuemu::smem_dynamic());' % (typ, name, typ)
        elif quals in ('', 'static'):
            decls = split_top(body)
            first = decls[0]
            b = first.find('[')
            base = first if b < 0 else first[:b]
            names = IDENT.findall(base)
            if len(names) < 2:
                die(where, 'cannot parse shared declaration: %r' % body)
            name0 = names[-1]
            typ = base[:base.rfind(name0)].strip()
            if '*' in typ or '&' in typ or '=' in body:
                die(where, 'unsupported shared declaration (pointer or initializer): %r' % body)
            parts = []
            for d in [first[base.rfind(name0):]] + decls[1:]:
                d = d.strip()
                mm = re.match(r'^([A-Za-z_][A-Za-z_0-9]*)\s*((?:\[[^\]]+\]\s*)*)$', d)
                if not mm:
                    die(where, 'cannot parse shared declarator %r' % d)
                nm, dims = mm.group(1), mm.group(2).replace(' ', '')
                site += 1
                sid = '(__COUNTER_BASE__ + %d)' % site
                if dims:
                    parts.append('%s (&%s)%s = *reinterpret_cast<%s (*)%s>(cuemu::smem_static(%s, sizeof(%s%s), alignof(%s)));'
                                 % (typ, nm, dims, typ, dims, sid, typ, dims, typ))
                else:
                    parts.append('%s &%s = *reinterpret_cast<%s *>(cuemu::smem_static(%s, sizeof(%s), alignof(%s)));'
                                 % (typ, nm, typ, sid, typ, typ))
            rep = ' '.join(parts)
        else:
            die(where, 'unsupported qualifiers before __shared__: %r' % quals)
        out.append(s[pos:a])
        out.append(lead + rep + '\n' * s[a:e].count('\n'))
        pos = e + 1
    out.append(s[pos:])
    return ''.join(out)


def rewrite_launch_bounds(src):
    s, out, pos = src.text, [], 0
    for m in re.finditer(r'\b__launch_bounds__\s*\(', s):
        if m.start() < pos or in_literal(s, m.start()):
            continue
        where = '%s:%d' % src.where(m.start())
        c = match_close(s, m.end() - 1, '(', ')')
        bound = split_top(s[m.end():c])[0].strip()
        p = s.find('(', c + 1)          # the kernel's parameter list
        q = match_close(s, p, '(', ')')
        b = q + 1
        while b < len(s) and s[b] in ' \t\n':
            b += 1
        if p < 0 or q < 0 or b >= len(s) or s[b] != '{':
            die(where, '__launch_bounds__ not followed by a kernel definition')
        out.append(s[pos:m.start()])
        out.append(s[c + 1:b + 1])
        out.append(' cuemu::launch_bounds_check(%s);' % bound)
        pos = b + 1
    out.append(s[pos:])
    return ''.join(out)


def main():
    text = open(sys.argv[1]).read()
    # every rewrite keeps the lines where they were, so the markers stay valid in between
    text = rewrite_launches(Src(text))
    text = rewrite_launch_bounds(Src(text))
    text = rewrite_shared(Src(text))
    # shared-memory declaration sites: unique within this translation unit
    text = text.replace('__COUNTER_BASE__', '0')
    for bad in ('__shared__', '<<<', '__launch_bounds__', '__constant__', '__managed__'):
        for m in re.finditer(re.escape(bad), text):
            if not in_literal(text, m.start()):
                die('%s:%d' % Src(text).where(m.start()), '%s is not supported by the emulation' % bad)
    open(sys.argv[2], 'w').write(text)


if __name__ == '__main__':
    main()

"""Lists which kernel parameters the generated kernels load from and store
to in global memory, named by their coda.kernel_abi role, so that tests can
check that a kernel writes only its declared outputs.

Reads the output of coda-to-gpu (gpu.func kernels with llvm.load, llvm.store
and llvm.atomicrmw through llvm.getelementptr of pointer parameters) and
prints, per kernel:

  <kernel>: loads <role>#<index> ...; stores <role>#<index> ...
"""

import re
import struct
import sys


class _AttrParser:
    """Parses the subset of MLIR attribute syntax coda.kernel_abi uses."""

    TOKEN = re.compile(r'\s*(array<i64:[^>]*>|"[^"]*"'
                       r'|(?:0x[0-9A-Fa-f]+|-?[\d.]+(?:e[-+]?\d+)?)\s*:\s*[if]64'
                       r'|[{}\[\]=,]|[A-Za-z_][\w.]*)')

    def __init__(self, text):
        self.tokens = self.TOKEN.findall(text)
        self.pos = 0

    def next(self):
        self.pos += 1
        return self.tokens[self.pos - 1]

    def value(self):
        tok = self.next()
        if tok == '{':
            d = {}
            while self.tokens[self.pos] != '}':
                key = self.next()
                assert self.next() == '='
                d[key] = self.value()
                if self.tokens[self.pos] == ',':
                    self.pos += 1
            self.pos += 1
            return d
        if tok == '[':
            items = []
            while self.tokens[self.pos] != ']':
                items.append(self.value())
                if self.tokens[self.pos] == ',':
                    self.pos += 1
            self.pos += 1
            return items
        if tok.startswith('array<'):
            body = tok[len('array<i64:'):-1].strip()
            return [int(x) for x in body.split(',')] if body else []
        if tok.startswith('"'):
            return tok[1:-1]
        number, kind = [t.strip() for t in tok.split(':')]
        if kind == 'i64':
            return int(number)
        if number.startswith('0x'):  # a float printed by its bits
            return struct.unpack('>d', bytes.fromhex(number[2:]))[0]
        return float(number)


def extract_abis(mlir_text):
    """Every coda.kernel_abi of the host declarations, by kernel name."""
    abis = {}
    for m in re.finditer(r'func\.func private @\w+\(.*?coda\.kernel_abi = ',
                         mlir_text):
        abi = _AttrParser(mlir_text[m.end():]).value()
        abis[abi['kernel']] = abi
    return abis


def main():
    text = open(sys.argv[1]).read()
    abis = extract_abis(text)
    funcs = re.split(r'(?=gpu\.func @)', text)[1:]
    for func in funcs:
        name = re.match(r'gpu\.func @(\w+)', func).group(1)
        params = abis[name]['params']
        base = {}
        loads, stores = set(), set()
        for line in func.splitlines():
            m = re.search(r'(%\w+) = llvm\.getelementptr (%\w+)\[', line)
            if m:
                base[m.group(1)] = base.get(m.group(2), m.group(2))
                continue
            m = re.search(r'llvm\.load (%\w+) : !llvm\.ptr<1>', line)
            if m:
                loads.add(base.get(m.group(1), m.group(1)))
            m = re.search(r'llvm\.store %\w+, (%\w+) : \S+, !llvm\.ptr<1>',
                          line) or re.search(
                r'llvm\.atomicrmw \w+ (%\w+), .* : !llvm\.ptr<1>', line)
            if m:
                stores.add(base.get(m.group(1), m.group(1)))

        def describe(values):
            names = []
            for v in sorted(values):
                m = re.fullmatch(r'%arg(\d+)', v)
                if not m:
                    names.append('unknown(%s)' % v)
                    continue
                p = params[int(m.group(1))]
                names.append('%s#%d' % (p['role'], p['index']))
            return ' '.join(names) if names else '-'
        print('%s: loads %s; stores %s' % (name, describe(loads),
                                           describe(stores)))


if __name__ == '__main__':
    main()

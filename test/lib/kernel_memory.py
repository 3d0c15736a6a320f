"""Lists which kernel parameters the generated kernels load from and store
to in global memory, named by their coda.kernel_abi role, so that tests can
check that a kernel writes only its declared outputs.

Reads the output of coda-to-gpu (gpu.func kernels with llvm.load, llvm.store
and llvm.atomicrmw through llvm.getelementptr of pointer parameters) and
prints, per kernel:

  <kernel>: loads <role>#<index> ...; stores <role>#<index> ...
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
import coda_gpu  # noqa: E402


def main():
    text = open(sys.argv[1]).read()
    abis = coda_gpu.extract_abis(text)
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

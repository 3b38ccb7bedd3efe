#!/usr/bin/env python3
"""Reads `cuobjdump -sass` listings of the attention kernels, for checking a kernel change before (or instead of) a
device run.

  cuobjdump -sass build-bundle/bench/attention_bench > a.sass      # cuobjdump and the nvdisasm it calls: pip packages
                                                                  # nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm (13.2.51)
  scripts/sass_report.py compare a.sass b.sass [NAME_PART]         # SAME / DIFF and length per function
  scripts/sass_report.py loops a.sass NAME_PART                    # the hot loops of the matching functions

`compare` tells whether a source change moved the code of each kernel (a refactor should print SAME everywhere).
`loops` lists every conditional backward branch that spans more than 128 instructions and has a wgmma (HGMMA)
inside: the consumers' tile loops and the item loops around them (unconditional returns from out-of-line wait
blocks are not loops and are skipped). Per loop: its instruction count, local-memory spills (LDL / STL), HGMMAs, MUFUs and
shuffles. A function's copies (one per architecture in a fat binary) are numbered #1, #2, ...
"""
import re
import signal
import sys

FUNCTION = re.compile(r'\s+Function : (\S+)')
INSTRUCTION = re.compile(r'\s*/\*([0-9a-f]{4,6})\*/\s+(.*?)\s*;')
BRANCH = re.compile(r'^@!?U?P\d+ BRA (0x[0-9a-f]+)$')  # conditional: a loop's back edge


def read_functions(path):
    """Maps each function name (with #n for repeats) to its list of (address, instruction)."""
    functions, name, body = {}, None, []
    with open(path) as listing:
        for line in listing:
            match = FUNCTION.match(line)
            if match:
                if name is not None:
                    functions[name] = body
                base, n = match.group(1), 1
                while f'{base}#{n}' in functions:
                    n += 1
                name, body = f'{base}#{n}', []
                continue
            match = INSTRUCTION.match(line)
            if name is not None and match:
                body.append((int(match.group(1), 16), match.group(2)))
    if name is not None:
        functions[name] = body
    return functions


def compare(path_a, path_b, part=''):
    a, b = read_functions(path_a), read_functions(path_b)
    for name in sorted(set(a) | set(b)):
        if part not in name:
            continue
        code_a = [text for _, text in a.get(name, [])]
        code_b = [text for _, text in b.get(name, [])]
        print('SAME' if code_a == code_b else 'DIFF', name, len(code_a), len(code_b))


def count(body, pattern):
    return sum(1 for _, text in body if re.search(pattern, text))


def loops(path, part):
    for name, body in read_functions(path).items():
        if part not in name:
            continue
        index = {address: i for i, (address, _) in enumerate(body)}
        for i, (address, text) in enumerate(body):
            match = BRANCH.search(text)
            if not match:
                continue
            target = int(match.group(1), 16)
            if target >= address or target not in index or i - index[target] < 128:
                continue
            loop = body[index[target]:i + 1]
            if count(loop, r'^HGMMA') == 0:
                continue
            print(f'{name}: loop {target:#x}-{address:#x}: {len(loop)} instructions, '
                  f'spills {count(loop, r"^(LDL|STL)")}, HGMMA {count(loop, r"^HGMMA")}, '
                  f'MUFU {count(loop, r"^MUFU")}, SHFL {count(loop, r"^SHFL")}')


def main(argv):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    if len(argv) >= 3 and argv[0] == 'compare':
        compare(*argv[1:4])
    elif len(argv) == 3 and argv[0] == 'loops':
        loops(argv[1], argv[2])
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main(sys.argv[1:])

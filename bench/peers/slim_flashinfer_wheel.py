#!/usr/bin/env python3
"""Repacks flashinfer-python's wheel without kernel sources the attention path never compiles.

The 0.7.2.post1 wheel is 62 MB; a device call carries 64 MiB in all. Kept: every Python file,
small non-Python files, and under flashinfer/data/ the headers and top-level csrc files the JIT
builds attention from (include/, spdlog/, cutlass/include, cutlass/tools/util/include,
cccl/{cub,libcudacxx,thrust}, csrc/*). Dropped: csrc subfolders (MoE, GEMM, Blackwell, ...),
cutlass examples/python/test, cccl python/docs, and non-Python files over 100 kB outside data/.
RECORD is rewritten to list only what is kept (same file name, so pip installs it as usual).

Usage: python3 slim_flashinfer_wheel.py WHEEL OUT_DIR
"""
import os
import re
import sys
import zipfile

KEEP_DATA = re.compile(r"^flashinfer/data/(include/|spdlog/|cutlass/include/|cutlass/tools/util/include/|"
                       r"cccl/(cub|libcudacxx|thrust)/|csrc/[^/]+$|[^/]+\.py$)")


def keep(info):
    name = info.filename
    if name.startswith("flashinfer/data/"):
        return bool(KEEP_DATA.match(name))
    if name.startswith("flashinfer/"):
        return name.endswith(".py") or info.file_size < 100_000
    return True


def main():
    src, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    dst = os.path.join(out_dir, os.path.basename(src))
    zin = zipfile.ZipFile(src)
    kept = [i for i in zin.infolist() if keep(i)]
    names = {i.filename for i in kept}
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        for info in kept:
            data = zin.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = [ln for ln in data.decode().splitlines()
                         if ln.split(",")[0] in names or ln.split(",")[0].endswith("RECORD")]
                data = ("\n".join(lines) + "\n").encode()
            zout.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    print(f"kept {len(kept)} of {len(zin.infolist())} entries; {dst}: {os.path.getsize(dst) / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compare the SASS of two moekit kernel caches (MOEKIT_CACHE_DIR folders).

A refactor that must not change what the kernels compute or how fast they run can be checked by
running the same benches or tests with two builds, each with its own cache folder, then:

    scripts/compare_sass.py CACHE_BEFORE CACHE_AFTER [--strict]

Cubins are paired by kernel entry name (the file name before the cache hash). The disassembly
(`cuobjdump -sass`) is compared after dropping addresses and encodings, the function name, and
(unless --strict) the constant-bank offsets of kernel parameters, which move when a parameter
struct is reorganised. Kernels whose entry name exists on one side only are paired by their
normalised SASS when possible. Exit status 0 when every kernel of BEFORE has an identical
counterpart in AFTER.
"""
import argparse
import hashlib
import pathlib
import re
import subprocess
import sys

PARAM = re.compile(r"c\[0x0\]\[0x[0-9a-f]+\]")
ADDR = re.compile(r"/\*[0-9a-f]{4,}\*/")
ENCODING = re.compile(r"/\* 0x[0-9a-f]+ \*/")


def sass(cubin: pathlib.Path, strict: bool) -> str:
    text = subprocess.run(["cuobjdump", "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    out = []
    for line in text.splitlines():
        if "Function :" in line or ".text." in line:
            continue
        line = ENCODING.sub("", ADDR.sub("", line))
        if not strict:
            line = PARAM.sub("c[0x0][P]", line)
        line = line.strip()
        if line:
            out.append(line)
    return "\n".join(out)


def load(folder: str, strict: bool) -> dict:
    kernels = {}
    for cubin in sorted(pathlib.Path(folder).glob("*.cubin")):
        entry = cubin.name.rsplit("-", 1)[0]
        kernels[entry] = sass(cubin, strict)
    return kernels


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--strict", action="store_true", help="also compare kernel-parameter offsets")
    args = ap.parse_args()
    before, after = load(args.before, args.strict), load(args.after, args.strict)
    digest = lambda s: hashlib.sha1(s.encode()).hexdigest()
    after_by_sass = {digest(s): e for e, s in after.items()}
    same, renamed, differ, missing = [], [], [], []
    for entry, code in before.items():
        if entry in after:
            (same if after[entry] == code else differ).append(entry)
        elif digest(code) in after_by_sass:
            renamed.append(f"{entry} -> {after_by_sass[digest(code)]}")
        else:
            missing.append(entry)
    new_only = sorted(set(after) - set(before) - {r.split(" -> ")[1] for r in renamed})
    print(f"kernels before {len(before)}, after {len(after)}: identical {len(same)}, identical under another "
          f"name {len(renamed)}, different {len(differ)}, missing after {len(missing)}, new {len(new_only)}")
    for title, items in (("renamed", renamed), ("different", differ), ("missing after", missing), ("new", new_only)):
        for item in items:
            print(f"  {title}: {item}")
    return 0 if not differ and not missing else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Summarise a compare.sh result directory as markdown tables.

Reads every LABEL__rROUND.csv written by gs-bench, mpi-bench or gloo-bench
(columns: coll,nranks,size,count,type,redop,root,algo,inplace,time_us,
algbw_gbps,busbw_gbps,wrong) and prints, for each size, one table with each
library's median busbw and median time over the rounds and the ratio
gradsync/peer of the busbw medians (> 1 means gradsync is faster), then one
summary table (sizes x libraries). Standard library only.

usage: table.py RESULT_DIR [--ref gradsync]
"""
import csv
import os
import re
import statistics
import sys

FILE_RE = re.compile(r"^(?P<label>.+)__r(?P<round>\d+)\.csv$")
ORDER = ["gradsync", "gradsync-tcp", "mpi-default", "mpi-ob1-tcp"]


def load(directory):
    """Return {label: {size: [row, ...]}} and the set of rank counts seen."""
    data = {}
    nranks = set()
    for name in sorted(os.listdir(directory)):
        m = FILE_RE.match(name)
        if not m:
            continue
        with open(os.path.join(directory, name), newline="") as f:
            lines = [ln for ln in f if ln.strip() and not ln.startswith("#")]
        for row in csv.DictReader(lines):
            try:
                size = int(row["size"])
                busbw = float(row["busbw_gbps"])
                time_us = float(row["time_us"])
                wrong = int(row["wrong"])
            except (KeyError, ValueError):
                print(f"table.py: skipping malformed row in {name}: {row}", file=sys.stderr)
                continue
            nranks.add(row.get("nranks", "?"))
            data.setdefault(m.group("label"), {}).setdefault(size, []).append(
                {"busbw": busbw, "time_us": time_us, "wrong": wrong})
    return data, nranks


def label_key(label):
    return (ORDER.index(label) if label in ORDER else len(ORDER), label)


def fmt_size(size):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= div and size % div == 0:
            return f"{size // div}{unit}"
    return str(size)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    ref = "gradsync"
    if len(argv) >= 4 and argv[2] == "--ref":
        ref = argv[3]
    data, nranks = load(argv[1])
    if not data:
        print(f"table.py: no results in {argv[1]}", file=sys.stderr)
        return 1
    labels = sorted(data, key=label_key)
    sizes = sorted({s for per in data.values() for s in per})
    med = {(lab, s): statistics.median(r["busbw"] for r in data[lab][s])
           for lab in labels for s in data[lab]}
    bad = 0

    print(f"All-reduce f32 sum, in place, {'/'.join(sorted(nranks))} ranks; "
          f"busbw = algbw * 2(n-1)/n (nccl-tests); ratio = {ref} / peer busbw.\n")
    for s in sizes:
        print(f"### {fmt_size(s)} B ({s // 4} f32)\n")
        print("| library | busbw median (GB/s) | time median (us) | rounds | wrong | "
              f"{ref} / peer |")
        print("|---|---:|---:|---:|---:|---:|")
        for lab in labels:
            rows = data[lab].get(s)
            if not rows:
                continue
            t = statistics.median(r["time_us"] for r in rows)
            wrong = sum(max(r["wrong"], 0) for r in rows)
            bad += wrong
            ratio = "-"
            if lab != ref and (ref, s) in med and med[(lab, s)] > 0:
                ratio = f"{med[(ref, s)] / med[(lab, s)]:.2f}"
            print(f"| {lab} | {med[(lab, s)]:.3f} | {t:.1f} | {len(rows)} | {wrong} | {ratio} |")
        print()

    print("### Summary: busbw median (GB/s)\n")
    print("| size | " + " | ".join(labels) + " |")
    print("|---:|" + "---:|" * len(labels))
    for s in sizes:
        cells = [f"{med[(lab, s)]:.3f}" if (lab, s) in med else "n/a" for lab in labels]
        print(f"| {fmt_size(s)} | " + " | ".join(cells) + " |")
    if bad:
        print(f"\n**{bad} wrong elements reported; those numbers are not valid.**")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

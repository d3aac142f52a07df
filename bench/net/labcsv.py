# SPDX-License-Identifier: Apache-2.0
"""The result files of the lab benchmarks (bench_net.sh, bench_hier.sh).

Each run writes LABEL__rROUND.csv (gs-bench, mpi-bench or gloo-bench --csv)
into the results folder; the scripts' table code imports this module (they
put this folder on PYTHONPATH). Standard library only.
"""
import csv
import os
import re


def rows(outdir):
    """Yield (label, row) for every row of every LABEL__rROUND.csv in outdir.

    Lines that start with '#' and blank lines are skipped; row is a
    csv.DictReader dict keyed by the header line.
    """
    for name in sorted(os.listdir(outdir)):
        fm = re.fullmatch(r"(.+)__r(\d+)\.csv", name)
        if not fm:
            continue
        with open(os.path.join(outdir, name), newline="") as f:
            lines = [ln for ln in f if ln.strip() and not ln.startswith("#")]
        for row in csv.DictReader(lines):
            yield fm.group(1), row


def fsz(size):
    """A byte count as the benchmarks' -b/-e write it: 1M, 64K, 1G or plain bytes."""
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= div and size % div == 0:
            return f"{size // div}{unit}"
    return str(size)

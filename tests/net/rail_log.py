#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""rail_log.py: reads the logs of bench/net/rail_run (multi-rail TCP lab).

rail_run prints, per iteration, "ITER i ms T busbw_MBps B t_ms W" and then one
"RAIL peer p rail r if NAME up U bytes X resent Y rate_MBps R share S" line per
rail to each ring neighbour. A rank sends to one neighbour in a ring: the
peers whose bytes grew during the iteration are its "send peers", and the
shares below are theirs (averaged when there are several).

  rail_log.py iters LOG [--t0 MS]
      one line per iteration: index, start and end (ms, since --t0 when
      given), time, busbw, then "if=share@rate" per rail of the send peers
  rail_log.py summary LOG [--skip N] [--from-ms MS] [--first K]
      the iterations with index >= N that end after MS (the first K of them
      when given): "ITERS n", "BUSBW median M min A max B", then per rail
      "SHARE rail R if NAME median S min A max B" and
      "RAILS peer P nrails N up U resent Y" for every peer of the last iteration
  rail_log.py tsv LOG --label L [--t0 MS] [--header] [--rails N]
      the time series as TSV: label, t_s (end of the iteration, seconds since
      --t0), iter, ms, busbw_MBps, then share_rR, rate_rR_MBps, up_rR per rail
      (send peers; "nan" where a rail is missing)
  rail_log.py plot TSV PNG [--mark-s T[:TEXT]]... [--title TEXT]
      shares and busbw against time, one line per label and rail
      (matplotlib; exit 77 without it)
Standard library only, except plot.
"""
import argparse
import statistics
import sys


def parse(path):
    """The iterations of a rail_run log: a list of dicts."""
    its = []
    with open(path, errors="replace") as f:
        for ln in f:
            w = ln.split()
            if len(w) >= 8 and w[0] == "ITER" and w[2] == "ms" and w[6] == "t_ms":
                its.append({"iter": int(w[1]), "ms": float(w[3]), "busbw": float(w[5]),
                            "t_end": int(w[7]), "rails": []})
            elif len(w) >= 17 and w[0] == "RAIL" and w[3] == "rail" and w[15] == "share" and its:
                its[-1]["rails"].append({
                    "peer": int(w[2]), "rail": int(w[4]), "if": w[6], "up": int(w[8]),
                    "bytes": int(w[10]), "resent": int(w[12]), "rate": float(w[14]),
                    "share": float(w[16])})
    prev = {}
    for it in its:
        it["t_start"] = it["t_end"] - it["ms"]
        tot = {}
        for r in it["rails"]:
            tot[r["peer"]] = tot.get(r["peer"], 0) + r["bytes"]
        # A peer the data went to: heartbeats (48 bytes a second per rail) do not count.
        it["send_peers"] = sorted(p for p, b in tot.items() if b > prev.get(p, 0) + 65536)
        prev = tot
    return its


def send_rails(it):
    """{rail index: (ifname, mean share, mean rate, min up)} over the send peers."""
    acc = {}
    for r in it["rails"]:
        if r["peer"] not in it["send_peers"]:
            continue
        a = acc.setdefault(r["rail"], [r["if"], [], [], []])
        a[1].append(r["share"])
        a[2].append(r["rate"])
        a[3].append(r["up"])
    return {k: (v[0], statistics.fmean(v[1]), statistics.fmean(v[2]), min(v[3]))
            for k, v in sorted(acc.items())}


def cmd_iters(a):
    t0 = a.t0 if a.t0 is not None else 0
    for it in parse(a.log):
        rails = " ".join(f"{n}={s:.3f}@{r:.2f}{'' if up else '(down)'}"
                         for n, s, r, up in send_rails(it).values())
        print(f"iter {it['iter']:3d} start {it['t_start'] - t0:9.0f} end {it['t_end'] - t0:9.0f}"
              f" ms {it['ms']:9.1f} busbw {it['busbw']:8.3f} MB/s {rails}")
    return 0


def stats_line(tag, xs):
    return (f"{tag} median {statistics.median(xs):.4f} min {min(xs):.4f} max {max(xs):.4f} "
            f"n {len(xs)}")


def cmd_summary(a):
    its = [it for it in parse(a.log) if it["iter"] >= a.skip
           and (a.from_ms is None or it["t_end"] > a.from_ms)]
    if a.first is not None:
        its = its[:a.first]
    print(f"ITERS {len(its)}")
    if not its:
        return 1
    print(stats_line("BUSBW", [it["busbw"] for it in its]))
    shares = {}
    for it in its:
        for k, (name, s, _, _) in send_rails(it).items():
            shares.setdefault((k, name), []).append(s)
    for (k, name), xs in sorted(shares.items()):
        print(stats_line(f"SHARE rail {k} if {name}", xs))
    last = its[-1]
    peers = {}
    for r in last["rails"]:
        p = peers.setdefault(r["peer"], [0, 0, 0])
        p[0] += 1
        p[1] += r["up"]
        p[2] += r["resent"]
    for p, (n, up, resent) in sorted(peers.items()):
        print(f"RAILS peer {p} nrails {n} up {up} resent {resent}")
    return 0


def cmd_tsv(a):
    t0 = a.t0
    its = parse(a.log)
    if t0 is None:
        t0 = its[0]["t_start"] if its else 0
    n = a.rails
    if a.header:
        cols = ["label", "t_s", "iter", "ms", "busbw_MBps"]
        for k in range(n):
            cols += [f"share_r{k}", f"rate_r{k}_MBps", f"up_r{k}"]
        print("\t".join(cols))
    for it in its:
        sr = send_rails(it)
        row = [a.label, f"{(it['t_end'] - t0) / 1e3:.3f}", str(it["iter"]), f"{it['ms']:.3f}",
               f"{it['busbw']:.3f}"]
        for k in range(n):
            if k in sr:
                _, s, r, up = sr[k]
                row += [f"{s:.4f}", f"{r:.3f}", str(up)]
            else:
                row += ["nan", "nan", "nan"]
        print("\t".join(row))
    return 0


def cmd_plot(a):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("rail_log: no matplotlib in this python; no plot", file=sys.stderr)
        return 77
    import csv
    with open(a.tsv, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows:
        print("rail_log: empty TSV", file=sys.stderr)
        return 1
    rails = sorted({int(c[len("share_r"):]) for c in rows[0] if c.startswith("share_r")})
    labels = list(dict.fromkeys(r["label"] for r in rows))
    fig, (ax_s, ax_b) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", ":", "-."]
    color_of = {lab: colors[i % len(colors)] for i, lab in enumerate(labels)}
    for lab in labels:
        rs = [r for r in rows if r["label"] == lab]
        ts = [float(r["t_s"]) for r in rs]
        for k in rails:
            ys = [float(r[f"share_r{k}"]) for r in rs]
            ax_s.plot(ts, ys, marker="o", ms=3, color=color_of[lab], ls=styles[k % len(styles)],
                      label=f"{lab} rail {k}")
        ax_b.plot(ts, [float(r["busbw_MBps"]) for r in rs], marker="o", ms=3,
                  color=color_of[lab], label=lab)
    for i, m in enumerate(a.mark_s or []):
        t, _, text = m.partition(":")
        color = color_of.get(text, "grey")
        for ax in (ax_s, ax_b):
            ax.axvline(float(t), color=color, ls=":", lw=1)
        ax_b.annotate(f"tc change ({text})" if text else "tc change", (float(t), 0),
                      xytext=(4, 4 + 12 * i), textcoords="offset points", fontsize=8, color=color)
    ax_s.set_ylabel("share of the striped message")
    ax_s.set_ylim(-0.02, 1.02)
    ax_s.legend(fontsize=8)
    ax_b.set_ylabel("all-reduce busbw (MB/s)")
    ax_b.set_xlabel("seconds")
    ax_b.set_ylim(bottom=0)
    ax_b.legend(fontsize=8)
    if a.title:
        ax_s.set_title(a.title)
    fig.tight_layout()
    fig.savefig(a.png, dpi=100)
    print(f"plot: {a.png}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("iters")
    s.add_argument("log")
    s.add_argument("--t0", type=int)
    s = sub.add_parser("summary")
    s.add_argument("log")
    s.add_argument("--skip", type=int, default=0)
    s.add_argument("--from-ms", type=int)
    s.add_argument("--first", type=int)
    s = sub.add_parser("tsv")
    s.add_argument("log")
    s.add_argument("--label", required=True)
    s.add_argument("--t0", type=int)
    s.add_argument("--header", action="store_true")
    s.add_argument("--rails", type=int, default=2)
    s = sub.add_parser("plot")
    s.add_argument("tsv")
    s.add_argument("png")
    s.add_argument("--mark-s", action="append")
    s.add_argument("--title")
    a = p.parse_args()
    return {"iters": cmd_iters, "summary": cmd_summary, "tsv": cmd_tsv, "plot": cmd_plot}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# train_modes.sh: examples/train with every --sync mode across the shaped
# multi-host lab, with and without a straggler, for docs/async.md
# ("Training with each mode"). tests/net/netlab.sh builds H hosts (network
# namespaces on a bridge, every link shaped with tc tbf at RATE on both
# veth ends); one rank per host (lib_lab.sh starts each in its namespace)
# trains the same synthetic problem with each mode of --modes, once as is
# and once with the last rank sleeping SLOW_MS per step (--slow-rank H-1
# --slow-ms SLOW_MS). Runs are interleaved (mode by mode, plain then
# straggler) over ROUNDS rounds.
#
# From rank 0's log of every run (OUTDIR/MODE__slowMS__rROUND.log) it
# collects the epoch lines (seconds since training started, held-out loss,
# accuracy) and the end ("done": every rank finished; "final": loss and
# accuracy of the final parameters) into OUTDIR/epochs.csv, and prints two
# Markdown tables: a summary per mode and straggler setting (median over
# rounds), with the time at which rank 0 first saw an accuracy of at least
# ps-bsp's final accuracy (same setting) minus TOL points; and every epoch
# of the last round. With ps-ssp and ps-asp the epoch lines are rank 0's
# own view, evaluated on the parameters it last pulled while the other
# ranks go on (see examples/train/train.c). With python3 and matplotlib it
# also draws OUTDIR/train_modes.png (accuracy and loss against time);
# without matplotlib it says so and draws nothing. --report prints the
# tables again from a former run's OUTDIR, without the lab (no root).
# Needs root and iproute2 (exit 77 otherwise) and a build with
# examples/train.
#
# usage: train_modes.sh BUILD_DIR [--hosts H] [--rate 1gbit] [--burst 256kb]
#                       [--modes allreduce,bucket,ps-bsp,ps-ssp=2,ps-asp]
#                       [--slow-ms 10] [--rounds 2] [--tol 0.5] [--timeout S]
#                       [--out DIR] [-- TRAIN_ARGS...]
#        train_modes.sh --report OUTDIR [--tol 0.5]
# TRAIN_ARGS replace the default problem: --samples 60000 --features 128
# --hidden 128 --classes 10 --held-out 0.05 --epochs 8 --lr 0.01 (about
# 2 minutes a round on 2 cores).
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source-path=SCRIPTDIR/../../tests/net source=../../tests/net/lib_script.sh
. "$ROOT/tests/net/lib_script.sh"
NH=4
RATE=1gbit
BURST=256kb
MODES=allreduce,bucket,ps-bsp,ps-ssp=2,ps-asp
SLOW_MS=10
ROUNDS=2
TOL=0.5
LAB_TIMEOUT=300
OUTDIR=
TRAIN_ARGS=(--samples 60000 --features 128 --hidden 128 --classes 10 --held-out 0.05 --epochs 8
    --lr 0.01)

# report DIR: the tables (and the plot) from the run logs in DIR and the
# settings its run.txt records.
report() {
    python3 - "$1" "$TOL" <<'EOF'
import csv, glob, os, re, statistics, sys

outdir, tol = sys.argv[1], float(sys.argv[2])
try:
    with open(os.path.join(outdir, "run.txt")) as f:
        cfg = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
except OSError:
    sys.exit(f"train_modes: no run.txt in {outdir}")
nh, rate, slow_rank, slow_ms = cfg["hosts"], cfg["rate"], cfg["slow_rank"], cfg["slow_ms"]
ep_re = re.compile(r"^epoch\s+(\d+)/(\d+)\s+train loss (\S+)\s+held-out loss (\S+)\s+acc\s+(\S+)%"
                   r".*elapsed (\S+) s$")
runs = {}  # (mode, slow, round) -> dict
for path in sorted(glob.glob(os.path.join(outdir, "*__slow*__r*.log"))):
    mode, slow, rnd = os.path.basename(path)[:-4].split("__")
    run = {"epochs": [], "done": None, "final": None}
    with open(path) as f:
        for line in f:
            line = line.strip()
            m = ep_re.match(line)
            if m:
                run["epochs"].append((int(m.group(1)), float(m.group(6)), float(m.group(4)),
                                      float(m.group(5))))
            elif line.startswith("done: "):
                run["done"] = float(line.split()[1])
            elif line.startswith("final: "):
                w = line.split()
                run["final"] = (float(w[2]), float(w[4]))
    if run["final"] is not None and run["done"] is not None:
        runs[(mode.replace("ps-ssp", "ps-ssp="), int(slow[4:]), int(rnd[1:]))] = run
if not runs:
    sys.exit("train_modes: no results")

with open(os.path.join(outdir, "epochs.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["sync", "slow_ms", "round", "epoch", "time_s", "loss", "acc"])
    for (mode, slow, rnd), run in sorted(runs.items()):
        for e, t, loss, acc in run["epochs"]:
            w.writerow([mode, slow, rnd, e, f"{t:.3f}", f"{loss:.4f}", f"{acc:.2f}"])
        w.writerow([mode, slow, rnd, "final", f"{run['done']:.3f}", f"{run['final'][0]:.4f}",
                    f"{run['final'][1]:.2f}"])



def mode_key(m):
    order = ["allreduce", "bucket", "ps-bsp", "ps-ssp", "ps-asp"]
    base, _, n = m.partition("=")
    return (order.index(base) if base in order else len(order), int(n or 0), m)


modes = sorted({k[0] for k in runs}, key=mode_key)
slows = sorted({k[1] for k in runs})
rounds = sorted({k[2] for k in runs})
med = statistics.median


def first_reach(run, target):
    pts = [(t, acc) for _, t, _, acc in run["epochs"]] + [(run["done"], run["final"][1])]
    for t, acc in pts:
        if acc >= target:
            return t
    return None


print(f"\nexamples/train {cfg['train']} across {nh} lab hosts (1 rank each), links at {rate};"
      f" straggler: rank {slow_rank} sleeps {slow_ms} ms per step; median over {len(rounds)}"
      " round(s)\n")
print("| sync | straggler | rank 0's last epoch: time (s) | its acc % | every rank done (s) | "
      f"final loss | final acc % | acc >= ps-bsp's final − {tol:g} at (s) |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for slow in slows:
    bsp = [runs[k]["final"][1] for k in runs if k[0] == "ps-bsp" and k[1] == slow]
    target = med(bsp) - tol if bsp else None
    for mode in modes:
        rs = [runs[k] for k in sorted(runs) if k[0] == mode and k[1] == slow]
        if not rs:
            continue
        reach = [first_reach(r, target) for r in rs] if target is not None else []
        reach_s = "-" if not reach else (
            "never" if None in reach else f"{med(reach):.1f}")
        print(f"| {mode} | {'rank ' + slow_rank + ' +' + str(slow) + ' ms' if slow else 'none'} | "
              f"{med(r['epochs'][-1][1] for r in rs):.1f} | "
              f"{med(r['epochs'][-1][3] for r in rs):.2f} | {med(r['done'] for r in rs):.1f} | "
              f"{med(r['final'][0] for r in rs):.4f} | {med(r['final'][1] for r in rs):.2f} | "
              f"{reach_s} |")

last = rounds[-1]
nep = max(len(r["epochs"]) for r in runs.values())
print(f"\nevery epoch of round {last} as rank 0 printed it: time since the start (s) / held-out "
      "loss / accuracy %; 'final' evaluates the servers' final parameters once every rank is done\n")
print("| sync | straggler | " + " | ".join(f"epoch {e}" for e in range(1, nep + 1)) + " | final |")
print("|---|---|" + "---:|" * (nep + 1))
for slow in slows:
    for mode in modes:
        run = runs.get((mode, slow, last))
        if run is None:
            continue
        cells = [f"{t:.1f} / {loss:.3f} / {acc:.1f}" for _, t, loss, acc in run["epochs"]]
        cells += ["-"] * (nep - len(cells))
        cells.append(f"{run['done']:.1f} / {run['final'][0]:.3f} / {run['final'][1]:.1f}")
        print(f"| {mode} | {'+' + str(slow) + ' ms' if slow else 'none'} | " + " | ".join(cells)
              + " |")

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("\nno plot: python3 has no matplotlib here (the tables above carry the same numbers)")
    sys.exit(0)
fig, axes = plt.subplots(2, len(slows), figsize=(6 * len(slows), 8), squeeze=False)
for j, slow in enumerate(slows):
    for mode in modes:
        run = runs.get((mode, slow, last))
        if run is None:
            continue
        ts = [0.0] + [t for _, t, _, _ in run["epochs"]]
        axes[0][j].plot(ts[1:], [a for *_, a in run["epochs"]], marker="o", label=mode)
        axes[1][j].plot(ts[1:], [l for _, _, l, _ in run["epochs"]], marker="o", label=mode)
    title = f"rank {slow_rank} +{slow} ms/step" if slow else "no straggler"
    axes[0][j].set_title(title)
    axes[0][j].set_ylabel("held-out accuracy %")
    axes[1][j].set_ylabel("held-out loss")
    axes[1][j].set_xlabel("seconds since the start")
    axes[0][j].legend()
fig.tight_layout()
png = os.path.join(outdir, "train_modes.png")
fig.savefig(png, dpi=100)
print(f"\nplot: {png}")
EOF
}

if [ "${1:-}" = --report ]; then
    [ $# -ge 2 ] || lab_header_usage
    OUTDIR=$2
    shift 2
    while [ $# -gt 0 ]; do
        case "$1" in
        --tol) TOL=$2; shift 2 ;;
        *) lab_unknown train_modes "$1" ;;
        esac
    done
    report "$OUTDIR"
    exit
fi
BUILD=$(lab_build_dir train_modes "$@") || exit 2
shift
while [ $# -gt 0 ]; do
    case "$1" in
    --burst) BURST=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --slow-ms) SLOW_MS=$2; shift 2 ;;
    --tol) TOL=$2; shift 2 ;;
    --) shift; TRAIN_ARGS=("$@"); break ;;
    *)
        lab_opt "--hosts --rate --rounds --timeout --out" "$@" || lab_unknown train_modes "$1"
        shift 2
        ;;
    esac
done
lab_whole "$NH" "$SLOW_MS" "$ROUNDS" "$LAB_TIMEOUT" ||
    { echo "train_modes: '$LAB_NAN' is not a number" >&2; exit 2; }
[ "$NH" -ge 2 ] || { echo "train_modes: needs 2 hosts or more" >&2; exit 2; }
TRAIN=$BUILD/examples/train/train
[ -x "$TRAIN" ] || { echo "train_modes: $TRAIN missing; build first" >&2; exit 2; }
IFS=, read -r -a modes <<< "$MODES"
for m in "${modes[@]}"; do
    case "$m" in
    allreduce | bucket | ps-bsp | ps-asp | ps-ssp=[0-9]*) ;;
    *) echo "train_modes: unknown mode '$m'" >&2; exit 2 ;;
    esac
done
SLOW_RANK=$((NH - 1))

# shellcheck source-path=SCRIPTDIR/../../tests/net source=../../tests/net/lib_lab.sh
. "$ROOT/tests/net/lib_lab.sh"
if [ -z "$OUTDIR" ]; then
    OUTDIR=$LAB_TMP/results
    KEEP=1 # the results folder lives in the lab's scratch folder
fi
mkdir -p "$OUTDIR"
printf 'hosts=%s\nrate=%s\nslow_rank=%s\nslow_ms=%s\ntrain=%s\n' "$NH" "$RATE" "$SLOW_RANK" \
    "$SLOW_MS" "${TRAIN_ARGS[*]}" >"$OUTDIR/run.txt"
LAB_ENV=("GS_TIMEOUT_MS=${GS_TIMEOUT_MS:-60000}")

lab_up "$NH" --rate "$RATE" --burst "$BURST"
echo "train_modes: $NH hosts at $RATE (tbf burst $BURST), 1 rank per host, modes $MODES," \
    "straggler rank $SLOW_RANK +$SLOW_MS ms/step, $ROUNDS round(s), results in $OUTDIR" >&2
echo "train_modes: train ${TRAIN_ARGS[*]}" >&2
FAILED=0
for ((r = 1; r <= ROUNDS; r++)); do
    for m in "${modes[@]}"; do
        for slow in 0 "$SLOW_MS"; do
            label=${m/=/}__slow${slow}__r$r
            extra=()
            [ "$slow" -gt 0 ] && extra=(--slow-rank "$SLOW_RANK" --slow-ms "$slow")
            t0=$SECONDS
            lab_launch "$NH" 1 "$TRAIN" "${TRAIN_ARGS[@]}" --sync "$m" "${extra[@]}"
            cp "$LAB_TMP/rank.0.log" "$OUTDIR/$label.log"
            if [ "$LAB_RC" -ne 0 ]; then
                echo "train_modes: $label failed (ranks exited ${RCS[*]})" >&2
                lab_dump 5 >&2
                mv -f "$OUTDIR/$label.log" "$OUTDIR/$label.log.failed"
                FAILED=1
            else
                echo "round $r $m slow=${slow}ms: $((SECONDS - t0)) s," \
                    "$(grep '^final:' "$OUTDIR/$label.log")" >&2
            fi
        done
    done
done

report "$OUTDIR"
PY_RC=$?
[ "$FAILED" -eq 0 ] && [ "$PY_RC" -eq 0 ]

#!/usr/bin/env python3
"""mfu_table.py — the MFU table of a GPU window (step 7): stepscope-train beside plain PyTorch
on the same GPT-2 shapes, each against the datasheet peak AND against the bf16 GEMM ceiling
measured in the same call (gemm_ceiling.py), since an H200 reaches about 80 % of its
datasheet peak in the best matrix multiply.

    mfu_table.py --datasheet-peak "DEVICE NAME"
        prints the device's dense bf16 datasheet peak in TFLOP/s (the Hopper rows of
        trainer/cuda/peak_flops.c; 989 when the name is unknown, said on stderr)
    mfu_table.py DIR --peak TFLOPS [--expect MODEL,MODEL]
        reads DIR/<model>.stepscope.jsonl (stepscope-train --log, run with --peak-tflops
        TFLOPS), DIR/<model>.torch-eager.json (trainer_torch_gpt2.py --json) and
        DIR/gemm.json (gemm_ceiling.py --json); prints a Markdown table (median step time,
        tokens/s, MFU of the datasheet peak, MFU of the measured ceiling) and a last line
        "headline: ...". Exits 1 when the ceiling or a run of an --expect model is missing
        (its run failed: the table says which), else 0.
"""
import glob
import json
import os
import sys

# Dense bf16 tensor-core peaks (NVIDIA datasheets), most specific first, like the trainer's.
HOPPER_PEAKS = [("H200", 989.0), ("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.0)]


def datasheet_peak(name):
    for pattern, tflops in HOPPER_PEAKS:
        if pattern.lower() in (name or "").lower():
            return tflops
    sys.stderr.write("mfu_table: no datasheet peak for '%s': 989 TFLOP/s (H100/H200 SXM) assumed\n" % name)
    return 989.0


def trainer_row(path):
    recs = [json.loads(l) for l in open(path) if l.strip()]
    recs = recs[3:] or recs  # the first steps warm up
    if not recs:
        return None
    mid = len(recs) // 2
    pick = lambda k: sorted(r[k] for r in recs)[mid]
    return pick("step_ms"), pick("tokens_per_s"), pick("mfu")


def torch_row(path):
    r = json.load(open(path))
    return r["median_step_ms"], r["tokens_per_s"], r["mfu"]


def table(d, peak, expect):
    ceiling = None
    gemm = os.path.join(d, "gemm.json")
    if os.path.exists(gemm):
        ceiling = json.load(open(gemm)).get("tflops")
    models = sorted({os.path.basename(f).split(".")[0] for f in
                     glob.glob(os.path.join(d, "*.stepscope.jsonl")) + glob.glob(os.path.join(d, "*.torch-eager.json"))}
                    | set(expect))
    print("# MFU, bf16, seq 1024 (medians after the warm-up steps)\n")
    print("datasheet peak %g TFLOP/s; measured bf16 GEMM ceiling %s\n"
          % (peak, "%.0f TFLOP/s" % ceiling if ceiling else "MISSING (gemm_ceiling.py failed)"))
    print("| model | implementation | step ms | tokens/s | MFU of datasheet | MFU of measured ceiling |")
    print("|---|---|---|---|---|---|")
    missing = [] if ceiling else ["gemm ceiling"]
    got = {}
    for m in models:
        for impl, f, reader in (("stepscope-train", "%s.stepscope.jsonl" % m, trainer_row),
                                ("pytorch eager", "%s.torch-eager.json" % m, torch_row)):
            path = os.path.join(d, f)
            row = None
            try:
                row = reader(path) if os.path.exists(path) else None
            except (OSError, ValueError, KeyError):
                row = None
            if row is None:
                print("| %s | %s | - | - | MISSING (run failed) | - |" % (m, impl))
                if m in expect:
                    missing.append("%s %s" % (m, impl))
                continue
            ms, tps, mfu = row
            of_ceiling = mfu * peak / ceiling if ceiling else None
            got[(m, impl)] = (mfu, of_ceiling)
            print("| %s | %s | %.1f | %.0f | %.1f %% | %s |" % (m, impl, ms, tps, 100 * mfu,
                                                             "%.1f %%" % (100 * of_ceiling) if of_ceiling else "-"))
    head = []
    for m in models:
        ours, theirs = got.get((m, "stepscope-train")), got.get((m, "pytorch eager"))
        if ours:
            head.append("%s %.1f%% (%s of ceiling)%s" % (
                m.replace("gpt2-", ""), 100 * ours[0], "%.1f%%" % (100 * ours[1]) if ours[1] else "-",
                ", torch %.1f%%" % (100 * theirs[0]) if theirs else ""))
    print("\nheadline: MFU %s; ceiling %s TFLOP/s%s" % ("; ".join(head) or "none measured",
                                                       "%.0f" % ceiling if ceiling else "?",
                                                       "; MISSING: " + ", ".join(missing) if missing else ""))
    return 1 if missing else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--datasheet-peak":
        print("%g" % datasheet_peak(argv[2]))
        return 0
    if len(argv) >= 4 and argv[2] == "--peak":
        expect = []
        if "--expect" in argv:
            expect = [m for m in argv[argv.index("--expect") + 1].split(",") if m]
        return table(argv[1], float(argv[3]), expect)
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

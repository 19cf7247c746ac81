#!/bin/bash
# plan_ranking.sh STEPSCOPE — how far `stepscope plan` ranks (analyzer/src/plan/plan_ranking.c,
# docs/plan.md "How far the ranking goes"), checked against an independent recomputation from
# the same run's --json layouts:
#   - the undecided group is every fitting layout within the band of the best (10 % by default,
#     --undecided-within PCT otherwise); per choice its open values are those of the group, its
#     ruled-out values those only fitting layouts outside it have; the least-memory member;
#   - the text says the same: the group's size, the decided choices, the open and ruled-out
#     values, the least-memory layout by its rank;
#   - a band smaller than the gap between the first two layouts: the best is decided, with that
#     gap; a single named layout and a job where nothing fits print no ranking;
#   - bad --undecided-within values are refused (exit 2).
set -u
stepscope=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-rank.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail=0
no() { echo "FAILED: $*"; fail=1; }

# a job whose best two layouts differ (gpt3-125m's tie: each of its layers' work is under
# Megatron's host floor, docs/plan.md "A layer's host floor")
job=(--model gpt3-350m --gpus 8 --global-batch 64)
check() { # check JSON TEXT BAND: the ranking recomputed from the layouts
  python3 - "$@" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1])); text = open(sys.argv[2]).read(); band = float(sys.argv[3])
L = d["layouts"]; k = d["ranking"]
fit = [l for l in L if l["fits"]]
best = fit[0]["tokens_per_s"]
group = [l for l in fit if l["tokens_per_s"] >= best * (1 - band)]
rest = [l for l in fit if l["tokens_per_s"] < best * (1 - band)]
def value(l, field):
    lay = l["layout"]
    if field == "schedule":
        if lay["pp"] == 1: return "none"
        return "interleaved v%d" % lay["virtual_stages"] if lay["schedule"] == "interleaved" else lay["schedule"]
    return lay[field]
ok = abs(k["band"] - band) < 1e-6 and k["undecided"] == len(group)
print("band %.3f: %d of %d fitting layouts within it (ranking says %d)" % (band, len(group), len(fit), k["undecided"]))
for field in ("dp", "tp", "sp", "pp", "cp", "ep", "zero", "schedule", "micro_batch", "recompute", "shard_group"):
    open_ = {value(l, field) for l in group}
    out = {value(l, field) for l in rest} - open_
    c = k["choices"][field]
    if set(c["open"]) != open_ or set(c["ruled_out"]) != out or not c["complete"]:
        print("  %s: open %s ruled out %s, ranking says %s" % (field, sorted(map(str, open_)), sorted(map(str, out)), c))
        ok = False
    if field == "micro_batch" and len(open_) > 1:  # the text lists the same values, sorted
        m = re.search(r"open \(they differ\):.*micro-batch ([0-9, ]+)", text)
        ok &= bool(m) and [int(x) for x in m.group(1).split(",")] == sorted(open_)
    if field == "tp" and len(open_) == 1 and len(group) > 1:
        ok &= ("decided (every one of them): tp %d" % next(iter(open_))) in text
least = min(range(len(group)), key=lambda i: (group[i]["memory_bytes"]["total"], i))
ok &= k["least_memory_index"] == least
if len(group) > 1:
    ok &= ("ranking: %d layouts (#1-#%d) are predicted within %.0f %%" % (len(group), len(group), 100 * band)) in text
    if least > 0:
        ok &= ("the least memory among them: #%d %s" % (least + 1, group[least]["layout"]["name"])) in text
    ok &= k["next_gap"] is None
else:
    gap = 1 - rest[0]["tokens_per_s"] / best if rest else None
    ok &= (k["next_gap"] is None) == (gap is None) and (gap is None or abs(k["next_gap"] - gap) < 1e-5)
    ok &= ("every other layout that fits is predicted at least %.1f %% slower" % (100 * gap)) in text and ": decided" in text
print("ranking matches the layouts" if ok else "ranking DIFFERS from the layouts")
sys.exit(0 if ok else 1)
PY
}

"$stepscope" plan "${job[@]}" --json "$dir/all.json" > "$dir/all.txt" 2>&1 || { cat "$dir/all.txt"; no "plan"; }
check "$dir/all.json" "$dir/all.txt" 0.10 || { cat "$dir/all.txt"; no "the default band"; }
"$stepscope" plan "${job[@]}" --undecided-within 25 --json "$dir/wide.json" > "$dir/wide.txt" 2>&1 ||
  no "plan --undecided-within 25"
check "$dir/wide.json" "$dir/wide.txt" 0.25 || { cat "$dir/wide.txt"; no "--undecided-within 25"; }

# a band below the gap between the first two layouts: the best is decided
half=$(python3 -c '
import json, sys
f = [l for l in json.load(open(sys.argv[1]))["layouts"] if l["fits"]]
print("%.6f" % (50 * (1 - f[1]["tokens_per_s"] / f[0]["tokens_per_s"])))' "$dir/all.json")
if python3 -c "import sys; sys.exit(0 if float('$half') >= 0.01 else 1)"; then
  "$stepscope" plan "${job[@]}" --undecided-within "$half" --json "$dir/one.json" > "$dir/one.txt" 2>&1 ||
    no "plan --undecided-within $half"
  check "$dir/one.json" "$dir/one.txt" "$(python3 -c "print($half / 100)")" ||
    { cat "$dir/one.txt"; no "a decided best"; }
else
  no "the first two layouts tie exactly ($half %): pick another job for the decided case"
fi

# one named layout, and a job where nothing fits: no ranking line
"$stepscope" plan "${job[@]}" --dp 8 --tp 1 --pp 1 --cp 1 --zero 1 --recompute none \
  --microbatches 2 > "$dir/single.txt" 2>&1 || no "one layout"
grep -q '^ranking:' "$dir/single.txt" && no "a single layout printed a ranking"
"$stepscope" plan "${job[@]}" --device-memory-gib 0.01 --json "$dir/none.json" > "$dir/none.txt" 2>&1 ||
  no "plan where nothing fits"
grep -q '^ranking:' "$dir/none.txt" && no "a job where nothing fits printed a ranking"
python3 -c 'import json,sys; k=json.load(open(sys.argv[1]))["ranking"]; sys.exit(0 if k["undecided"] == 0 and k["least_memory_index"] is None else 1)' \
  "$dir/none.json" || no "nothing fits: ranking.undecided is not 0"

# bad values
for bad in 100 0 -5 abc; do
  "$stepscope" plan "${job[@]}" --undecided-within "$bad" > "$dir/bad.txt" 2>&1
  rc=$?
  [ $rc -eq 2 ] && grep -q -- '--undecided-within' "$dir/bad.txt" ||
    { cat "$dir/bad.txt"; no "--undecided-within $bad: exit $rc"; }
done

[ $fail -eq 0 ] && echo "plan ranking: OK"
exit $fail

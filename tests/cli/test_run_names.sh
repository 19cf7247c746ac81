#!/bin/bash
# One run, one discovery (issue 15 §5): every command takes the same names.
#
# usage: test_run_names.sh STEPSCOPE MAKE_KINETO SAMPLE_RUN CASE
#   names       a 2-rank PyTorch-profiler run under every name form users have
#               (rank-N.json.gz, rank_N.json, tensorboard_trace_handler's
#               HOST_PID.TIME.pt.trace.json.gz, worker*.json, a Kineto trace.json.gz,
#               any name with Kineto content) through analyze, info and
#               view --html; and single files through analyze and info
#   detection   a Kineto trace named trace.json[.gz] is read as a rank, not taken
#               for stepscope's export; stepscope's export is told by its marker
#               under any name; an export or report given as a trace is refused
#               with what it is
#   view_html   `view RUN --html` on the committed sample (its export is
#               trace.json.gz): exit 0, one line on stdout naming the report's step
#               time, nothing on stderr, the export inflated into the page
set -u
stepscope=$1 make_kineto=$2 sample=$3 case=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, command...
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}

python3 "$make_kineto" "$tmp/gz" --ranks 2 --steps 3 --gzip >/dev/null 2>&1 || { echo "make_kineto failed"; exit 1; }
python3 "$make_kineto" "$tmp/plain" --ranks 2 --steps 3 >/dev/null 2>&1 || { echo "make_kineto failed"; exit 1; }

# one run directory per name form: two files, rank 0 and rank 1 (ranks come from
# distributedInfo, not from the names)
make_form() { # form name0 name1 (gz|plain)
  mkdir -p "$tmp/form-$1"
  local ext=json; [ "$4" = gz ] && ext=json.gz
  cp "$tmp/$4/rank-0.$ext" "$tmp/form-$1/$2"
  cp "$tmp/$4/rank-1.$ext" "$tmp/form-$1/$3"
}

case $case in
names)
  make_form dash rank-0.json.gz rank-1.json.gz gz
  make_form underscore rank_0.json rank_1.json plain
  make_form tensorboard node1_4242.1700000000001.pt.trace.json.gz node2_4243.1700000000002.pt.trace.json.gz gz
  make_form worker worker0.json worker1.json plain
  make_form tracejson trace.json.gz other.json.gz gz
  make_form anyname train_step_profile_a.json train_step_profile_b.json plain
  for form in dash underscore tensorboard worker tracejson anyname; do
    d="$tmp/form-$form"
    out=$("$stepscope" analyze "$d" 2>&1); rc=$?
    check "analyze $form: exit 0 (rc $rc)" test $rc -eq 0
    check "analyze $form: both ranks loaded" grep -q "ranks loaded: 2" <<<"$out"
    out=$("$stepscope" info "$d" 2>&1); rc=$?
    check "info $form: exit 0 (rc $rc)" test $rc -eq 0
    check "info $form: both files are ranks" grep -q "2 trace files, world size 2" <<<"$out"
    "$stepscope" view "$d" --html "$tmp/$form.html" >"$tmp/out" 2>"$tmp/err"; rc=$?
    check "view --html $form: exit 0 (rc $rc: $(head -c 300 "$tmp/err"))" test $rc -eq 0
    check "view --html $form: one line on stdout" test "$(wc -l <"$tmp/out")" -eq 1
    check "view --html $form: the line names 2 ranks and generated files" \
      grep -q "2 ranks, step time .*export trace.json (generated), report report.json (generated)" "$tmp/out"
    check "view --html $form: nothing on stderr" test ! -s "$tmp/err"
    check "view --html $form: the page holds both ranks' export" \
      python3 -c 'import sys; p = open(sys.argv[1]).read(); sys.exit(0 if p.count("process_name") >= 2 and "stepscope export" in p else 1)' "$tmp/$form.html"
    # the same run through the JSON report: the ranks of the two files
    "$stepscope" analyze "$d" --json "$tmp/$form.report.json" --quiet
    check "analyze --json $form: ranks 0 and 1" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if [x["rank"] for x in r["ranks"]] == [0, 1] else 1)' "$tmp/$form.report.json"
  done
  # single files of each form
  for f in form-dash/rank-1.json.gz form-underscore/rank_1.json form-tensorboard/node2_4243.1700000000002.pt.trace.json.gz \
           form-worker/worker1.json form-tracejson/trace.json.gz form-anyname/train_step_profile_b.json; do
    out=$("$stepscope" analyze "$tmp/$f" 2>&1); rc=$?
    check "analyze one file $f: exit 0 and one rank (rc $rc)" grep -q "ranks loaded: 1" <<<"$out"
    out=$("$stepscope" info "$tmp/$f" 2>&1); rc=$?
    check "info one file $f: exit 0 (rc $rc)" test $rc -eq 0
  done
  # view of one rank file, and a comparison of two runs named differently
  "$stepscope" view "$tmp/form-tensorboard/node2_4243.1700000000002.pt.trace.json.gz" --html "$tmp/one.html" >"$tmp/out" 2>"$tmp/err"; rc=$?
  check "view --html of one tensorboard file: one rank (rc $rc)" grep -q ": 1 rank, step time" "$tmp/out"
  "$stepscope" view "$tmp/form-worker" --compare "$tmp/form-tracejson" --html "$tmp/cmp.html" >"$tmp/out" 2>"$tmp/err"; rc=$?
  check "view --compare worker* with a Kineto trace.json.gz run: one line (rc $rc)" test $rc -eq 0 -a "$(wc -l <"$tmp/out")" -eq 1
  check "and the diff of the two is in the page" grep -q 'id="data-b-diff"' "$tmp/cmp.html"
  # export, diff and plan --from take the same names (they load through the same discovery)
  "$stepscope" export "$tmp/form-tensorboard" -o "$tmp/tb-export.json" >/dev/null 2>&1
  check "export of a tensorboard_trace_handler run" grep -q '"exporter":"stepscope export' "$tmp/tb-export.json"
  out=$("$stepscope" diff "$tmp/form-worker" "$tmp/form-anyname" 2>&1); rc=$?
  check "diff worker* vs any-name runs (rc $rc)" test $rc -eq 0
  ;;
detection)
  # a Kineto trace named trace.json.gz and trace.json: ranks
  mkdir "$tmp/k1" "$tmp/k2"
  cp "$tmp/gz/rank-0.json.gz" "$tmp/k1/trace.json.gz"
  cp "$tmp/plain/rank-1.json" "$tmp/k2/trace.json"
  for d in k1 k2; do
    out=$("$stepscope" analyze "$tmp/$d" 2>&1); rc=$?
    check "$d: analyze reads the Kineto trace.json[.gz] as a rank (rc $rc)" grep -q "ranks loaded: 1" <<<"$out"
    out=$("$stepscope" info "$tmp/$d" 2>&1)
    check "$d: info lists it as a rank, not as an export" bash -c '! grep -q "not a rank" <<<"$1" && grep -q "1 trace file" <<<"$1"' _ "$out"
  done
  # a stepscope run holding its export under an unusual name and its report
  cp -r "$sample" "$tmp/s"
  rm -f "$tmp/s/trace.json.gz"
  "$stepscope" export "$tmp/s" -o "$tmp/s/exported-by-me.json.gz" >/dev/null 2>&1
  "$stepscope" export "$tmp/s" -o "$tmp/s/plain-export.json" >/dev/null 2>&1
  out=$("$stepscope" info "$tmp/s" 2>&1); rc=$?
  check "info on the stepscope run: exit 0 (rc $rc)" test $rc -eq 0
  check "info: 4 rank files" grep -q "4 trace files" <<<"$out"
  check "info: the gzip export is told by its content" grep -q "not a rank: exported-by-me.json.gz: stepscope export (begins as .stepscope export. writes" <<<"$out"
  check "info: the plain export by its marker" grep -q "not a rank: plain-export.json: stepscope export (has the marker of .stepscope export.)" <<<"$out"
  check "info: the report is told by its generator" grep -q "not a rank: report.json: stepscope report" <<<"$out"
  out=$("$stepscope" analyze "$tmp/s" 2>&1)
  check "analyze: the exports are not ranks" grep -q "ranks loaded: 4" <<<"$out"
  "$stepscope" info "$tmp/s" --json >"$tmp/info.json"
  check "info --json lists the other files with kind and reason" python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
kinds = {f["file"].rsplit("/", 1)[1]: f["kind"] for f in o["other_files"]}
sys.exit(0 if kinds.get("exported-by-me.json.gz") == "stepscope export" and kinds.get("report.json") == "stepscope report" and len(o["ranks"]) == 4 else 1)' "$tmp/info.json"
  "$stepscope" view "$tmp/s" --html "$tmp/s.html" >"$tmp/out" 2>"$tmp/err"; rc=$?
  check "view uses the export found by its marker (rc $rc)" grep -q "export exported-by-me.json.gz, report report.json" "$tmp/out"
  # an export or a report given where a trace is expected
  "$stepscope" analyze "$tmp/s/exported-by-me.json.gz" >/dev/null 2>"$tmp/err"; rc=$?
  check "analyze of an export: exit 1 (rc $rc)" test $rc -eq 1
  check "and says it is stepscope's export" grep -q "is a stepscope export .*not a trace" "$tmp/err"
  "$stepscope" info "$tmp/s/report.json" >/dev/null 2>"$tmp/err"; rc=$?
  check "info of a report: exit 1, says what it is (rc $rc)" grep -q "is a stepscope report" "$tmp/err"
  "$stepscope" dump "$tmp/k1/trace.json.gz" >/dev/null 2>"$tmp/err"; rc=$?
  check "dump of a Kineto file: exit 1, says what it is (rc $rc)" grep -q "is a Kineto trace" "$tmp/err"
  # a directory with nothing to read says what it found
  mkdir "$tmp/none"
  cp "$tmp/s/report.json" "$tmp/none/"
  "$stepscope" analyze "$tmp/none" >/dev/null 2>"$tmp/err"; rc=$?
  check "analyze of a directory without ranks: exit 1 naming what is there (rc $rc)" \
    grep -q "no rank files.*found report.json: stepscope report" "$tmp/err"
  ;;
view_html)
  "$stepscope" view "$sample" --html "$tmp/page.html" >"$tmp/out" 2>"$tmp/err"; rc=$?
  check "view --html on the sample: exit 0 (rc $rc: $(head -c 300 "$tmp/err"))" test $rc -eq 0
  check "one line on stdout" test "$(wc -l <"$tmp/out")" -eq 1
  check "nothing on stderr" test ! -s "$tmp/err"
  want=$(python3 -c 'import json, sys; print("%.3f ms" % (json.load(open(sys.argv[1]))["run"]["step_time_ns"] / 1e6))' "$sample/report.json")
  check "the line gives the report's step time ($want) and the files used" \
    grep -q "4 ranks, step time $want; export trace.json.gz, report report.json" "$tmp/out"
  check "the page holds the inflated export (its marker) and the report" python3 -c '
import sys
p = open(sys.argv[1]).read()
t = p.split("id=\"data-a-trace\">", 1)[1].split("</script>", 1)[0]
r = p.split("id=\"data-a-report\">", 1)[1].split("</script>", 1)[0]
ok = t.startswith("{\"traceEvents\":[") and "\"exporter\":\"stepscope export" in t and "\"generator\":\"stepscope analyze" in r
sys.exit(0 if ok else 1)' "$tmp/page.html"
  ;;
*)
  echo "unknown case $case"; exit 2 ;;
esac
exit $fail

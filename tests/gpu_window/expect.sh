#!/bin/bash
# expect.sh — sourced by the gpu_window tests: expect RC COMMAND... runs COMMAND, and when its
# exit status is not RC prints the command and its output and marks the test failed
# ($fail); expect_output REGEX checks the last command's output. Each test ends with
# `exit $fail`.
fail=0
last_output=""
expect() {
  local want=$1 rc; shift
  last_output=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAILED: $* exited $rc, expected $want"; echo "$last_output" | tail -20; fail=1
  fi
}
expect_output() {
  if ! grep -Eq -- "$1" <<<"$last_output"; then
    echo "FAILED: no line matching '$1' in:"; echo "$last_output" | tail -20; fail=1
  fi
}

#!/usr/bin/env bash
# tools/run_tests.sh: builds everything and runs the whole test suite in stages, printing
# the time each stage took: build, unit, parity (against PyTorch / single-device), and
# multi-process. Tests are sorted into stages by Bazel tags: "parity", "multiprocess";
# "manual" targets (benchmarks, long runs) are not run here.
set -uo pipefail
cd "$(dirname "$0")/.."

failed_stages=()
passed=0
failed=0
declare -a timings

stage() {  # stage NAME bazel-args...
  local name="$1"; shift
  local t0=$(date +%s)
  echo "=== stage: $name ==="
  local log
  log=$(mktemp)
  bazel "$@" 2>&1 | tee "$log" | grep -vE '^(INFO: From|\[[0-9,]+ / [0-9,]+\])' 
  local rc=${PIPESTATUS[0]}
  local p f
  p=$(grep -cE '^//.* PASSED' "$log" || true)
  f=$(grep -cE '^//.* (FAILED|TIMEOUT|FLAKY|NO STATUS)' "$log" || true)
  # rc 4 = no tests matched the filter: not a failure of the stage.
  if [ "$rc" != 0 ] && [ "$rc" != 4 ]; then failed_stages+=("$name"); [ "$f" = 0 ] && f=1; fi
  passed=$((passed + p)); failed=$((failed + f))
  rm -f "$log"
  timings+=("$(printf '%-14s %5ds  (exit %s)' "$name" $(( $(date +%s) - t0 )) "$rc")")
}

stage build build //...
if [ "${#failed_stages[@]}" = 0 ]; then
  stage unit test --test_tag_filters=-parity,-multiprocess,-manual //...
  stage parity test --test_tag_filters=parity,-manual //...
  if [ -n "$(bazel query 'attr(tags, "\bmultiprocess\b", tests(//...))' 2>/dev/null)" ]; then
    stage multi-process test --test_tag_filters=multiprocess,-manual //...
  else
    echo "=== stage: multi-process === (no test is tagged multiprocess yet)"
    timings+=("$(printf '%-14s %5ds  (no tests)' multi-process 0)")
  fi
fi

echo "=== stage times ==="
printf '%s\n' "${timings[@]}"
echo "tests: $passed passed, $failed failed"
if [ "${#failed_stages[@]}" != 0 ]; then
  echo "failed stages: ${failed_stages[*]}"
  exit 1
fi

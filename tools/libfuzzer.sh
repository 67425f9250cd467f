# tools/libfuzzer.sh: what every run_*fuzz*.sh script shares (source it; run from the
# repository root). The fuzz targets are built outside Bazel with clang++
# -fsanitize=fuzzer,address,undefined (clang and libclang-rt-14-dev from tools/setup.sh) and
# linked against Debian's Abseil.
#
#   libfuzzer_build OUT_BINARY SRC...  compile and link one fuzz target (-DMXMACA_LIBFUZZER:
#                                      the target's own main is left out)
#   libfuzzer_run BINARY SECONDS MAX_LEN ARTIFACT_PREFIX CORPUS_DIR
#                                      run it for SECONDS on one core; crash inputs are
#                                      written as ARTIFACT_PREFIX<kind>-<hash> (10 s per
#                                      input, 4 GiB RSS at most)

LIBFUZZER_ABSL_LIBS=(-labsl_statusor -labsl_status -labsl_cord -labsl_cord_internal
  -labsl_cordz_functions -labsl_cordz_handle -labsl_cordz_info -labsl_str_format_internal
  -labsl_strings -labsl_strings_internal -labsl_strerror -labsl_int128 -labsl_throw_delegate
  -labsl_synchronization -labsl_graphcycles_internal -labsl_time -labsl_time_zone
  -labsl_hash -labsl_city -labsl_low_level_hash -labsl_raw_hash_set -labsl_stacktrace
  -labsl_symbolize -labsl_debugging_internal -labsl_demangle_internal -labsl_malloc_internal
  -labsl_spinlock_wait -labsl_raw_logging_internal -labsl_log_severity -labsl_base
  -labsl_bad_optional_access -labsl_bad_variant_access -labsl_exponential_biased)
LIBFUZZER_FLAGS=(-std=c++17 -O1 -g -fno-omit-frame-pointer -DMXMACA_LIBFUZZER
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I.)

libfuzzer_build() {
  local out="$1"
  shift
  clang++ "${LIBFUZZER_FLAGS[@]}" "$@" "${LIBFUZZER_ABSL_LIBS[@]}" -o "$out"
}

libfuzzer_run() {
  local binary="$1" seconds="$2" max_len="$3" prefix="$4" corpus="$5"
  "$binary" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$prefix" "$corpus"
}

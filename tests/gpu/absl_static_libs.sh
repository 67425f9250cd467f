#!/usr/bin/env bash
# tests/gpu/absl_static_libs.sh: prints the linker arguments that link Abseil STATICALLY
# (Debian's libabsl-dev 20220623 archives, /usr/lib/x86_64-linux-gnu/libabsl_*.a) into a
# program using absl::Status, absl::StatusOr, absl::StrCat, absl::StrFormat,
# absl::flat_hash_map and absl::Span — what layers/device/cuda_device_kernels.cc and
# kernel_args.cc need — for the GPU check binary, which must run on a machine without
# Abseil (tests/gpu/build_gpu_check.sh).
#
# The archives are pkg-config's --static closure of absl_status, absl_statusor,
# absl_strings, absl_str_format, absl_flat_hash_map and absl_span, given as full paths
# (so the linker cannot pick the .so next to them) inside --start-group/--end-group (so
# the order among them does not matter). Put the output AFTER the objects that use
# Abseil:
#   g++ -o prog main.o ... $(bash tests/gpu/absl_static_libs.sh) -L$CUDA/lib64 \
#       -lcudart_static -lcublasLt -ldl -lpthread -lrt -static-libstdc++ -static-libgcc
# Proven by linking CudaDeviceKernels (cuda_device_kernels.cc, kernel_args.cc) with the
# kernels/cuda objects and a main using all six facilities: `ldd` shows no libabsl and
# the binary runs (on a machine without a GPU it prints Create's "no GPU: ..." error).
#
# Usage: bash tests/gpu/absl_static_libs.sh            # prints the arguments
#        bash tests/gpu/absl_static_libs.sh --selftest # links a small host-only program
#                                                      # with them and checks ldd
set -euo pipefail
ABSL_LIBDIR="${ABSL_LIBDIR:-/usr/lib/x86_64-linux-gnu}"
# pkg-config --libs --static absl_status absl_statusor absl_strings absl_str_format
# absl_flat_hash_map absl_span (Abseil 20220623), in its order.
ABSL_LIBS="statusor status strerror str_format_internal cord cordz_info cord_internal
cordz_functions cordz_handle hash city bad_variant_access low_level_hash raw_hash_set
bad_optional_access hashtablez_sampler exponential_biased synchronization
graphcycles_internal stacktrace symbolize debugging_internal demangle_internal
malloc_internal time civil_time strings strings_internal base spinlock_wait int128
time_zone throw_delegate raw_logging_internal log_severity"

link_args() {
  local args="-Wl,--start-group" lib
  for lib in $ABSL_LIBS; do
    local a="$ABSL_LIBDIR/libabsl_$lib.a"
    if [[ ! -f "$a" ]]; then
      echo "absl_static_libs.sh: missing $a (install libabsl-dev)" >&2
      return 1
    fi
    args="$args $a"
  done
  echo "$args -Wl,--end-group -lpthread -lrt"
}

if [[ "${1:-}" != "--selftest" ]]; then
  link_args
  exit 0
fi

# --selftest: a host program exercising Status, StatusOr, StrCat, StrFormat,
# flat_hash_map and Span, linked with libstdc++/libgcc static; fails if it depends on
# any libabsl shared object or does not print the expected line.
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
cat > "$dir/main.cc" <<'CC'
#include <cstdio>
#include <string>
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
absl::StatusOr<int> Sum(absl::Span<const int> v) {
  if (v.empty()) return absl::InvalidArgumentError("empty");
  int s = 0;
  for (int x : v) s += x;
  return s;
}
int main() {
  absl::flat_hash_map<std::string, int> m;
  for (int i = 0; i < 100; ++i) m[absl::StrCat("k", i)] = i;
  const int v[] = {1, 2, 3};
  const absl::StatusOr<int> s = Sum(v);
  const absl::Status e = Sum({}).status();
  std::printf("%s\n", absl::StrFormat("selftest %d %d %s", m.size(), *s, e.ToString()).c_str());
  return 0;
}
CC
g++ -std=c++17 -O2 -c "$dir/main.cc" -o "$dir/main.o"
# shellcheck disable=SC2046
g++ -o "$dir/prog" "$dir/main.o" $(link_args) -static-libstdc++ -static-libgcc
if ldd "$dir/prog" | grep -q 'libabsl\|libstdc++'; then
  echo "FAIL: still dynamic:"; ldd "$dir/prog"; exit 1
fi
out="$("$dir/prog")"
[[ "$out" == "selftest 100 6 INVALID_ARGUMENT: empty" ]] || { echo "FAIL: printed '$out'"; exit 1; }
echo "OK: $out; dynamic libraries:"
ldd "$dir/prog" | sed 's/^/  /'

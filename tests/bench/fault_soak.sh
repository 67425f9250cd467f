#!/usr/bin/env bash
# tests/bench/fault_soak.sh: the fault soak (docs/MULTIPROCESS.md "Fault soak"), by hand:
#   bazel run //tests/bench:fault_soak -- [--minutes 60] [--seed S] [--work DIR]
# Runs tests/bench/fault_soak.py (the driver; its docstring says what it injects and
# checks) with this build's mxmaca. Root (or the right to mount a tmpfs) adds the full-disk
# fault. Not part of CI: it runs for an hour.
set -euo pipefail
exec /usr/bin/python3 tests/bench/fault_soak.py --mxmaca "$(realpath api/mxmaca)" "$@"

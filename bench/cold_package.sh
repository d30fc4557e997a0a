#!/usr/bin/env bash
# A cold `./pants package`: no pantsd, an empty Pants store and empty named caches (pex_root:
# wheels downloaded and zipped again), a fresh dist/ of the backend. Compare with
# bench/uv_same_pins.sh of the same pins (docs/benchmarks.md, "Cold package vs uv").
set -euo pipefail
backend="${1:-transformers}"
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rm -rf "dist/backends/${backend}/cpu" "dist/images/${backend}/cpu"
env -u PIP_CONFIG_FILE ./pants --no-pantsd "--local-store-dir=$work/store" "--named-caches-dir=$work/named" \
  package "backends/${backend}:cpu" >/dev/null 2>&1

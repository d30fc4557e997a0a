#!/usr/bin/env bash
# A cold `./pants package`: no pantsd, an empty Pants store and empty named caches (pex_root:
# wheels downloaded and zipped again), a fresh dist/ of the backend. Compare with
# bench/uv_same_pins.sh of the same pins (docs/benchmarks.md, "Cold package vs uv"). The second
# argument names the variant (default cpu; cpu-arm64: the cross build, docs/benchmarks.md "linux/arm64").
set -euo pipefail
backend="${1:-transformers}"
variant="${2:-cpu}"
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rm -rf "dist/backends/${backend}/${variant}" "dist/images/${backend}/${variant}" "dist/pex/${backend}/${variant}"
env -u PIP_CONFIG_FILE ./pants --no-pantsd "--local-store-dir=$work/store" "--named-caches-dir=$work/named" \
  package "backends/${backend}:${variant}" >/dev/null 2>&1

#!/usr/bin/env bash
# A cold `./pants package`: an empty Pants store and empty named caches (pex_root: wheels
# downloaded again), a fresh dist/ of the backend. Compare with bench/uv_same_pins.sh of the same
# pins (docs/benchmarks.md, "Cold package vs uv"). The second argument names the variant (default
# cpu; cpu-arm64: the cross build, docs/benchmarks.md "linux/arm64").
# PANTSD=1: the developer's loop. This checkout's pantsd is restarted on those empty caches
# first, then only the package is timed, printed as "package: <seconds> s".
set -euo pipefail
backend="${1:-transformers}"
variant="${2:-cpu}"
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
caches=("--local-store-dir=$work/store" "--named-caches-dir=$work/named")
stop_pantsd() {  # this checkout's pantsd only
  for pid in $(pgrep -f '^pantsd' || true); do
    [ "$(readlink "/proc/$pid/cwd")" = "$PWD" ] && kill "$pid" && while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  done
  return 0
}
if [ "${PANTSD:-0}" = 1 ]; then
  caches+=("--pantsd")
  stop_pantsd
  trap 'stop_pantsd; rm -rf "$work"' EXIT
  env -u PIP_CONFIG_FILE ./pants "${caches[@]}" --version >/dev/null
else
  caches+=("--no-pantsd")
  trap 'rm -rf "$work"' EXIT
fi
rm -rf "dist/backends/${backend}/${variant}" "dist/images/${backend}/${variant}" "dist/pex/${backend}/${variant}"
start=$EPOCHREALTIME
env -u PIP_CONFIG_FILE ./pants "${caches[@]}" package "backends/${backend}:${variant}" >/dev/null 2>&1
awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "package: %.1f s\n", b - a }'

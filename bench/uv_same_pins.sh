#!/usr/bin/env bash
# uv installing the pins of backends/<name>:cpu's PEX (read from its PEX-INFO, so run a package
# first) into a fresh venv with an empty cache, from PyPI and the CPU wheelhouse the lock uses:
# the yardstick for bench/cold_package.sh. UV=<path> names the uv binary (default: uv on PATH).
# Further arguments go to `uv pip install` (e.g. --compile-bytecode: our folder ships .pyc files).
set -euo pipefail
backend="${1:-transformers}"
shift || true
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -c 'import json,sys; [print("%s==%s" % tuple(d.split("-")[:2])) for d in sorted(json.load(open(sys.argv[1]))["distributions"])]' \
  "dist/pex/${backend}/cpu/backend.pex/PEX-INFO" > "$work/pins.txt"
"${UV:-uv}" venv -q -p python3.11 "$work/venv"
"${UV:-uv}" pip install -q --no-cache --no-deps -p "$work/venv/bin/python" \
  --find-links "$HOME/.cache/localai-build/wheelhouse/cpu" -r "$work/pins.txt" "$@"

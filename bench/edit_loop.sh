#!/usr/bin/env bash
# The edit loop: one changed line in a backend's own code, then `./pants package` (pantsd warm
# when one is running), then the file restored. Time the whole script from outside, e.g.
#   /usr/bin/time -v bench/edit_loop.sh transformers
# (docs/benchmarks.md, "Edit loop"). Restoring the file is not timed work the developer does,
# but it is a few ms; the next run then sees an edit again.
set -euo pipefail
backend="${1:-transformers}"
cd "$(dirname "$0")/.."
source="backends/${backend}/backend.py"
orig="$(mktemp)"  # outside the repo: a new file under backends/ would itself invalidate the BUILD globs
cp -p "$source" "$orig"
trap 'cat "$orig" > "$source"; rm -f "$orig"' EXIT
printf '\n# bench edit %s\n' "$(date +%s%N)" >> "$source"
./pants package "backends/${backend}:cpu" >/dev/null 2>&1

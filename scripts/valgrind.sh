#!/usr/bin/env bash
# npm run valgrind: memcheck over snapshotDigest (valid and refused snapshots), describeRuntime
# and a few executor runs (test/helpers/valgrind-workload.mjs), with the normal build. Node's
# own noise is not an error here: scripts/valgrind-report.mjs fails only on errors with a
# frame in our addon or helpers, and on definite leaks our code allocated.
# Needs valgrind (Debian: apt-get install valgrind).
#   CONFINED_VALGRIND_RUNS  executor runs (default 3)
#   CONFINED_VALGRIND_KEEP=1 keep the logs (their path is printed)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
command -v valgrind >/dev/null || { echo "valgrind: not installed (apt-get install -y valgrind)" >&2; exit 2; }
[ -f "$src/build/Release/confined.node" ] || { echo "valgrind: build first (npm run build)" >&2; exit 2; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/confined-valgrind-XXXXXX")
if [ "${CONFINED_VALGRIND_KEEP:-}" != 1 ]; then trap 'rm -rf "$dir"' EXIT; fi
chmod 755 "$dir"
mkdir -m 700 "$dir/root"
mkdir "$dir/logs" "$dir/bpf"
# valgrind does not implement seccomp(2), which libseccomp needs to compile a policy: compile
# them with the same addon outside valgrind (see the workload).
(cd "$src" && node --input-type=module -e "
import { native } from './lib/native.js';
import { writeFileSync } from 'node:fs';
for (const p of ['executor', 'command']) writeFileSync('$dir/bpf/' + p + '.bpf', native.seccompFilter(p));
")
echo "valgrind: $(valgrind --version), logs in $dir/logs"
set +e
CONFINED_VALGRIND_BPF_DIR="$dir/bpf" valgrind --smc-check=all-non-file --leak-check=full \
  --show-leak-kinds=definite --num-callers=40 --error-limit=no \
  --suppressions="$src/scripts/valgrind.supp" --log-file="$dir/logs/log.%p" \
  node "$src/test/helpers/valgrind-workload.mjs" "$dir/root" "${CONFINED_VALGRIND_RUNS:-3}" &
main=$!
wait "$main"
rc=$?
set -e
[ "$rc" -eq 0 ] || { echo "valgrind: the workload failed (exit $rc)" >&2; tail -30 "$dir/logs/log.$main" >&2; exit 1; }
node "$src/scripts/valgrind-report.mjs" "$dir/logs" "$main"

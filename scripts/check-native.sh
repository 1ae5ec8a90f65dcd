#!/usr/bin/env bash
# npm run check:native: builds the addon and the helper executables with ASan and UBSan
# (binding.gyp's CONFINED_SANITIZE condition; every UBSan finding fatal) in a copy of the
# package, so build/Release of this checkout is left alone, and runs the native-heavy suites
# and a few real executor runs against that build. The addon runs inside node, so libasan is
# preloaded (it must come first) and leak detection is off: node itself does not free
# everything at exit. The confined-stage helper is an ASan executable too; its libasan is
# part of the runtime closure (describeRuntime follows the stage's ldd), so it is bound
# read-only into the sandbox like every other library.
#   CONFINED_CHECK_TESTS   test files to run (default: the native-heavy suites present)
#   CONFINED_CHECK_KEEP=1  keep the sanitized copy (its path is printed)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/confined-asan-XXXXXX")
if [ "${CONFINED_CHECK_KEEP:-}" != 1 ]; then trap 'rm -rf "$dir"' EXIT; fi
chmod 755 "$dir"
tar -C "$src" --exclude=.git --exclude=./build --exclude=./node_modules -cf - . | tar -C "$dir" -xf -
ln -s "$src/node_modules" "$dir/node_modules"
cd "$dir"
echo "check:native: sanitized build in $dir"
CONFINED_SANITIZE=1 node scripts/build.mjs >"$dir/build.log" 2>&1 || {
  tail -40 "$dir/build.log" >&2
  exit 1
}

# The runtime of the sanitizers the build linked (gcc's libasan, or clang's when CC=clang).
asan=$(ldd build/Release/confined.node | awk '/libasan|libclang_rt.asan/ { print $3; exit }')
if [ -z "$asan" ] || [ ! -f "$asan" ]; then
  echo "check:native: the addon is not linked against an ASan runtime (CONFINED_SANITIZE ignored?)" >&2
  exit 1
fi
for f in build/Release/confined.node build/Release/confined-stage; do
  symbols=$(nm -D "$f" 2>/dev/null || true)
  if ! grep -q '__asan_report_load' <<<"$symbols" || ! grep -q '__ubsan_handle' <<<"$symbols"; then
    echo "check:native: $f has no sanitizer instrumentation" >&2
    exit 1
  fi
done
stage_libs=$(ldd build/Release/confined-stage)
grep -q asan <<<"$stage_libs" || {
  echo "check:native: confined-stage is not an ASan executable" >&2
  exit 1
}
echo "check:native: addon and stage instrumented (ASan runtime $asan)"

# The reference tools the suites compare against (ldd above all, which runs the loader on the
# file) must not see the preload: shims first in PATH drop it for them.
mkdir -p "$dir/.nopreload"
for tool in ldd readelf ldconfig objdump; do
  real=$(command -v "$tool" || true)
  [ -n "$real" ] || continue
  printf '#!/bin/sh\nunset LD_PRELOAD\nexec %s "$@"\n' "$real" >"$dir/.nopreload/$tool"
  chmod 755 "$dir/.nopreload/$tool"
done
export PATH="$dir/.nopreload:$PATH"
export LD_PRELOAD="$asan"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export CONFINED_FUZZ_ITERATIONS=${CONFINED_FUZZ_ITERATIONS:-10000}

# The stage, as the sandbox will see it: its closure must hold the ASan runtime.
node --input-type=module -e "
import { describeRuntime } from './lib/runtime.js';
const r = describeRuntime();
const files = (r.identity ?? r).files ?? [];
const asan = files.filter((f) => /libasan|clang_rt\.asan/.test(f.path ?? f));
console.log('check:native: runtime closure', files.length, 'files, ASan runtime in it:', asan.map((f) => f.path ?? f).join(', ') || 'none');
process.exit(asan.length > 0 ? 0 : 1);
" || {
  echo "check:native: the ASan runtime is not in the runtime closure: the sandbox could not load the stage" >&2
  exit 1
}

if [ -n "${CONFINED_CHECK_TESTS:-}" ]; then
  read -r -a tests <<<"$CONFINED_CHECK_TESTS"
else
  tests=()
  for t in snapshot runtime namespace macho seatbelt-profile validate validate-fuzz confined-executor \
    fault-injection; do
    [ -f "test/$t.test.js" ] && tests+=("test/$t.test.js")
  done
fi
echo "check:native: node --test ${tests[*]}"
set +e
node --test --test-concurrency=1 --test-reporter=spec "${tests[@]}" 2>&1 | tee "$dir/test.log" |
  grep -E '^(ℹ|✖)|not ok|ERROR: AddressSanitizer|runtime error:'
status=${PIPESTATUS[0]}
set -e
if grep -q 'AddressSanitizer\|runtime error:' "$dir/test.log"; then
  echo "check:native: sanitizer report in the tests" >&2
  grep -B2 -A30 'AddressSanitizer\|runtime error:' "$dir/test.log" | head -80 >&2
  exit 1
fi
[ "$status" -eq 0 ] || { echo "check:native: tests failed (log $dir/test.log)" >&2; exit 1; }

# Real executor runs through the ASan stage and the ASan addon: the soak's mix, short.
# ASan's quarantine keeps freed memory, so RSS is not judged here (npm run soak does).
set +e
CONFINED_SOAK_RUNS=${CONFINED_CHECK_RUNS:-24} CONFINED_SOAK_COMMANDS=0 CONFINED_SOAK_RSS_GROWTH=off \
  node bench/soak.mjs 2>&1 | tee "$dir/soak.log" | tail -12
status=${PIPESTATUS[0]}
set -e
if grep -q 'AddressSanitizer\|runtime error:' "$dir/soak.log"; then
  echo "check:native: sanitizer report in the executor runs" >&2
  exit 1
fi
[ "$status" -eq 0 ] || { echo "check:native: executor runs failed" >&2; exit 1; }
echo "check:native: passed"

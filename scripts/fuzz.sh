#!/usr/bin/env bash
# npm run fuzz: builds the libFuzzer targets of fuzz/ with clang (fuzzer, ASan, UBSan, every
# UBSan finding fatal) against the pure C readers of native/ and runs each for a fixed time,
# starting from seed corpora written by scripts/fuzz-seeds.mjs. Fails on any crash, leak,
# sanitizer report or timeout, and prints where the reproducer was saved.
#   CONFINED_FUZZ_SECONDS  seconds per target (default 60)
#   CONFINED_FUZZ_RUNS     a number of runs per target instead of a time
#   CONFINED_FUZZ_TARGETS  a subset, e.g. "snapshot macho" (default: runtime macho snapshot)
#   CONFINED_FUZZ_DIR      where to build and keep corpora (default: a new temporary dir)
# Needs clang with libFuzzer (Debian: apt-get install clang) and node's headers (for
# OpenSSL's evp.h, which fuzz/evp_shim.c implements: no libcrypto is linked).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cc=${CC_FUZZ:-clang}
if ! command -v "$cc" >/dev/null; then
  echo "fuzz: $cc not found (Debian: apt-get install -y clang)" >&2
  exit 2
fi
prefix=$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")
nodeinc="$prefix/include/node"
if [ ! -f "$nodeinc/openssl/evp.h" ]; then
  echo "fuzz: $nodeinc/openssl/evp.h not found (node's headers are needed)" >&2
  exit 2
fi
seconds=${CONFINED_FUZZ_SECONDS:-60}
runs=${CONFINED_FUZZ_RUNS:-}
targets=${CONFINED_FUZZ_TARGETS:-runtime macho snapshot}
if [ -n "${CONFINED_FUZZ_DIR:-}" ]; then work=$CONFINED_FUZZ_DIR; keep=1; else
  work=$(mktemp -d "${TMPDIR:-/tmp}/confined-fuzz-XXXXXX"); keep=0; fi
mkdir -p "$work"
node "$root/scripts/fuzz-seeds.mjs" "$work/seeds"

sources() {
  case "$1" in
  runtime) echo "fuzz/runtime_fuzz.c native/elf.c native/ldcache.c" ;;
  macho) echo "fuzz/macho_fuzz.c native/macho.c" ;;
  snapshot) echo "fuzz/snapshot_fuzz.c fuzz/evp_shim.c native/snapshot.c" ;;
  *) echo "fuzz: unknown target $1" >&2; return 1 ;;
  esac
}

if [ -n "$runs" ]; then budget=(-runs="$runs"); else budget=(-max_total_time="$seconds"); fi
summary=()
failed=0
for t in $targets; do
  src=$(sources "$t")
  bin="$work/${t}_fuzz"
  (cd "$root" && $cc -g -O1 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
    -Inative -I"$nodeinc" $src -o "$bin")
  corpus="$work/corpus-$t"
  mkdir -p "$corpus"
  log="$work/$t.log"
  echo "fuzz: $t (${runs:+$runs runs}${runs:-$seconds s}), log $log"
  start=$(date +%s.%N)
  set +e
  ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$bin" "${budget[@]}" -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/$t-" "$corpus" "$work/seeds/$t" >"$log" 2>&1
  rc=$?
  set -e
  end=$(date +%s.%N)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  units=$(ls "$corpus" | wc -l)
  elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  # libFuzzer's own average is in whole seconds (0 for a short run): measured here instead.
  rate=$(awk -v n="${execs:-0}" -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", n / (b - a) }')
  if [ "$rc" -ne 0 ]; then
    failed=1
    summary+=("$(printf '%-9s FAILED (exit %s) after %s s; reproducer: %s' "$t" "$rc" "$elapsed" "$(ls "$work/$t-"* 2>/dev/null | head -1)")")
    tail -40 "$log" >&2
  else
    summary+=("$(printf '%-9s %10s execs %8s s %8s exec/s %6s corpus units' "$t" "${execs:-?}" "$elapsed" "${rate:-?}" "$units")")
  fi
done
echo "fuzz summary:"
printf '  %s\n' "${summary[@]}"
# A temporary work dir is kept only when something failed (it holds the reproducer).
if [ "$failed" -eq 0 ] && [ "$keep" -eq 0 ]; then rm -rf "$work"; else echo "fuzz: kept $work"; fi
exit "$failed"

#!/usr/bin/env bash
# Runs the test suites as the unprivileged user `nobody` (the ground rules require every
# boundary suite to pass both as root and unprivileged). nobody cannot read a checkout under a
# 0700 directory, so the built package is copied to a world-readable temporary directory first.
# Usage: npm run test:nobody [-- test files...]   (as root)
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
  echo "test-as-nobody: run as root (it switches to nobody with runuser)" >&2
  exit 2
fi
src=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d /tmp/confined-nobody-XXXXXX)
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
tar -C "$src" --exclude=.git -cf - . | tar -C "$dir" -xf -
chmod -R a+rX "$dir"
cd "$dir"
if [ "$#" -gt 0 ]; then files=("$@"); else files=(test/*.test.js); fi
echo "test-as-nobody: running ${#files[@]} test files as $(runuser -u nobody -- id -un) in $dir"
runuser -u nobody -- env -i PATH=/usr/bin:/bin HOME="$dir" CONFINED_TEST_USER=nobody \
  node --test --test-concurrency=1 "${files[@]}"

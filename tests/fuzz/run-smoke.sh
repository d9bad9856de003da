#!/bin/sh
# run-smoke.sh -- make check's runner for tests/fuzz/smoke-NAME.fz: runs the
# driver-linked fuzz target NAME over its corpus.
name=$(basename "$1" .fz | sed 's/^smoke-//')
dir=$(dirname "$0")
exec "./tests/fuzz/smoke_$name" "$dir/corpus/$name" 20000

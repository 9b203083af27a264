#!/usr/bin/env bash
# Runs idgen's benchmarks with their peers (bwmarrin/snowflake,
# sony/sonyflake) in one process, prints the markdown table and writes it to
# bench/RESULTS.md. Extra arguments go to `go test`, e.g. -benchtime 200ms or
# -count 3 (runs are averaged).
set -euo pipefail
cd "$(dirname "$0")"
go test -run '^$' -bench . -benchmem "$@" ./... | go run ./cmd/benchtable

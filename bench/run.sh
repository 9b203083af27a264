#!/usr/bin/env bash
# Runs every benchmark with its peers in the same run and prints one
# markdown table, also written to bench/RESULTS.md, from which it redraws
# the charts of docs/performance.md (docs/perf-*.svg; without rerunning
# the benchmarks: cd bench && go run ./cmd/benchtable -redraw):
#   - idgen against bwmarrin/snowflake and sony/sonyflake (this module);
#   - a leased generator against a static one, and the leasers' calls
#     against one round trip (the root module);
#   - the dedupe stores against a naive two-round-trips-per-message
#     baseline on the same real servers (the root module; servers from the
#     IDEMQ_* variables, which make bench sets, or started by the tests);
#   - the consumer's per-message path against a hand-written naive consumer
#     on Redis, MariaDB, PostgreSQL and SQLite, and end to end through the
#     real broker against no dedupe (remoting's BenchmarkPath and
#     BenchmarkEndToEnd);
#   - the outbox: a business transaction with Add against the same INSERT
#     by hand, and relays against a plain loop of sends (outbox/... and
#     remoting's BenchmarkShip and BenchmarkCommitToBroker);
#   - end to end on Kafka and NATS JetStream: the adapters against no
#     dedupe, a naive consumer on Redis and watermill's in-memory
#     Deduplicator on the same broker (this module's BenchmarkKafkaEndToEnd
#     and BenchmarkNATSEndToEnd).
# Extra arguments go to `go test`, e.g. -benchtime 200ms or -count 3.
set -euo pipefail
cd "$(dirname "$0")"
# -timeout: remoting's end-to-end rows alone take about 9 minutes,
# near go test's default of 10 per package on a loaded machine.
{
	go test -run '^$' -bench . -benchmem -timeout 60m "$@" ./...
	(cd .. && go test -run '^$' -bench . -benchmem -timeout 60m "$@" ./idgen/... ./dedupe/... ./consumer/... ./outbox/... ./remoting/...)
} | go run ./cmd/benchtable

# idemq developer commands. `make test` and `make demo` work on a fresh
# Debian machine: they install what is missing and start real servers.
GO ?= go
WITH_SERVERS = $(GO) run ./internal/testenv/withservers
# N messages, M of them sent again on purpose, for make demo.
DEMO_N ?= 200
DEMO_RESEND ?= 50

# Everything, rocketmq-client-go included, runs under the race detector. Its
# master (v2.1.3-0.20251226070945-2173d070fd1b) fixed the races of v2.1.2
# (apache/rocketmq-client-go#961 and others) but still races inside itself
# now and then: Shutdown against InvokeSync during a rebalance (seen in three
# of about fifteen full runs; the fault tests' child processes, which shut a
# client down each time, tolerate races wholly inside it). Compiling it
# without the race detector does not hide that reliably and adds false
# reports: its atomics then order nothing for the detector, while map and
# channel operations are still checked in the runtime (two of three full
# runs failed that way, on a map of its route data and in encoding/json
# under its heartbeat).
RACE = -race

.PHONY: deps test test-containers demo bench vet fmt

deps:
	./internal/testenv/install-deps.sh

# The adapter modules beside the root one: each client family but
# RocketMQ's has its adapter in a module of its own.
ADAPTERS = kafka natsjs

## test: every test with -race against real Redis, MariaDB, PostgreSQL,
## RocketMQ, Kafka and NATS
test: deps
	$(GO) mod tidy -diff
	@# The README programs' test builds a user's module offline, whose module
	@# graph (rocketmq-client-go's, unpruned) needs go.mod files that building
	@# idemq itself never downloads: a fresh module cache has them only after
	@# the whole graph is loaded once.
	$(GO) list -m all >/dev/null
	@# The go.sum isolation test tidies a user's module of each adapter
	@# offline in the same way.
	for m in $(ADAPTERS); do (cd $$m && $(GO) mod tidy -diff && $(GO) list -m all >/dev/null && $(GO) vet ./...) || exit 1; done
	cd bench && $(GO) mod tidy -diff
	cd bench && $(GO) vet ./...
	@# The Prometheus example is a module of its own, so that the exporter
	@# stays out of idemq's module graph; its tests need promtool (deps).
	cd examples/prometheus && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) test $(RACE) -count=1 ./...
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1; }
	@# -parallel 4: most parallel tests wait on leases and brokers rather than
	@# use a core (the lease conformance suites sleep out lease after lease),
	@# and the default of one per core let two of them run at a time.
	$(WITH_SERVERS) -- ./scripts/test-modules.sh $(RACE) -count=1 -parallel 4 -timeout 15m

## test-containers: the container path (testcontainers-go, docker/compose.yaml)
## on podman with stand-in images built from Debian's packages: see
## scripts/test-containers.sh
test-containers: deps
	cd internal/testenv/containers && $(GO) mod tidy -diff && $(GO) vet ./...
	./scripts/test-containers.sh

## demo: a sender that re-sends some messages and a receiver that applies each once
demo: deps
	$(WITH_SERVERS) -only redis,rocketmq -- ./examples/demo.sh $(DEMO_N) $(DEMO_RESEND)

## bench: benchmarks with peers in the same run; writes bench/RESULTS.md and
## the charts in docs/
bench: deps
	$(WITH_SERVERS) -only redis,mysql,postgres,rocketmq,kafka,nats -- ./bench/run.sh

vet:
	$(GO) vet ./...
	for m in $(ADAPTERS); do (cd $$m && $(GO) vet ./...) || exit 1; done
	cd bench && $(GO) vet ./...
	cd examples/prometheus && $(GO) vet ./...
	cd internal/testenv/containers && $(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

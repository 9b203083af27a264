#!/usr/bin/env bash
# make test-containers: the container path, proven on podman with stand-in
# images (no image registry needed). It
#   1. installs podman, runc, docker-compose and CNI's dnsname plugin if
#      missing, and runs podman with runc and lowered ulimits (see
#      podman-containers.conf) behind a Docker-compatible API socket of its
#      own;
#   2. builds or reuses the stand-in images (scripts/standin-images.sh);
#   3. runs, with servers started by withcontainers (testcontainers-go):
#      the dedupe stores' conformance suites, the producer/consumer
#      end-to-end suites on RocketMQ 4.9.7 and 5.5.0, the Kafka and NATS
#      adapters' conformance suites (where their modules are), and the demo;
#   4. runs the module's own tests: the twin's contract (Redis, Kafka and
#      NATS started, named by their IDEMQ_* variable, reached by a client,
#      removed), and docker/compose.yaml brought up with docker-compose
#      1.29, the example sender and receiver run against it, and torn down.
# Every container it started is removed on exit, failure included.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
begin=$(date +%s)
log() { echo "test-containers: $*" >&2; }

need=()
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
command -v docker-compose >/dev/null || need+=(docker-compose)
# Compose's services find each other by name (the brokers their name
# server) through podman's DNS, which a CNI network has only with the
# dnsname plugin (no Debian package depends on it or recommends it):
# without it the compose brokers never register (TestCompose).
[ -x /usr/lib/cni/dnsname ] || need+=(golang-github-containernetworking-plugin-dnsname)
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

tmp=$(mktemp -d /tmp/idemq-containers.XXXXXX)
export CONTAINERS_CONF=$repo/scripts/podman-containers.conf
export DOCKER_HOST=unix://$tmp/podman.sock
# The reaper's image is in a registry; the harness and this script remove
# what they start, by the session label.
export TESTCONTAINERS_RYUK_DISABLED=true
export IDEMQ_CONTAINERS_SESSION=${tmp##*/}
# Compose lower-cases project names; the labels hold the lower-cased one.
COMPOSE_PROJECT_NAME=$(echo "idemq-${IDEMQ_CONTAINERS_SESSION#idemq-containers.}" | tr '[:upper:]' '[:lower:]')
export COMPOSE_PROJECT_NAME
service=
ticker=
cleanup() {
	local status=$?
	docker-compose -f docker/compose.yaml --profile rocketmq5 down -v --remove-orphans >/dev/null 2>&1 || true
	podman ps -aq --filter "label=idemq.session=$IDEMQ_CONTAINERS_SESSION" | xargs -r podman rm -f -v >/dev/null 2>&1 || true
	[ -n "$ticker" ] && kill "$ticker" 2>/dev/null
	[ -n "$service" ] && kill "$service" 2>/dev/null && wait "$service" 2>/dev/null
	rm -rf "$tmp"
	log "done in $(($(date +%s) - begin)) s (status $status)"
}
trap cleanup EXIT

# The API service podman runs for testcontainers and docker-compose; its
# own socket, so that concurrent runs do not share one.
podman system service --time=0 "$DOCKER_HOST" >"$tmp/service.log" 2>&1 &
service=$!
for _ in $(seq 100); do
	[ -S "$tmp/podman.sock" ] && break
	sleep 0.1
done
[ -S "$tmp/podman.sock" ] || {
	cat "$tmp/service.log" >&2
	exit 1
}

# podman schedules healthchecks with systemd timers; without systemd (as in
# CI's sandbox) none run and compose's services stay "starting". Run this
# run's compose healthchecks every 2 s instead.
if [ ! -S /run/systemd/private ]; then
	while sleep 2; do
		podman ps -q --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME" |
			xargs -r -n1 podman healthcheck run >/dev/null 2>&1 || true
	done &
	ticker=$!
fi

step=$(date +%s)
set -a
eval "$(scripts/standin-images.sh)"
set +a
log "images ready in $(($(date +%s) - step)) s"
podman images --filter reference='localhost/idemq-standin/*' --format '{{.Repository}}:{{.Tag}} {{.Size}}' >&2

# Servers named in the environment would be used instead of containers.
unset IDEMQ_REDIS_ADDR IDEMQ_MYSQL_DSN IDEMQ_POSTGRES_DSN IDEMQ_ROCKETMQ_NAMESRV IDEMQ_ROCKETMQ5_NAMESRV IDEMQ_ROCKETMQ5_PROXY \
	IDEMQ_KAFKA_BROKERS IDEMQ_NATS_URL
(cd internal/testenv/containers && go build -o "$tmp/withcontainers" ./withcontainers)

step=$(date +%s)
"$tmp/withcontainers" -only redis,mysql,postgres,rocketmq,rocketmq5 -- go test -race -count=1 -timeout 15m \
	-run 'Conformance|EndToEnd' ./dedupe/redisdedupe ./dedupe/sqldedupe ./remoting ./grpcv5
log "conformance and end-to-end suites in $(($(date +%s) - step)) s"

# The Kafka and NATS adapters' conformance suites, each adapter a module
# of its own (kafka/, natsjs/), on the twin's Kafka and NATS.
adapters=()
for m in kafka natsjs; do
	[ -f "$m/go.mod" ] && adapters+=("$m")
done
if [ ${#adapters[@]} -gt 0 ]; then
	step=$(date +%s)
	"$tmp/withcontainers" -only kafka,nats -- sh -c \
		'for m; do (cd "$m" && go test -race -count=1 -run Conformance ./...) || exit 1; done' sh "${adapters[@]}"
	log "conformance suites of ${adapters[*]} in $(($(date +%s) - step)) s"
fi

step=$(date +%s)
"$tmp/withcontainers" -only redis,rocketmq -- ./examples/demo.sh "${DEMO_N:-200}" "${DEMO_RESEND:-50}"
log "demo in $(($(date +%s) - step)) s"

step=$(date +%s)
(cd internal/testenv/containers && go test -count=1 -timeout 30m ./...)
log "harness and compose tests in $(($(date +%s) - step)) s"

#!/usr/bin/env bash
# The idemq demo: a receiver consuming through the dedupe middleware, and a
# sender that sends N messages and re-sends M of them. Needs
# IDEMQ_ROCKETMQ_NAMESRV and IDEMQ_REDIS_ADDR (make demo sets them).
# Ends with: summary: sent=N resent=M delivered=D suppressed=S applied=A
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200}
resend=${2:-50}
run=$(date +%s)-$$
topic=idemq-demo-$run
out=$(mktemp -d)
receiver=
# A failed sender must not leave the receiver waiting for its topic.
trap '[ -n "$receiver" ] && kill "$receiver" 2>/dev/null; rm -rf "$out"' EXIT

go build -o "$out/receiver" ./examples/receiver
go build -o "$out/sender" ./examples/sender

"$out/receiver" -topic "$topic" -group "demo-receiver-$run" -expect "$n" >"$out/received" &
receiver=$!
# The sender leases its node id from Redis; a pool Redis has no record of
# waits one lease before its first grant, so the demo keeps the lease short.
"$out/sender" -topic "$topic" -n "$n" -resend "$resend" -pool idemq-demo-senders -lease 2s >"$out/sent"
status=0
wait "$receiver" || status=$?
receiver=
echo "summary: $(cat "$out/sent") $(cat "$out/received")"
exit "$status"

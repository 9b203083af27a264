#!/usr/bin/env bash
# make test's last step, run by withservers with the servers up: go test
# with the given flags in idemq's module and in each adapter module at
# once. Each adapter has a module of its own (so that its client stays
# out of other users' go.sum) and go test takes one module at a time;
# their tests mostly wait on brokers, so running them beside the root
# module's costs little time. So too the bench module's tests (the charts
# against bench/RESULTS.md, and the peers' failing-handler counts on the
# brokers), without the race detector: they test the peers, whose client
# (Sarama) is not ours to make race-free. The root module's output
# streams; each other module's is printed when it ends. Exits non-zero if
# any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pids=()
mods=(kafka natsjs bench)
for m in "${mods[@]}"; do
	flags=("$@")
	[ "$m" = bench ] && flags=(-count=1)
	(cd "$m" && "${GO:-go}" test "${flags[@]}" ./... >"$tmp/$m.out" 2>&1; echo $? >"$tmp/$m.rc") &
	pids+=($!)
done
"${GO:-go}" test "$@" ./...
status=$?
wait "${pids[@]}"
for m in "${mods[@]}"; do
	cat "$tmp/$m.out"
	rc=$(cat "$tmp/$m.rc")
	[ "$rc" = 0 ] || { echo "test-modules: module $m failed (exit $rc)"; status=1; }
done
exit $status

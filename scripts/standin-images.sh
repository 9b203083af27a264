#!/usr/bin/env bash
# Builds stand-in images for the servers idemq tests against, from Debian's
# packages, the RocketMQ and Kafka jars on Maven Central and the nats-server
# testenv builds, for a container engine with no image registry in reach
# (podman here). Each image is a root file system holding the programs and
# the libraries ldd lists, imported with `podman import`; the RocketMQ and
# Kafka images are built on a JRE image made with jlink, the NATS image
# FROM scratch. The jars and nats-server are the very files testenv runs
# (internal/testenv/containers/serverfiles fetches them into its cache).
# internal/testenv/containers/standin is the entry point that gives the
# redis, mariadb, postgres and kafka images the official images' environment
# contract (see its doc).
#
# An image is rebuilt only when its inputs change: its idemq.standin label
# holds the hash of its recipe (a build_* function below), the helpers, the
# files it copies from the repository and the package versions.
#
# Prints the IDEMQ_*_IMAGE assignments that select the images, for eval.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
here=$repo/scripts/standin

log() { echo "standin-images: $*" >&2; }

need=()
command -v podman >/dev/null || need+=(podman)
command -v redis-server >/dev/null || need+=(redis-server)
[ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
[ -x /usr/lib/postgresql/15/bin/postgres ] || need+=(postgresql-15)
command -v pg_isready >/dev/null || need+=(postgresql-client-15)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v jlink >/dev/null || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || need+=(maven)
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	apt-get update -qq
	# policy-rc.d keeps the packages from starting system-wide servers.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod +x /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# libs ROOT FILE... copies the shared libraries ldd lists for each file
# into ROOT under the same path, skipping those already in ROOT (a JRE's
# own, found through its RUNPATH).
libs() {
	local root=$1 f lib
	shift
	for f in "$@"; do
		# A file ldd cannot read (a script, data) has no libraries.
		for lib in $(ldd "$f" 2>/dev/null | grep -o '/[^ ]*' || true); do
			case $lib in "$root"/*) continue ;; esac
			if [ ! -e "$root$lib" ]; then
				mkdir -p "$root$(dirname "$lib")"
				cp -L "$lib" "$root$lib"
			fi
		done
	done
}

# add ROOT FILE... copies each file (following links) and its libraries into
# ROOT under the same path.
add() {
	local root=$1 f
	shift
	for f in "$@"; do
		mkdir -p "$root$(dirname "$f")"
		cp -L "$f" "$root$f"
	done
	libs "$root" "$@"
}

# natives ROOT LIB copies into ROOT the libraries needed by the native
# libraries for Linux on x86-64 that the jars in LIB unpack at run time
# (RocketMQ 5.x: RocksDB's JNI, netty's tcnative for the proxy; Kafka: the
# snappy, lz4 and zstd codecs).
natives() {
	local root=$1 lib=$2 tmp jar so
	tmp=$(mktemp -d -p "$work")
	for jar in "$lib"/*.jar; do
		so=$("$jdk/bin/jar" tf "$jar" | grep -E '([Ll]inux.*(x86_64|amd64)|linux64)[^/]*(/[^/]*)?\.so$' || true)
		[ -n "$so" ] && (cd "$tmp" && "$jdk/bin/jar" xf "$jar" $so)
	done
	libs "$root" $(find "$tmp" -name '*.so')
}

# base ROOT makes the skeleton every image has: /tmp, /etc/nsswitch.conf,
# an /etc/passwd with root and the accounts given as name:uid, and the
# stand-in entry point.
base() {
	local root=$1 acct
	shift
	mkdir -p "$root"/{etc,tmp,usr/local/bin}
	chmod 1777 "$root/tmp"
	# Without nsswitch.conf glibc asks DNS before /etc/hosts: every lookup
	# of the container's own name (the JVM makes many) waits for a
	# resolver that may not answer.
	printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
	echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
	echo 'root:x:0:' >"$root/etc/group"
	for acct in "$@"; do
		echo "${acct%%:*}:x:${acct#*:}:${acct#*:}::/home/${acct%%:*}:/bin/sh" >>"$root/etc/passwd"
		echo "${acct%%:*}:x:${acct#*:}:" >>"$root/etc/group"
	done
	cp "$work/standin" "$root/usr/local/bin/docker-entrypoint"
}

# import ROOT IMAGE CHANGE... makes IMAGE from ROOT, labelled with its
# stamp.
import() {
	local root=$1 image=$2 args=()
	shift 2
	for c in "$@" "LABEL idemq.standin=$(stamp "$image")"; do
		args+=(--change "$c")
	done
	tar -C "$root" -cf "$work/rootfs.tar" .
	podman import -q "${args[@]}" "$work/rootfs.tar" "$image" >/dev/null
	rm -f "$work/rootfs.tar"
	log "built $image"
}

pg=/usr/lib/postgresql/15
jdk=$(dirname "$(dirname "$(readlink -f "$(command -v jlink)")")")
versions=$(dpkg-query -W -f '${Package}=${Version}\n' redis-server redis-tools mariadb-server-core postgresql-15 \
	postgresql-client-15 dash bash libc6 libstdc++6 2>/dev/null)
# What every image is made of besides its recipe.
common=$( (cat "$here"/* internal/testenv/containers/standin/*.go; echo "$versions"; "$jdk/bin/java" -version 2>&1;
	declare -f libs add base import natives) | sha256sum | cut -c1-16)

# The server files testenv runs; the Kafka and NATS images are tagged with
# their releases.
(cd internal/testenv/containers && go build -o "$work/serverfiles" ./serverfiles)
kafkalib=$("$work/serverfiles" kafka)
natsbin=$("$work/serverfiles" nats)
kafkajar=$(cd "$kafkalib" && echo kafka_*-*.jar)
kafkarelease=${kafkajar#kafka_*-}
kafkarelease=${kafkarelease%.jar}
natsrelease=$("$natsbin" --version)
natsrelease=${natsrelease##* v}

redis=localhost/idemq-standin/redis:7.0
mariadb=localhost/idemq-standin/mariadb:10.11
postgres=localhost/idemq-standin/postgres:15
jre=localhost/idemq-standin/jre:17
rocketmq4=localhost/idemq-standin/rocketmq:4.9.7
rocketmq5=localhost/idemq-standin/rocketmq:5.5.0
kafka=localhost/idemq-standin/kafka:$kafkarelease
nats=localhost/idemq-standin/nats:$natsrelease
declare -A recipe=([$redis]=build_redis [$mariadb]=build_mariadb [$postgres]=build_postgres [$jre]=build_jre
	[$rocketmq4]=build_rocketmq [$rocketmq5]=build_rocketmq [$kafka]=build_kafka [$nats]=build_nats)

# stamp IMAGE is the hash of IMAGE's inputs: the common ones, its name and
# its recipe (a RocketMQ or Kafka image's also the JRE image's, the Kafka
# image's also its jars' names).
stamp() {
	local extra=
	case $1 in
	*/rocketmq:*) extra=$(stamp $jre) ;;
	*/kafka:*) extra="$(stamp $jre) $(ls "$kafkalib")" ;;
	esac
	echo "$common $1 $(declare -f "${recipe[$1]}") $extra" | sha256sum | cut -c1-16
}

# fresh IMAGE says whether IMAGE exists with its current stamp.
fresh() {
	[ "$(podman image inspect --format '{{index .Labels "idemq.standin"}}' "$1" 2>/dev/null)" = "$(stamp "$1")" ]
}

build_redis() {
	local r=$work/redis
	base "$r"
	add "$r" /usr/bin/redis-server /usr/bin/redis-cli
	mkdir -p "$r/data"
	import "$r" $redis 'WORKDIR /data' 'EXPOSE 6379' \
		'ENTRYPOINT ["/usr/local/bin/docker-entrypoint"]' 'CMD ["redis-server"]'
}

build_mariadb() {
	local r=$work/mariadb
	base "$r"
	add "$r" /usr/sbin/mariadbd
	mkdir -p "$r/usr/share" "$r/var/lib/mysql" "$r/run/mysqld"
	cp -a /usr/share/mysql "$r/usr/share/"
	ln -s docker-entrypoint "$r/usr/local/bin/healthcheck.sh"
	import "$r" $mariadb 'ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin' 'EXPOSE 3306' \
		'ENTRYPOINT ["/usr/local/bin/docker-entrypoint"]' 'CMD ["mariadbd"]'
}

build_postgres() {
	local r=$work/postgres so
	base "$r" postgres:999
	# initdb runs `postgres -V` through popen, hence /bin/sh.
	add "$r" $pg/bin/postgres $pg/bin/initdb $pg/bin/pg_isready /bin/dash
	ln -s dash "$r/bin/sh"
	# The server loads these (plpgsql, the encoding conversions) and reads
	# its catalogs' sources and the time zones from share.
	for so in $pg/lib/*.so; do
		case $so in *llvmjit*) continue ;; esac
		add "$r" "$so"
	done
	mkdir -p "$r/usr/share/postgresql" "$r/usr/share/zoneinfo" "$r/var/lib/postgresql/data" "$r/var/run/postgresql"
	chown -R 999:999 "$r/var/lib/postgresql" "$r/var/run/postgresql"
	cp -a /usr/share/postgresql/15 "$r/usr/share/postgresql/"
	cp -aL /usr/share/zoneinfo/{UTC,Etc} "$r/usr/share/zoneinfo/"
	import "$r" $postgres "ENV PATH=/usr/local/bin:$pg/bin:/usr/bin" 'ENV PGDATA=/var/lib/postgresql/data' \
		'ENV TZ=UTC' 'EXPOSE 5432' 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint"]' 'CMD ["postgres"]'
}

build_jre() {
	local r=$work/jre
	base "$r" rocketmq:3000
	mkdir -p "$r/opt" "$r/home/rocketmq" "$r/bin"
	# The modules RocketMQ 4.9.7 and 5.x (netty, grpc, rocksdb, fastjson)
	# use; jlink's runtime is a third of the JDK's size.
	"$jdk/bin/jlink" --add-modules java.se,jdk.unsupported,jdk.management,jdk.crypto.ec,jdk.zipfs \
		--strip-debug --no-man-pages --no-header-files --output "$r/opt/java"
	# sh is bash, not dash as in Debian: testcontainers' port check runs
	# `/bin/sh -c '</dev/tcp/localhost/PORT'` where the image has no nc.
	add "$r" /bin/bash
	ln -s bash "$r/bin/sh"
	libs "$r" "$r"/opt/java/bin/* "$r"/opt/java/lib/*.so "$r"/opt/java/lib/server/*.so
	chown -R 3000:3000 "$r/home/rocketmq"
	import "$r" $jre 'ENV PATH=/opt/java/bin:/bin:/usr/bin' 'ENV JAVA_HOME=/opt/java' 'CMD ["sh"]'
}

# build_rocketmq IMAGE builds a RocketMQ image (its tag is the release) on
# the JRE image with the jars testenv resolved (it resolves them now if it
# has not yet) and the stand-in scripts for `sh mqnamesrv` and `sh mqbroker
# [--enable-proxy]`, in the official image's layout:
# ROCKETMQ_HOME=/home/rocketmq/rocketmq-RELEASE, the working directory its
# bin.
build_rocketmq() {
	local image=$1 release=${1##*:} lib ctx home
	lib=$("$work/serverfiles" rocketmq "$release")
	ctx=$work/rocketmq-$release
	home=$ctx/home
	mkdir -p "$home/bin" "$home/conf" "$ctx/sysroot"
	cp -a "$lib" "$home/lib"
	cp "$here/mqnamesrv" "$here/mqbroker" "$here/runjava" "$home/bin/"
	# 5.x's proxy reads conf/rmq-proxy.json unless given -pc; this is the
	# distribution's.
	case $release in 5.*) cp "$here/rmq-proxy.json" "$home/conf/" ;; esac
	cp internal/testenv/rocketmq/logback.xml "$home/conf/logback_namesrv.xml"
	cp internal/testenv/rocketmq/logback.xml "$home/conf/logback_broker.xml"
	natives "$ctx/sysroot" "$lib"
	cat >"$ctx/Containerfile" <<-EOF
		FROM $jre
		ENV ROCKETMQ_VERSION=$release ROCKETMQ_HOME=/home/rocketmq/rocketmq-$release
		COPY sysroot/ /
		COPY --chown=3000:3000 home/ /home/rocketmq/rocketmq-$release/
		USER rocketmq
		WORKDIR /home/rocketmq/rocketmq-$release/bin
		EXPOSE 9876 10909 10911 10912 8080 8081
		LABEL idemq.standin=$(stamp "$image")
	EOF
	podman build -q -f "$ctx/Containerfile" -t "$image" "$ctx" >/dev/null
	log "built $image"
}

# build_kafka IMAGE builds apache/kafka's stand-in on the JRE image: the
# jars testenv resolved in /opt/kafka/libs, the image's directories, and
# its command /etc/kafka/docker/run, which the entry point serves. It runs
# as root, where the image runs as appuser: nothing the harness does
# depends on the account.
build_kafka() {
	local image=$1 ctx=$work/kafka
	mkdir -p "$ctx/root/opt/kafka/config" "$ctx/root/etc/kafka/docker" "$ctx/root/mnt/shared/config"
	cp -a "$kafkalib" "$ctx/root/opt/kafka/libs"
	natives "$ctx/root" "$kafkalib"
	cat >"$ctx/Containerfile" <<-EOF
		FROM $jre
		COPY root/ /
		EXPOSE 9092
		ENTRYPOINT ["/usr/local/bin/docker-entrypoint"]
		CMD ["/etc/kafka/docker/run"]
		LABEL idemq.standin=$(stamp "$image")
	EOF
	podman build -q -f "$ctx/Containerfile" -t "$image" "$ctx" >/dev/null
	log "built $image"
}

# build_nats IMAGE builds the nats image's stand-in FROM scratch, as the
# nats image is: the nats-server testenv runs as the entry point, with the
# image's default command and a configuration of its client and
# monitoring ports.
build_nats() {
	local image=$1 ctx=$work/nats
	mkdir -p "$ctx/root"
	cp "$natsbin" "$ctx/root/nats-server"
	# None for a static build, as testenv's is; a cgo build's otherwise.
	libs "$ctx/root" "$natsbin"
	printf 'port: 4222\nmonitor_port: 8222\n' >"$ctx/root/nats-server.conf"
	cat >"$ctx/Containerfile" <<-EOF
		FROM scratch
		COPY root/ /
		EXPOSE 4222 6222 8222
		ENTRYPOINT ["/nats-server"]
		CMD ["--config", "nats-server.conf"]
		LABEL idemq.standin=$(stamp "$image")
	EOF
	podman build -q -f "$ctx/Containerfile" -t "$image" "$ctx" >/dev/null
	log "built $image"
}

# The JRE first: the RocketMQ and Kafka images are built on it.
stale=()
for image in $redis $mariadb $postgres $jre $rocketmq4 $rocketmq5 $kafka $nats; do
	fresh "$image" || stale+=("$image")
done
if [ ${#stale[@]} -gt 0 ]; then
	(cd internal/testenv/containers && CGO_ENABLED=0 go build -trimpath -o "$work/standin" ./standin)
fi
replaced=()
for image in "${stale[@]}"; do
	replaced=("$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)" "${replaced[@]}")
	"${recipe[$image]}" "$image"
done
# The images these replaced, newest first so that the JRE goes after the
# images built on it; one a container still uses stays.
for id in "${replaced[@]}"; do
	[ -n "$id" ] && podman rmi "$id" >/dev/null 2>&1 || true
done

cat <<EOF
IDEMQ_REDIS_IMAGE=$redis
IDEMQ_MYSQL_IMAGE=$mariadb
IDEMQ_POSTGRES_IMAGE=$postgres
IDEMQ_ROCKETMQ_IMAGE=$rocketmq4
IDEMQ_ROCKETMQ5_IMAGE=$rocketmq5
IDEMQ_KAFKA_IMAGE=$kafka
IDEMQ_NATS_IMAGE=$nats
EOF

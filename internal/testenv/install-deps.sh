#!/usr/bin/env bash
# Installs what the real-server tests and the demo need, where it is missing:
# Debian's redis-server, mariadb-server and postgresql (only when run as root;
# otherwise it names what to install), a JDK and Maven for RocketMQ, and
# prometheus for its promtool.
# The RocketMQ jars themselves are resolved by testenv on first use.
set -euo pipefail

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || missing+=(maven)
# promtool checks and unit-tests the alert rules of examples/prometheus.
command -v promtool >/dev/null || missing+=(prometheus)

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing ${missing[*]}; install them (apt-get install ${missing[*]}) or set the IDEMQ_* variables" >&2
	exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# policy-rc.d keeps the packages from starting system-wide servers: tests
# start their own on free ports.
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

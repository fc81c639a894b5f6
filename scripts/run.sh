#!/usr/bin/env bash
# Builds and runs kgate on the embedded store (data in ./kgate-data). Extra arguments go to `kgate serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh build
exec cargo run --release --bin kgate -- serve "$@"

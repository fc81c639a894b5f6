#!/usr/bin/env bash
# Installs what the tests need, then runs the whole suite: formatting, lints, unit, integration and
# end-to-end tests (real etcd, real kubectl, real client libraries).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh all
cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
# Benches (harness = false) are checked by clippy above but not run here: they print figures, not verdicts.
cargo test 2>&1

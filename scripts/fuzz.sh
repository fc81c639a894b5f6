#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets, the parsers of kgate::fuzzing) under libFuzzer for a bounded
# time each, on the machine's nightly toolchain, from fuzz/seeds and, when KGATE_FUZZ_MANIFESTS names a
# directory of real manifests (e.g. ../shared/corpus), from those too (they are copied into the working
# corpus, never into the repository). Prints the executions of each target.
#   ./scripts/fuzz.sh [SECONDS_PER_TARGET]       (default 60; KGATE_FUZZ_TARGETS="body apply" picks targets)
# A crash, hang (over 10 s) or input that takes over 2 GiB is kept in fuzz/artifacts/<target>/: once
# fixed, copy it to fuzz/regressions/<target>/, which the ordinary test suite replays (tests/fuzz_corpus.rs).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${1:-60}
command -v cargo-fuzz >/dev/null || cargo install --quiet --locked cargo-fuzz
rustup toolchain list | grep -q nightly || { echo "fuzz: the nightly toolchain is needed (rustup toolchain install nightly)" >&2; exit 1; }
failed=0
for target in ${KGATE_FUZZ_TARGETS:-$(ls fuzz_targets | sed 's/\.rs$//')}; do
  corpus=corpus/$target
  mkdir -p "$corpus"
  cp -n seeds/"$target"/* "$corpus"/ 2>/dev/null || true
  if [ -n "${KGATE_FUZZ_MANIFESTS:-}" ] && [[ $target =~ ^(body|apply|openapi|crd|table)$ ]]; then
    find "$KGATE_FUZZ_MANIFESTS" -type f \( -name '*.yaml' -o -name '*.yml' -o -name '*.json' \) -print0 |
      while IFS= read -r -d '' f; do cp -n "$f" "$corpus/manifest-$(sha1sum "$f" | cut -c1-16)"; done
  fi
  log=/tmp/kgate-fuzz-$target.log
  if cargo +nightly fuzz run "$target" "$corpus" -- -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
      -max_len=65536 >"$log" 2>&1; then
    runs=$(grep -oE 'Done [0-9]+ runs' "$log" | tail -1 | grep -oE '[0-9]+' || echo '?')
    echo "$target: $runs executions in ${seconds}s, no crash, hang or excess memory"
  else
    failed=1
    echo "$target: FAILED, see $log and fuzz/artifacts/$target/"
  fi
done
exit $failed

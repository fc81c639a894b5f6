//! The fuzz targets (`kgate::fuzzing`) on stable, in the ordinary test suite: every seed and every input a
//! fuzzer once found to fail (`fuzz/regressions/`) goes through its target, which must return. And every
//! target has its cargo-fuzz binary and its seeds, so `scripts/fuzz.sh` runs them all.

use std::path::Path;

fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect();
    out.sort();
    out
}

#[test]
fn every_seed_and_regression_goes_through_its_target() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut replayed = 0;
    for (name, target) in kgate::fuzzing::TARGETS {
        assert!(
            fuzz.join("fuzz_targets").join(format!("{name}.rs")).is_file(),
            "fuzz/fuzz_targets/{name}.rs is missing"
        );
        let seeds = files(&fuzz.join("seeds").join(name));
        assert!(!seeds.is_empty(), "fuzz/seeds/{name}/ has no seeds");
        for input in seeds.iter().chain(files(&fuzz.join("regressions").join(name)).iter()) {
            target(&std::fs::read(input).unwrap());
            replayed += 1;
        }
    }
    let binaries = files(&fuzz.join("fuzz_targets")).len();
    assert_eq!(
        binaries,
        kgate::fuzzing::TARGETS.len(),
        "a fuzz target binary without an entry in kgate::fuzzing::TARGETS"
    );
    assert!(replayed >= 2 * kgate::fuzzing::TARGETS.len());
}

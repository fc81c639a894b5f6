//! Fuzz target `strategic_merge`: see `kgate::fuzzing::strategic_merge`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kgate::fuzzing::strategic_merge(data));

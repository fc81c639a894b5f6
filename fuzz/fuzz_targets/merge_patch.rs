//! Fuzz target `merge_patch`: see `kgate::fuzzing::merge_patch`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kgate::fuzzing::merge_patch(data));

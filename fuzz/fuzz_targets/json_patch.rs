//! Fuzz target `json_patch`: see `kgate::fuzzing::json_patch`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kgate::fuzzing::json_patch(data));

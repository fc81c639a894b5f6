//! Fuzz target `selectors`: see `kgate::fuzzing::selectors`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kgate::fuzzing::selectors(data));

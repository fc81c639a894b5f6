//! Fuzz target `crd`: see `kgate::fuzzing::crd`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kgate::fuzzing::crd(data));

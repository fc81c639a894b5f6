//! Fuzz target `apply`: see `kgate::fuzzing::apply`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kgate::fuzzing::apply(data));

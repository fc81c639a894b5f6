//! Fuzz target `body`: see `kgate::fuzzing::body`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kgate::fuzzing::body(data));

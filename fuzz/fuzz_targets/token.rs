//! Fuzz target `token`: see `kgate::fuzzing::token`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kgate::fuzzing::token(data));

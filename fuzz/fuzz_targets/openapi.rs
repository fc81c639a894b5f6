//! Fuzz target `openapi`: see `kgate::fuzzing::openapi`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kgate::fuzzing::openapi(data));

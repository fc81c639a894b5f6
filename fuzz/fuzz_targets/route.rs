//! Fuzz target `route`: see `kgate::fuzzing::route`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kgate::fuzzing::route(data));

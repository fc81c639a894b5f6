//! Fuzz target `continue_token`: see `kgate::fuzzing::continue_token`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kgate::fuzzing::continue_token(data));

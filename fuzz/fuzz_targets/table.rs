//! Fuzz target `table`: see `kgate::fuzzing::table`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kgate::fuzzing::table(data));

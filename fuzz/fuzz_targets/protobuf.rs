//! Fuzz target `protobuf`: see `kgate::fuzzing::protobuf`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kgate::fuzzing::protobuf(data));

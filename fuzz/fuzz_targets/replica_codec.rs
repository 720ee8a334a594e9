//! libFuzzer entry point; the harness is [`worldmesh_fuzz::replica_codec`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| worldmesh_fuzz::replica_codec(data));

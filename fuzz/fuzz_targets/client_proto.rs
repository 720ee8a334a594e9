//! libFuzzer entry point; the harness is [`worldmesh_fuzz::client_proto`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| worldmesh_fuzz::client_proto(data));

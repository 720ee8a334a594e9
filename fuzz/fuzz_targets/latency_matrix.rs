//! libFuzzer entry point; the harness is [`worldmesh_fuzz::latency_matrix`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| worldmesh_fuzz::latency_matrix(data));

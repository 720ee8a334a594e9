//! libFuzzer entry point; the harness is [`worldmesh_fuzz::text_configs`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| worldmesh_fuzz::text_configs(data));

//! libFuzzer entry point; the harness is [`worldmesh_fuzz::dashboard_msg`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| worldmesh_fuzz::dashboard_msg(data));

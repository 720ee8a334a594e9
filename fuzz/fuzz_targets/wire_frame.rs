//! libFuzzer entry point; the harness is [`worldmesh_fuzz::wire_frame`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| worldmesh_fuzz::wire_frame(data));

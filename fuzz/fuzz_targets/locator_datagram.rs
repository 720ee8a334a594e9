//! libFuzzer entry point; the harness is [`worldmesh_fuzz::locator_datagram`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| worldmesh_fuzz::locator_datagram(data));

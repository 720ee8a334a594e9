//! libFuzzer entry point; the harness is [`worldmesh_fuzz::node_datagram`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| worldmesh_fuzz::node_datagram(data));

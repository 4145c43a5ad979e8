//! Arbitrary operation sequences through the router against a fake cluster: transport
//! events, requests, replies split anywhere, garbage bytes, moved primaries and time.
#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iggy_route_core::fuzzing::router_ops(Instant::now(), data);
});

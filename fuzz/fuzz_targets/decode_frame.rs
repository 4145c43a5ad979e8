//! Feed arbitrary bytes through the frame decoder and every body decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iggy_route_core::fuzzing::decode_frame(data);
});

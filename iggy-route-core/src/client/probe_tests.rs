#![allow(clippy::unwrap_used)]

use std::time::Duration;

use bytes::BytesMut;

use super::{ProbeVerdict, probe_delay, probe_request, probe_verdict};
use crate::wire::{EvictionHeader, HEADER_SIZE, ReplyHeader, RequestHeader, code};

/// What a plaintext Iggy node answers to the probe's `PING`.
fn reply_to(ping: &[u8]) -> Vec<u8> {
    let request = RequestHeader::decode(ping).unwrap();
    let mut reply = BytesMut::new();
    ReplyHeader::for_request(&request, 0, 1, 0).encode(&mut reply);
    reply.to_vec()
}

#[test]
fn the_probe_waits_a_quarter_of_the_connect_timeout_at_most_a_second() {
    assert_eq!(
        probe_delay(Duration::from_millis(400)),
        Duration::from_millis(100)
    );
    assert_eq!(
        probe_delay(Duration::from_secs(3)),
        Duration::from_millis(750)
    );
    assert_eq!(probe_delay(Duration::from_secs(30)), Duration::from_secs(1));
    assert_eq!(probe_delay(Duration::MAX), Duration::from_secs(1));
    assert_eq!(probe_delay(Duration::ZERO), Duration::ZERO);
}

#[test]
fn the_probe_is_one_ping_header_with_no_body_and_never_client_zero() {
    for client in [0, 1, 7, u64::MAX] {
        let ping = probe_request(client);
        let header = RequestHeader::decode(&ping).unwrap();
        assert_eq!(header.command_code(), Some(code::PING));
        assert_eq!(header.size as usize, HEADER_SIZE, "a header alone");
        assert_eq!(header.client, u128::from(client.max(1)));
        assert_eq!(header.session, 0, "sent before any sign-in");
    }
}

#[test]
fn nothing_or_part_of_a_header_asks_for_more() {
    let reply = reply_to(&probe_request(5));
    assert_eq!(probe_verdict(&[]), ProbeVerdict::Pending);
    assert_eq!(probe_verdict(&reply[..1]), ProbeVerdict::Pending);
    assert_eq!(
        probe_verdict(&reply[..HEADER_SIZE - 1]),
        ProbeVerdict::Pending
    );
}

#[test]
fn an_iggy_reply_or_eviction_is_a_plaintext_node_even_with_more_behind_it() {
    let mut reply = reply_to(&probe_request(5));
    assert_eq!(probe_verdict(&reply), ProbeVerdict::PlaintextIggy);
    reply.extend_from_slice(&[0xAB; 100]);
    assert_eq!(probe_verdict(&reply), ProbeVerdict::PlaintextIggy);
    let mut eviction = BytesMut::new();
    EvictionHeader::default().encode(&mut eviction);
    assert_eq!(probe_verdict(&eviction), ProbeVerdict::PlaintextIggy);
}

#[test]
fn a_tls_alert_garbage_or_our_own_ping_echoed_prove_nothing() {
    // What a TLS node answers to plaintext: an alert record (then it hangs up).
    let alert = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32];
    assert_eq!(probe_verdict(&alert), ProbeVerdict::Pending);
    let mut padded = alert.to_vec();
    padded.resize(HEADER_SIZE, 0);
    assert_eq!(probe_verdict(&padded), ProbeVerdict::Unknown);
    assert_eq!(probe_verdict(&[0xAB; HEADER_SIZE]), ProbeVerdict::Unknown);
    assert_eq!(probe_verdict(&[0; HEADER_SIZE]), ProbeVerdict::Unknown);
    assert_eq!(
        probe_verdict(&[0xFF; 4 * HEADER_SIZE]),
        ProbeVerdict::Unknown
    );
    // An echo server is no Iggy node: a request header is not a reply.
    assert_eq!(probe_verdict(&probe_request(5)), ProbeVerdict::Unknown);
}

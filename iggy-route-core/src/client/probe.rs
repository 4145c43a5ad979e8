//! Telling a plaintext Iggy node from a slow TLS one: what the adapters' probe sends and
//! what it concludes from the answer.
//!
//! A plaintext Iggy 0.11.0 node reads a whole 256-byte header before it judges anything,
//! and a rustls ClientHello is shorter (236 bytes with a `localhost` SNI): such a node
//! waits for the rest in silence, and the handshake would only time out, exactly as with a
//! TLS node that hangs. A TLS node answers a ClientHello within a round trip. So when a
//! handshake has had no result for [`probe_delay`], the adapter opens a second, plaintext
//! connection to the same address and sends [`probe_request`], a `PING` header as the
//! SDK's heartbeat may send before signing in (no credentials go out). Only a node that
//! answers with an Iggy header is taken for a plaintext one (`TlsError::NotTls`); a TLS
//! node answers with an alert or hangs up, which proves nothing, and the handshake runs on
//! to its deadline.

use std::time::Duration;

use crate::wire::{EvictionHeader, HEADER_SIZE, Operation, ReplyHeader, RequestHeader, code};

/// The probe never waits longer than this for a handshake, whatever the connect timeout:
/// a TLS node that takes a second to answer a ClientHello is already unusually slow.
const PROBE_DELAY_MAX: Duration = Duration::from_secs(1);

/// How long a handshake may go without a result before its node is probed: a quarter of
/// the connect timeout, at most a second.
pub fn probe_delay(connect_timeout: Duration) -> Duration {
    (connect_timeout / 4).min(PROBE_DELAY_MAX)
}

/// How many bytes the probe writes, and reads back before [`probe_verdict`] can say more
/// than `Pending`: one consensus header.
pub const PROBE_LEN: usize = HEADER_SIZE;

/// The probe's bytes: a `PING` header from client `client` (the adapter's random number).
/// The server drops a request from client 0 without a word, so 0 is sent as 1.
pub fn probe_request(client: u64) -> [u8; PROBE_LEN] {
    let header = RequestHeader::new(
        Operation::NonReplicated,
        code::PING,
        u128::from(client.max(1)),
        0,
        1,
        0,
    );
    let mut ping = [0u8; HEADER_SIZE];
    header.encode(&mut ping.as_mut_slice());
    ping
}

/// What a probe has found out from the bytes read back so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeVerdict {
    /// Less than a header so far: wait for more. A node that hangs up now has proved
    /// nothing.
    Pending,
    /// The node answered the plaintext `PING` in Iggy (a reply or an eviction).
    PlaintextIggy,
    /// Something else (a TLS alert, garbage): the handshake decides.
    Unknown,
}

/// The verdict on `answer`, the bytes the probed node sent back, from the first.
pub fn probe_verdict(answer: &[u8]) -> ProbeVerdict {
    let Some(header) = answer.get(..HEADER_SIZE) else {
        return ProbeVerdict::Pending;
    };
    if ReplyHeader::decode(header).is_ok() || EvictionHeader::decode(header).is_ok() {
        ProbeVerdict::PlaintextIggy
    } else {
        ProbeVerdict::Unknown
    }
}

#[cfg(test)]
#[path = "probe_tests.rs"]
mod tests;

//! Telling a plaintext Iggy node from a slow TLS one.
//!
//! A plaintext Iggy 0.11.0 node reads a 256-byte header before it judges anything, and a
//! rustls ClientHello is shorter (236 bytes with a `localhost` SNI): the node waits for the
//! rest in silence, and the handshake would simply time out, exactly like a TLS node that
//! hangs. A TLS node answers a ClientHello within a round trip. So when a handshake has had
//! no result for a while ([`probe_delay`]), a second connection to the same address sends a
//! pre-authentication `PING` in plaintext, without credentials, as the SDK's heartbeat does
//! before it signs in. Only a node that answers it with an Iggy frame is reported as
//! `TlsError::NotTls`; a TLS node answers with an alert and closes, which proves nothing,
//! and the handshake goes on until its deadline.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;
use iggy_route_core::TlsError;
use iggy_route_core::wire::{
    EvictionHeader, HEADER_SIZE, Operation, ReplyHeader, RequestHeader, code,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::debug;

/// The probe never waits longer than this for a handshake, whatever the connect timeout:
/// a TLS node that takes a second to answer a ClientHello is already unusually slow.
const PROBE_DELAY_MAX: Duration = Duration::from_secs(1);

/// How long a handshake may go without a result before the probe: a quarter of the
/// connect timeout, at most [`PROBE_DELAY_MAX`].
pub(crate) fn probe_delay(connect_timeout: Duration) -> Duration {
    (connect_timeout / 4).min(PROBE_DELAY_MAX)
}

/// Runs `handshake`; should it have no result after `delay`, probes `peer` alongside it,
/// and ends it with `TlsError::NotTls` if the node answers in plaintext Iggy. The
/// handshake's own deadline bounds both.
pub(crate) async fn unless_plaintext<T>(
    handshake: impl Future<Output = Result<T, TlsError>>,
    peer: SocketAddr,
    delay: Duration,
) -> Result<T, TlsError> {
    let probe = async {
        tokio::time::sleep(delay).await;
        debug!(%peer, ?delay, "no handshake yet: probing for a plaintext Iggy node");
        if speaks_plaintext_iggy(peer).await {
            TlsError::NotTls
        } else {
            // Nothing learned: the handshake's result, or its deadline, decides.
            std::future::pending().await
        }
    };
    tokio::select! {
        biased;
        result = handshake => result,
        error = probe => Err(error),
    }
}

/// Whether the node at `peer` answers a plaintext `PING` with an Iggy reply or eviction
/// header.
pub(crate) async fn speaks_plaintext_iggy(peer: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect(peer).await else {
        return false;
    };
    // The server drops a request whose client id is 0 without a word; any other will do
    // for a ping before sign-in.
    let client = getrandom::u64().map_or(1, |random| random.max(1));
    let header = RequestHeader::new(
        Operation::NonReplicated,
        code::PING,
        u128::from(client),
        0,
        1,
        0,
    );
    let mut ping = BytesMut::with_capacity(HEADER_SIZE);
    header.encode(&mut ping);
    if stream.write_all(&ping).await.is_err() {
        return false;
    }
    let mut answer = [0u8; HEADER_SIZE];
    if stream.read_exact(&mut answer).await.is_err() {
        return false;
    }
    ReplyHeader::decode(&answer).is_ok() || EvictionHeader::decode(&answer).is_ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::tls_peers::{Plain, plain_iggy_server, plain_server};

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
        assert_eq!(probe_delay(Duration::from_secs(30)), PROBE_DELAY_MAX);
    }

    #[tokio::test]
    async fn a_node_answering_a_plaintext_ping_speaks_plaintext_iggy() {
        let addr = plain_iggy_server().await;
        assert!(speaks_plaintext_iggy(addr).await);
    }

    #[tokio::test]
    async fn peers_that_close_answer_garbage_or_are_gone_prove_nothing() {
        for behaviour in [Plain::Close, Plain::Garbage] {
            let (addr, _) = plain_server(behaviour).await;
            assert!(!speaks_plaintext_iggy(addr).await, "{behaviour:?}");
        }
        let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = gone.local_addr().unwrap();
        drop(gone);
        assert!(!speaks_plaintext_iggy(addr).await);
    }

    #[tokio::test]
    async fn a_handshake_that_ends_first_is_not_probed() {
        let (addr, received) = plain_server(Plain::Silent).await;
        let quick = async { Ok::<_, TlsError>(7) };
        assert_eq!(unless_plaintext(quick, addr, Duration::ZERO).await, Ok(7));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(received.load(std::sync::atomic::Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn a_stalled_handshake_to_a_plaintext_node_ends_as_not_tls() {
        let addr = plain_iggy_server().await;
        let stalled = std::future::pending::<Result<(), TlsError>>();
        let result = unless_plaintext(stalled, addr, Duration::from_millis(10)).await;
        assert_eq!(result, Err(TlsError::NotTls));
    }
}

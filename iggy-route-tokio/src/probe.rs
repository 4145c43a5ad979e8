//! The plaintext probe's I/O: a second connection to a node whose TLS handshake has had
//! no result for a while. What it sends, what the answer means and when it starts are the
//! core's (`iggy_route_core::client::probe_request` and its siblings: see there why a
//! plaintext Iggy node has to be asked).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use iggy_route_core::TlsError;
use iggy_route_core::client::{PROBE_LEN, ProbeVerdict, probe_request, probe_verdict};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::debug;

pub(crate) use iggy_route_core::client::probe_delay;

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
    // Any client id but 0 will do for a ping before sign-in; the core sees to that.
    let ping = probe_request(getrandom::u64().unwrap_or(1));
    if stream.write_all(&ping).await.is_err() {
        return false;
    }
    let mut answer = [0u8; PROBE_LEN];
    if stream.read_exact(&mut answer).await.is_err() {
        // A hang-up before a whole header proves nothing.
        return false;
    }
    probe_verdict(&answer) == ProbeVerdict::PlaintextIggy
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::tls_peers::{Plain, plain_iggy_server, plain_server};

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

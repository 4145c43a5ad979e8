//! How [`Client::connect`](crate::Client::connect) learns from the driver that its session
//! signed in, or why it never will. The rule, and the bookkeeping of the driver's side,
//! are the core's (`SessionWatch`, which hands its outcome to a channel once); this is the
//! caller's side of that channel.

use std::future::Future;
use std::time::Duration;

use iggy_route_core::client::ClientError;
use tokio::sync::oneshot;

/// Where `Client::connect` waits for the session: signed in, or why not.
pub(crate) type SessionReady = oneshot::Sender<Result<(), ClientError>>;

/// The client's side: waits up to `budget` for the outcome. Past it, `stop` stops the
/// driver (which then says why it gave up: the last TLS failure met, else
/// `ConnectTimedOut`).
pub(crate) async fn wait_for_session<Stopped: Future<Output = ()>>(
    mut ready: oneshot::Receiver<Result<(), ClientError>>,
    budget: Duration,
    stop: impl FnOnce() -> Stopped,
) -> Result<(), ClientError> {
    match tokio::time::timeout(budget, &mut ready).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(_driver_gone)) => Err(ClientError::Closed),
        Err(_elapsed) => {
            stop().await;
            Err(match ready.try_recv() {
                Ok(Err(error)) => error,
                // Signed in just as the budget ran out: too late, the client is stopped.
                Ok(Ok(())) | Err(_) => ClientError::ConnectTimedOut { after: budget },
            })
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use iggy_route_core::client::SessionWatch;
    use iggy_route_core::{Config, Credentials, Event, LinkId, LinkRole, NodeId, TlsError};

    use super::*;

    /// Three connect timeouts of the config [`watched`] makes.
    const BUDGET: Duration = Duration::from_millis(300);

    /// A watch of a router with two seeds.
    fn watched() -> (SessionWatch, oneshot::Receiver<Result<(), ClientError>>) {
        let seeds = vec!["127.0.0.1:1".to_owned(), "127.0.0.1:2".to_owned()];
        let mut config = Config::new(seeds, Credentials::user("iggy", "iggy").unwrap());
        config.connect_timeout = BUDGET / 3;
        let (sender, receiver) = oneshot::channel();
        let watch = SessionWatch::new(&config, move |outcome| {
            let _ = sender.send(outcome);
        });
        (watch, receiver)
    }

    async fn never_stopped() {
        panic!("not stopped");
    }

    #[tokio::test]
    async fn a_certificate_problem_ends_the_wait_at_once() {
        let rejected = TlsError::CertificateRejected {
            reason: "UnknownIssuer".to_owned(),
        };
        let (mut watch, ready) = watched();
        watch.tls_failed(LinkId(1), NodeId(0), rejected.clone());
        let outcome = wait_for_session(ready, BUDGET, never_stopped).await;
        assert!(matches!(outcome, Err(ClientError::Tls(e)) if e == rejected));
    }

    #[tokio::test]
    async fn a_handshake_timeout_is_reported_when_the_budget_runs_out_and_the_driver_stops() {
        let (mut watch, ready) = watched();
        watch.tls_failed(LinkId(1), NodeId(0), TlsError::HandshakeTimedOut);
        let watch = Arc::new(Mutex::new(watch));
        let started = Instant::now();
        let stopping = Arc::clone(&watch);
        let stop = || async move { stopping.lock().unwrap().stopped() };
        let outcome = wait_for_session(ready, BUDGET, stop).await;
        assert!(started.elapsed() >= BUDGET);
        assert!(matches!(
            outcome,
            Err(ClientError::Tls(TlsError::HandshakeTimedOut))
        ));
        // Without any TLS trouble, a timeout is a timeout.
        let (quiet, ready) = watched();
        let quiet = Arc::new(Mutex::new(quiet));
        let stop = || async move { quiet.lock().unwrap().stopped() };
        let outcome = wait_for_session(ready, BUDGET, stop).await;
        assert!(matches!(outcome, Err(ClientError::ConnectTimedOut { after }) if after == BUDGET));
    }

    #[tokio::test]
    async fn a_signed_in_session_settles_the_wait_and_later_failures_are_not_sent() {
        let (mut watch, ready) = watched();
        watch.tls_failed(LinkId(1), NodeId(0), TlsError::HandshakeTimedOut);
        watch.event(&Event::LinkUp {
            link: LinkId(2),
            node: NodeId(0),
            role: LinkRole::Coordinator,
        });
        watch.tls_failed(LinkId(3), NodeId(0), TlsError::NotTls);
        watch.tls_failed(LinkId(4), NodeId(1), TlsError::NotTls);
        watch.stopped();
        assert!(wait_for_session(ready, BUDGET, never_stopped).await.is_ok());
    }

    #[tokio::test]
    async fn a_driver_that_is_gone_closes_the_wait() {
        let (watch, ready) = watched();
        drop(watch);
        let outcome = wait_for_session(ready, BUDGET, never_stopped).await;
        assert!(matches!(outcome, Err(ClientError::Closed)));
    }
}

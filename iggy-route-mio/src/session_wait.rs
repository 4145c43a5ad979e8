//! How [`Client::connect`](crate::Client::connect) learns from the I/O thread that its
//! session signed in, or why it never will. The rule, and the bookkeeping of the I/O
//! thread's side, are the core's (`SessionWatch`, which hands its outcome to a channel
//! once); this is the caller's side of that channel.

use std::sync::mpsc;
use std::time::Duration;

use iggy_route_core::client::ClientError;

/// The client's side: waits up to `budget` for the outcome. Past it, `stop` stops the I/O
/// thread (which then says why it gave up: the last TLS failure met, else
/// `ConnectTimedOut`).
pub(crate) fn wait_for_session(
    ready: &mpsc::Receiver<Result<(), ClientError>>,
    budget: Duration,
    stop: impl FnOnce(),
) -> Result<(), ClientError> {
    match ready.recv_timeout(budget) {
        Ok(outcome) => outcome,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            stop();
            Err(match ready.try_recv() {
                Ok(Err(error)) => error,
                // Signed in just as the budget ran out: too late, the client is stopped.
                Ok(Ok(())) | Err(_) => ClientError::ConnectTimedOut { after: budget },
            })
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(ClientError::Closed),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Instant;

    use iggy_route_core::client::SessionWatch;
    use iggy_route_core::{Config, Credentials, Event, LinkId, LinkRole, NodeId, TlsError};

    use super::*;

    const BUDGET: Duration = Duration::from_millis(200);

    /// A watch of a router with two seeds.
    fn watched() -> (SessionWatch, mpsc::Receiver<Result<(), ClientError>>) {
        let seeds = vec!["127.0.0.1:1".to_owned(), "127.0.0.1:2".to_owned()];
        let config = Config::new(seeds, Credentials::user("iggy", "iggy").unwrap());
        let (sender, receiver) = mpsc::channel();
        let watch = SessionWatch::new(&config, move |outcome| {
            let _ = sender.send(outcome);
        });
        (watch, receiver)
    }

    #[test]
    fn a_certificate_problem_ends_the_wait_at_once() {
        let rejected = TlsError::CertificateRejected {
            reason: "UnknownIssuer".to_owned(),
        };
        let (mut watch, news) = watched();
        watch.tls_failed(LinkId(1), NodeId(0), rejected.clone());
        assert!(watch.is_settled());
        let outcome = wait_for_session(&news, BUDGET, || panic!("not stopped"));
        assert!(matches!(outcome, Err(ClientError::Tls(e)) if e == rejected));
    }

    #[test]
    fn a_handshake_timeout_is_reported_when_the_budget_runs_out_and_the_loop_stops() {
        let (watch, news) = watched();
        let watch = std::cell::RefCell::new(watch);
        watch
            .borrow_mut()
            .tls_failed(LinkId(1), NodeId(0), TlsError::HandshakeTimedOut);
        let started = Instant::now();
        let outcome = wait_for_session(&news, BUDGET, || watch.borrow_mut().stopped());
        assert!(started.elapsed() >= BUDGET);
        assert!(matches!(
            outcome,
            Err(ClientError::Tls(TlsError::HandshakeTimedOut))
        ));
        // Without any TLS trouble, a timeout is a timeout.
        let (mut quiet, news) = watched();
        let outcome = wait_for_session(&news, BUDGET, || quiet.stopped());
        assert!(matches!(outcome, Err(ClientError::ConnectTimedOut { .. })));
    }

    #[test]
    fn a_signed_in_session_settles_the_wait_and_later_failures_are_not_sent() {
        let (mut watch, news) = watched();
        watch.tls_failed(LinkId(1), NodeId(0), TlsError::HandshakeTimedOut);
        watch.event(&Event::LinkUp {
            link: LinkId(1),
            node: NodeId(0),
            role: LinkRole::Coordinator,
        });
        assert!(watch.is_settled());
        watch.tls_failed(LinkId(1), NodeId(0), TlsError::NotTls);
        watch.tls_failed(LinkId(1), NodeId(1), TlsError::NotTls);
        watch.stopped();
        assert!(wait_for_session(&news, BUDGET, || panic!("not stopped")).is_ok());
        assert!(news.try_recv().is_err(), "nothing after the answer");
    }

    #[test]
    fn a_loop_that_is_gone_closes_the_wait() {
        let (watch, news) = watched();
        drop(watch);
        let outcome = wait_for_session(&news, BUDGET, || panic!("not stopped"));
        assert!(matches!(outcome, Err(ClientError::Closed)));
    }
}

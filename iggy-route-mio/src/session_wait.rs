//! How [`Client::connect`](crate::Client::connect) learns from the I/O thread that its
//! session signed in, or why it never will. The rule is the core's
//! [`ConnectWait`](iggy_route_core::client::ConnectWait); this carries its outcome over a
//! channel, once.

use std::sync::mpsc;
use std::time::Duration;

use iggy_route_core::client::{ClientError, ConnectWait};
use iggy_route_core::{Config, Event, NodeId, TlsError};

/// Where `Client::connect` waits for the session: signed in, or why not.
pub(crate) type SessionReady = mpsc::Sender<Result<(), ClientError>>;

/// The I/O thread's side: the core's wait, and the channel its outcome goes over.
#[derive(Debug)]
pub(crate) struct SessionWatch {
    ready: Option<SessionReady>,
    wait: ConnectWait,
}

impl SessionWatch {
    pub(crate) fn new(ready: SessionReady, config: &Config) -> Self {
        Self {
            ready: Some(ready),
            wait: ConnectWait::new(config),
        }
    }

    /// Whether `connect` has had its answer (TLS failures are then the router's to retry).
    pub(crate) fn is_settled(&self) -> bool {
        self.wait.is_settled()
    }

    /// An event of the router, which may settle the wait.
    pub(crate) fn event(&mut self, event: &Event) {
        let outcome = self.wait.on_event(event);
        self.send(outcome);
    }

    /// A link to `node` failed its TLS handshake (or never finished it).
    pub(crate) fn tls_failed(&mut self, node: NodeId, error: &TlsError) {
        let outcome = self.wait.on_tls_failure(node, error.clone());
        self.send(outcome);
    }

    /// The loop stops while `connect` may still wait: a `connect` that ran out of time
    /// stops it and then reads the channel, and the TLS failure met, if any, says more
    /// than the bare timeout.
    pub(crate) fn stopped(&mut self) {
        let outcome = self.wait.give_up().map(Err);
        self.send(outcome);
    }

    fn send(&mut self, outcome: Option<Result<(), ClientError>>) {
        if let Some(outcome) = outcome
            && let Some(ready) = self.ready.take()
        {
            // `connect` may have given up waiting; then nobody listens.
            let _ = ready.send(outcome);
        }
    }
}

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

    use iggy_route_core::{Credentials, LinkId, LinkRole};

    use super::*;

    const BUDGET: Duration = Duration::from_millis(200);

    /// A watch of a router with two seeds.
    fn watched() -> (SessionWatch, mpsc::Receiver<Result<(), ClientError>>) {
        let seeds = vec!["127.0.0.1:1".to_owned(), "127.0.0.1:2".to_owned()];
        let config = Config::new(seeds, Credentials::user("iggy", "iggy").unwrap());
        let (sender, receiver) = mpsc::channel();
        (SessionWatch::new(sender, &config), receiver)
    }

    #[test]
    fn a_certificate_problem_ends_the_wait_at_once() {
        let rejected = TlsError::CertificateRejected {
            reason: "UnknownIssuer".to_owned(),
        };
        let (mut watch, news) = watched();
        watch.tls_failed(NodeId(0), &rejected);
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
            .tls_failed(NodeId(0), &TlsError::HandshakeTimedOut);
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
        watch.tls_failed(NodeId(0), &TlsError::HandshakeTimedOut);
        watch.event(&Event::LinkUp {
            link: LinkId(1),
            node: NodeId(0),
            role: LinkRole::Coordinator,
        });
        assert!(watch.is_settled());
        watch.tls_failed(NodeId(0), &TlsError::NotTls);
        watch.tls_failed(NodeId(1), &TlsError::NotTls);
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

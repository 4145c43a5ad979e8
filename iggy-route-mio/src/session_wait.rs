//! How [`Client::connect`](crate::Client::connect) learns that its session signed in, or
//! why it never will, from the I/O thread.
//!
//! The core's [`session_signal`] settles the wait on the coordinator's sign-in or a refusal
//! of the credentials. TLS adds failures the core never sees as such: a handshake the
//! adapter gave up on. A certificate or configuration problem ([`TlsError::is_fatal`])
//! settles the wait at once, since dialling again would meet it again. A node that does
//! not speak TLS may be one node's problem, and the router moves the session on to the
//! next seed; once every seed has answered so, no seed can carry the session and the wait
//! ends with `NotTls` (within milliseconds of each other: the router dials the next seed at
//! once). Other TLS failures (a handshake that did not finish in time) leave the router
//! trying, and are kept: if the budget runs out, `connect` reports the last of them
//! instead of a bare `ConnectTimedOut`.

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use iggy_route_core::client::{ClientError, session_signal};
use iggy_route_core::{Event, NodeId, TlsError};

/// What the I/O thread tells a waiting `connect`.
#[derive(Debug)]
pub(crate) enum SessionNews {
    /// The wait is over: the session signed in, or cannot.
    Settled(Result<(), ClientError>),
    /// A TLS failure that may pass; the router keeps trying.
    TlsTrouble(TlsError),
}

/// The I/O thread's side: sends news until the wait is settled, then nothing.
#[derive(Debug)]
pub(crate) struct SessionWatch {
    news: Option<mpsc::Sender<SessionNews>>,
    /// How many seeds the router has: node ids `0..seeds`.
    seeds: usize,
    /// Seeds that answered in plaintext.
    not_tls: BTreeSet<NodeId>,
}

impl SessionWatch {
    /// A watch for a router with `seeds` seed nodes.
    pub(crate) fn new(news: mpsc::Sender<SessionNews>, seeds: usize) -> Self {
        Self {
            news: Some(news),
            seeds,
            not_tls: BTreeSet::new(),
        }
    }

    /// Whether `connect` has had its answer (TLS failures are then the router's to retry).
    pub(crate) fn is_settled(&self) -> bool {
        self.news.is_none()
    }

    /// An event of the router, which may settle the wait.
    pub(crate) fn event(&mut self, event: &Event) {
        if let Some(signal) = session_signal(event) {
            self.settle(signal);
        }
    }

    /// A link to `node` failed its TLS handshake (or never finished it).
    pub(crate) fn tls_failed(&mut self, node: NodeId, error: &TlsError) {
        if *error == TlsError::NotTls && usize::try_from(node.0).is_ok_and(|id| id < self.seeds) {
            self.not_tls.insert(node);
        }
        if error.is_fatal() || (self.seeds > 0 && self.not_tls.len() >= self.seeds) {
            self.settle(Err(ClientError::Tls(error.clone())));
        } else if let Some(news) = &self.news {
            // `connect` may have given up waiting; then nobody listens.
            let _ = news.send(SessionNews::TlsTrouble(error.clone()));
        }
    }

    fn settle(&mut self, outcome: Result<(), ClientError>) {
        if let Some(news) = self.news.take() {
            let _ = news.send(SessionNews::Settled(outcome));
        }
    }
}

/// The client's side: waits up to `budget` for the wait to settle. Past it, the last TLS
/// failure heard of, else `ConnectTimedOut`.
pub(crate) fn wait_for_session(
    news: &mpsc::Receiver<SessionNews>,
    budget: Duration,
) -> Result<(), ClientError> {
    let deadline = Instant::now() + budget;
    let mut trouble = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match news.recv_timeout(left) {
            Ok(SessionNews::Settled(outcome)) => return outcome,
            Ok(SessionNews::TlsTrouble(error)) => trouble = Some(error),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(trouble.map_or(
                    ClientError::ConnectTimedOut { after: budget },
                    ClientError::Tls,
                ));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(ClientError::Closed),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use iggy_route_core::{LinkId, LinkRole, NodeId};

    use super::*;

    const BUDGET: Duration = Duration::from_millis(200);

    /// A watch of a router with two seeds.
    fn watched() -> (SessionWatch, mpsc::Receiver<SessionNews>) {
        let (sender, receiver) = mpsc::channel();
        (SessionWatch::new(sender, 2), receiver)
    }

    fn ends_at_once(news: &mpsc::Receiver<SessionNews>, error: &TlsError) {
        let started = Instant::now();
        let outcome = wait_for_session(news, BUDGET);
        assert!(matches!(outcome, Err(ClientError::Tls(e)) if e == *error));
        assert!(started.elapsed() < BUDGET);
    }

    #[test]
    fn a_certificate_problem_ends_the_wait_at_once() {
        let rejected = TlsError::CertificateRejected {
            reason: "UnknownIssuer".to_owned(),
        };
        let (mut watch, news) = watched();
        watch.tls_failed(NodeId(0), &rejected);
        assert!(watch.is_settled());
        ends_at_once(&news, &rejected);
    }

    #[test]
    fn plaintext_nodes_end_the_wait_once_every_seed_answered_so() {
        let (mut watch, news) = watched();
        watch.tls_failed(NodeId(0), &TlsError::NotTls);
        // A node learned from the roster is no seed; the same seed twice counts once.
        watch.tls_failed(NodeId(5), &TlsError::NotTls);
        watch.tls_failed(NodeId(0), &TlsError::NotTls);
        assert!(!watch.is_settled(), "the second seed may carry the session");
        watch.tls_failed(NodeId(1), &TlsError::NotTls);
        assert!(watch.is_settled());
        ends_at_once(&news, &TlsError::NotTls);
    }

    #[test]
    fn a_handshake_timeout_is_reported_only_when_the_budget_runs_out() {
        let (mut watch, news) = watched();
        watch.tls_failed(NodeId(0), &TlsError::HandshakeTimedOut);
        assert!(!watch.is_settled());
        let started = Instant::now();
        let outcome = wait_for_session(&news, BUDGET);
        assert!(started.elapsed() >= BUDGET);
        assert!(matches!(
            outcome,
            Err(ClientError::Tls(TlsError::HandshakeTimedOut))
        ));
        // Without any TLS trouble, a timeout is a timeout.
        let (_unused, news) = watched();
        let outcome = wait_for_session(&news, BUDGET);
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
        assert!(wait_for_session(&news, BUDGET).is_ok());
        assert!(news.try_recv().is_err(), "nothing after the answer");
    }
}

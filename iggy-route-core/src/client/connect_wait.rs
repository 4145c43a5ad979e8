//! When a client's `connect` stops waiting for its session, and with what: one rule for
//! both adapters, fed by the router's events and by the TLS failures only the adapter
//! sees (the router meets them as failed connects).
//!
//! The wait settles on the coordinator's sign-in or a refusal of the credentials for good
//! ([`session_signal`]). A certificate or configuration problem ([`TlsError::is_fatal`])
//! settles it at once: dialling again would meet it again. A node that does not speak TLS
//! may be one node's problem, and the router moves the session on to the next seed; once
//! every seed has answered so, no seed can carry the session and the wait ends with
//! `NotTls`. Any other TLS failure (a handshake that did not finish in time) is kept: when
//! the budget runs out, `connect` reports the latest of them rather than a bare
//! `ConnectTimedOut`.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use tracing::{debug, warn};

use super::{ClientError, session_signal};
use crate::config::{Config, TlsError};
use crate::event::Event;
use crate::ids::{LinkId, NodeId};

/// `connect` waits this many connect timeouts for the session to sign in.
const CONNECT_ATTEMPTS: u32 = 3;

/// One `connect`'s wait for its session. Each method that may settle it returns the
/// outcome once, the first time; afterwards every input is ignored.
#[derive(Debug, Clone)]
pub struct ConnectWait {
    /// How many seed nodes the router dials: its node ids `0..seeds`.
    seeds: usize,
    /// Seeds that answered in plaintext.
    not_tls: BTreeSet<NodeId>,
    /// The latest TLS failure that did not settle the wait.
    latest: Option<TlsError>,
    budget: Duration,
    settled: bool,
}

impl ConnectWait {
    /// The wait of a client made from `config`.
    pub fn new(config: &Config) -> Self {
        Self {
            // The router takes at most `max_nodes` seeds (and always room for one).
            seeds: config.seeds.len().min(config.max_nodes.max(1)),
            not_tls: BTreeSet::new(),
            latest: None,
            budget: config.connect_timeout.saturating_mul(CONNECT_ATTEMPTS),
            settled: false,
        }
    }

    /// How long `connect` waits in all: a few connect timeouts, so that the router can
    /// try the next seed when one does not answer.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Whether `connect` has had its outcome; a TLS failure after it is the router's to
    /// retry, as any failed connect.
    pub fn is_settled(&self) -> bool {
        self.settled
    }

    /// An event of the router: `Some` when it settles the wait.
    pub fn on_event(&mut self, event: &Event) -> Option<Result<(), ClientError>> {
        let outcome = session_signal(event)?;
        self.settle(outcome)
    }

    /// A link to `node` failed its TLS handshake, or never finished it: `Some` when the
    /// failure ends `connect` now.
    pub fn on_tls_failure(
        &mut self,
        node: NodeId,
        error: TlsError,
    ) -> Option<Result<(), ClientError>> {
        if self.settled {
            return None;
        }
        if error.is_fatal() {
            return self.settle(Err(ClientError::Tls(error)));
        }
        let is_seed = usize::try_from(node.0).is_ok_and(|id| id < self.seeds);
        if error == TlsError::NotTls && is_seed {
            self.not_tls.insert(node);
            if self.not_tls.len() >= self.seeds {
                return self.settle(Err(ClientError::Tls(error)));
            }
        }
        self.latest = Some(error);
        None
    }

    /// The budget ran out (or the client stops) before the wait settled: the error
    /// `connect` reports, the latest TLS failure if one was met, else `ConnectTimedOut`.
    /// `None` when the wait had settled already.
    pub fn give_up(&mut self) -> Option<ClientError> {
        if self.settled {
            return None;
        }
        self.settled = true;
        Some(self.latest.take().map_or(
            ClientError::ConnectTimedOut { after: self.budget },
            ClientError::Tls,
        ))
    }

    fn settle(&mut self, outcome: Result<(), ClientError>) -> Option<Result<(), ClientError>> {
        if self.settled {
            return None;
        }
        self.settled = true;
        self.latest = None;
        Some(outcome)
    }
}

/// Where a settled wait's outcome goes: the adapter's channel to the caller of `connect`.
type Ready = Box<dyn FnOnce(Result<(), ClientError>) + Send>;

/// The adapter's side of one `connect`: the [`ConnectWait`], fed by the router's events and
/// the adapter's TLS failures, and `ready`, which hears its outcome once. Both adapters keep
/// one in their driver, and it also decides which TLS failures are worth a warning.
pub struct SessionWatch {
    wait: ConnectWait,
    ready: Option<Ready>,
}

impl fmt::Debug for SessionWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionWatch")
            .field("wait", &self.wait)
            .field("heard", &self.ready.is_none())
            .finish()
    }
}

impl SessionWatch {
    /// The watch of a client made from `config`; `ready` is called once, with the outcome
    /// (a caller that gave up waiting is the adapter's to ignore).
    pub fn new(
        config: &Config,
        ready: impl FnOnce(Result<(), ClientError>) + Send + 'static,
    ) -> Self {
        Self {
            wait: ConnectWait::new(config),
            ready: Some(Box::new(ready)),
        }
    }

    /// Whether `connect` has had its answer.
    pub fn is_settled(&self) -> bool {
        self.wait.is_settled()
    }

    /// An event of the router, which may settle the wait.
    pub fn event(&mut self, event: &Event) {
        let outcome = self.wait.on_event(event);
        self.send(outcome);
    }

    /// `link`'s TLS session to `node` failed to come up (or never finished); the router
    /// handles the link as any failed connect. While `connect` waits, the failure may end
    /// the wait, and `connect` reports it. Once the session is up, the router retries the
    /// node after its backoff, and only a failure that retrying will not mend is warned of.
    pub fn tls_failed(&mut self, link: LinkId, node: NodeId, error: TlsError) {
        if self.is_settled() && (error.is_fatal() || error == TlsError::NotTls) {
            warn!(%link, %node, %error, "TLS failed; the node is retried after its backoff");
        } else {
            debug!(%link, %node, %error, "TLS failed; handled as a failed connect");
        }
        let outcome = self.wait.on_tls_failure(node, error);
        self.send(outcome);
    }

    /// The driver stops while `connect` may still wait: a `connect` that ran out of time
    /// stops it and then reads the outcome, and the TLS failure met, if any, says more than
    /// the bare timeout.
    pub fn stopped(&mut self) {
        let outcome = self.wait.give_up().map(Err);
        self.send(outcome);
    }

    fn send(&mut self, outcome: Option<Result<(), ClientError>>) {
        if let Some(outcome) = outcome
            && let Some(ready) = self.ready.take()
        {
            ready(outcome);
        }
    }
}

#[cfg(test)]
#[path = "connect_wait_tests.rs"]
mod tests;

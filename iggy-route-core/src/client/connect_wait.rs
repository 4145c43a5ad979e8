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
use std::time::Duration;

use super::{ClientError, session_signal};
use crate::config::{Config, TlsError};
use crate::event::Event;
use crate::ids::NodeId;

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

#[cfg(test)]
#[path = "connect_wait_tests.rs"]
mod tests;

//! How [`Client::connect`](crate::Client::connect) learns from the driver that its session
//! signed in, or why it never will. The rule is the core's
//! [`ConnectWait`](iggy_route_core::client::ConnectWait); this carries its outcome over a
//! channel, once.

use iggy_route_core::client::{ClientError, ConnectWait};
use iggy_route_core::{Config, Event, LinkId, NodeId, TlsError};
use tokio::sync::oneshot;
use tracing::warn;

/// Where `Client::connect` waits for the session: signed in, or why not.
pub(crate) type SessionReady = oneshot::Sender<Result<(), ClientError>>;

/// The driver's side: the core's wait, and the channel its outcome goes over.
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

    /// An event of the router, which may settle the wait.
    pub(crate) fn event(&mut self, event: &Event) {
        let outcome = self.wait.on_event(event);
        self.send(outcome);
    }

    /// A link's TLS session failed to come up. It is logged whenever it happens (the router
    /// handles the link as any failed connect); while `connect` waits, it may end the wait.
    pub(crate) fn tls_failed(&mut self, link: LinkId, node: NodeId, error: TlsError) {
        warn!(%link, %node, %error, "TLS failed; handled as a failed connect");
        let outcome = self.wait.on_tls_failure(node, error);
        self.send(outcome);
    }

    /// The driver stops while `connect` may still wait: a `connect` that ran out of time
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

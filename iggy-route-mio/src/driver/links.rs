//! The I/O loop's sockets: dialling a link (name lookup, TCP, then TLS when the client uses
//! it), readiness events, reads and writes, and the interest each socket is registered
//! with; and the probes that tell a plaintext node from a slow TLS one (see
//! [`crate::probe`]).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iggy_route_core::client::{ProbeVerdict, connect_error};
use iggy_route_core::{CloseReason, ConnectError, LinkId, NodeId, TlsError};
use mio::Token;
use mio::event::Event as Readiness;
use tracing::{debug, debug_span};

use super::Driver;
use crate::connection::{ConnectState, Connection};
use crate::probe::{PROBE_BIT, Probe};
use crate::resolve::{Resolution, Resolver};
use crate::tls::{TlsSession, TlsSettings};

/// How the loop reaches a node: its name looked up off the thread, TCP, and TLS over it
/// when the client uses TLS.
#[derive(Debug)]
pub(crate) struct Dialer {
    pub(crate) resolver: Resolver,
    pub(crate) tls: Option<TlsSettings>,
    /// How long a TLS handshake may go without a result before its node is probed
    /// (`probe::probe_delay` of the connect timeout).
    pub(crate) probe_delay: Duration,
}

/// A link whose address is being looked up: no socket yet.
#[derive(Debug)]
pub(super) struct Resolving {
    span: tracing::Span,
    node: NodeId,
    /// Its TLS session, made with the address's name before the lookup.
    tls: Option<Box<TlsSession>>,
}

impl Driver {
    pub(super) fn socket_ready(&mut self, readiness: &Readiness) {
        let link = LinkId(readiness.token().0 as u64);
        let Some(connection) = self.connections.get_mut(&link) else {
            return;
        };
        let span = connection.span.clone();
        let _entered = span.enter();
        let mut read_now = readiness.is_readable() || readiness.is_read_closed();
        if !connection.is_up() {
            let was_handshaking = connection.is_handshaking();
            match connection.check_connect() {
                ConnectState::Pending => {
                    if connection.is_handshaking() && !was_handshaking {
                        // TCP is up and the handshake under way.
                        let at = Instant::now() + self.dialer.probe_delay;
                        self.probes_due.push((at, link));
                    }
                    return;
                }
                ConnectState::Connected => {
                    debug!("connected");
                    // The handshake may have stopped reading at its last record, with more
                    // (or plaintext already decrypted) behind it: with edge-triggered
                    // readiness, no new event would announce it.
                    if connection.is_tls() {
                        read_now = true;
                        self.forget_probe(link);
                    }
                    self.router.handle_connected(Instant::now(), link);
                    self.drain();
                }
                ConnectState::Failed(mut error) => {
                    // The name may have resolved to more addresses: try the next one
                    // before telling the router (the token is the link's, as before).
                    match connection.dial_next(self.poll.registry(), readiness.token()) {
                        Ok(true) => {
                            debug!(%error, "connect failed; trying the next address");
                            return;
                        }
                        Ok(false) => {}
                        Err(next) => error = next,
                    }
                    debug!(%error, "connect failed");
                    self.forget(link);
                    let reason = connect_error(&error);
                    self.router
                        .handle_connect_failed(Instant::now(), link, reason);
                    self.drain();
                    return;
                }
                ConnectState::Refused(reason) => {
                    let node = connection.node;
                    self.forget(link);
                    self.connect_failed(link, node, reason);
                    self.drain();
                    return;
                }
            }
        }
        if read_now || readiness.is_error() {
            self.read_until_blocked(link);
        }
        if readiness.is_writable() {
            self.flush(link);
            self.drain();
        }
    }

    /// Reads the socket until it would block, feeding every chunk to the router.
    fn read_until_blocked(&mut self, link: LinkId) {
        loop {
            let Some(connection) = self.connections.get_mut(&link) else {
                return;
            };
            let reason = match connection.read(&mut self.read_buffer) {
                Ok(None) => return,
                Ok(Some(0)) => CloseReason::Peer,
                Ok(Some(read)) => {
                    let bytes = &self.read_buffer[..read];
                    self.router.handle_read(Instant::now(), link, bytes);
                    self.drain();
                    continue;
                }
                Err(error) => CloseReason::Io(error.to_string()),
            };
            self.forget(link);
            self.router.handle_closed(Instant::now(), link, reason);
            self.drain();
            return;
        }
    }

    /// Writes what the link has queued. A write error ends the link; the router is told,
    /// and the caller drains.
    pub(super) fn flush(&mut self, link: LinkId) {
        let Some(connection) = self.connections.get_mut(&link) else {
            return;
        };
        if let Err(error) = connection.flush() {
            self.forget(link);
            let reason = CloseReason::Io(error.to_string());
            self.router.handle_closed(Instant::now(), link, reason);
        }
    }

    /// Starts a link's connect: at once for a numeric address, after the lookup for a name
    /// (which runs off this thread, see `resolve`). A failure to even start is reported at
    /// once (inside the drain, which then carries on with what it queues).
    pub(super) fn connect(&mut self, link: LinkId, node: iggy_route_core::NodeId, addr: &str) {
        let span = debug_span!(parent: &self.loop_span, "link", %link, %node, %addr);
        let _entered = span.enter();
        let tls = match self.dialer.tls.as_ref().map(|tls| tls.session(addr)) {
            None => None,
            Some(Ok(session)) => Some(Box::new(session)),
            Some(Err(error)) => return self.connect_failed(link, node, ConnectError::Tls(error)),
        };
        let resolving = Resolving {
            span: span.clone(),
            node,
            tls,
        };
        match self.dialer.resolver.resolve(link, addr) {
            Ok(Resolution::Ready(addrs)) => self.dial(link, addrs, resolving),
            Ok(Resolution::Pending) => {
                debug!("looking the name up");
                self.resolving.insert(link, resolving);
            }
            Err(reason) => self.connect_failed(link, node, reason),
        }
    }

    /// Lookups that finished: their links connect, or fail with `ConnectError::Resolve`.
    /// Links the router closed meanwhile are no longer in `resolving` and are skipped.
    pub(super) fn take_resolved(&mut self) {
        for (link, resolved) in self.dialer.resolver.take_done() {
            let Some(resolving) = self.resolving.remove(&link) else {
                continue;
            };
            match resolved {
                Ok(addrs) => self.dial(link, addrs, resolving),
                Err(reason) => {
                    let (span, node) = (resolving.span, resolving.node);
                    span.in_scope(|| self.connect_failed(link, node, reason));
                }
            }
            self.drain();
        }
    }

    /// Starts a non-blocking connect to the first address that takes one; the others are
    /// tried in turn if it fails (see `socket_ready`).
    fn dial(&mut self, link: LinkId, addrs: Vec<SocketAddr>, resolving: Resolving) {
        let Resolving { span, node, tls } = resolving;
        let _entered = span.enter();
        // Below the probe bit, so that a link's probe has a token of its own.
        let token = usize::try_from(link.0).ok().filter(|&id| id < PROBE_BIT);
        let Some(token) = token.map(Token) else {
            let reason = ConnectError::Other("link id exceeds the token space".into());
            return self.connect_failed(link, node, reason);
        };
        let registry = self.poll.registry();
        match Connection::dial(addrs, registry, token, node, span.clone(), tls) {
            Ok(connection) => {
                self.connections.insert(link, connection);
            }
            Err(error) => self.connect_failed(link, node, connect_error(&error)),
        }
    }

    /// Tells the router a link could not be connected (within the link's span; the caller
    /// drains). A TLS failure also goes to a `connect` still waiting, which may end on it.
    fn connect_failed(&mut self, link: LinkId, node: NodeId, reason: ConnectError) {
        debug!(%reason, "connect failed");
        if let ConnectError::Tls(error) = &reason {
            self.session.tls_failed(link, node, error.clone());
        }
        self.router
            .handle_connect_failed(Instant::now(), link, reason);
    }

    /// A link's handshake is over (or the link gone): no probe is due for it, and one under
    /// way is dropped.
    fn forget_probe(&mut self, link: LinkId) {
        self.probes_due.retain(|&(_, due)| due != link);
        if let Some(mut probe) = self.probes.remove(&link) {
            let _ = self.poll.registry().deregister(&mut probe.stream);
        }
    }

    /// The earliest probe due, if any handshake is waiting for one.
    pub(super) fn next_probe(&self) -> Option<Instant> {
        self.probes_due.iter().map(|&(at, _)| at).min()
    }

    /// Probes the nodes of handshakes that have gone on for the probe delay.
    pub(super) fn start_due_probes(&mut self) {
        let now = Instant::now();
        let due: Vec<LinkId> = self
            .probes_due
            .iter()
            .filter(|&&(at, _)| at <= now)
            .map(|&(_, link)| link)
            .collect();
        self.probes_due.retain(|&(at, _)| at > now);
        for link in due {
            let Some(connection) = self.connections.get(&link) else {
                continue;
            };
            // Done (or failed) meanwhile: nothing to find out.
            if !connection.is_handshaking() {
                continue;
            }
            let _entered = connection.span.enter();
            let Ok(peer) = connection.stream.peer_addr() else {
                continue;
            };
            let token = Token(PROBE_BIT | link.0 as usize);
            match Probe::start(peer, self.poll.registry(), token) {
                Ok(probe) => {
                    debug!(%peer, "no handshake yet: probing for a plaintext Iggy node");
                    self.probes.insert(link, probe);
                }
                Err(error) => debug!(%error, "the probe could not start"),
            }
        }
    }

    /// A probe's socket is ready. A node found to answer in plaintext Iggy fails its link
    /// with `NotTls`; a probe that learned nothing is dropped, and the handshake decides.
    pub(super) fn probe_ready(&mut self, token: Token) {
        let link = LinkId((token.0 & !PROBE_BIT) as u64);
        let Some(probe) = self.probes.get_mut(&link) else {
            return;
        };
        let verdict = probe.advance();
        if verdict == ProbeVerdict::Pending {
            return;
        }
        self.forget_probe(link);
        let Some(connection) = self.connections.get(&link) else {
            return;
        };
        let (span, node) = (connection.span.clone(), connection.node);
        let _entered = span.enter();
        match verdict {
            ProbeVerdict::PlaintextIggy => {
                self.forget(link);
                self.connect_failed(link, node, ConnectError::Tls(TlsError::NotTls));
                self.drain();
            }
            ProbeVerdict::Unknown | ProbeVerdict::Pending => debug!("the probe learned nothing"),
        }
    }

    /// The router closes `link`. A link still in its handshake is closed only at the
    /// router's connect timeout, which bounds TCP and TLS together: the handshake did not
    /// finish in time.
    pub(super) fn close(&mut self, link: LinkId) {
        if let Some(connection) = self.connections.get(&link)
            && connection.is_handshaking()
        {
            let node = connection.node;
            connection
                .span
                .in_scope(|| debug!("TLS handshake did not finish within the connect timeout"));
            self.session
                .tls_failed(link, node, TlsError::HandshakeTimedOut);
        }
        self.forget(link);
    }

    /// Drops a link's socket (closing it), or its interest in a lookup in progress. The
    /// router has forgotten it or is told separately.
    pub(super) fn forget(&mut self, link: LinkId) {
        if let Some(mut connection) = self.connections.remove(&link) {
            let _ = self.poll.registry().deregister(&mut connection.stream);
            if connection.is_tls() {
                self.forget_probe(link);
            }
        }
        if self.resolving.remove(&link).is_some() {
            self.dialer.resolver.cancel(link);
        }
    }

    /// WRITABLE interest only while a link has bytes to write (frames, or the TLS
    /// handshake's records) or is still connecting.
    pub(super) fn update_interests(&mut self) {
        let mut failed = Vec::new();
        for (&link, connection) in &mut self.connections {
            let wanted = connection.wanted_interest();
            if wanted == connection.registered {
                continue;
            }
            let token = Token(link.0 as usize);
            match self
                .poll
                .registry()
                .reregister(&mut connection.stream, token, wanted)
            {
                Ok(()) => connection.registered = wanted,
                Err(error) => failed.push((link, error)),
            }
        }
        for (link, error) in failed {
            self.forget(link);
            let reason = CloseReason::Io(error.to_string());
            self.router.handle_closed(Instant::now(), link, reason);
            self.drain();
        }
    }
}

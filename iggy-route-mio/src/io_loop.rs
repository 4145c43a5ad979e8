//! The I/O thread: one `mio::Poll` loop that owns the [`Router`] and every socket, and
//! follows the router's drive contract: feed one input, drain `poll_output` to `None`
//! carrying out each output, then poll until the next readiness, command or deadline.
//!
//! It also parks the requests the router has no room for (see [`crate::parking`]): after
//! every turn of the loop, whatever completed made room, and the parked requests are
//! submitted again in arrival order.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::mpsc::{self, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use iggy_route_core::client::{ClientError, connect_error, session_signal};
use iggy_route_core::{
    CloseReason, ConnectError, LinkId, Output, Request, RequestId, Router, Stats, SubmitError,
};
use mio::event::Event as Readiness;
use mio::{Events, Poll, Token};
use tracing::{debug, debug_span, error, trace};

use crate::connection::{ConnectState, Connection};
use crate::parking::{Parked, ParkedRequests};
use crate::resolve::{Resolution, Resolver};
use crate::responder::Responder;

/// The token of the waker that announces commands and finished name lookups (mio allows
/// one waker per poll, so both share it).
pub(crate) const WAKER: Token = Token(usize::MAX);

/// Commands taken per wake-up, so a flood of requests cannot starve the sockets.
const MAX_COMMANDS_PER_WAKE: usize = 64;

/// Bytes asked for per read.
const READ_CHUNK: usize = 64 * 1024;

/// What a [`crate::Client`] asks of the I/O thread.
#[derive(Debug)]
pub(crate) enum Command {
    Submit {
        request: Request,
        responder: Responder,
        admission: Admission,
    },
    Shutdown,
}

/// What a submit does when the router has no room for it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Admission {
    /// Waits (parked, in arrival order) for room until `deadline`, then fails with
    /// `QueueFull`.
    WaitForRoom { deadline: Instant },
    /// Fails with `QueueFull` at once, also while others are parked: a try never jumps
    /// the queue.
    AtOnce,
}

/// The router's bounds on pending requests, which decide when a request may be refused.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PendingLimits {
    /// `Config::max_pending_requests`: also how many requests may be parked.
    pub(crate) total: usize,
    /// `Config::max_pending_per_lane` (never above `total`).
    pub(crate) per_lane: usize,
}

#[derive(Debug)]
pub(crate) struct IoLoop {
    poll: Poll,
    router: Router,
    connections: HashMap<LinkId, Connection>,
    /// Links whose address is being looked up, with their spans; no socket yet.
    resolving: HashMap<LinkId, tracing::Span>,
    resolver: Resolver,
    pending: HashMap<RequestId, Responder>,
    /// Requests waiting for room in the router, in arrival order.
    parked: ParkedRequests,
    limits: PendingLimits,
    commands: mpsc::Receiver<Command>,
    stats: Arc<Mutex<Stats>>,
    read_buffer: Vec<u8>,
    /// `Client::connect` waits on this until the session signed in or was refused.
    session_ready: Option<mpsc::Sender<Result<(), ClientError>>>,
}

impl IoLoop {
    pub(crate) fn new(
        poll: Poll,
        router: Router,
        resolver: Resolver,
        limits: PendingLimits,
        commands: mpsc::Receiver<Command>,
        stats: Arc<Mutex<Stats>>,
        session_ready: mpsc::Sender<Result<(), ClientError>>,
    ) -> Self {
        Self {
            poll,
            router,
            connections: HashMap::new(),
            resolving: HashMap::new(),
            resolver,
            pending: HashMap::new(),
            parked: ParkedRequests::new(limits.total),
            limits,
            commands,
            stats,
            read_buffer: vec![0; READ_CHUNK],
            session_ready: Some(session_ready),
        }
    }

    /// Runs until a `Shutdown` command, or until every client handle is gone.
    pub(crate) fn run(mut self) {
        // `Router::new` queued the first connect.
        self.drain();
        let mut events = Events::with_capacity(256);
        let mut commands_left = false;
        loop {
            let timeout = if commands_left {
                Some(Duration::ZERO)
            } else {
                let next = self.router.next_timer();
                if let Some((at, reason)) = next {
                    trace!(
                        ?reason,
                        in_ms = at.saturating_duration_since(Instant::now()).as_millis(),
                        "next wake-up"
                    );
                }
                let parked = self.parked.next_deadline();
                let wake = match (next.map(|(at, _)| at), parked) {
                    (Some(timer), Some(parked)) => Some(timer.min(parked)),
                    (timer, parked) => timer.or(parked),
                };
                wake.map(|at| at.saturating_duration_since(Instant::now()))
            };
            if let Err(error) = self.poll.poll(&mut events, timeout) {
                if error.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                error!(%error, "mio poll failed; shutting the client down");
                self.shutdown();
                return;
            }
            let mut woken = commands_left;
            for event in &events {
                if event.token() == WAKER {
                    woken = true;
                } else {
                    self.socket_ready(event);
                }
            }
            if woken {
                self.take_resolved();
                match self.take_commands() {
                    Some(more) => commands_left = more,
                    None => return,
                }
            }
            if self
                .router
                .poll_timeout()
                .is_some_and(|at| Instant::now() >= at)
            {
                self.router.handle_timeout(Instant::now());
                self.drain();
            }
            self.unpark();
            self.update_interests();
        }
    }

    /// Up to `MAX_COMMANDS_PER_WAKE` commands; `Some(true)` when more are waiting, `None`
    /// when the loop must end.
    fn take_commands(&mut self) -> Option<bool> {
        for _ in 0..MAX_COMMANDS_PER_WAKE {
            match self.commands.try_recv() {
                Ok(Command::Submit {
                    request,
                    responder,
                    admission,
                }) => self.submit(request, responder, admission),
                Ok(Command::Shutdown) | Err(TryRecvError::Disconnected) => {
                    self.shutdown();
                    return None;
                }
                Err(TryRecvError::Empty) => return Some(false),
            }
        }
        Some(true)
    }

    /// A caller's request: to the router, or parked behind the requests already waiting
    /// for room.
    fn submit(&mut self, request: Request, responder: Responder, admission: Admission) {
        // Room freed since the last turn (requests completed within it, their callers
        // calling again at once) goes to the requests already waiting, before this one
        // is measured against it.
        self.unpark();
        match admission {
            Admission::AtOnce if !self.parked.is_empty() => {
                let limit = self.limits.total;
                responder.respond(Err(ClientError::QueueFull { limit }));
            }
            Admission::AtOnce => match self.router.submit(Instant::now(), request) {
                Ok(id) => {
                    self.pending.insert(id, responder);
                    self.drain();
                }
                Err(error) => responder.respond(Err(error.into())),
            },
            Admission::WaitForRoom { deadline } => {
                let parked = Parked::new(request, responder, deadline, self.limits.total);
                if self.parked.is_empty() {
                    if let Some(parked) = self.submit_if_room(parked) {
                        self.park(parked);
                    }
                } else {
                    self.park(parked);
                }
            }
        }
    }

    /// Parks a request behind the others, or fails it when the lot is full.
    fn park(&mut self, parked: Parked) {
        if let Some(refused) = self.parked.park(parked) {
            let limit = self.limits.total;
            refused
                .responder
                .respond(Err(ClientError::QueueFull { limit }));
        }
    }

    /// Submits a request that may wait for room; hands it back when the router has none.
    fn submit_if_room(&mut self, mut parked: Parked) -> Option<Parked> {
        let pending = self.router.pending_count();
        if pending >= self.limits.total {
            // Certain to be refused: no need to ask.
            parked.limit = self.limits.total;
            return Some(parked);
        }
        // `Router::submit` drops a request it refuses for want of room, so a copy is kept
        // to park it again, but only when a bound is near enough to be hit: far from them
        // the copy would cost every send an allocation for nothing. (A request the
        // router still counts after it completed, one that timed out in flight, can
        // make it refuse sooner; such a request fails with `QueueFull` at once.)
        let spare = (pending + 1 >= self.limits.per_lane).then(|| parked.request.clone());
        let (request, responder, place) = parked.into_parts();
        match self.router.submit(Instant::now(), request) {
            Ok(id) => {
                self.pending.insert(id, responder);
                self.drain();
                None
            }
            Err(SubmitError::QueueFull { limit }) => match spare {
                Some(request) => Some(Parked::resume(request, responder, place, limit)),
                None => {
                    responder.respond(Err(ClientError::QueueFull { limit }));
                    None
                }
            },
            Err(error) => {
                responder.respond(Err(error.into()));
                None
            }
        }
    }

    /// Fails the parked requests whose wait is over, then submits the others in arrival
    /// order while the router takes them. Runs after every turn of the loop: room frees
    /// up when requests complete, which every input may do.
    fn unpark(&mut self) {
        if self.parked.is_empty() {
            return;
        }
        for expired in self.parked.take_expired(Instant::now()) {
            let limit = expired.limit;
            expired
                .responder
                .respond(Err(ClientError::QueueFull { limit }));
        }
        while let Some(front) = self.parked.pop_front() {
            if let Some(front) = self.submit_if_room(front) {
                self.parked.restore(front);
                break;
            }
        }
    }

    fn socket_ready(&mut self, readiness: &Readiness) {
        let link = LinkId(readiness.token().0 as u64);
        let Some(connection) = self.connections.get_mut(&link) else {
            return;
        };
        let span = connection.span.clone();
        let _entered = span.enter();
        if !connection.connected {
            match connection.check_connect() {
                ConnectState::Pending => return,
                ConnectState::Connected => {
                    debug!("connected");
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
            }
        }
        if readiness.is_readable() || readiness.is_read_closed() || readiness.is_error() {
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
    fn flush(&mut self, link: LinkId) {
        let Some(connection) = self.connections.get_mut(&link) else {
            return;
        };
        if let Err(error) = connection.flush() {
            self.forget(link);
            let reason = CloseReason::Io(error.to_string());
            self.router.handle_closed(Instant::now(), link, reason);
        }
    }

    /// Step 2 of the drive contract: carry out every queued output.
    fn drain(&mut self) {
        while let Some(output) = self.router.poll_output() {
            match output {
                Output::Connect { link, node, addr } => self.connect(link, node, &addr),
                Output::Transmit { link, bytes } => match self.connections.get_mut(&link) {
                    Some(connection) => {
                        connection.queue(bytes);
                        self.flush(link);
                    }
                    None => error!(%link, "transmit on a link the adapter does not know"),
                },
                Output::Close { link } => self.forget(link),
                Output::Completed { id, outcome } => {
                    // A caller that reads `stats()` right after its request returns must
                    // see that request counted.
                    self.publish_stats();
                    if let Some(responder) = self.pending.remove(&id) {
                        responder.respond(outcome.map_err(ClientError::from));
                    }
                }
                Output::Event(event) => {
                    if let Some(signal) = session_signal(&event)
                        && let Some(ready) = self.session_ready.take()
                    {
                        // `connect` may have given up waiting; then nobody listens.
                        let _ = ready.send(signal);
                    }
                    event.log();
                }
            }
        }
        self.publish_stats();
    }

    fn publish_stats(&self) {
        let stats = self.router.stats();
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner) = stats;
    }

    /// Starts a link's connect: at once for a numeric address, after the lookup for a name
    /// (which runs off this thread, see `resolve`). A failure to even start is reported at
    /// once (inside the drain, which then carries on with what it queues).
    fn connect(&mut self, link: LinkId, node: iggy_route_core::NodeId, addr: &str) {
        let span = debug_span!("link", %link, %node, %addr);
        match self.resolver.resolve(link, addr) {
            Ok(Resolution::Ready(addrs)) => self.dial(link, addrs, span),
            Ok(Resolution::Pending) => {
                span.in_scope(|| debug!("looking the name up"));
                self.resolving.insert(link, span);
            }
            Err(reason) => self.connect_failed_to_start(link, &span, reason),
        }
    }

    /// Lookups that finished: their links connect, or fail with `ConnectError::Resolve`.
    /// Links the router closed meanwhile are no longer in `resolving` and are skipped.
    fn take_resolved(&mut self) {
        for (link, resolved) in self.resolver.take_done() {
            let Some(span) = self.resolving.remove(&link) else {
                continue;
            };
            match resolved {
                Ok(addrs) => self.dial(link, addrs, span),
                Err(reason) => self.connect_failed_to_start(link, &span, reason),
            }
            self.drain();
        }
    }

    /// Starts a non-blocking connect to the first address that takes one; the others are
    /// tried in turn if it fails (see `socket_ready`).
    fn dial(&mut self, link: LinkId, addrs: Vec<SocketAddr>, span: tracing::Span) {
        let Ok(token) = usize::try_from(link.0).map(Token) else {
            let reason = ConnectError::Other("link id exceeds the token space".into());
            return self.connect_failed_to_start(link, &span, reason);
        };
        match Connection::dial(addrs, self.poll.registry(), token, span.clone()) {
            Ok(connection) => {
                self.connections.insert(link, connection);
            }
            Err(error) => self.connect_failed_to_start(link, &span, connect_error(&error)),
        }
    }

    fn connect_failed_to_start(
        &mut self,
        link: LinkId,
        span: &tracing::Span,
        reason: ConnectError,
    ) {
        span.in_scope(|| debug!(%reason, "connect failed to start"));
        self.router
            .handle_connect_failed(Instant::now(), link, reason);
    }

    /// Drops a link's socket (closing it), or its interest in a lookup in progress. The
    /// router has forgotten it or is told separately.
    fn forget(&mut self, link: LinkId) {
        if let Some(mut connection) = self.connections.remove(&link) {
            let _ = self.poll.registry().deregister(&mut connection.stream);
        }
        if self.resolving.remove(&link).is_some() {
            self.resolver.cancel(link);
        }
    }

    /// WRITABLE interest only while a link has unsent bytes (or is still connecting).
    fn update_interests(&mut self) {
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

    fn shutdown(&mut self) {
        self.router.shutdown(Instant::now());
        self.drain();
        let links: Vec<LinkId> = self.connections.keys().copied().collect();
        for link in links {
            self.forget(link);
        }
        // Anything left was never accepted by the router; its caller sees `Closed`.
        self.pending.clear();
        for parked in self.parked.take_all() {
            parked.responder.respond(Err(ClientError::Closed));
        }
    }
}

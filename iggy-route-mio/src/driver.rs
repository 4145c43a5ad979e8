//! The driver: the I/O thread, one `mio::Poll` loop that owns the [`Router`] and every
//! socket. It follows the router's drive contract: feed one input, drain `poll_output` to
//! `None` carrying out each output, then poll until the next readiness, command or deadline.
//!
//! Backpressure is the router's: a call that may wait for room is submitted with
//! `Router::submit_waiting` and its deadline, and the router keeps it in line and ends it.
//! The sockets' side (dialling, TLS, readiness, reads and
//! writes) is in [`links`].

use std::collections::HashMap;
use std::io;
use std::sync::mpsc::{self, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use iggy_route_core::client::consumer::GroupClaims;
use iggy_route_core::client::{Admission, Callers, SessionWatch};
use iggy_route_core::{LinkId, Output, Request, Router, Stats};
use mio::{Events, Poll, Token};
use tracing::{error, trace};

use crate::connection::Connection;
use crate::probe::{PROBE_BIT, Probe};
use crate::responder::Responder;

mod links;

pub(crate) use links::Dialer;

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

#[derive(Debug)]
pub(crate) struct Driver {
    poll: Poll,
    router: Router,
    connections: HashMap<LinkId, Connection>,
    /// Links whose address is being looked up; no socket yet.
    resolving: HashMap<LinkId, links::Resolving>,
    dialer: Dialer,
    /// Probes of TLS handshakes' nodes, by link (see `crate::probe`).
    probes: HashMap<LinkId, Probe>,
    /// When each TLS handshake under way is due for a probe; empty without TLS.
    probes_due: Vec<(Instant, LinkId)>,
    /// Where the outcome of every request the router took goes (also of those waiting
    /// for room in it).
    callers: Callers<Responder>,
    commands: mpsc::Receiver<Command>,
    stats: Arc<Mutex<Stats>>,
    read_buffer: Vec<u8>,
    /// `Client::connect` waits on this until the session signed in or cannot.
    session: SessionWatch,
    /// The loop's own span, each link's span's parent. A link is often dialled while
    /// another link's span is entered; nesting there would chain every link's span to the
    /// one before it, one level per reconnect for the client's whole life.
    loop_span: tracing::Span,
    /// The client's consumer-group claims (see `Driver::with_claims`).
    claims: Option<GroupClaims>,
}

impl Driver {
    pub(crate) fn new(
        poll: Poll,
        router: Router,
        dialer: Dialer,
        commands: mpsc::Receiver<Command>,
        stats: Arc<Mutex<Stats>>,
        session: SessionWatch,
    ) -> Self {
        Self {
            poll,
            router,
            connections: HashMap::new(),
            resolving: HashMap::new(),
            dialer,
            probes: HashMap::new(),
            probes_due: Vec::new(),
            callers: Callers::default(),
            commands,
            stats,
            read_buffer: vec![0; READ_CHUNK],
            session,
            loop_span: tracing::Span::none(),
            claims: None,
        }
    }

    /// The client's consumer-group claims: memberships of dropped consumers end here.
    pub(crate) fn with_claims(mut self, claims: GroupClaims) -> Self {
        self.claims = Some(claims);
        self
    }

    /// The memberships of consumers dropped without leaving their group end now.
    fn end_memberships(&mut self) {
        let Some(claims) = &self.claims else {
            return;
        };
        let leaving = claims.take_leaving();
        if leaving.is_empty() {
            return;
        }
        for group in leaving {
            self.router.abandon_group(Instant::now(), &group);
        }
        self.drain();
    }

    /// Runs until a `Shutdown` command, or until every client handle is gone.
    pub(crate) fn run(mut self) {
        self.loop_span = tracing::Span::current();
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
                let mut wake = next.map(|(at, _)| at);
                if !self.probes_due.is_empty() {
                    wake = wake.into_iter().chain(self.next_probe()).min();
                }
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
                } else if event.token().0 & PROBE_BIT != 0 {
                    self.probe_ready(event.token());
                } else {
                    self.socket_ready(event);
                }
            }
            if !self.probes_due.is_empty() {
                self.start_due_probes();
            }
            if woken {
                self.take_resolved();
                self.end_memberships();
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

    /// A caller's request, to the router: one that may wait for room waits in the
    /// router's line until its deadline, a try is refused at once.
    fn submit(&mut self, request: Request, responder: Responder, admission: Admission) {
        let now = Instant::now();
        let submitted = self
            .callers
            .submit(&mut self.router, now, request, admission, responder);
        match submitted {
            Ok(()) => self.drain(),
            Err((responder, error)) => responder.respond(Err(error)),
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
                Output::Close { link } => self.close(link),
                Output::Completed { id, outcome } => {
                    // A caller that reads `stats()` right after its request returns must
                    // see that request counted.
                    self.publish_stats();
                    if let Some((responder, outcome)) = self.callers.completed(id, outcome) {
                        responder.respond(outcome);
                    }
                }
                Output::Event(event) => {
                    self.session.event(&event);
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

    fn shutdown(&mut self) {
        // First: links the router closes now are no TLS failures for a waiting `connect`.
        self.session.stopped();
        self.router.shutdown(Instant::now());
        self.drain();
        let links: Vec<LinkId> = self.connections.keys().copied().collect();
        for link in links {
            self.forget(link);
        }
        // Requests waiting for room ended `Closed` with the router's shutdown; anything
        // left was never accepted by the router, and its caller sees `Closed`.
        self.callers.clear();
    }
}

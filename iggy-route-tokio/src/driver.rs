//! The one task that owns the [`Router`]. It follows the router's drive contract to the
//! letter: feed one input, drain `poll_output` to `None` carrying out each output, then
//! wait for the next input or the router's deadline.
//!
//! Backpressure lives here too: a request the router has no room for waits in
//! [`WaitingRequests`] (first in, first out, each until its deadline) and is submitted
//! again when a request completes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use iggy_route_core::client::ClientError;
use iggy_route_core::client::consumer::GroupClaims;
use iggy_route_core::{
    CloseReason, Config, ConnectError, LinkId, NodeId, Output, Reply, Request, RequestError,
    RequestId, Router, Stats, SubmitError, TlsError,
};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::{Instrument, debug_span, error, trace};

use crate::connection::{self, IoEvent};
use crate::session_wait::{SessionReady, SessionWatch};
use crate::tls::Tls;
use crate::waiting::{Parked, WaitingRequests};

/// Inputs handled per wake before the driver yields to the runtime, so a flood of bytes
/// or requests cannot starve other tasks on its worker.
const MAX_INPUTS_PER_WAKE: usize = 64;

/// How often, at most, the driver looks for requests whose callers dropped their futures.
const ABANDONED_SWEEP: Duration = Duration::from_millis(20);

/// Events from connection tasks waiting for the driver.
pub(crate) const IO_QUEUE_LEN: usize = 256;

pub(crate) type ReplySender = oneshot::Sender<Result<Reply, ClientError>>;

/// What a caller does when the router has no room for its request.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Admission {
    /// Wait in line (behind every request already waiting) until room frees up, at most
    /// until `deadline`, then fail with `QueueFull`.
    Wait { deadline: Instant },
    /// Fail with `QueueFull` at once, also while other requests wait (a try never jumps
    /// the line).
    Immediate,
}

/// What a [`crate::Client`] asks of the driver.
#[derive(Debug)]
pub(crate) enum Command {
    Submit {
        request: Request,
        reply: ReplySender,
        admission: Admission,
    },
    Shutdown {
        done: oneshot::Sender<()>,
    },
    /// A consumer was dropped while a member of its group: see `GroupClaims`.
    EndMemberships,
}

/// The tasks behind one link.
#[derive(Debug)]
struct LinkTasks {
    connection: JoinHandle<()>,
    writer: Option<(mpsc::Sender<bytes::Bytes>, JoinHandle<()>)>,
    node: NodeId,
    /// TCP is up and the TLS handshake under way (never set for plain TCP).
    handshaking: bool,
}

impl LinkTasks {
    fn abort(self) {
        self.connection.abort();
        if let Some((_, task)) = self.writer {
            task.abort();
        }
    }
}

/// The caller of a request the router accepted.
#[derive(Debug)]
struct Waiter {
    reply: ReplySender,
    /// A copy of the request and its caller's deadline, kept when it was accepted while
    /// some partition's queue may have been full: the router refuses a request with
    /// `RequestError::QueueFull` after accepting it when it waited for its topic's
    /// partition count and then found its partition's queue full, and it keeps no copy.
    /// With this one the request waits for room again instead of failing.
    spare: Option<(Request, Instant)>,
}

/// What became of a request offered to the router.
enum Offer {
    /// Accepted: it completes through `Output::Completed`.
    Accepted,
    /// Refused for a reason other than room; its caller has the error.
    Answered,
    /// No room now: it must wait.
    NoRoom(Parked),
}

/// The router's bounds the driver needs to park requests without losing them.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    max_pending_requests: usize,
    max_pending_per_lane: usize,
    attempt_timeout: Duration,
}

#[derive(Debug)]
pub(crate) struct Driver {
    router: Router,
    links: HashMap<LinkId, LinkTasks>,
    pending: HashMap<RequestId, Waiter>,
    waiting: WaitingRequests,
    bounds: Bounds,
    /// The router's timeout count when the driver last looked.
    timeouts_seen: u64,
    /// Until when a request that timed out on the wire may still hold room the router
    /// does not count in `pending_count` (see [`Driver::might_refuse`]).
    timed_out_room_until: Option<Instant>,
    io_events: mpsc::Sender<IoEvent>,
    stats: Arc<Mutex<Stats>>,
    /// `Client::connect` waits on this until the session signed in or cannot.
    session: SessionWatch,
    /// Every link's TLS settings, when `Config::tls` is set.
    tls: Option<Arc<Tls>>,
    /// Shutting down: links the router closes now are not failures.
    stopping: bool,
    /// When the driver last looked for abandoned requests.
    swept_at: Instant,
    /// The client's consumer-group claims: memberships of dropped consumers end here.
    claims: GroupClaims,
}

impl Driver {
    /// A driver for a router made from `config`.
    pub(crate) fn new(
        config: &Config,
        router: Router,
        io_events: mpsc::Sender<IoEvent>,
        stats: Arc<Mutex<Stats>>,
        session_ready: SessionReady,
        tls: Option<Arc<Tls>>,
        claims: GroupClaims,
    ) -> Self {
        Self {
            router,
            links: HashMap::new(),
            pending: HashMap::new(),
            waiting: WaitingRequests::new(config.max_pending_requests),
            bounds: Bounds {
                max_pending_requests: config.max_pending_requests,
                max_pending_per_lane: config.max_pending_per_lane,
                attempt_timeout: config.attempt_timeout,
            },
            timeouts_seen: 0,
            timed_out_room_until: None,
            io_events,
            stats,
            session: SessionWatch::new(session_ready, config),
            tls,
            stopping: false,
            swept_at: Instant::now(),
            claims,
        }
    }

    /// Runs until a `Shutdown` command, or until every client handle is dropped.
    pub(crate) async fn run(
        mut self,
        mut commands: mpsc::Receiver<Command>,
        mut io: mpsc::Receiver<IoEvent>,
    ) {
        // `Router::new` queued the first connect.
        self.drain();
        let mut inputs = 0;
        loop {
            if inputs >= MAX_INPUTS_PER_WAKE {
                tokio::task::yield_now().await;
                inputs = 0;
            }
            inputs += 1;
            self.withdraw_abandoned(Instant::now());
            let next = self.router.next_timer();
            if let Some((at, reason)) = next {
                trace!(
                    ?reason,
                    in_ms = at.saturating_duration_since(Instant::now()).as_millis(),
                    "next wake-up"
                );
            }
            let deadline = match (next.map(|(at, _)| at), self.waiting.next_deadline()) {
                (Some(router), Some(waiting)) => Some(router.min(waiting)),
                (router, waiting) => router.or(waiting),
            };
            // tokio's coop budget can keep an expired `Sleep` pending: trust the clock.
            if deadline.is_some_and(|at| Instant::now() >= at) {
                self.handle_timeout(Instant::now());
                self.drain();
                continue;
            }
            let sleep = async move {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                // The driver holds a sender of `io` itself, so `recv` never returns `None`.
                Some(event) = io.recv() => self.handle_io(event),
                command = commands.recv() => match command {
                    Some(Command::Submit {
                        request,
                        reply,
                        admission,
                    }) => self.submit(request, reply, admission),
                    Some(Command::EndMemberships) => self.end_memberships(Instant::now()),
                    Some(Command::Shutdown { done }) => {
                        self.shutdown();
                        let _ = done.send(());
                        return;
                    }
                    None => {
                        self.shutdown();
                        return;
                    }
                },
                () = sleep => self.handle_timeout(Instant::now()),
            }
            self.drain();
        }
    }

    /// A caller that dropped its future no longer waits: its request is withdrawn where
    /// nothing of it was written yet (the router decides), and dropped from the line for
    /// room. Looked for every [`ABANDONED_SWEEP`] at most, between inputs.
    fn withdraw_abandoned(&mut self, now: Instant) {
        if now.saturating_duration_since(self.swept_at) < ABANDONED_SWEEP {
            return;
        }
        self.swept_at = now;
        let mut abandoned: Vec<RequestId> = self
            .pending
            .iter()
            .filter(|(_, waiter)| waiter.reply.is_closed())
            .map(|(id, _)| *id)
            .collect();
        // In id order: the router's outputs must not follow the map's order.
        abandoned.sort_unstable();
        for id in abandoned {
            self.router.withdraw(now, id);
        }
        self.waiting.forget_abandoned();
        self.end_memberships(now);
    }

    /// The memberships of consumers dropped without leaving their group end now.
    fn end_memberships(&mut self, now: Instant) {
        for group in self.claims.take_leaving() {
            self.router.abandon_group(now, &group);
        }
    }

    /// Time passed: the router's deadlines, and those of the requests waiting for room.
    fn handle_timeout(&mut self, now: Instant) {
        self.router.handle_timeout(now);
        for parked in self.waiting.expire(now) {
            parked.give_up();
        }
    }

    fn submit(&mut self, request: Request, reply: ReplySender, admission: Admission) {
        let blocking_limit = self.waiting.blocking_limit();
        let deadline = match admission {
            Admission::Immediate => {
                match blocking_limit {
                    Some(limit) => {
                        let _ = reply.send(Err(ClientError::QueueFull { limit }));
                    }
                    None => self.submit_once(request, reply),
                }
                return;
            }
            Admission::Wait { deadline } => deadline,
        };
        let parked = Parked {
            request,
            reply,
            deadline,
            limit: blocking_limit.unwrap_or(self.bounds.max_pending_requests),
        };
        // While anything waits, a new request waits behind it even if the router would
        // take it now: otherwise one caller's sends to one partition could be reordered.
        let parked = match blocking_limit {
            Some(_) => parked,
            None => match self.offer(parked) {
                Offer::Accepted | Offer::Answered => return,
                Offer::NoRoom(parked) => parked,
            },
        };
        // Bounded: a full line refuses at once (its caller is told).
        self.waiting.park_back(parked);
    }

    /// A try: submitted once, whatever the router answers goes to the caller.
    fn submit_once(&mut self, request: Request, reply: ReplySender) {
        match self.router.submit(Instant::now(), request) {
            Ok(id) => {
                let spare = None;
                self.pending.insert(id, Waiter { reply, spare });
            }
            Err(error) => {
                let _ = reply.send(Err(error.into()));
            }
        }
    }

    /// Offers a waiting (or would-be waiting) request to the router. The router drops a
    /// request it refuses, so it is offered only when it can be kept: never while the
    /// router holds `max_pending_requests`, and with a copy kept while it might refuse it
    /// for room anyway (see [`Self::might_refuse`]).
    fn offer(&mut self, parked: Parked) -> Offer {
        let Parked {
            request,
            reply,
            deadline,
            ..
        } = parked;
        let held = self.router.pending_count();
        if held >= self.bounds.max_pending_requests {
            let limit = self.bounds.max_pending_requests;
            return Offer::NoRoom(Parked {
                request,
                reply,
                deadline,
                limit,
            });
        }
        let now = Instant::now();
        let spare = self.might_refuse(held, now).then(|| request.clone());
        match self.router.submit(now, request) {
            Ok(id) => {
                let spare = spare.map(|request| (request, deadline));
                self.pending.insert(id, Waiter { reply, spare });
                Offer::Accepted
            }
            Err(SubmitError::QueueFull { limit }) => match spare {
                Some(request) => Offer::NoRoom(Parked {
                    request,
                    reply,
                    deadline,
                    limit,
                }),
                None => {
                    // Not expected (see `might_refuse`); the caller is told, typed.
                    let _ = reply.send(Err(ClientError::QueueFull { limit }));
                    Offer::Answered
                }
            },
            Err(error) => {
                let _ = reply.send(Err(error.into()));
                Offer::Answered
            }
        }
    }

    /// Whether the router, holding `held` requests (fewer than `max_pending_requests`),
    /// might still refuse the next one for room, so that a copy must be kept to park it.
    /// The copy costs a clone of the request, so it is made only then:
    /// - when a partition's queue may be full: it holds only requests the router holds,
    ///   so none is while it holds fewer than `max_pending_per_lane`;
    /// - for an attempt timeout after a request timed out: one that timed out on the wire
    ///   still takes its room (its partition's next write must not overtake it) until its
    ///   attempt ends, within an attempt timeout, and `pending_count` does not count it.
    fn might_refuse(&mut self, held: usize, now: Instant) -> bool {
        let timeouts = self.router.stats().timeouts;
        if timeouts > self.timeouts_seen {
            self.timeouts_seen = timeouts;
            // Counted from when it was seen, at or after it happened: never too short.
            self.timed_out_room_until = now.checked_add(self.bounds.attempt_timeout);
        }
        held >= self.bounds.max_pending_per_lane
            || self.timed_out_room_until.is_some_and(|until| now < until)
    }

    /// Offers the waiting requests to the router, oldest first, until one finds no room.
    /// Called after every input: room frees up when a request completes, and also when
    /// the attempt of one that timed out on the wire ends, which completes nothing.
    /// Returns whether the router accepted any (and so has outputs).
    fn admit_waiting(&mut self) -> bool {
        if self.waiting.blocking_limit().is_none() {
            return false;
        }
        let now = Instant::now();
        let mut accepted = false;
        while let Some(parked) = self.waiting.pop_front() {
            if parked.deadline <= now {
                parked.give_up();
                continue;
            }
            match self.offer(parked) {
                Offer::Accepted => accepted = true,
                Offer::Answered => {}
                Offer::NoRoom(parked) => {
                    self.waiting.park_front(parked);
                    break;
                }
            }
        }
        accepted
    }

    fn handle_io(&mut self, event: IoEvent) {
        let now = Instant::now();
        match event {
            IoEvent::Connected {
                link,
                writer,
                writer_task,
            } => match self.links.get_mut(&link) {
                Some(tasks) => {
                    tasks.writer = Some((writer, writer_task));
                    self.router.handle_connected(now, link);
                }
                // The router gave up on this link (connect timeout) while it connected.
                None => writer_task.abort(),
            },
            IoEvent::Handshaking { link } => {
                if let Some(tasks) = self.links.get_mut(&link) {
                    tasks.handshaking = true;
                }
            }
            IoEvent::ConnectFailed { link, reason } => {
                if let Some(tasks) = self.links.remove(&link) {
                    if let ConnectError::Tls(error) = &reason {
                        self.session.tls_failed(link, tasks.node, error.clone());
                    }
                    tasks.abort();
                    self.router.handle_connect_failed(now, link, reason);
                }
            }
            IoEvent::Read { link, bytes } => {
                if self.links.contains_key(&link) {
                    self.router.handle_read(now, link, &bytes);
                }
            }
            IoEvent::Closed { link, reason } => {
                if let Some(tasks) = self.links.remove(&link) {
                    tasks.abort();
                    self.router.handle_closed(now, link, reason);
                }
            }
        }
    }

    /// Step 2 of the drive contract: carry out every queued output. Room may have freed
    /// up, so the waiting requests are offered again, and what that queues is carried out
    /// too.
    fn drain(&mut self) {
        loop {
            self.carry_out_outputs();
            if !self.admit_waiting() {
                break;
            }
        }
        self.publish_stats();
    }

    /// Carries out the router's queued outputs.
    fn carry_out_outputs(&mut self) {
        while let Some(output) = self.router.poll_output() {
            match output {
                Output::Connect { link, node, addr } => {
                    let span = debug_span!("link", %link, %node, %addr);
                    let tls = self.tls.clone();
                    let task = connection::run(link, addr, tls, self.io_events.clone());
                    let connection = tokio::spawn(task.instrument(span));
                    self.links.insert(
                        link,
                        LinkTasks {
                            connection,
                            writer: None,
                            node,
                            handshaking: false,
                        },
                    );
                }
                Output::Transmit { link, bytes } => self.transmit(link, bytes),
                Output::Close { link } => {
                    if let Some(tasks) = self.links.remove(&link) {
                        // The router closes a link that is still connecting only when its
                        // connect timeout ran out: with TCP up, the handshake did not finish.
                        if tasks.handshaking && tasks.writer.is_none() && !self.stopping {
                            let timed_out = TlsError::HandshakeTimedOut;
                            self.session.tls_failed(link, tasks.node, timed_out);
                        }
                        tasks.abort();
                    }
                }
                Output::Completed { id, outcome } => {
                    // A caller that reads `stats()` right after its request returns must
                    // see that request counted.
                    self.publish_stats();
                    if let Some(waiter) = self.pending.remove(&id) {
                        self.complete(waiter, outcome);
                    }
                }
                Output::Event(event) => {
                    self.session.event(&event);
                    event.log();
                }
            }
        }
    }

    fn complete(&mut self, waiter: Waiter, outcome: Result<Reply, RequestError>) {
        match (outcome, waiter.spare) {
            // Refused for room after it was accepted (nothing was sent): it was accepted
            // before every request waiting now, so it waits first in line.
            (Err(RequestError::QueueFull { limit }), Some((request, deadline))) => {
                self.waiting.park_front(Parked {
                    request,
                    reply: waiter.reply,
                    deadline,
                    limit,
                });
            }
            (outcome, _) => {
                // The caller may have stopped waiting; the outcome is then unused.
                let _ = waiter.reply.send(outcome.map_err(ClientError::from));
            }
        }
    }

    fn publish_stats(&self) {
        let stats = self.router.stats();
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner) = stats;
    }

    /// Hands the bytes to the link's writer without waiting. A full queue means the peer
    /// stopped reading: the link is reported closed, and the router decides what follows.
    fn transmit(&mut self, link: LinkId, bytes: bytes::Bytes) {
        let Some(tasks) = self.links.get(&link) else {
            error!(%link, "transmit on a link the adapter does not know");
            return;
        };
        let Some((writer, _)) = &tasks.writer else {
            error!(%link, "transmit on a link that is not connected");
            return;
        };
        if writer.try_send(bytes).is_err() {
            if let Some(tasks) = self.links.remove(&link) {
                tasks.abort();
            }
            let reason = CloseReason::Io("write queue full or writer gone".to_owned());
            self.router.handle_closed(Instant::now(), link, reason);
        }
    }

    fn shutdown(&mut self) {
        self.stopping = true;
        self.session.stopped();
        // First, so that no waiting request is offered to the router as it fails the rest.
        for parked in self.waiting.take_all() {
            parked.close();
        }
        self.router.shutdown(Instant::now());
        self.drain();
        for (_, tasks) in self.links.drain() {
            tasks.abort();
        }
        // Anything left was never accepted by the router; its caller sees `Closed`.
        self.pending.clear();
    }
}

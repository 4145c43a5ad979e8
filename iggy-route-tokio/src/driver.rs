//! The one task that owns the [`Router`]. It follows the router's drive contract to the
//! letter: feed one input, drain `poll_output` to `None` carrying out each output, then
//! wait for the next input or the router's deadline.
//!
//! Backpressure is the router's: a call that may wait for room is submitted with
//! `Router::submit_waiting` and its deadline, and the router keeps it in line and ends it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use iggy_route_core::client::consumer::GroupClaims;
use iggy_route_core::client::{Admission, Callers, ClientError, SessionWatch};
use iggy_route_core::{
    CloseReason, Config, ConnectError, Credentials, LinkId, NodeId, Output, Reply, Request, Router,
    Stats, TlsError,
};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::{Instrument, debug_span, error, trace};

use crate::connection::{self, IoEvent};
use crate::session_wait::SessionReady;
use crate::tls::Tls;

/// Inputs handled per wake before the driver yields to the runtime, so a flood of bytes
/// or requests cannot starve other tasks on its worker.
const MAX_INPUTS_PER_WAKE: usize = 64;

/// How often, at most, the driver looks for requests whose callers dropped their futures.
const ABANDONED_SWEEP: Duration = Duration::from_millis(20);

/// Events from connection tasks waiting for the driver.
pub(crate) const IO_QUEUE_LEN: usize = 256;

pub(crate) type Responder = oneshot::Sender<Result<Reply, ClientError>>;

/// What a [`crate::Client`] asks of the driver.
#[derive(Debug)]
pub(crate) enum Command {
    Submit {
        request: Request,
        reply: Responder,
        admission: Admission,
    },
    Shutdown {
        done: oneshot::Sender<()>,
    },
    /// A consumer was dropped while a member of its group: see `GroupClaims`.
    EndMemberships,
    /// Sign in as these from now on (a run-time login as another user): see
    /// `Router::sign_in_as`. Commands after it run signed in as them.
    #[cfg_attr(not(feature = "sdk"), allow(dead_code))]
    SignInAs(Credentials),
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

#[derive(Debug)]
pub(crate) struct Driver {
    router: Router,
    links: HashMap<LinkId, LinkTasks>,
    /// The caller of every request the router took (also those waiting for room in it).
    callers: Callers<Responder>,
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
    /// Where the SDK trait's `subscribe_events` receivers hear about the session's link.
    #[cfg(feature = "sdk")]
    diagnostics: Option<crate::sdk::Diagnostics>,
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
            callers: Callers::default(),
            io_events,
            stats,
            session: SessionWatch::new(config, move |outcome| {
                // `connect` may have given up waiting; then nobody listens.
                let _ = session_ready.send(outcome);
            }),
            tls,
            stopping: false,
            swept_at: Instant::now(),
            claims,
            #[cfg(feature = "sdk")]
            diagnostics: None,
        }
    }

    /// Reports the session link's ups and downs, and the shutdown, to `diagnostics`.
    #[cfg(feature = "sdk")]
    pub(crate) fn with_diagnostics(mut self, diagnostics: crate::sdk::Diagnostics) -> Self {
        self.diagnostics = Some(diagnostics);
        self
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
            // A caller may drop its future while nothing else happens: wake for the next
            // sweep while any caller waits, so that a dropped call is withdrawn within
            // about `ABANDONED_SWEEP`, not at the next input.
            let sweep = (!self.callers.is_empty()).then(|| self.swept_at + ABANDONED_SWEEP);
            let deadline = match (next.map(|(at, _)| at), sweep) {
                (Some(at), Some(sweep)) => Some(at.min(sweep)),
                (at, sweep) => at.or(sweep),
            };
            // tokio's coop budget can keep an expired `Sleep` pending: trust the clock.
            if deadline.is_some_and(|at| Instant::now() >= at) {
                self.router.handle_timeout(Instant::now());
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
                    Some(Command::SignInAs(credentials)) => self.sign_in_as(credentials),
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
                () = sleep => self.router.handle_timeout(Instant::now()),
            }
            self.drain();
        }
    }

    /// A caller that dropped its future no longer waits: its request is withdrawn where
    /// nothing of it was written yet (the router decides; one waiting for room leaves the
    /// line). Looked for every [`ABANDONED_SWEEP`] at most, between inputs.
    fn withdraw_abandoned(&mut self, now: Instant) {
        if now.saturating_duration_since(self.swept_at) < ABANDONED_SWEEP {
            return;
        }
        self.swept_at = now;
        for id in self.callers.abandoned(Responder::is_closed) {
            self.router.withdraw(now, id);
        }
        self.end_memberships(now);
    }

    /// The memberships of consumers dropped without leaving their group end now.
    fn end_memberships(&mut self, now: Instant) {
        for group in self.claims.take_leaving() {
            self.router.abandon_group(now, &group);
        }
    }

    /// A caller's request, to the router: one that may wait for room waits in the
    /// router's line until its deadline, a try is refused at once.
    fn submit(&mut self, request: Request, reply: Responder, admission: Admission) {
        let now = Instant::now();
        let submitted = self
            .callers
            .submit(&mut self.router, now, request, admission, reply);
        if let Err((reply, error)) = submitted {
            let _ = reply.send(Err(error));
        }
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

    /// Step 2 of the drive contract: carry out every queued output.
    fn drain(&mut self) {
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
                    if let Some((reply, outcome)) = self.callers.completed(id, outcome) {
                        // The caller may have stopped waiting; the outcome is then unused.
                        let _ = reply.send(outcome);
                    }
                }
                Output::Event(event) => {
                    self.session.event(&event);
                    #[cfg(feature = "sdk")]
                    if let Some(diagnostics) = &self.diagnostics {
                        diagnostics.router_event(&event);
                        if event == iggy_route_core::Event::CredentialsChanged {
                            diagnostics.credentials_changed(self.router.credentials());
                        }
                    }
                    event.log();
                }
            }
        }
        self.publish_stats();
    }

    fn sign_in_as(&mut self, credentials: Credentials) {
        self.router.sign_in_as(Instant::now(), credentials);
        #[cfg(feature = "sdk")]
        if let Some(diagnostics) = &self.diagnostics {
            diagnostics.credentials_changed(self.router.credentials());
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
        // Requests waiting for room end `Closed`, the router's others `Shutdown`.
        self.router.shutdown(Instant::now());
        self.drain();
        for (_, tasks) in self.links.drain() {
            tasks.abort();
        }
        // Anything left was never accepted by the router; its caller sees `Closed`.
        self.callers.clear();
        #[cfg(feature = "sdk")]
        if let Some(diagnostics) = &self.diagnostics {
            diagnostics.shut_down();
        }
    }
}

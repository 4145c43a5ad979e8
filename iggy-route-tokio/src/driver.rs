//! The one task that owns the [`Router`]. It follows the router's drive contract to the
//! letter: feed one input, drain `poll_output` to `None` carrying out each output, then
//! wait for the next input or the router's deadline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use iggy_route_core::client::{ClientError, session_signal};
use iggy_route_core::{CloseReason, LinkId, Output, Reply, Request, RequestId, Router, Stats};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::{Instrument, debug_span, error, trace};

use crate::connection::{self, IoEvent};

/// Inputs handled per wake before the driver yields to the runtime, so a flood of bytes
/// or requests cannot starve other tasks on its worker.
const MAX_INPUTS_PER_WAKE: usize = 64;

/// Events from connection tasks waiting for the driver.
pub(crate) const IO_QUEUE_LEN: usize = 256;

pub(crate) type ReplySender = oneshot::Sender<Result<Reply, ClientError>>;

/// What a [`crate::Client`] asks of the driver.
#[derive(Debug)]
pub(crate) enum Command {
    Submit {
        request: Request,
        reply: ReplySender,
    },
    Shutdown {
        done: oneshot::Sender<()>,
    },
}

/// The tasks behind one link.
#[derive(Debug)]
struct LinkTasks {
    connection: JoinHandle<()>,
    writer: Option<(mpsc::Sender<bytes::Bytes>, JoinHandle<()>)>,
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
    pending: HashMap<RequestId, ReplySender>,
    io_events: mpsc::Sender<IoEvent>,
    stats: Arc<Mutex<Stats>>,
    /// `Client::connect` waits on this until the session signed in or was refused.
    session_ready: Option<oneshot::Sender<Result<(), ClientError>>>,
}

impl Driver {
    pub(crate) fn new(
        router: Router,
        io_events: mpsc::Sender<IoEvent>,
        stats: Arc<Mutex<Stats>>,
        session_ready: oneshot::Sender<Result<(), ClientError>>,
    ) -> Self {
        Self {
            router,
            links: HashMap::new(),
            pending: HashMap::new(),
            io_events,
            stats,
            session_ready: Some(session_ready),
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
            let next = self.router.next_timer();
            if let Some((at, reason)) = next {
                trace!(
                    ?reason,
                    in_ms = at.saturating_duration_since(Instant::now()).as_millis(),
                    "next wake-up"
                );
            }
            let deadline = next.map(|(at, _)| at);
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
                    Some(Command::Submit { request, reply }) => self.submit(request, reply),
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

    fn submit(&mut self, request: Request, reply: ReplySender) {
        match self.router.submit(Instant::now(), request) {
            Ok(id) => {
                self.pending.insert(id, reply);
            }
            Err(error) => {
                let _ = reply.send(Err(error.into()));
            }
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
            IoEvent::ConnectFailed { link, reason } => {
                if let Some(tasks) = self.links.remove(&link) {
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
                    let task = connection::run(link, addr, self.io_events.clone());
                    let connection = tokio::spawn(task.instrument(span));
                    self.links.insert(
                        link,
                        LinkTasks {
                            connection,
                            writer: None,
                        },
                    );
                }
                Output::Transmit { link, bytes } => self.transmit(link, bytes),
                Output::Close { link } => {
                    if let Some(tasks) = self.links.remove(&link) {
                        tasks.abort();
                    }
                }
                Output::Completed { id, outcome } => {
                    // A caller that reads `stats()` right after its request returns must
                    // see that request counted.
                    self.publish_stats();
                    if let Some(reply) = self.pending.remove(&id) {
                        // The caller may have stopped waiting; the outcome is then unused.
                        let _ = reply.send(outcome.map_err(ClientError::from));
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
        self.router.shutdown(Instant::now());
        self.drain();
        for (_, tasks) in self.links.drain() {
            tasks.abort();
        }
        // Anything left was never accepted by the router; its caller sees `Closed`.
        self.pending.clear();
    }
}

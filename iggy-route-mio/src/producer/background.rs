//! Background mode: the core's [`ProducerState`] decides everything (what is buffered,
//! who waits for room and until when, which batch goes, which call an answer settles,
//! which flush is over); this file carries it out with a thread. Callers take the state's
//! lock briefly and wait on their own channel; one [`Worker`] thread per producer pumps
//! the state, hands its batches to the client's router in order without waiting for their
//! answers (the client's I/O thread stays the only one that touches sockets), and tells
//! each caller what the state says. No I/O, no user callback and no submit runs under the
//! lock; the I/O thread only settles an answered batch under it.

use std::collections::VecDeque;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use iggy_route_core::SendReceipt;
use iggy_route_core::client::producer::{
    Batch, Handles, Offered, OnError, Output, ProducerKey, ProducerSettings, ProducerState,
    ProducerStats, SendFailure, SharedState,
};
use iggy_route_core::client::{ClientError, stamp_origin_timestamps};
use iggy_route_core::wire::Message;
use tracing::warn;

use super::delivery::{Delivery, DeliverySender, Notify};
use super::{Background, Producer, ProducerError};
use crate::Client;
use crate::client::unix_micros;
use crate::responder::Responder;

/// The handles the core's state tells things through, on threads: channels of one slot
/// (never blocking the sender), and a call's [`Notify`].
#[derive(Debug)]
struct Channels;

impl Handles for Channels {
    type Waiter = mpsc::SyncSender<Result<(), ClientError>>;
    type Delivery = Notify;
    type Flush = mpsc::SyncSender<Result<(), ProducerError>>;

    fn admit(waiter: Self::Waiter, outcome: Result<(), ClientError>) {
        let _ = waiter.send(outcome);
    }

    fn deliver(delivery: Self::Delivery, outcome: Result<SendReceipt, SendFailure>) {
        delivery.send(outcome);
    }

    fn unused(delivery: Self::Delivery) {
        delivery.refused();
    }

    fn flush_over(done: Self::Flush, report: Result<(), ProducerError>) {
        let _ = done.send(report);
    }
}
/// What the callers, the worker and the I/O thread share.
#[derive(Debug)]
struct Shared {
    state: SharedState<Channels>,
    /// Wakes the worker: a call to buffer sooner, a waiting call, a flush, a shutdown, an
    /// answer.
    wake: Condvar,
}

/// The state of a background producer (see [`Producer<Background>`](crate::Producer)):
/// its `send` buffers and returns a [`Delivery`], its `send_tagged` reports to a
/// [`DeliveryQueue`](super::DeliveryQueue).
#[derive(Debug)]
pub struct BackgroundMode {
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// Tells the calls its `on_error` makes.
    key: ProducerKey,
}

impl BackgroundMode {
    /// Starts the producer's thread.
    pub(super) fn start(client: Client, settings: ProducerSettings) -> Result<Self, ClientError> {
        let state = ProducerState::new(&settings);
        let shared = Arc::new(Shared {
            state: SharedState::new(state),
            wake: Condvar::new(),
        });
        let key = ProducerKey::unique();
        let worker = Worker {
            shared: Arc::clone(&shared),
            client,
            on_error: settings
                .on_error
                .map(|callback| OnError::new(callback, key)),
            untold: VecDeque::new(),
            over: false,
        };
        let worker = thread::Builder::new()
            .name("iggy-route-producer".to_owned())
            .spawn(move || tracing::info_span!("iggy_route_producer").in_scope(|| worker.run()))?;
        Ok(Self {
            shared,
            worker: Mutex::new(Some(worker)),
            key,
        })
    }

    /// Buffers one call, waiting for room as the producer's `Backpressure` says; its
    /// outcome will go to `notify`. On the producer's own thread (from `on_error`) a call
    /// never waits: it would wait for room only that thread can make.
    fn push(&self, messages: Vec<Message>, notify: Notify) -> Result<(), ClientError> {
        let may_wait = !self.on_own_thread();
        let mut admission = None;
        let offered =
            self.shared
                .state
                .lock()
                .send(Instant::now(), messages, notify.armed(), || {
                    let (waiter, admitted) = mpsc::sync_channel(1);
                    admission = Some(admitted);
                    may_wait.then_some(waiter)
                });
        let offered = offered.map_err(|refusal| {
            refusal.delivery.refused();
            refusal.error
        })?;
        match offered {
            Offered::Buffered { wake } => {
                if wake {
                    self.shared.wake.notify_one();
                }
                Ok(())
            }
            Offered::Waiting(_) => {
                self.shared.wake.notify_one();
                // Bounded by the state: it ends the wait by the call's deadline, or (under
                // `Block`) at shutdown; a worker that stops ends it too.
                let admitted = admission.ok_or(ClientError::Closed)?;
                admitted.recv().unwrap_or(Err(ClientError::Closed))
            }
        }
    }

    /// Waits until every call buffered before it is settled; reports the failures no
    /// callback took since the last flush.
    fn flush(&self) -> Result<(), ProducerError> {
        if self.on_own_thread() {
            // From `on_error`: the calls it would wait for are settled by this very thread.
            return Err(ProducerError::OwnThread);
        }
        let (done, over) = mpsc::sync_channel(1);
        if let Some((_, report)) = self.shared.state.lock().flush(done) {
            return report;
        }
        self.shared.wake.notify_one();
        // Bounded like `Delivery::wait`: every call settles within the client's deadlines,
        // and a worker that stops answers every flush.
        over.recv().unwrap_or(Err(ProducerError::Stopped))
    }

    /// Whether the caller is the producer's own `on_error` callback, or else its thread
    /// (which drops the last handle when the callback held one).
    fn on_own_thread(&self) -> bool {
        self.key.in_its_callback()
            || self
                .worker
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .is_some_and(|worker| worker.thread().id() == thread::current().id())
    }

    /// Stops taking sends, flushes, stops the thread and waits for it (unless called on the
    /// producer's own thread, from `on_error`: it cannot wait for itself, so it returns at
    /// once and the thread stops after the callback).
    fn shutdown(&self) -> Result<(), ProducerError> {
        if self.on_own_thread() {
            self.shared.state.lock().shutdown(None);
            self.shared.wake.notify_one();
            return Ok(());
        }
        let (done, over) = mpsc::sync_channel(1);
        let answered = self.shared.state.lock().shutdown(Some(done));
        self.shared.wake.notify_one();
        let report = match answered {
            Some((_, report)) => report,
            None => over.recv().unwrap_or(Err(ProducerError::Stopped)),
        };
        let worker = self
            .worker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(worker) = worker {
            // A panic on the thread was already told to everyone waiting.
            let _ = worker.join();
        }
        report
    }

    fn stats(&self) -> ProducerStats {
        self.shared.state.lock().stats()
    }
}

/// The last handle gone: flush and stop, as `shutdown` does.
impl Drop for BackgroundMode {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

impl Producer<Background> {
    /// Buffers `messages` as one call and returns its [`Delivery`] once they are buffered.
    /// While the buffer is full it waits for room, fails at once or gives up after a
    /// while, as the producer's `Backpressure` says (failing with
    /// `ClientError::QueueFull`). A call larger than the whole buffer fails with
    /// `ClientError::Invalid` at once (it could never fit), an empty one with
    /// `SubmitError::EmptyBatch`, and any call after shutdown with `ClientError::Closed`,
    /// as also once a batch has found the client shut down (the producer then stops as if
    /// shut down: nothing it holds could go).
    /// The messages are stamped with the current time unless they carry one.
    pub fn send(&self, mut messages: Vec<Message>) -> Result<Delivery, ClientError> {
        stamp_origin_timestamps(&mut messages, unix_micros());
        let (delivery, notify) = Delivery::new();
        self.mode.push(messages, notify)?;
        Ok(delivery)
    }

    /// Buffers `messages` as one call, as [`send`](Self::send) does, but the call's
    /// outcome goes to the [`DeliveryQueue`](super::DeliveryQueue) of `to` with `tag` (any
    /// number: the caller's own name for the call) instead of to a [`Delivery`]. One
    /// thread can then wait for many calls, of this producer and others, made on any
    /// threads, with one `DeliveryQueue::recv`, and learn of each as it settles. A call
    /// that fails here was not buffered and goes to no queue.
    pub fn send_tagged(
        &self,
        mut messages: Vec<Message>,
        tag: u64,
        to: &DeliverySender,
    ) -> Result<(), ClientError> {
        stamp_origin_timestamps(&mut messages, unix_micros());
        self.mode.push(messages, to.notify(tag))
    }

    /// [`send`](Self::send) of one message.
    pub fn send_one(&self, message: Message) -> Result<Delivery, ClientError> {
        self.send(vec![message])
    }

    /// Waits until every message buffered before the call is acknowledged or failed.
    /// Fails with [`ProducerError::SendsFailed`] naming how many messages failed since
    /// the last flush, when no `on_error` callback took them (flushes that end at once,
    /// from several threads, each report the same failures). Called from the producer's
    /// own `on_error`, it returns [`ProducerError::OwnThread`] at once.
    pub fn flush(&self) -> Result<(), ProducerError> {
        self.mode.flush()
    }

    /// Stops taking sends (they fail with `ClientError::Closed`, also those waiting for
    /// room), flushes what is buffered, and stops the producer's thread; answers as
    /// [`flush`](Self::flush) does. Dropping the last handle does the same. Called from
    /// the producer's own `on_error`, it stops taking sends and returns `Ok` at once; the
    /// thread stops once the callback has returned and what it holds is settled.
    pub fn shutdown(&self) -> Result<(), ProducerError> {
        self.mode.shutdown()
    }

    /// Messages acknowledged and failed so far, buffered now, and batches in flight.
    pub fn stats(&self) -> ProducerStats {
        self.mode.stats()
    }
}

/// The producer's thread: carries out what the state says until it is shut down and
/// everything has settled. However it ends (a panicking `on_error`), its drop tells
/// everyone still waiting.
struct Worker {
    shared: Arc<Shared>,
    client: Client,
    on_error: Option<OnError>,
    /// Outputs taken from the state and not carried out yet. Kept here, not on the stack,
    /// so that a panicking `on_error` leaves them for the drop to hand back to the state.
    untold: VecDeque<Output<Channels>>,
    /// Set once the state is finished: the end is normal.
    over: bool,
}

impl Worker {
    fn run(mut self) {
        let mut state = self.shared.state.lock();
        loop {
            state.pump(Instant::now());
            self.untold
                .extend(std::iter::from_fn(|| state.poll_output()));
            if self.untold.is_empty() {
                if state.is_finished() {
                    break;
                }
                // Until the next linger or deadline, or until a call, flush, shutdown or
                // answer wakes it.
                state = match state.poll_timeout() {
                    Some(at) => {
                        let timeout = at.saturating_duration_since(Instant::now());
                        match self.shared.wake.wait_timeout(state, timeout) {
                            Ok((state, _)) => state,
                            Err(poisoned) => poisoned.into_inner().0,
                        }
                    }
                    None => (self.shared.wake.wait(state)).unwrap_or_else(PoisonError::into_inner),
                };
                continue;
            }
            drop(state);
            // In order: each batch is in the client's queue before the next, so batches to
            // a partition are written in the order they were cut.
            while let Some(output) = self.untold.pop_front() {
                if let Some(batch) = output.tell(self.on_error.as_ref()) {
                    self.submit(batch);
                }
            }
            state = self.shared.state.lock();
        }
        drop(state);
        self.over = true;
    }

    /// Hands a batch to the client's router; its answer settles it from the I/O thread.
    fn submit(&self, batch: Batch) {
        let shared = Arc::clone(&self.shared);
        let id = batch.id;
        // Were the client closed, the responder is dropped unanswered and says `Closed`.
        let responder = Responder::callback(move |reply| {
            shared.state.lock().answered(id, reply);
            shared.wake.notify_one();
        });
        self.client
            .submit(batch.request, self.client.wait_for_room(), responder);
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.over {
            warn!("the producer's thread stopped abnormally (its on_error panicked?)");
        }
        // The state ends before any untold output is told: a caller who hears `Stopped`
        // finds the producer closed.
        let untold = std::mem::take(&mut self.untold);
        let outputs = self.shared.state.lock().end(!self.over, untold);
        for output in outputs {
            output.tell(None);
        }
    }
}

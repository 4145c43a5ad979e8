//! Background mode: callers buffer their sends in the core's [`ProducerBuffer`]; one
//! thread per producer takes due batches from it, hands each to the client's router in
//! order without waiting for its answer, and settles the calls of each batch when the
//! client's I/O thread answers it.
//!
//! Everything the callers and the thread share sits under one mutex, held only briefly:
//! no I/O, no user callback and no submit ever runs under it (a batch's answer is pushed
//! under it by the I/O thread, which must never wait long). The thread sleeps on one
//! condition variable until a batch is due (the linger ends), a push fills a batch, a
//! flush or shutdown asks, or an answer arrives; callers (blocked senders, flushes) wait
//! on another.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use iggy_route_core::client::producer::{
    Backpressure, Batch, BatchId, ProducerBuffer, ProducerConfig, ProducerStats, PushError,
    Settled, Ticket,
};
use iggy_route_core::client::{ClientError, stamp_origin_timestamps};
use iggy_route_core::wire::{Identifier, Message};
use iggy_route_core::{Reply, Request, SendReceipt, SubmitError};
use tracing::warn;

use super::delivery::{Delivery, DeliverySender, Notify};
use super::{ErrorCallback, Producer, ProducerError};
use crate::Client;
use crate::client::unix_micros;
use crate::responder::Responder;

/// The mode of a producer whose `send` buffers and returns a [`Delivery`] (or whose
/// `send_tagged` reports to a [`DeliveryQueue`]). See the module documentation of
/// [`crate::producer`].
#[derive(Debug)]
pub struct Background {
    core: Arc<Core>,
    worker: Mutex<Option<JoinHandle<()>>>,
    max_buffered_messages: usize,
    max_buffered_bytes: usize,
    backpressure: Backpressure,
}

/// What the callers and the producer's thread share.
#[derive(Debug)]
struct Core {
    state: Mutex<State>,
    /// The producer's thread waits on it.
    worker_wake: Condvar,
    /// Senders waiting for room and flushes waiting for acknowledgements wait on it.
    callers_wake: Condvar,
}

impl Core {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No code that can panic runs under the lock; were it poisoned anyway, the state
        // is still consistent between whole operations.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, condvar: &Condvar, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        condvar.wait(state).unwrap_or_else(PoisonError::into_inner)
    }

    fn wait_until<'a>(
        &self,
        condvar: &Condvar,
        state: MutexGuard<'a, State>,
        until: Instant,
    ) -> MutexGuard<'a, State> {
        let timeout = until.saturating_duration_since(Instant::now());
        match condvar.wait_timeout(state, timeout) {
            Ok((state, _)) => state,
            Err(poisoned) => poisoned.into_inner().0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// Shutting down: no more sends; the thread flushes what it holds, then stops.
    Closing,
    /// The thread has stopped; `abnormally` after a panic.
    Stopped {
        abnormally: bool,
    },
}

#[derive(Debug)]
struct State {
    buffer: ProducerBuffer,
    /// Message bytes buffered, kept here as well: a push the buffer refuses for want of
    /// room drops the call's messages, so room is checked before pushing, and the buffer
    /// tells its message count but not its bytes.
    buffered_bytes: usize,
    next_ticket: u64,
    /// Calls buffered or in flight, not yet settled: what a flush waits for.
    unsettled: BTreeSet<Ticket>,
    /// Where each unsettled call's outcome goes (in ticket order: a producer that stops
    /// tells a shared queue of its calls in flight in the order they were made).
    deliveries: BTreeMap<Ticket, Notify>,
    /// Batches answered by the I/O thread, not yet settled by the producer's thread.
    answers: Vec<(BatchId, Result<SendReceipt, ClientError>)>,
    /// Senders waiting for room, in arrival order: only the first may push, so a large
    /// call is not starved by smaller ones arriving after it.
    blocked_senders: VecDeque<u64>,
    next_blocked_sender: u64,
    /// Flushes waiting: while any does, batches go without lingering.
    flushes: usize,
    /// Failures no `on_error` callback took, since the last flush.
    unreported: Unreported,
    phase: Phase,
}

#[derive(Debug, Default)]
struct Unreported {
    messages: u64,
    last_error: Option<ClientError>,
}

impl State {
    /// The flush's answer: the failures not reported yet, now reported.
    fn take_report(&mut self) -> Result<(), ProducerError> {
        let unreported = std::mem::take(&mut self.unreported);
        if let Some(last_error) = unreported.last_error {
            return Err(ProducerError::SendsFailed {
                messages: unreported.messages,
                last_error,
            });
        }
        if self.phase == (Phase::Stopped { abnormally: true }) {
            return Err(ProducerError::Stopped);
        }
        Ok(())
    }
}

impl Background {
    /// Starts the producer's thread.
    pub(super) fn start(
        client: Client,
        stream: Identifier,
        topic: Identifier,
        config: ProducerConfig,
        on_error: Option<ErrorCallback>,
    ) -> Result<Self, ClientError> {
        let max_buffered_messages = config.max_buffered_messages;
        let max_buffered_bytes = config.max_buffered_bytes;
        let backpressure = config.backpressure;
        let core = Arc::new(Core {
            state: Mutex::new(State {
                buffer: ProducerBuffer::new(stream, topic, config),
                buffered_bytes: 0,
                next_ticket: 0,
                unsettled: BTreeSet::new(),
                deliveries: BTreeMap::new(),
                answers: Vec::new(),
                blocked_senders: VecDeque::new(),
                next_blocked_sender: 0,
                flushes: 0,
                unreported: Unreported::default(),
                phase: Phase::Running,
            }),
            worker_wake: Condvar::new(),
            callers_wake: Condvar::new(),
        });
        let worker_core = Arc::clone(&core);
        let worker = thread::Builder::new()
            .name("iggy-route-producer".to_owned())
            .spawn(move || {
                tracing::info_span!("iggy_route_producer")
                    .in_scope(|| run(&worker_core, &client, on_error.as_ref()));
            })?;
        Ok(Self {
            core,
            worker: Mutex::new(Some(worker)),
            max_buffered_messages,
            max_buffered_bytes,
            backpressure,
        })
    }

    /// Buffers one call, waiting for room as the producer's [`Backpressure`] says; its
    /// outcome will go to `notify`.
    fn push(&self, messages: Vec<Message>, notify: Notify) -> Result<(), ClientError> {
        let count = messages.len();
        let bytes: usize = messages.iter().map(Message::frame_len).sum();
        if count == 0 {
            return Err(ClientError::Submit(SubmitError::EmptyBatch));
        }
        // A call larger than the whole buffer could never be buffered.
        if count > self.max_buffered_messages {
            let limit = self.max_buffered_messages;
            return Err(ClientError::QueueFull { limit });
        }
        if bytes > self.max_buffered_bytes {
            let limit = self.max_buffered_bytes;
            return Err(ClientError::QueueFull { limit });
        }
        let give_up_at = match self.backpressure {
            // The builder bounds the wait to a day, far from overflowing an instant.
            Backpressure::BlockWithTimeout(wait) => Instant::now().checked_add(wait),
            Backpressure::Block | Backpressure::FailImmediately => None,
        };
        let own_thread = self.on_own_thread();
        let mut state = self.core.lock();
        let mut place_in_line = None;
        let pushed = loop {
            if state.phase != Phase::Running {
                break Err(ClientError::Closed);
            }
            let first_in_line = match place_in_line {
                Some(place) => state.blocked_senders.front() == Some(&place),
                None => state.blocked_senders.is_empty(),
            };
            let messages_fit =
                state.buffer.buffered_messages() + count <= self.max_buffered_messages;
            let bytes_fit = state.buffered_bytes + bytes <= self.max_buffered_bytes;
            if first_in_line && messages_fit && bytes_fit {
                break self.buffer_call(&mut state, messages, bytes, notify);
            }
            let limit = if messages_fit {
                self.max_buffered_bytes
            } else {
                self.max_buffered_messages
            };
            let gave_up = match (self.backpressure, give_up_at) {
                (Backpressure::FailImmediately, _) => true,
                // The producer's own thread (its `on_error`) would wait for room only it
                // can make.
                _ if own_thread => true,
                (_, Some(at)) => Instant::now() >= at,
                (_, None) => false,
            };
            if gave_up {
                break Err(ClientError::QueueFull { limit });
            }
            if place_in_line.is_none() {
                let place = state.next_blocked_sender;
                state.next_blocked_sender += 1;
                state.blocked_senders.push_back(place);
                place_in_line = Some(place);
            }
            state = match give_up_at {
                Some(at) => self.core.wait_until(&self.core.callers_wake, state, at),
                // Bounded by the batches in flight: each ends within the client's
                // deadlines, and its messages left the buffer when it was submitted.
                None => self.core.wait(&self.core.callers_wake, state),
            };
        };
        if let Some(place) = place_in_line {
            state.blocked_senders.retain(|waiting| *waiting != place);
            // The next in line may fit now.
            self.core.callers_wake.notify_all();
        }
        pushed
    }

    /// Puts a call that fits into the buffer.
    fn buffer_call(
        &self,
        state: &mut State,
        messages: Vec<Message>,
        bytes: usize,
        notify: Notify,
    ) -> Result<(), ClientError> {
        let ticket = Ticket(state.next_ticket);
        let was_empty = state.buffer.buffered_messages() == 0;
        match state.buffer.push(Instant::now(), ticket, messages) {
            Ok(()) => {}
            // Not expected: room was checked just before.
            Err(PushError::Full { .. }) => {
                let limit = self.max_buffered_messages;
                return Err(ClientError::QueueFull { limit });
            }
            Err(PushError::Empty) => return Err(ClientError::Submit(SubmitError::EmptyBatch)),
            // Not expected either: a call larger than the buffer was refused before.
            Err(PushError::TooLarge { .. }) | Err(_) => {
                let limit = self.max_buffered_messages;
                return Err(ClientError::QueueFull { limit });
            }
        }
        state.next_ticket += 1;
        state.buffered_bytes += bytes;
        state.unsettled.insert(ticket);
        state.deliveries.insert(ticket, notify.armed());
        // The thread sleeps until the oldest call's linger ends: only a first call (a new
        // linger) or a full batch needs it sooner.
        let config = state.buffer.config();
        let full = state.buffer.buffered_messages() >= config.batch_length as usize
            || state.buffered_bytes >= config.batch_size;
        if was_empty || full {
            self.core.worker_wake.notify_one();
        }
        Ok(())
    }

    /// Waits until every call buffered before it is settled; reports the failures no
    /// callback took since the last flush.
    fn flush(&self) -> Result<(), ProducerError> {
        if self.on_own_thread() {
            // From `on_error`: the calls it would wait for are settled by this very thread.
            return Err(ProducerError::OwnThread);
        }
        let mut state = self.core.lock();
        let before = Ticket(state.next_ticket);
        state.flushes += 1;
        self.core.worker_wake.notify_one();
        // Bounded like `Delivery::wait`: every call settles within the client's deadlines,
        // and a thread that stops settles or gives up what it holds.
        while state
            .unsettled
            .first()
            .is_some_and(|oldest| *oldest < before)
            && !matches!(state.phase, Phase::Stopped { .. })
        {
            state = self.core.wait(&self.core.callers_wake, state);
        }
        state.flushes -= 1;
        state.take_report()
    }

    /// Whether the caller is the producer's own thread (its `on_error` callback).
    fn on_own_thread(&self) -> bool {
        self.worker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|worker| worker.thread().id() == thread::current().id())
    }

    /// Stops taking sends, flushes, stops the thread and waits for it (unless called on the
    /// producer's own thread, from `on_error`: it cannot wait for itself, so it returns at
    /// once and the thread stops after the callback).
    fn shutdown(&self) -> Result<(), ProducerError> {
        {
            let mut state = self.core.lock();
            if state.phase == Phase::Running {
                state.phase = Phase::Closing;
            }
            self.core.worker_wake.notify_one();
            // Senders waiting for room give up with `Closed`.
            self.core.callers_wake.notify_all();
        }
        let worker = self
            .worker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(worker) = worker
            && worker.thread().id() != thread::current().id()
        {
            // A panic on the thread was already turned into `Phase::Stopped`.
            let _ = worker.join();
        }
        self.core.lock().take_report()
    }

    fn stats(&self) -> ProducerStats {
        self.core.lock().buffer.stats()
    }
}

/// The last handle gone: flush and stop, as `shutdown` does.
impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

impl Producer<Background> {
    /// Buffers `messages` as one call and returns its [`Delivery`] once they are buffered.
    /// While the buffer is full it waits for room, fails at once or gives up after a
    /// while, as the producer's [`Backpressure`] says (failing with
    /// `ClientError::QueueFull`). A call larger than the whole buffer fails with
    /// `QueueFull` at once, an empty one with `SubmitError::EmptyBatch`, and any call
    /// after shutdown with `ClientError::Closed`. The messages are stamped with the
    /// current time unless they carry one.
    pub fn send(&self, mut messages: Vec<Message>) -> Result<Delivery, ClientError> {
        stamp_origin_timestamps(&mut messages, unix_micros());
        let (delivery, notify) = Delivery::new();
        self.mode.push(messages, notify)?;
        Ok(delivery)
    }

    /// Buffers `messages` as one call, as [`send`](Self::send) does, but the call's
    /// outcome goes to the [`DeliveryQueue`] of `to` with `tag` (any number: the caller's
    /// own name for the call) instead of to a [`Delivery`]. One thread can then wait for
    /// many calls, of this producer and others, made on any threads, with one
    /// [`DeliveryQueue::recv`], and learn of each as it settles. A call that fails here
    /// was not buffered and goes to no queue.
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
    /// the last flush, when no `on_error` callback took them.
    pub fn flush(&self) -> Result<(), ProducerError> {
        self.mode.flush()
    }

    /// Stops taking sends (they fail with `ClientError::Closed`, also those waiting for
    /// room), flushes what is buffered, and stops the producer's thread; answers as
    /// [`flush`](Self::flush) does. Dropping the last handle does the same.
    pub fn shutdown(&self) -> Result<(), ProducerError> {
        self.mode.shutdown()
    }

    /// Messages acknowledged and failed so far, buffered now, and batches in flight.
    pub fn stats(&self) -> ProducerStats {
        self.mode.stats()
    }
}

/// The producer's thread. Ends once shutdown is asked and everything is settled.
fn run(core: &Arc<Core>, client: &Client, on_error: Option<&ErrorCallback>) {
    let _stop = StopOnExit(core);
    let mut state = core.lock();
    loop {
        let now = Instant::now();
        // Answers first: they free in-flight slots for the next batches.
        let mut settled = Vec::new();
        for (batch, outcome) in std::mem::take(&mut state.answers) {
            settled.extend(state.buffer.complete(batch, outcome));
        }
        let flushing = state.flushes > 0 || state.phase != Phase::Running;
        let mut batches = Vec::new();
        while let Some(batch) = state.buffer.next_batch(now, flushing) {
            state.buffered_bytes = state.buffered_bytes.saturating_sub(batch_bytes(&batch));
            batches.push(batch);
        }
        if !batches.is_empty() {
            // Their messages left the buffer: room for blocked senders.
            core.callers_wake.notify_all();
        }
        if settled.is_empty() && batches.is_empty() {
            if state.phase != Phase::Running && state.buffer.is_idle() {
                return;
            }
            // Until the oldest call's linger ends, or a push, flush, shutdown or answer
            // wakes it. Idle, it sleeps until one of those.
            state = match state.buffer.poll_timeout() {
                Some(due) => core.wait_until(&core.worker_wake, state, due),
                None => core.wait(&core.worker_wake, state),
            };
            continue;
        }
        let deliveries: Vec<_> = settled
            .iter()
            .map(|call| state.deliveries.remove(&call.ticket))
            .collect();
        drop(state);
        // In order: each batch is in the client's queue before the next, so batches to a
        // partition are written in the order they were cut.
        for batch in batches {
            submit(client, core, batch);
        }
        let handed = hand_on(settled, deliveries, on_error);
        state = core.lock();
        state.unreported.messages += handed.unreported_messages;
        if let Some(error) = handed.last_error {
            state.unreported.last_error = Some(error);
        }
        for ticket in handed.tickets {
            state.unsettled.remove(&ticket);
        }
        // Flushes may be over.
        core.callers_wake.notify_all();
    }
}

/// Hands a batch to the client's router; its answer comes back through `answers`.
fn submit(client: &Client, core: &Arc<Core>, batch: Batch) {
    let answered = Arc::clone(core);
    let id = batch.id;
    // Runs on the I/O thread: push the answer and wake the producer's thread, no more.
    // Were the client closed, the responder is dropped unanswered and says `Closed`.
    let responder = Responder::callback(move |outcome| {
        let outcome = outcome.and_then(|reply| {
            if let Reply::Sent(receipt) = reply {
                Ok(receipt)
            } else {
                Err(ClientError::UnexpectedReply { operation: "send" })
            }
        });
        answered.lock().answers.push((id, outcome));
        answered.worker_wake.notify_one();
    });
    client.submit(batch.request, client.wait_for_room(), responder);
}

fn batch_bytes(batch: &Batch) -> usize {
    if let Request::Send(send) = &batch.request {
        send.messages.iter().map(Message::frame_len).sum()
    } else {
        0
    }
}

/// What handing settled calls on left for the shared state.
#[derive(Debug, Default)]
struct Handed {
    tickets: Vec<Ticket>,
    unreported_messages: u64,
    last_error: Option<ClientError>,
}

/// Gives each settled call's outcome to its delivery, and each failure to `on_error` (or
/// leaves it to be reported by the next flush). Runs without the lock: `on_error` is the
/// application's code.
fn hand_on(
    settled: Vec<Settled>,
    deliveries: Vec<Option<Notify>>,
    on_error: Option<&ErrorCallback>,
) -> Handed {
    let mut handed = Handed::default();
    for (call, delivery) in settled.into_iter().zip(deliveries) {
        handed.tickets.push(call.ticket);
        let failure = match call.outcome {
            Ok(receipt) => {
                if let Some(delivery) = delivery {
                    delivery.send(Ok(receipt));
                }
                continue;
            }
            Err(failure) => failure,
        };
        let (messages, error) = (failure.messages.len() as u64, failure.error.clone());
        let taken = match on_error {
            Some(callback) => {
                if let Some(delivery) = delivery {
                    delivery.send(Err(failure.clone()));
                }
                // A callback that panics stops the producer, as `ErrorCallback` says (and as
                // the async producer does): the thread unwinds, flushes and shutdown report
                // `ProducerError::Stopped`, and the calls not yet handed on hear it stopped.
                if let Err(panic) = catch_unwind(AssertUnwindSafe(|| callback(failure))) {
                    warn!("a producer's on_error callback panicked; the producer stops");
                    std::panic::resume_unwind(panic);
                }
                true
            }
            None => {
                if let Some(delivery) = delivery {
                    delivery.send(Err(failure));
                }
                false
            }
        };
        if !taken {
            handed.unreported_messages += messages;
            handed.last_error = Some(error);
        }
    }
    handed
}

/// Marks the producer stopped when its thread ends, however it ends: whatever it still
/// buffers (only after a panic) fails with `Closed`, deliveries of batches in flight read
/// `Closed`, and every waiting caller wakes.
struct StopOnExit<'a>(&'a Arc<Core>);

impl Drop for StopOnExit<'_> {
    fn drop(&mut self) {
        let abnormally = thread::panicking();
        let core = self.0;
        let mut state = core.lock();
        let abandoned = state.buffer.abandon(&ClientError::Closed);
        for call in abandoned {
            state.unsettled.remove(&call.ticket);
            let delivery = state.deliveries.remove(&call.ticket);
            if let Err(failure) = &call.outcome {
                state.unreported.messages += failure.messages.len() as u64;
                state.unreported.last_error = Some(failure.error.clone());
            }
            if let Some(delivery) = delivery {
                delivery.send(call.outcome);
            }
        }
        // Batches in flight: nobody will settle them now; each call's caller hears it
        // stopped (a dropped `Notify` says so), in ticket order.
        while let Some((_, delivery)) = state.deliveries.pop_first() {
            drop(delivery);
        }
        state.phase = Phase::Stopped { abnormally };
        core.callers_wake.notify_all();
    }
}

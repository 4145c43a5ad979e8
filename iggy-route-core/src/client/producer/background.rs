//! The bookkeeping of a background producer, written once for both adapters: which calls
//! are buffered and which wait for room (each until its [`Backpressure`] deadline), which
//! batches go, which call each answer settles, what the `on_error` callback gets, which
//! flush is over, and how the producer shuts down.
//!
//! The adapter owns the clock, its task or thread, and the handles it is told through
//! (`H`): it passes `now` in, carries out each [`Output`] in order, and sleeps until
//! [`ProducerState::poll_timeout`] or until something it was told to wake for happens.
//! Nothing here waits.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::output::{Handles, Output};
use super::{
    Backpressure, BatchId, ProducerBuffer, ProducerConfig, ProducerError, ProducerSettings,
    ProducerStats, SendFailure, Settled, Ticket,
};
use crate::client::ClientError;
use crate::request::{Reply, SendReceipt, SubmitError};
use crate::wire::{Message, WireError};

/// The id of a call waiting for room, for [`ProducerState::cancel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WaitId(u64);

/// What became of a send call at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offered {
    /// Buffered; its outcome will go to its delivery. `wake` says whether the producer's
    /// loop must run sooner than it planned (the first buffered call starts a linger, or a
    /// batch is full).
    Buffered {
        /// Wake the producer's loop.
        wake: bool,
    },
    /// Waiting for room: its waiter will be told ([`Output::Admitted`] or
    /// [`Output::Refused`]).
    Waiting(WaitId),
}

/// A call not buffered, with its delivery handed back unused.
#[derive(Debug)]
pub struct Refusal<D> {
    /// Why.
    pub error: ClientError,
    /// The call's delivery, never told anything.
    pub delivery: D,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// Shut down: no more calls; what is buffered goes, then the producer ends.
    Closing,
    /// Ended; `abnormally` when its loop stopped before it was over (a panic).
    Ended {
        abnormally: bool,
    },
}

/// A call waiting for room.
struct Waiting<H: Handles> {
    id: WaitId,
    messages: Vec<Message>,
    deadline: Option<Instant>,
    waiter: H::Waiter,
    delivery: H::Delivery,
}

/// A flush waits for every call buffered before it: tickets below `before`.
struct PendingFlush<F> {
    before: Ticket,
    done: F,
}

/// The state of one background producer. See the module documentation.
pub struct ProducerState<H: Handles> {
    buffer: ProducerBuffer,
    has_callback: bool,
    phase: Phase,
    next_ticket: u64,
    next_wait: u64,
    /// Every buffered or in-flight call's delivery, by ticket: what flushes wait for.
    deliveries: BTreeMap<Ticket, H::Delivery>,
    waiting: VecDeque<Waiting<H>>,
    flushes: Vec<PendingFlush<H::Flush>>,
    shutdowns: Vec<H::Flush>,
    /// Messages failed since the last flush that no callback took, and the last error.
    failures: Option<(u64, ClientError)>,
    outputs: VecDeque<Output<H>>,
}

impl<H: Handles> fmt::Debug for ProducerState<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProducerState")
            .field("buffer", &self.buffer)
            .field("phase", &self.phase)
            .field("unsettled", &self.deliveries.len())
            .field("waiting", &self.waiting.len())
            .field("flushes", &self.flushes.len())
            .finish_non_exhaustive()
    }
}

impl<H: Handles> ProducerState<H> {
    /// A running producer as `settings` say (failures go to the callback when there is
    /// one; flushes then do not count them).
    pub fn new(settings: &ProducerSettings) -> Self {
        Self {
            buffer: ProducerBuffer::new(
                settings.stream.clone(),
                settings.topic.clone(),
                settings.config.clone(),
            ),
            has_callback: settings.on_error.is_some(),
            phase: Phase::Running,
            next_ticket: 0,
            next_wait: 0,
            deliveries: BTreeMap::new(),
            waiting: VecDeque::new(),
            flushes: Vec::new(),
            shutdowns: Vec::new(),
            failures: None,
            outputs: VecDeque::new(),
        }
    }

    fn config(&self) -> &ProducerConfig {
        self.buffer.config()
    }

    fn no_room(&self) -> ClientError {
        ClientError::QueueFull {
            limit: self.config().max_buffered_messages,
        }
    }

    /// One send call (its messages already stamped). Refused at once with
    /// `SubmitError::EmptyBatch` for no messages, `ClientError::Invalid` for a call larger
    /// than the whole buffer (it could never fit), `ClientError::Closed` once shut down,
    /// and `ClientError::QueueFull` when there is no room and the call may not wait: under
    /// `FailImmediately`, or when `waiter` gives no handle (a caller that cannot wait).
    /// A call never overtakes one that waits, even when it would fit.
    pub fn send(
        &mut self,
        now: Instant,
        messages: Vec<Message>,
        delivery: H::Delivery,
        waiter: impl FnOnce() -> Option<H::Waiter>,
    ) -> Result<Offered, Refusal<H::Delivery>> {
        let bytes: usize = messages.iter().map(Message::frame_len).sum();
        let config = self.config();
        let error = if self.phase != Phase::Running {
            Some(ClientError::Closed)
        } else if messages.is_empty() {
            Some(ClientError::Submit(SubmitError::EmptyBatch))
        } else if messages.len() > config.max_buffered_messages || bytes > config.max_buffered_bytes
        {
            Some(larger_than_buffer(bytes))
        } else {
            None
        };
        if let Some(error) = error {
            return Err(Refusal { error, delivery });
        }
        if self.waiting.is_empty() && self.buffer.fits(messages.len(), bytes) {
            let was_empty = self.buffer.buffered_messages() == 0;
            self.buffer_call(now, messages, delivery);
            let full = self.buffer.buffered_messages() >= self.config().batch_length as usize
                || self.buffer.buffered_bytes() >= self.config().batch_size;
            return Ok(Offered::Buffered {
                wake: was_empty || full,
            });
        }
        let deadline = match self.config().backpressure {
            Backpressure::FailImmediately => {
                let error = self.no_room();
                return Err(Refusal { error, delivery });
            }
            // Validated to at most a day: the sum fits; were it not to, no deadline.
            Backpressure::BlockWithTimeout(wait) => now.checked_add(wait),
            Backpressure::Block => None,
        };
        let Some(waiter) = waiter() else {
            let error = self.no_room();
            return Err(Refusal { error, delivery });
        };
        let id = WaitId(self.next_wait);
        self.next_wait += 1;
        self.waiting.push_back(Waiting {
            id,
            messages,
            deadline,
            waiter,
            delivery,
        });
        Ok(Offered::Waiting(id))
    }

    /// Buffers a call that fits (checked by the caller).
    fn buffer_call(&mut self, now: Instant, messages: Vec<Message>, delivery: H::Delivery) {
        let ticket = Ticket(self.next_ticket);
        if self.buffer.push(now, ticket, messages).is_ok() {
            self.next_ticket += 1;
            self.deliveries.insert(ticket, delivery);
        }
    }

    /// A waiting caller gave up (its task was cancelled): its call leaves the line unsent,
    /// and its delivery is handed back. `None` once it left the line already.
    pub fn cancel(&mut self, id: WaitId) -> Option<H::Delivery> {
        let place = self.waiting.iter().position(|call| call.id == id)?;
        self.waiting.remove(place).map(|call| call.delivery)
    }

    /// A flush: what is buffered goes without lingering, and `done` is told once every
    /// call buffered before now has settled, with the failures no callback took since the
    /// last flush. It is told by [`pump`](Self::pump)'s outputs, after the outputs before
    /// them: so a flush returns only once every earlier call's delivery and the callback
    /// were told, even when nothing is left to send (wake the loop). Handed back with its
    /// answer only once the producer has ended.
    pub fn flush(&mut self, done: H::Flush) -> Option<(H::Flush, Result<(), ProducerError>)> {
        if matches!(self.phase, Phase::Ended { .. }) {
            return Some((done, self.take_report()));
        }
        let before = Ticket(self.next_ticket);
        self.flushes.push(PendingFlush { before, done });
        None
    }

    /// Shuts the producer down: later calls fail `Closed`, and so do calls waiting for
    /// room; what is buffered goes at once. `done` (if any) is told as a flush is, once
    /// everything has settled (wake the loop); handed back with its answer only once the
    /// producer has ended.
    pub fn shutdown(
        &mut self,
        done: Option<H::Flush>,
    ) -> Option<(H::Flush, Result<(), ProducerError>)> {
        if self.phase == Phase::Running {
            self.phase = Phase::Closing;
            for call in std::mem::take(&mut self.waiting) {
                self.outputs.push_back(Output::Refused {
                    waiter: call.waiter,
                    delivery: call.delivery,
                    error: ClientError::Closed,
                });
            }
        }
        let done = done?;
        if matches!(self.phase, Phase::Ended { .. }) {
            return Some((done, self.take_report()));
        }
        self.shutdowns.push(done);
        None
    }

    /// Carries the producer forward to `now`: gives up on calls past their deadline,
    /// cuts due batches, lets waiting calls in as room frees up (first come, first in),
    /// and ends the flushes (and the shutdown) that are over. Then read
    /// [`poll_output`](Self::poll_output) dry.
    pub fn pump(&mut self, now: Instant) {
        if matches!(self.phase, Phase::Ended { .. }) {
            return;
        }
        let expired = |call: &Waiting<H>| call.deadline.is_some_and(|at| at <= now);
        if self.waiting.iter().any(expired) {
            let (gone, kept) = std::mem::take(&mut self.waiting)
                .into_iter()
                .partition(expired);
            self.waiting = kept;
            for call in gone {
                let error = self.no_room();
                self.outputs.push_back(Output::Refused {
                    waiter: call.waiter,
                    delivery: call.delivery,
                    error,
                });
            }
        }
        let flushing = self.phase != Phase::Running || !self.flushes.is_empty();
        loop {
            let mut progressed = false;
            while let Some(batch) = self.buffer.next_batch(now, flushing) {
                self.outputs.push_back(Output::Submit(batch));
                progressed = true;
            }
            while let Some(call) = self.waiting.front() {
                let bytes = call.messages.iter().map(Message::frame_len).sum();
                if !self.buffer.fits(call.messages.len(), bytes) {
                    break;
                }
                let Some(call) = self.waiting.pop_front() else {
                    break;
                };
                self.buffer_call(now, call.messages, call.delivery);
                self.outputs.push_back(Output::Admitted(call.waiter));
                progressed = true;
            }
            if !progressed {
                break;
            }
        }
        self.end_flushes();
    }

    /// A submitted batch was answered (or could not be submitted): each of its calls
    /// settles, in order, then the flushes it completes end.
    pub fn complete(&mut self, batch: BatchId, outcome: Result<SendReceipt, ClientError>) {
        // With its client gone nothing can go any more: stop taking calls, as a shutdown.
        if outcome.as_ref().is_err_and(ClientError::client_gone) {
            self.shutdown(None);
        }
        let settled = self.buffer.complete(batch, outcome);
        self.settle(settled, self.has_callback);
        self.end_flushes();
    }

    /// A submitted batch's reply as the client gives it: [`complete`](Self::complete)
    /// with its receipt, or with `UnexpectedReply` for any reply but `Sent`.
    pub fn answered(&mut self, batch: BatchId, reply: Result<Reply, ClientError>) {
        let outcome = reply.and_then(|reply| match reply {
            Reply::Sent(receipt) => Ok(receipt),
            Reply::Polled(_)
            | Reply::OffsetStored
            | Reply::Stream(_)
            | Reply::Topic(_)
            | Reply::PartitionsCreated
            | Reply::Payload(_) => Err(ClientError::UnexpectedReply { operation: "send" }),
        });
        self.complete(batch, outcome);
    }

    fn settle(&mut self, settled: Vec<Settled>, to_callback: bool) {
        for Settled { ticket, outcome } in settled {
            let Some(delivery) = self.deliveries.remove(&ticket) else {
                continue;
            };
            let mut on_error = None;
            if let Err(failure) = &outcome {
                if to_callback {
                    on_error = Some(failure.clone());
                } else {
                    self.count_failure(failure.messages.len() as u64, &failure.error);
                }
            }
            self.outputs.push_back(Output::Settled {
                delivery,
                outcome,
                on_error,
            });
        }
    }

    fn count_failure(&mut self, messages: u64, error: &ClientError) {
        let before = self.failures.take().map_or(0, |(count, _)| count);
        self.failures = Some((before + messages, error.clone()));
    }

    /// Whether every call with a ticket below `before` has settled.
    fn settled_before(&self, before: Ticket) -> bool {
        self.deliveries
            .first_key_value()
            .is_none_or(|(oldest, _)| *oldest >= before)
    }

    /// Tells the flushes now over (and shutdowns, once finished) one shared report.
    fn end_flushes(&mut self) {
        let flushes = std::mem::take(&mut self.flushes);
        let (over, pending): (Vec<_>, Vec<_>) = flushes
            .into_iter()
            .partition(|flush| self.settled_before(flush.before));
        self.flushes = pending;
        let finished = self.is_finished();
        let shutdowns = std::mem::take(&mut self.shutdowns);
        let (shutdowns, waiting) = shutdowns.into_iter().partition(|_| finished);
        self.shutdowns = waiting;
        self.tell_flushes(over.into_iter().map(|flush| flush.done).chain(shutdowns));
    }

    /// Tells each of `dones` the one report of the failures not reported yet; with none to
    /// tell, the failures stay for the next flush.
    fn tell_flushes(&mut self, dones: impl IntoIterator<Item = H::Flush>) {
        let mut dones = dones.into_iter().peekable();
        if dones.peek().is_some() {
            let report = self.take_report();
            for done in dones {
                self.outputs
                    .push_back(Output::FlushOver(done, report.clone()));
            }
        }
    }

    /// The failures not reported yet, now reported.
    /// After an abnormal end that is what a flush hears first: the producer is gone.
    fn take_report(&mut self) -> Result<(), ProducerError> {
        let failures = self.failures.take();
        if self.phase == (Phase::Ended { abnormally: true }) {
            return Err(ProducerError::Stopped);
        }
        match failures {
            Some((messages, last_error)) => Err(ProducerError::SendsFailed {
                messages,
                last_error,
            }),
            None => Ok(()),
        }
    }

    /// The next thing to carry out, in order.
    pub fn poll_output(&mut self) -> Option<Output<H>> {
        self.outputs.pop_front()
    }

    /// When [`pump`](Self::pump) has something to do without being woken: the oldest
    /// call's linger ends, or a waiting call's deadline passes. `None`: only a call, a
    /// flush, a shutdown or an answer can give it work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let linger = self.buffer.poll_timeout();
        let deadline = self.waiting.iter().filter_map(|call| call.deadline).min();
        match (linger, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Shut down and everything settled: the loop may end (then call
    /// [`end`](Self::end)).
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Closing && self.buffer.is_idle() && self.waiting.is_empty()
    }

    /// The producer's loop ended, `abnormally` when it stopped before it was over (a
    /// panic): all still held is handed out to tell at once, without the callback. Buffered
    /// calls fail `Closed` with their messages, calls in flight without them (they may be
    /// stored), waiting calls are refused `Closed`, flushes hear the report (`Stopped`
    /// after an abnormal end); later calls fail `Closed`. `untold` (outputs taken, not
    /// carried out: a panicking `on_error` unwinds past them) and what is queued go out
    /// only now, so nobody hears of the end while the producer still takes calls.
    pub fn end(&mut self, abnormally: bool, untold: VecDeque<Output<H>>) -> Vec<Output<H>> {
        self.shutdown(None);
        self.phase = Phase::Ended { abnormally };
        let queued = std::mem::take(&mut self.outputs);
        let held = untold.into_iter().chain(queued);
        self.outputs = held.filter_map(|o| o.after_end(abnormally)).collect();
        let abandoned = self.buffer.abandon(&ClientError::Closed);
        self.settle(abandoned, false);
        for (_, delivery) in std::mem::take(&mut self.deliveries) {
            self.outputs.push_back(Output::Settled {
                delivery,
                outcome: Err(SendFailure {
                    messages: Vec::new(),
                    error: ClientError::Closed,
                }),
                on_error: None,
            });
        }
        let flushes = std::mem::take(&mut self.flushes)
            .into_iter()
            .map(|f| f.done);
        let dones: Vec<_> = flushes.chain(std::mem::take(&mut self.shutdowns)).collect();
        self.tell_flushes(dones);
        self.outputs.drain(..).collect()
    }

    /// Counters so far.
    pub fn stats(&self) -> ProducerStats {
        self.buffer.stats()
    }
}

/// A [`ProducerState`] shared by an adapter's callers and its loop (and, on the blocking
/// adapter, its I/O thread), each holding the lock only for one call into the state.
#[derive(Debug)]
pub struct SharedState<H: Handles>(Mutex<ProducerState<H>>);

impl<H: Handles> SharedState<H> {
    /// Shares `state`.
    pub fn new(state: ProducerState<H>) -> Self {
        Self(Mutex::new(state))
    }

    /// The state, for one call. Nothing that can panic runs under the lock (no callback,
    /// no I/O); were it poisoned anyway, the state is consistent between whole calls.
    pub fn lock(&self) -> MutexGuard<'_, ProducerState<H>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a call larger than the whole buffer is told: it could never fit, so it is invalid
/// rather than `QueueFull` (which says "try again later").
fn larger_than_buffer(bytes: usize) -> ClientError {
    ClientError::Invalid(WireError::InvalidLength {
        field: "producer send (larger than the producer's buffer)",
        len: bytes,
    })
}

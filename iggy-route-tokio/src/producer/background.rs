//! Background mode: one task per producer owns the core's
//! [`ProducerBuffer`] and carries out what it decides. It takes due batches with
//! `next_batch`, hands each to the client's driver in order without waiting for its answer
//! (so up to `max_in_flight` batches are out, and the router's coalescing can merge them
//! further), hands each answer to `complete`, and tells every call its outcome. It sleeps
//! until the buffer's `poll_timeout`, a command or an answer.
//!
//! Calls that find no room wait in the task, first in, first out (a later call never
//! overtakes one that waits, so calls keep their order), each until its backpressure
//! deadline.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

use iggy_route_core::client::producer::{
    Backpressure, Batch, BatchId, ProducerBuffer, ProducerConfig, ProducerStats, PushError,
    SendFailure, Settled, Ticket,
};
use iggy_route_core::client::{ClientError, stamp_origin_timestamps};
use iggy_route_core::wire::{Identifier, Message};
use iggy_route_core::{Reply, SendReceipt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tracing::{Instrument, debug_span, warn};

use super::room::Room;
use super::{ErrorCallback, ProducerError, empty_send, larger_than_buffer};
use crate::Client;
use crate::client::{Answer, unix_micros};
use crate::driver::Admission;

/// Commands waiting for the producer's task. Calls that find no room wait in the task, not
/// here; this only smooths bursts.
const COMMAND_QUEUE_LEN: usize = 256;

type DeliverySender = oneshot::Sender<Result<SendReceipt, SendFailure>>;
type DoneSender = oneshot::Sender<Result<(), ProducerError>>;

/// The handle of one background send call, a future: resolves to that call's own receipt
/// (its `base_offset` is the offset of the call's first message), or to a [`SendFailure`]
/// carrying the call's messages and the error. Dropping it is fine: the messages are sent
/// either way, and a failure then goes only to `on_error` or the next flush.
#[derive(Debug)]
pub struct Delivery {
    outcome: oneshot::Receiver<Result<SendReceipt, SendFailure>>,
}

impl Future for Delivery {
    type Output = Result<SendReceipt, SendFailure>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // The task settles every call it buffered before it ends, so a closed channel
        // means the task stopped abnormally (a panicking `on_error`, say) with the call in
        // flight: its messages went with the batch.
        Pin::new(&mut self.outcome).poll(cx).map(|outcome| {
            outcome.unwrap_or(Err(SendFailure {
                messages: Vec::new(),
                error: ClientError::Closed,
            }))
        })
    }
}

/// How long a call may wait for room in the buffer.
#[derive(Debug, Clone, Copy)]
enum RoomWait {
    /// Not at all (`FailImmediately`).
    None,
    /// Until this instant (`BlockWithTimeout`).
    Until(Instant),
    /// Until there is room or the producer shuts down (`Block`).
    Unbounded,
}

enum Command {
    Send {
        messages: Vec<Message>,
        wait: RoomWait,
        answer: CallAnswer,
    },
    Flush {
        done: DoneSender,
    },
    Shutdown {
        done: DoneSender,
    },
}

/// The state of a background producer (see [`Producer<Background>`](crate::Producer)): the
/// way to its task.
#[derive(Debug)]
pub struct Background {
    commands: mpsc::Sender<Command>,
    backpressure: Backpressure,
    /// For `QueueFull` when there is no room, and what no room could ever hold.
    max_buffered_messages: usize,
    max_buffered_bytes: usize,
    room: Arc<Room>,
    closed: AtomicBool,
    /// Set by the task when it ends after flushing everything (not when it stops
    /// abnormally): a flush that finds it gone then has nothing to report.
    ended_cleanly: Arc<AtomicBool>,
    stats: Arc<Mutex<ProducerStats>>,
}

impl Background {
    pub(super) fn start(
        runtime: &tokio::runtime::Handle,
        client: Client,
        stream: Identifier,
        topic: Identifier,
        config: ProducerConfig,
        on_error: Option<ErrorCallback>,
    ) -> Self {
        let (commands, queue) = mpsc::channel(COMMAND_QUEUE_LEN);
        let stats = Arc::new(Mutex::new(ProducerStats::default()));
        let backpressure = config.backpressure;
        let max_buffered_messages = config.max_buffered_messages;
        let max_buffered_bytes = config.max_buffered_bytes;
        let room = Arc::new(Room::new(max_buffered_messages, max_buffered_bytes));
        let span = debug_span!("producer", stream = %stream, topic = %topic);
        let ended_cleanly = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            client,
            buffer: ProducerBuffer::new(stream, topic, config),
            room: Arc::clone(&room),
            on_error,
            next_ticket: 0,
            deliveries: HashMap::new(),
            unsettled: BTreeSet::new(),
            waiting: VecDeque::new(),
            in_flight: JoinSet::new(),
            batches: HashMap::new(),
            flushes: Vec::new(),
            shutdowns: Vec::new(),
            closing: false,
            failures: None,
            stats: Arc::clone(&stats),
            ended_cleanly: Arc::clone(&ended_cleanly),
        };
        runtime.spawn(worker.run(queue).instrument(span));
        Self {
            commands,
            backpressure,
            max_buffered_messages,
            max_buffered_bytes,
            room,
            closed: AtomicBool::new(false),
            ended_cleanly,
            stats,
        }
    }

    pub(super) async fn send(&self, mut messages: Vec<Message>) -> Result<Delivery, ClientError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(ClientError::Closed);
        }
        stamp_origin_timestamps(&mut messages, unix_micros());
        let now = Instant::now();
        let wait = match self.backpressure {
            Backpressure::FailImmediately => RoomWait::None,
            // Checked at build to be at most a day, so the sum fits.
            Backpressure::BlockWithTimeout(timeout) => now
                .checked_add(timeout)
                .map_or(RoomWait::Unbounded, RoomWait::Until),
            Backpressure::Block => RoomWait::Unbounded,
        };
        // What the buffer would refuse outright is refused here.
        if messages.is_empty() {
            return Err(empty_send());
        }
        let bytes: usize = messages.iter().map(Message::frame_len).sum();
        if messages.len() > self.max_buffered_messages || bytes > self.max_buffered_bytes {
            return Err(larger_than_buffer(bytes));
        }
        if self.room.reserve(messages.len(), bytes) {
            // The call has its room: the caller takes its `Delivery` now and the task only
            // settles it. This saves a round trip through the task per call, which under
            // load cost more than the rest of the call.
            let (delivery, outcome) = oneshot::channel();
            let command = Command::Send {
                messages,
                wait: RoomWait::Unbounded,
                answer: CallAnswer::Deliver(delivery),
            };
            self.commands
                .send(command)
                .await
                .map_err(|_| ClientError::Closed)?;
            return Ok(Delivery { outcome });
        }
        let (reply, answer) = oneshot::channel();
        let command = Command::Send {
            messages,
            wait,
            answer: CallAnswer::Accept(reply),
        };
        let no_room = ClientError::QueueFull {
            limit: self.max_buffered_messages,
        };
        // The hand-off to the task waits as the call may wait for room.
        match wait {
            RoomWait::None => match self.commands.try_send(command) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => return Err(no_room),
                Err(mpsc::error::TrySendError::Closed(_)) => return Err(ClientError::Closed),
            },
            RoomWait::Until(deadline) => {
                match tokio::time::timeout_at(deadline.into(), self.commands.send(command)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_closed)) => return Err(ClientError::Closed),
                    Err(_elapsed) => return Err(no_room),
                }
            }
            RoomWait::Unbounded => self
                .commands
                .send(command)
                .await
                .map_err(|_| ClientError::Closed)?,
        }
        // The task answers at once, or when the call finds room, or at its deadline.
        answer.await.map_err(|_| ClientError::Closed)?
    }

    pub(super) async fn flush(&self) -> Result<(), ProducerError> {
        let (done, finished) = oneshot::channel();
        if self.commands.send(Command::Flush { done }).await.is_err() {
            return self.ended();
        }
        finished.await.unwrap_or_else(|_| self.ended())
    }

    pub(super) async fn shutdown(&self) -> Result<(), ProducerError> {
        self.closed.store(true, Ordering::Release);
        let (done, finished) = oneshot::channel();
        if self
            .commands
            .send(Command::Shutdown { done })
            .await
            .is_err()
        {
            return self.ended();
        }
        finished.await.unwrap_or_else(|_| self.ended())
    }

    /// What a flush reports when the task is gone: nothing when it ended after flushing
    /// everything (and reporting its failures), `Stopped` when it stopped abnormally.
    fn ended(&self) -> Result<(), ProducerError> {
        if self.ended_cleanly.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(ProducerError::Stopped)
        }
    }

    pub(super) fn stats(&self) -> ProducerStats {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Commands taken per pass of the task's loop after the one it woke for.
const COMMANDS_PER_PASS: usize = 256;

/// Where a call learns what became of it.
enum CallAnswer {
    /// The caller waits to hear whether the call was buffered (it may give up or be
    /// refused for room), and gets its `Delivery` then.
    Accept(oneshot::Sender<Result<Delivery, ClientError>>),
    /// The caller already holds the call's `Delivery` (a `Block` send, which is never
    /// refused for room): the task only settles it. This saves a round trip through the
    /// task per call, which under load cost more than the rest of the call.
    Deliver(DeliverySender),
}

impl CallAnswer {
    /// Whether the caller stopped waiting (a cancelled send): nothing of it is buffered.
    fn is_closed(&self) -> bool {
        match self {
            Self::Accept(reply) => reply.is_closed(),
            // A dropped `Delivery` is fine: the messages are sent either way.
            Self::Deliver(_) => false,
        }
    }

    /// The call was not buffered.
    fn fail(self, messages: Vec<Message>, error: ClientError) {
        match self {
            Self::Accept(reply) => {
                let _ = reply.send(Err(error));
            }
            Self::Deliver(delivery) => {
                let _ = delivery.send(Err(SendFailure { messages, error }));
            }
        }
    }
}

/// A call waiting for room.
struct WaitingCall {
    messages: Vec<Message>,
    deadline: Option<Instant>,
    answer: CallAnswer,
}

/// A flush waits for every call buffered before it: tickets below `before`.
struct PendingFlush {
    before: u64,
    done: DoneSender,
}

/// The producer's task. See the module documentation.
struct Worker {
    client: Client,
    buffer: ProducerBuffer,
    /// The buffer's room, shared with the callers (see [`Room`]): `push` takes the call's
    /// messages even when it answers `Full`, so a call is pushed only once it has room.
    room: Arc<Room>,
    on_error: Option<ErrorCallback>,
    next_ticket: u64,
    deliveries: HashMap<Ticket, DeliverySender>,
    /// Tickets buffered or in flight, not yet settled (what flushes wait for).
    unsettled: BTreeSet<u64>,
    waiting: VecDeque<WaitingCall>,
    in_flight: JoinSet<Result<Reply, ClientError>>,
    batches: HashMap<tokio::task::Id, BatchId>,
    flushes: Vec<PendingFlush>,
    shutdowns: Vec<DoneSender>,
    /// Shut down, or every handle dropped: flush, then end.
    closing: bool,
    /// Messages failed since the last flush that no `on_error` took, and the last error.
    failures: Option<(u64, ClientError)>,
    stats: Arc<Mutex<ProducerStats>>,
    ended_cleanly: Arc<AtomicBool>,
}

impl Worker {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        let mut commands_open = true;
        loop {
            self.pump().await;
            self.room.set_waiting(self.waiting.len());
            if self.closing && self.buffer.is_idle() && self.waiting.is_empty() {
                break;
            }
            let wake = self.next_wake();
            let sleep = async move {
                match wake {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                // While calls wait for room, new ones are left in the channel, whose bound
                // then holds the callers back.
                command = commands.recv(), if commands_open && self.waiting.len() < COMMAND_QUEUE_LEN => match command {
                    Some(command) => {
                        self.handle(command);
                        // Calls come in bursts: take what is queued now before the next
                        // pump, so a burst costs one pass of the loop, not one per call.
                        for _ in 0..COMMANDS_PER_PASS {
                            if self.waiting.len() >= COMMAND_QUEUE_LEN {
                                break;
                            }
                            let Ok(command) = commands.try_recv() else {
                                break;
                            };
                            self.handle(command);
                        }
                    }
                    None => {
                        // Every handle was dropped: send what is buffered, then end.
                        commands_open = false;
                        self.closing = true;
                    }
                },
                Some(joined) = self.in_flight.join_next_with_id() => self.answered(joined),
                () = sleep => {}
            }
        }
        self.publish_stats();
        let outcome = self.take_failures();
        for done in self
            .shutdowns
            .drain(..)
            .chain(self.flushes.drain(..).map(|f| f.done))
        {
            let _ = done.send(outcome.clone());
        }
        // Commands that came after the end: nothing is left to flush, and nothing more is
        // sent.
        self.ended_cleanly.store(true, Ordering::Release);
        commands.close();
        while let Ok(command) = commands.try_recv() {
            match command {
                Command::Send {
                    messages, answer, ..
                } => answer.fail(messages, ClientError::Closed),
                Command::Flush { done } | Command::Shutdown { done } => {
                    let _ = done.send(Ok(()));
                }
            }
        }
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::Send {
                messages,
                wait,
                answer,
            } => self.call(messages, wait, answer),
            Command::Flush { done } => {
                let before = self.next_ticket;
                self.flushes.push(PendingFlush { before, done });
            }
            Command::Shutdown { done } => {
                self.closing = true;
                self.shutdowns.push(done);
                // Calls still waiting for room learn it now; what is buffered is flushed.
                for call in self.waiting.drain(..) {
                    if matches!(call.answer, CallAnswer::Deliver(_)) {
                        let bytes = call.messages.iter().map(Message::frame_len).sum();
                        self.room.release(call.messages.len(), bytes);
                    }
                    call.answer.fail(call.messages, ClientError::Closed);
                }
            }
        }
    }

    fn call(&mut self, messages: Vec<Message>, wait: RoomWait, answer: CallAnswer) {
        if self.closing {
            answer.fail(messages, ClientError::Closed);
            return;
        }
        let deadline = match wait {
            RoomWait::None => Some(Instant::now()),
            RoomWait::Until(at) => Some(at),
            RoomWait::Unbounded => None,
        };
        let call = WaitingCall {
            messages,
            deadline,
            answer,
        };
        // Behind a waiting call even if this one would fit: calls keep their order.
        if !self.waiting.is_empty() {
            match wait {
                RoomWait::None => self.no_room(call),
                RoomWait::Until(_) | RoomWait::Unbounded => self.waiting.push_back(call),
            }
            return;
        }
        if let Some(call) = self.buffer_call(call) {
            match wait {
                RoomWait::None => self.no_room(call),
                RoomWait::Until(_) | RoomWait::Unbounded => self.waiting.push_back(call),
            }
        }
    }

    /// Buffers a call if it fits (answering its caller), or hands it back.
    fn buffer_call(&mut self, call: WaitingCall) -> Option<WaitingCall> {
        let count = call.messages.len();
        let bytes: usize = call.messages.iter().map(Message::frame_len).sum();
        // A caller that found room reserved it; a call from the line takes it now.
        let has_room = matches!(call.answer, CallAnswer::Deliver(_))
            || self.room.reserve_waiting(count, bytes);
        if !has_room {
            return Some(call);
        }
        let ticket = Ticket(self.next_ticket);
        let error = match self.buffer.push(Instant::now(), ticket, call.messages) {
            Ok(()) => {
                self.next_ticket += 1;
                self.unsettled.insert(ticket.0);
                match call.answer {
                    CallAnswer::Deliver(delivery) => {
                        self.deliveries.insert(ticket, delivery);
                    }
                    CallAnswer::Accept(reply) => {
                        let (delivery, outcome) = oneshot::channel();
                        self.deliveries.insert(ticket, delivery);
                        // The caller may have given up waiting; then the delivery is
                        // simply unread.
                        let _ = reply.send(Ok(Delivery { outcome }));
                    }
                }
                return None;
            }
            Err(PushError::Empty) => empty_send(),
            Err(PushError::TooLarge { bytes, .. }) => larger_than_buffer(bytes),
            // Not expected: the room was checked above as the buffer checks it.
            Err(PushError::Full { .. }) => ClientError::QueueFull {
                limit: config_limit(&self.buffer),
            },
            Err(other) => ClientError::Io(std::io::Error::other(other.to_string())),
        };
        // Callers check these cases before they send a call, so this is not expected; the
        // buffer kept the messages it refused, and the room they took is given back.
        self.room.release(count, bytes);
        call.answer.fail(Vec::new(), error);
        None
    }

    fn no_room(&self, call: WaitingCall) {
        let limit = config_limit(&self.buffer);
        call.answer
            .fail(call.messages, ClientError::QueueFull { limit });
    }

    /// Carries out what the buffer decides until nothing more is due: submits due batches
    /// in order, lets waiting calls in as room frees up, gives up on calls past their
    /// deadline, and ends the flushes that are over.
    async fn pump(&mut self) {
        loop {
            let now = Instant::now();
            self.expire_waiting(now);
            let flushing = self.closing || !self.flushes.is_empty();
            let mut progressed = false;
            while let Some(batch) = self.buffer.next_batch(now, flushing) {
                self.submit(batch).await;
                progressed = true;
            }
            while let Some(call) = self.waiting.pop_front() {
                if call.answer.is_closed() {
                    // Its caller stopped waiting (the send was cancelled): nothing of it
                    // was buffered, and nothing is sent.
                    continue;
                }
                if let Some(call) = self.buffer_call(call) {
                    self.waiting.push_front(call);
                    break;
                }
                progressed = true;
            }
            if !progressed {
                break;
            }
        }
        // Counted before anyone is told: a caller that reads `stats()` right after its
        // flush returns must see what the flush waited for.
        self.publish_stats();
        self.end_flushes();
    }

    /// Hands a batch to the client's driver, in order, without waiting for its answer.
    async fn submit(&mut self, batch: Batch) {
        let Batch { id, request } = batch;
        if let iggy_route_core::Request::Send(send) = &request {
            let bytes: usize = send.messages.iter().map(Message::frame_len).sum();
            self.room.release(send.messages.len(), bytes);
        }
        // A batch waits for room in the router as any request does.
        let deadline = Instant::now() + self.client.request_timeout();
        match self
            .client
            .hand_off(request, Admission::Wait { deadline })
            .await
        {
            Ok(answer) => {
                let task = self.in_flight.spawn(await_answer(answer));
                self.batches.insert(task.id(), id);
            }
            Err(error) => {
                let settled = self.buffer.complete(id, Err(error));
                self.settle(settled);
            }
        }
    }

    fn answered(
        &mut self,
        joined: Result<(tokio::task::Id, Result<Reply, ClientError>), tokio::task::JoinError>,
    ) {
        let (task, outcome) = match joined {
            Ok((task, outcome)) => (task, outcome),
            // The answer's task only awaits a channel; were it ever cancelled, its batch
            // still ends, as unknown.
            Err(error) => (error.id(), Err(ClientError::Closed)),
        };
        let Some(batch) = self.batches.remove(&task) else {
            return;
        };
        let outcome = outcome.and_then(|reply| {
            if let Reply::Sent(receipt) = reply {
                Ok(receipt)
            } else {
                Err(ClientError::UnexpectedReply { operation: "send" })
            }
        });
        let settled = self.buffer.complete(batch, outcome);
        self.settle(settled);
    }

    /// Tells each call its outcome: its handle always, then `on_error` or the next flush.
    fn settle(&mut self, settled: Vec<Settled>) {
        // The buffer has counted them: publish before any caller learns its outcome.
        self.publish_stats();
        for Settled { ticket, outcome } in settled {
            self.unsettled.remove(&ticket.0);
            let delivery = self.deliveries.remove(&ticket);
            match outcome {
                Ok(receipt) => {
                    if let Some(delivery) = delivery {
                        let _ = delivery.send(Ok(receipt));
                    }
                }
                Err(failure) => {
                    if let Some(delivery) = delivery.filter(|d| !d.is_closed()) {
                        let _ = delivery.send(Err(failure.clone()));
                    }
                    let count = failure.messages.len() as u64;
                    warn!(messages = count, error = %failure.error, "producer send failed");
                    match &self.on_error {
                        Some(on_error) => on_error(failure),
                        None => {
                            let total = self.failures.take().map_or(0, |(n, _)| n);
                            self.failures = Some((total + count, failure.error));
                        }
                    }
                }
            }
        }
    }

    fn expire_waiting(&mut self, now: Instant) {
        if self
            .waiting
            .iter()
            .all(|call| call.deadline.is_none_or(|at| at > now))
        {
            return;
        }
        let limit = config_limit(&self.buffer);
        let (expired, kept): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|call| call.deadline.is_some_and(|at| at <= now));
        self.waiting = kept;
        for call in expired {
            call.answer
                .fail(call.messages, ClientError::QueueFull { limit });
        }
    }

    /// Flushes whose calls have all settled are over: each is told the failures since the
    /// last flush.
    fn end_flushes(&mut self) {
        let oldest_unsettled = self.unsettled.first().copied().unwrap_or(u64::MAX);
        if self.flushes.iter().all(|f| f.before > oldest_unsettled) {
            return;
        }
        let (over, pending): (Vec<_>, Vec<_>) = std::mem::take(&mut self.flushes)
            .into_iter()
            .partition(|flush| flush.before <= oldest_unsettled);
        self.flushes = pending;
        let outcome = self.take_failures();
        for flush in over {
            let _ = flush.done.send(outcome.clone());
        }
    }

    fn take_failures(&mut self) -> Result<(), ProducerError> {
        match self.failures.take() {
            Some((messages, last_error)) => Err(ProducerError::SendsFailed {
                messages,
                last_error,
            }),
            None => Ok(()),
        }
    }

    /// The next linger to end, or the next waiting call to give up.
    fn next_wake(&self) -> Option<Instant> {
        let linger = self.buffer.poll_timeout();
        let waiting = self.waiting.iter().filter_map(|call| call.deadline).min();
        match (linger, waiting) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn publish_stats(&self) {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner) = self.buffer.stats();
    }
}

async fn await_answer(answer: Answer) -> Result<Reply, ClientError> {
    answer.await.map_err(|_| ClientError::Closed)?
}

fn config_limit(buffer: &ProducerBuffer) -> usize {
    buffer.config().max_buffered_messages
}

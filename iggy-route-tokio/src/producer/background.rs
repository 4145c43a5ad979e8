//! Background mode: the core's [`ProducerState`] decides everything (what is buffered,
//! who waits for room and until when, which batch goes, which call an answer settles,
//! which flush is over); this file carries it out on tokio. Callers take the state's lock
//! briefly and wait on their own channel; one [`Worker`] task per producer pumps the state,
//! submits its batches in order without waiting for their answers (so up to
//! `max_in_flight` are out, and the router's coalescing can merge them further), and tells
//! each caller what the state says.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use iggy_route_core::client::producer::{
    BatchId, Handles, Offered, OnError, Output, ProducerKey, ProducerSettings, ProducerState,
    ProducerStats, SendFailure, SharedState, WaitId,
};
use iggy_route_core::client::{Admission, ClientError, stamp_origin_timestamps};
use iggy_route_core::wire::Message;
use iggy_route_core::{Reply, SendReceipt};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinSet;
use tracing::{Instrument, debug_span};

use super::ProducerError;
use crate::Client;
use crate::client::{Answer, unix_micros};

type Outcome = Result<SendReceipt, SendFailure>;

/// The handles the core's state tells things through, on tokio: one-shot channels.
#[derive(Debug)]
struct Channels;

impl Handles for Channels {
    type Waiter = oneshot::Sender<Result<(), ClientError>>;
    type Delivery = oneshot::Sender<Outcome>;
    type Flush = oneshot::Sender<Result<(), ProducerError>>;

    fn admit(waiter: Self::Waiter, outcome: Result<(), ClientError>) {
        let _ = waiter.send(outcome);
    }

    fn deliver(delivery: Self::Delivery, outcome: Outcome) {
        let _ = delivery.send(outcome);
    }

    fn flush_over(done: Self::Flush, report: Result<(), ProducerError>) {
        let _ = done.send(report);
    }
}
/// The handle of one background send call, a future: resolves to that call's own receipt
/// (its `base_offset` is the offset of the call's first message), or to a [`SendFailure`]
/// carrying the call's messages and the error. One exception: a call in flight when its
/// producer's task stopped abnormally (a panicking `on_error`, its runtime gone) fails with
/// `ClientError::Closed` and no messages, which went with its batch and may be stored.
/// Dropping it is fine: the messages are sent either way, and a failure then goes only to
/// `on_error` or the next flush.
#[derive(Debug)]
pub struct Delivery {
    outcome: oneshot::Receiver<Outcome>,
}

impl Future for Delivery {
    type Output = Outcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // The worker settles every call it holds before it ends, even abnormally; a closed
        // channel is the runtime gone: the call's messages went with its batch.
        Pin::new(&mut self.outcome).poll(cx).map(|outcome| {
            outcome.unwrap_or(Err(SendFailure {
                messages: Vec::new(),
                error: ClientError::Closed,
            }))
        })
    }
}

/// What the callers and the worker share.
#[derive(Debug)]
struct Shared {
    state: SharedState<Channels>,
    /// Wakes the worker: a call to buffer sooner, a waiting call, a flush, a shutdown.
    wake: Notify,
}

/// The state of a background producer (see [`Producer<Background>`](crate::Producer)).
/// Dropping the last handle shuts it down without waiting: what is buffered is still sent.
#[derive(Debug)]
pub struct BackgroundMode {
    shared: Arc<Shared>,
    /// Tells the calls its `on_error` makes: the task waits for the callback, so those
    /// calls must not wait for the task.
    key: ProducerKey,
}

impl BackgroundMode {
    pub(super) fn start(
        runtime: &tokio::runtime::Handle,
        client: Client,
        settings: ProducerSettings,
    ) -> Self {
        let span = debug_span!("producer", stream = %settings.stream, topic = %settings.topic);
        let state = ProducerState::new(&settings);
        let shared = Arc::new(Shared {
            state: SharedState::new(state),
            wake: Notify::new(),
        });
        let key = ProducerKey::unique();
        let worker = Worker {
            shared: Arc::clone(&shared),
            client,
            on_error: settings
                .on_error
                .map(|callback| OnError::new(callback, key)),
            in_flight: JoinSet::new(),
            untold: VecDeque::new(),
            over: false,
        };
        runtime.spawn(worker.run().instrument(span));
        Self { shared, key }
    }

    pub(super) async fn send(&self, mut messages: Vec<Message>) -> Result<Delivery, ClientError> {
        stamp_origin_timestamps(&mut messages, unix_micros());
        let (delivery, outcome) = oneshot::channel();
        let mut admission = None;
        let may_wait = !self.key.in_its_callback();
        let offered = self
            .shared
            .state
            .lock()
            .send(Instant::now(), messages, delivery, || {
                let (waiter, admitted) = oneshot::channel();
                admission = Some(admitted);
                may_wait.then_some(waiter)
            });
        match offered.map_err(|refusal| refusal.error)? {
            Offered::Buffered { wake } => {
                if wake {
                    self.shared.wake.notify_one();
                }
            }
            Offered::Waiting(id) => {
                self.shared.wake.notify_one();
                let cancel = CancelOnDrop {
                    shared: &self.shared,
                    id: Some(id),
                };
                let admitted = admission.ok_or(ClientError::Closed)?;
                let answer = admitted.await;
                cancel.disarm();
                answer.unwrap_or(Err(ClientError::Closed))?;
            }
        }
        Ok(Delivery { outcome })
    }

    pub(super) async fn flush(&self) -> Result<(), ProducerError> {
        if self.key.in_its_callback() {
            return Err(ProducerError::OwnThread);
        }
        let (done, over) = oneshot::channel();
        if let Some((_, report)) = self.shared.state.lock().flush(done) {
            return report;
        }
        self.shared.wake.notify_one();
        over.await.unwrap_or(Err(ProducerError::Stopped))
    }

    pub(super) async fn shutdown(&self) -> Result<(), ProducerError> {
        if self.key.in_its_callback() {
            // It stops taking sends now, and stops once the callback has returned.
            self.shared.state.lock().shutdown(None);
            self.shared.wake.notify_one();
            return Ok(());
        }
        let (done, over) = oneshot::channel();
        if let Some((_, report)) = self.shared.state.lock().shutdown(Some(done)) {
            return report;
        }
        self.shared.wake.notify_one();
        over.await.unwrap_or(Err(ProducerError::Stopped))
    }

    pub(super) fn stats(&self) -> ProducerStats {
        self.shared.state.lock().stats()
    }
}

impl Drop for BackgroundMode {
    fn drop(&mut self) {
        self.shared.state.lock().shutdown(None);
        self.shared.wake.notify_one();
    }
}

/// Takes a waiting call out of the line when its caller's task is cancelled: it is never
/// buffered, so never sent.
struct CancelOnDrop<'a> {
    shared: &'a Shared,
    id: Option<WaitId>,
}

impl CancelOnDrop<'_> {
    fn disarm(mut self) {
        self.id = None;
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.shared.state.lock().cancel(id);
            // The call behind it may fit now.
            self.shared.wake.notify_one();
        }
    }
}

/// The producer's task: carries out what the state says until it is shut down and
/// everything has settled. However it ends (a panicking `on_error`, a runtime shut down),
/// its drop tells everyone still waiting.
struct Worker {
    shared: Arc<Shared>,
    client: Client,
    on_error: Option<OnError>,
    in_flight: JoinSet<(BatchId, Result<Reply, ClientError>)>,
    /// Outputs taken from the state and not carried out yet. Kept here, not on the stack,
    /// so that a panicking `on_error` (or a runtime shut down) leaves them for the drop to
    /// hand back to the state.
    untold: VecDeque<Output<Channels>>,
    /// Set once the state is finished: the end is normal.
    over: bool,
}

impl Worker {
    async fn run(mut self) {
        loop {
            let (wake_at, finished) = {
                let mut state = self.shared.state.lock();
                state.pump(Instant::now());
                self.untold
                    .extend(std::iter::from_fn(|| state.poll_output()));
                (state.poll_timeout(), state.is_finished())
            };
            if !self.untold.is_empty() {
                while let Some(output) = self.untold.pop_front() {
                    self.carry_out(output).await;
                }
                continue;
            }
            if finished {
                self.over = true;
                return;
            }
            let sleep = async move {
                match wake_at {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = self.shared.wake.notified() => {}
                Some(joined) = self.in_flight.join_next() => {
                    // The answer's task only awaits a channel; were it ever cancelled, its
                    // batch would stay out until the producer ends (then `Closed`).
                    if let Ok((batch, reply)) = joined {
                        self.shared.state.lock().answered(batch, reply);
                    }
                }
                () = sleep => {}
            }
        }
    }

    async fn carry_out(&mut self, output: Output<Channels>) {
        let Some(batch) = output.tell(self.on_error.as_ref()) else {
            return;
        };
        // A batch waits for room in the router as any request does.
        let admission = Admission::wait_for_room(Instant::now(), self.client.request_timeout());
        match self.client.hand_off(batch.request, admission).await {
            Ok(answer) => {
                let id = batch.id;
                self.in_flight
                    .spawn(async move { (id, await_answer(answer).await) });
            }
            Err(error) => self.shared.state.lock().complete(batch.id, Err(error)),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // The state ends before any untold output is told: a caller who hears `Stopped`
        // finds the producer closed.
        let untold = std::mem::take(&mut self.untold);
        let outputs = self.shared.state.lock().end(!self.over, untold);
        for output in outputs {
            output.tell(None);
        }
    }
}

async fn await_answer(answer: Answer) -> Result<Reply, ClientError> {
    answer.await.map_err(|_| ClientError::Closed)?
}

//! A consumer of one stream and topic (the SDK 0.11.0's `IggyConsumer`): a single consumer
//! or a member of a consumer group, read message by message with [`TopicConsumer::next`], or
//! as a `futures_core::Stream` of the same items (as the SDK's consumer is). The core's
//! consumer state decides every request (join, sync, polls, commits); this type only
//! carries them out and waits when it says to, so an idle topic costs a few polls a second.
//!
//! ```no_run
//! # async fn example(client: iggy_route_tokio::Client) -> Result<(), iggy_route_tokio::ClientError> {
//! let mut consumer = client.consumer("orders", "events")?.group("billing")?.build()?;
//! while let Some(received) = consumer.next().await {
//!     let received = received?;
//!     println!(
//!         "{} of {} from partition {}",
//!         received.offset(),
//!         received.current_offset,
//!         received.partition_id
//!     );
//! }
//! # Ok(())
//! # }
//! ```
//!
//! A request out when a `next` is dropped (a `select!`, a timeout) or a stream is left
//! mid-item stays the consumer's: the next call, or the stream, takes its answer, so
//! `next` is cancel-safe and the two ways of reading mix.

use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use futures_core::Stream;
use iggy_route_core::Reply;
use iggy_route_core::client::ClientError;
use iggy_route_core::client::consumer::{ConsumerState, ConsumerStats, ReceivedMessage, Step};

use crate::Client;

/// An answer on its way, owned, so that it outlives the call that asked for it.
type AnswerFuture = Pin<Box<dyn Future<Output = Result<Reply, ClientError>> + Send + Sync>>;

/// What the consumer waits on. Kept in the consumer rather than in a call's future: the
/// state has at most one request out and must get its answer, whichever call (or stream
/// poll) is there when it comes.
enum Pending {
    /// The request the state asked for; its answer goes to the state.
    Answer(AnswerFuture),
    /// Nothing to ask before this sleep ends.
    Sleep(Pin<Box<tokio::time::Sleep>>),
}

impl fmt::Debug for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pending::Answer(_) => f.write_str("Answer"),
            Pending::Sleep(sleep) => f.debug_tuple("Sleep").field(&sleep.deadline()).finish(),
        }
    }
}

/// Builds a [`TopicConsumer`]; from [`Client::consumer`]. Its settings and their rules are
/// the core's, the same on both adapters.
pub type ConsumerBuilder = iggy_route_core::client::consumer::ConsumerBuilder<Client>;

/// See the module documentation.
///
/// Dropped without [`TopicConsumer::shutdown`], a group member's membership ends at once
/// (its partitions go to the other members at their next sync), and what it handed out
/// since its last commit is not stored: the next owner hands that batch out again.
#[derive(Debug)]
pub struct TopicConsumer {
    client: Client,
    state: ConsumerState,
    pending: Option<Pending>,
}

impl TopicConsumer {
    /// The consumer that carries out `state`'s requests on `client`.
    pub(crate) fn new(client: Client, state: ConsumerState) -> Self {
        Self {
            client,
            state,
            pending: None,
        }
    }

    /// The next message; waits for one. Never `None` while the client is up: an error
    /// (a poll that timed out, a node that refused) is returned once and the consumer goes
    /// on after `poll_interval`. `None` once the client is shut down. Cancel-safe.
    pub async fn next(&mut self) -> Option<Result<ReceivedMessage, ClientError>> {
        loop {
            if let Some(message) = self.state.next_message(Instant::now()) {
                return Some(Ok(message));
            }
            match self.step().await {
                Ok(()) => {}
                Err(ClientError::Closed) => return None,
                Err(error) => return Some(Err(error)),
            }
        }
    }

    /// One step of the state, waited for: its request submitted and answered, or its
    /// wait slept (see [`Self::poll_step`]).
    async fn step(&mut self) -> Result<(), ClientError> {
        poll_fn(|cx| self.poll_step(cx)).await
    }

    /// One step of the state: the one under way, or else the next the state asks for.
    /// Ready once its request is answered (and the answer given to the state) or its wait
    /// is over. A client shut down is `Closed` at once: no answer will ever come, so the
    /// state is not asked to retry.
    fn poll_step(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ClientError>> {
        let mut pending = match self.pending.take() {
            Some(pending) => pending,
            None => self.start_step(),
        };
        let outcome = match &mut pending {
            Pending::Answer(answer) => answer.as_mut().poll(cx).map(Some),
            Pending::Sleep(sleep) => sleep.as_mut().poll(cx).map(|()| None),
        };
        let Poll::Ready(outcome) = outcome else {
            self.pending = Some(pending);
            return Poll::Pending;
        };
        Poll::Ready(match outcome {
            None => Ok(()),
            Some(Err(ClientError::Closed)) => Err(ClientError::Closed),
            Some(answer) => self.state.answer(Instant::now(), answer),
        })
    }

    fn start_step(&mut self) -> Pending {
        match self.state.next_step(Instant::now()) {
            Step::Submit(request) => {
                let client = self.client.clone();
                Pending::Answer(Box::pin(async move { client.request(request).await }))
            }
            Step::Wait(until) => Pending::Sleep(Box::pin(tokio::time::sleep_until(
                tokio::time::Instant::from_std(until),
            ))),
        }
    }

    /// Ends a wait under way: the caller has something to do now, and the state says
    /// again how long to wait when there is still nothing.
    fn cancel_wait(&mut self) {
        if matches!(self.pending, Some(Pending::Sleep(_))) {
            self.pending = None;
        }
    }

    /// Waits for the answer to a request still out (from a `next` dropped mid-poll, or a
    /// stream left mid-item), so that the state knows what it did before it is asked for
    /// anything else.
    async fn settle(&mut self) -> Result<(), ClientError> {
        self.cancel_wait();
        match self.pending {
            Some(_) => self.step().await,
            None => Ok(()),
        }
    }

    /// Joins the group (creating it first if configured) and reads the assignment, or
    /// reads the topic's partitions, without polling: what the first message would do
    /// first. Members that all join before any of them reads share the partitions out
    /// once, instead of handing some over as each newcomer arrives.
    pub async fn join(&mut self) -> Result<(), ClientError> {
        self.cancel_wait();
        while !self.state.is_ready() {
            self.step().await?;
        }
        Ok(())
    }

    /// Stores the offsets handed out and not stored yet, now. A group member first syncs,
    /// when it has not since the batch was handed out, and stores only the offsets of
    /// partitions still its own (the others' new owners read on from the stored offset).
    pub async fn commit(&mut self) -> Result<(), ClientError> {
        // A request still out belongs to a call that was dropped (or a stream left
        // mid-item): its answer is the state's, its error nobody's, as for any call whose
        // future was dropped.
        let _ = self.settle().await;
        self.state.request_commit();
        while self.state.commit_requested() {
            self.step().await?;
        }
        Ok(())
    }

    /// Stores what was handed out and not stored yet when `commit` says so, then leaves
    /// the group, if it joined one (its partitions go to the other members at once).
    ///
    /// The membership ends whatever happens: a failed commit still leaves (its error is
    /// returned), and a leave that fails or times out ends the membership with its
    /// member link. A request still out is answered first, so that a join it made is left
    /// too.
    pub async fn shutdown(mut self, commit: bool) -> Result<(), ClientError> {
        let committed = if commit {
            self.commit().await
        } else {
            // As in `commit`: the answer is for the state, its error for nobody.
            let _ = self.settle().await;
            Ok(())
        };
        let left = match self.state.leave_call() {
            Some(call) => self
                .client
                .request(call.request)
                .await
                .and_then(|reply| call.reply.extract(reply))
                .map(|()| self.state.left()),
            None => Ok(()),
        };
        // Dropped here: a membership the leave did not end is abandoned.
        committed.and(left)
    }

    /// Counters so far.
    pub fn stats(&self) -> ConsumerStats {
        self.state.stats()
    }

    /// The partitions read now.
    pub fn partitions(&self) -> &[u32] {
        self.state.partitions()
    }
}

/// The items of [`TopicConsumer::next`], as a stream: a message, or an error after which
/// the stream goes on; it ends once the client is shut down.
impl Stream for TopicConsumer {
    type Item = Result<ReceivedMessage, ClientError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(message) = this.state.next_message(Instant::now()) {
                return Poll::Ready(Some(Ok(message)));
            }
            match ready!(this.poll_step(cx)) {
                Ok(()) => {}
                Err(ClientError::Closed) => return Poll::Ready(None),
                Err(error) => return Poll::Ready(Some(Err(error))),
            }
        }
    }
}

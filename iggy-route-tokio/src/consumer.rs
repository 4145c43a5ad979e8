//! A consumer of one stream and topic (the SDK 0.11.0's `IggyConsumer`): a single consumer
//! or a member of a consumer group, read message by message with [`TopicConsumer::next`]. The
//! core's [`ConsumerState`] decides every request (join, sync, polls, commits); this type
//! only carries them out and waits when it says to, so an idle topic costs a few polls a
//! second.
//!
//! ```no_run
//! # async fn example(client: iggy_route_tokio::Client) -> Result<(), iggy_route_tokio::ClientError> {
//! let mut consumer = client.consumer("orders", "events")?.group("billing")?.build()?;
//! while let Some(received) = consumer.next().await {
//!     let received = received?;
//!     println!("{} from partition {}", received.message.offset, received.partition_id);
//! }
//! # Ok(())
//! # }
//! ```

use std::time::Instant;

use iggy_route_core::client::ClientError;
use iggy_route_core::client::consumer::{ConsumerState, ConsumerStats, ReceivedMessage, Step};
use iggy_route_core::wire::Identifier;

use crate::Client;

/// Builds a [`TopicConsumer`]; from [`Client::consumer`]. Its settings and their rules are
/// the core's, the same on both adapters.
pub type ConsumerBuilder =
    iggy_route_core::client::consumer::ConsumerBuilder<Client, TopicConsumer>;

impl Client {
    /// A builder for a consumer of `stream`/`topic` (named as for [`Client::send`]).
    pub fn consumer(
        &self,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<ConsumerBuilder, ClientError> {
        let claims = self.claims().clone();
        ConsumerBuilder::new(self.clone(), claims, TopicConsumer::new, stream, topic)
    }
}

/// See the module documentation.
///
/// Dropped without [`TopicConsumer::shutdown`], a group member's membership ends at once
/// (its partitions go to the other members at their next sync), and what it handed out
/// since its last commit is not stored: the next owner hands that batch out again.
#[derive(Debug)]
pub struct TopicConsumer {
    client: Client,
    state: ConsumerState,
}

impl TopicConsumer {
    /// The consumer that carries out `state`'s requests on `client`.
    fn new(client: Client, state: ConsumerState) -> Self {
        Self { client, state }
    }

    /// The next message; waits for one. Never `None` while the client is up: an error
    /// (a poll that timed out, a node that refused) is returned once and the consumer goes
    /// on after `poll_interval`. `None` once the client is shut down.
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
    /// wait slept. A client shut down is `Closed` at once: no answer will ever come, so
    /// the state is not asked to retry.
    async fn step(&mut self) -> Result<(), ClientError> {
        match self.state.next_step(Instant::now()) {
            Step::Submit(request) => match self.client.request(request).await {
                Err(ClientError::Closed) => Err(ClientError::Closed),
                answer => self.state.answer(Instant::now(), answer),
            },
            Step::Wait(until) => {
                tokio::time::sleep_until(tokio::time::Instant::from_std(until)).await;
                Ok(())
            }
        }
    }

    /// Joins the group (creating it first if configured) and reads the assignment, or
    /// reads the topic's partitions, without polling: what the first message would do
    /// first. Members that all join before any of them reads share the partitions out
    /// once, instead of handing some over as each newcomer arrives.
    pub async fn join(&mut self) -> Result<(), ClientError> {
        while !self.state.is_ready() {
            self.step().await?;
        }
        Ok(())
    }

    /// Stores the offsets handed out and not stored yet, now. A group member first syncs,
    /// when it has not since the batch was handed out, and stores only the offsets of
    /// partitions still its own (the others' new owners read on from the stored offset).
    pub async fn commit(&mut self) -> Result<(), ClientError> {
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
    /// member link.
    pub async fn shutdown(mut self, commit: bool) -> Result<(), ClientError> {
        let committed = if commit { self.commit().await } else { Ok(()) };
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

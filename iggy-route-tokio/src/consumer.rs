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

use std::time::Duration;

use iggy_route_core::client::consumer::{
    AutoCommit, ConsumerConfig, ConsumerIdentity, ConsumerState, ConsumerStats, ReceivedMessage,
    Step,
};
use iggy_route_core::client::{ClientError, identifier};
use iggy_route_core::wire::{Identifier, PollingStrategy};

use crate::Client;

/// Builds a [`TopicConsumer`]; from [`Client::consumer`]. A single consumer with id 0 of every
/// partition unless told otherwise.
#[derive(Debug)]
pub struct ConsumerBuilder {
    client: Client,
    config: ConsumerConfig,
}

impl Client {
    /// A builder for a consumer of `stream`/`topic` (named as for [`Client::send`]).
    pub fn consumer(
        &self,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<ConsumerBuilder, ClientError> {
        Ok(ConsumerBuilder {
            client: self.clone(),
            config: ConsumerConfig::new(
                identifier(stream)?,
                identifier(topic)?,
                ConsumerIdentity::Consumer(Identifier::Numeric(0)),
            ),
        })
    }
}

impl ConsumerBuilder {
    /// A single consumer with this id (its offsets are its own).
    pub fn consumer_id(
        mut self,
        id: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        self.config.identity = ConsumerIdentity::Consumer(identifier(id)?);
        Ok(self)
    }

    /// A member of this consumer group (created if absent, unless
    /// [`ConsumerBuilder::create_group`] says not to).
    pub fn group(
        mut self,
        group: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        self.config.identity = ConsumerIdentity::Group(identifier(group)?);
        Ok(self)
    }

    /// Whether a missing group is created (default yes).
    pub fn create_group(mut self, create: bool) -> Self {
        self.config.create_group = create;
        self
    }

    /// A single consumer's one partition (default: all of them).
    pub fn partition(mut self, partition: u32) -> Self {
        self.config.partition = Some(partition);
        self
    }

    /// Where each partition's first poll starts (default `Next`: after the stored offset).
    pub fn polling_strategy(mut self, strategy: PollingStrategy) -> Self {
        self.config.strategy = strategy;
        self
    }

    /// Most messages per poll (default 100).
    pub fn batch_length(mut self, messages: u32) -> Self {
        self.config.batch_length = messages.max(1);
        self
    }

    /// How long an empty partition waits before it is polled again (default 100 ms).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.config.poll_interval = interval;
        self
    }

    /// When offsets are stored (default [`AutoCommit::AfterPoll`]).
    pub fn auto_commit(mut self, policy: AutoCommit) -> Self {
        self.config.auto_commit = policy;
        self
    }

    /// The consumer. It asks nothing until [`TopicConsumer::next`] is first awaited.
    ///
    /// A group member is refused with `ClientError::GroupConsumerExists` while another
    /// consumer of the same group lives on this client: the server counts a client as one
    /// member, so each member of a group needs a client of its own.
    pub fn build(self) -> Result<TopicConsumer, ClientError> {
        Ok(TopicConsumer {
            state: ConsumerState::claiming(self.config, self.client.claims())?,
            client: self.client,
        })
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
    /// The next message; waits for one. Never `None` while the client is up: an error
    /// (a poll that timed out, a node that refused) is returned once and the consumer goes
    /// on after `poll_interval`. `None` once the client is shut down.
    pub async fn next(&mut self) -> Option<Result<ReceivedMessage, ClientError>> {
        loop {
            if let Some(message) = self.state.next_message(std::time::Instant::now()) {
                return Some(Ok(message));
            }
            match self.state.next_step(std::time::Instant::now()) {
                Step::Submit(request) => {
                    let answer = self.client.request(request).await;
                    if matches!(answer, Err(ClientError::Closed)) {
                        return None;
                    }
                    match self.state.answer(std::time::Instant::now(), answer) {
                        Ok(()) => {}
                        Err(error) => return Some(Err(error)),
                    }
                }
                Step::Wait(until) => {
                    tokio::time::sleep_until(tokio::time::Instant::from_std(until)).await;
                }
            }
        }
    }

    /// Joins the group (creating it first if configured) and reads the assignment, or
    /// reads the topic's partitions, without polling: what the first message would do
    /// first. Members that all join before any of them reads share the partitions out
    /// once, instead of handing some over as each newcomer arrives.
    pub async fn join(&mut self) -> Result<(), ClientError> {
        while !self.state.is_ready() {
            match self.state.next_step(std::time::Instant::now()) {
                Step::Submit(request) => {
                    let answer = self.client.request(request).await;
                    self.state.answer(std::time::Instant::now(), answer)?;
                }
                Step::Wait(until) => {
                    tokio::time::sleep_until(tokio::time::Instant::from_std(until)).await;
                }
            }
        }
        Ok(())
    }

    /// Stores the offsets handed out and not stored yet, now. A group member first syncs,
    /// when it has not since the batch was handed out, and stores only the offsets of
    /// partitions still its own (the others' new owners read on from the stored offset).
    pub async fn commit(&mut self) -> Result<(), ClientError> {
        self.state.request_commit();
        while self.state.commit_requested() {
            match self.state.next_step(std::time::Instant::now()) {
                Step::Submit(request) => {
                    let answer = self.client.request(request).await;
                    self.state.answer(std::time::Instant::now(), answer)?;
                }
                Step::Wait(until) => {
                    tokio::time::sleep_until(tokio::time::Instant::from_std(until)).await;
                }
            }
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

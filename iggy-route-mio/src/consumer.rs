//! A consumer of one stream and topic (the SDK 0.11.0's `IggyConsumer`) for blocking
//! code: a single consumer or a member of a consumer group, read message by message as an
//! [`Iterator`]. The core's [`ConsumerState`] decides every request (join, sync, polls,
//! commits); this type only carries them out and sleeps when it says to, so an idle topic
//! costs a few polls a second.
//!
//! ```no_run
//! # fn example(client: iggy_route_mio::Client) -> Result<(), iggy_route_mio::ClientError> {
//! let consumer = client.consumer("orders", "events")?.group("billing")?.build();
//! for received in consumer {
//!     let received = received?;
//!     println!("{} from partition {}", received.message.offset, received.partition_id);
//! }
//! # Ok(())
//! # }
//! ```

use std::collections::VecDeque;
use std::time::{Duration, Instant};

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

    /// The consumer. It asks nothing until its first message is asked for.
    pub fn build(self) -> TopicConsumer {
        TopicConsumer {
            client: self.client,
            state: ConsumerState::new(self.config),
            ready: VecDeque::new(),
        }
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct TopicConsumer {
    client: Client,
    state: ConsumerState,
    ready: VecDeque<ReceivedMessage>,
}

impl Iterator for TopicConsumer {
    type Item = Result<ReceivedMessage, ClientError>;

    /// The next message; blocks until there is one. An error (a poll that timed out, a
    /// node that refused) is returned once and the consumer goes on after
    /// `poll_interval`. `None` once the client is shut down.
    fn next(&mut self) -> Option<Self::Item> {
        self.next_by(None)
    }
}

impl TopicConsumer {
    /// [`Iterator::next`] that gives up at `deadline`: `None` when no message came by
    /// then (or the client is shut down), so that a loop can stop an idle consumer.
    pub fn next_before(
        &mut self,
        deadline: Instant,
    ) -> Option<Result<ReceivedMessage, ClientError>> {
        self.next_by(Some(deadline))
    }

    fn next_by(
        &mut self,
        deadline: Option<Instant>,
    ) -> Option<Result<ReceivedMessage, ClientError>> {
        loop {
            if let Some(message) = self.ready.pop_front() {
                return Some(Ok(message));
            }
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return None;
            }
            match self.state.next_step(Instant::now()) {
                Step::Submit(request) => {
                    let answer = self.client.request(request);
                    if matches!(answer, Err(ClientError::Closed)) {
                        return None;
                    }
                    match self.state.answer(Instant::now(), answer) {
                        Ok(messages) => self.ready.extend(messages),
                        Err(error) => return Some(Err(error)),
                    }
                }
                Step::Wait(until) => {
                    let until = deadline.map_or(until, |deadline| until.min(deadline));
                    std::thread::sleep(until.saturating_duration_since(Instant::now()));
                }
            }
        }
    }

    /// Joins the group (creating it first if configured) and reads the assignment, or
    /// reads the topic's partitions, without polling: what the first message would do
    /// first. Members that all join before any of them reads share the partitions out
    /// once, instead of handing some over as each newcomer arrives.
    pub fn join(&mut self) -> Result<(), ClientError> {
        while !self.state.is_ready() {
            match self.state.next_step(Instant::now()) {
                Step::Submit(request) => {
                    let answer = self.client.request(request);
                    let messages = self.state.answer(Instant::now(), answer)?;
                    self.ready.extend(messages);
                }
                Step::Wait(until) => {
                    std::thread::sleep(until.saturating_duration_since(Instant::now()));
                }
            }
        }
        Ok(())
    }

    /// Stores the offsets handed out and not stored yet, now.
    pub fn commit(&mut self) -> Result<(), ClientError> {
        for (partition, offset) in self.state.uncommitted() {
            let call = self.state.commit_call(partition, offset)?;
            let reply = self.client.request(call.request)?;
            call.reply.extract(reply)?;
            self.state.committed(partition, offset);
        }
        Ok(())
    }

    /// Stores what was handed out and not stored yet when `commit` says so, then leaves
    /// the group, if it joined one (its partitions go to the other members at once).
    pub fn shutdown(mut self, commit: bool) -> Result<(), ClientError> {
        if commit {
            self.commit()?;
        }
        if let Some(call) = self.state.leave_call() {
            let reply = self.client.request(call.request)?;
            call.reply.extract(reply)?;
        }
        Ok(())
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

//! The consumer builder both adapters hand out from `Client::consumer`: every setting and
//! its rule live here; an adapter only says how its client's consumer is made around the
//! [`ConsumerState`] built ([`StartConsumer`]).

use std::fmt;
use std::time::Duration;

use super::{AutoCommit, ConsumerConfig, ConsumerIdentity, ConsumerState, GroupClaims};
use crate::client::{Checked, ClientError, identifier};
use crate::wire::{Identifier, PollingStrategy};

/// How an adapter makes its client's consumer around the state a builder made. For the
/// adapters.
pub trait StartConsumer: Sized {
    /// The adapter's consumer.
    type Consumer;

    /// The consumer groups this client's consumers are members of.
    fn claims(&self) -> &GroupClaims;

    /// The consumer that carries out `state`'s requests on this client.
    fn start_consumer(self, state: Checked<ConsumerState>) -> Self::Consumer;
}

/// Builds a consumer on client `C`; from `Client::consumer`. A single consumer with id 0
/// of every partition unless told otherwise.
pub struct ConsumerBuilder<C> {
    client: C,
    config: ConsumerConfig,
}

impl<C: fmt::Debug> fmt::Debug for ConsumerBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsumerBuilder")
            .field("client", &self.client)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<C> ConsumerBuilder<C> {
    /// A builder for a consumer of `stream`/`topic` on `client`, with the SDK's defaults
    /// ([`ConsumerConfig::new`]). For the adapters' `Client::consumer`.
    #[doc(hidden)]
    pub fn new(
        client: C,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        Ok(Self {
            client,
            config: ConsumerConfig::new(
                identifier(stream)?,
                identifier(topic)?,
                ConsumerIdentity::Consumer(Identifier::Numeric(0)),
            ),
        })
    }
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

    /// Most messages per poll (default 100; 0 is taken as 1, since a poll for nothing
    /// would never move on).
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

    /// How the consumer will read, as set so far.
    pub fn config(&self) -> &ConsumerConfig {
        &self.config
    }

    /// The consumer (`TopicConsumer` on both adapters). It asks nothing until its first
    /// message is asked for.
    ///
    /// A group member is refused with `ClientError::GroupConsumerExists` while another
    /// consumer of the same group lives on this client: the server counts a client as one
    /// member, so each member of a group needs a client of its own.
    pub fn build(self) -> Result<C::Consumer, ClientError>
    where
        C: StartConsumer,
    {
        let state = ConsumerState::claiming(self.config, self.client.claims())?;
        Ok(self.client.start_consumer(Checked::new(state)))
    }
}

#[cfg(test)]
#[path = "builder_tests.rs"]
mod tests;

//! A consumer of one stream and topic (the SDK 0.11.0's `IggyConsumer`) for blocking
//! code: a single consumer or a member of a consumer group, read message by message as an
//! [`Iterator`]. The core's [`ConsumerState`] decides every request (join, sync, polls,
//! commits); this type only carries them out and sleeps when it says to, so an idle topic
//! costs a few polls a second.
//!
//! ```no_run
//! # fn example(client: iggy_route_mio::Client) -> Result<(), iggy_route_mio::ClientError> {
//! let consumer = client.consumer("orders", "events")?.group("billing")?.build()?;
//! for received in consumer {
//!     let received = received?;
//!     println!("{} from partition {}", received.message.offset, received.partition_id);
//! }
//! # Ok(())
//! # }
//! ```

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use iggy_route_core::client::consumer::{
    AutoCommit, ConsumerConfig, ConsumerIdentity, ConsumerState, ConsumerStats, ReceivedMessage,
    Step,
};
use iggy_route_core::client::{ClientError, identifier};
use iggy_route_core::wire::{Identifier, PollingStrategy};

use crate::Client;
use crate::responder::Outcome;

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
    ///
    /// A group member is refused with `ClientError::GroupConsumerExists` while another
    /// consumer of the same group lives on this client: the server counts a client as one
    /// member, so each member of a group needs a client of its own.
    pub fn build(self) -> Result<TopicConsumer, ClientError> {
        Ok(TopicConsumer {
            state: ConsumerState::claiming(self.config, self.client.claims())?,
            client: self.client,
            in_flight: None,
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
    /// Where the answer to the request out will come, when a call gave up waiting for it
    /// at its deadline: the next call waits on.
    in_flight: Option<Receiver<Outcome>>,
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
            if let Some(message) = self.state.next_message(Instant::now()) {
                return Some(Ok(message));
            }
            if let Some(answer) = &self.in_flight {
                let outcome = match deadline {
                    None => answer.recv().unwrap_or(Err(ClientError::Closed)),
                    Some(deadline) => {
                        match answer
                            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                        {
                            Ok(outcome) => outcome,
                            // Still out: the next call waits on for it.
                            Err(RecvTimeoutError::Timeout) => return None,
                            Err(RecvTimeoutError::Disconnected) => Err(ClientError::Closed),
                        }
                    }
                };
                self.in_flight = None;
                if matches!(outcome, Err(ClientError::Closed)) {
                    return None;
                }
                match self.state.answer(Instant::now(), outcome) {
                    Ok(()) => {}
                    Err(error) => return Some(Err(error)),
                }
                continue;
            }
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return None;
            }
            match self.state.next_step(Instant::now()) {
                Step::Submit(request) => {
                    let admission = self.client.wait_for_room();
                    self.in_flight = Some(self.client.hand_off(request, admission));
                }
                Step::Wait(until) => {
                    let until = deadline.map_or(until, |deadline| until.min(deadline));
                    std::thread::sleep(until.saturating_duration_since(Instant::now()));
                }
            }
        }
    }

    /// The answer to the request a call gave up waiting for, first: the state expects it
    /// before the next step.
    fn finish_in_flight(&mut self) -> Result<(), ClientError> {
        if let Some(answer) = self.in_flight.take() {
            let outcome = answer.recv().unwrap_or(Err(ClientError::Closed));
            self.state.answer(Instant::now(), outcome)?;
        }
        Ok(())
    }

    /// Joins the group (creating it first if configured) and reads the assignment, or
    /// reads the topic's partitions, without polling: what the first message would do
    /// first. Members that all join before any of them reads share the partitions out
    /// once, instead of handing some over as each newcomer arrives.
    pub fn join(&mut self) -> Result<(), ClientError> {
        self.finish_in_flight()?;
        while !self.state.is_ready() {
            self.step()?;
        }
        Ok(())
    }

    /// Stores the offsets handed out and not stored yet, now. A group member first syncs,
    /// when it has not since the batch was handed out, and stores only the offsets of
    /// partitions still its own (the others' new owners read on from the stored offset).
    pub fn commit(&mut self) -> Result<(), ClientError> {
        self.finish_in_flight()?;
        self.state.request_commit();
        while self.state.commit_requested() {
            self.step()?;
        }
        Ok(())
    }

    /// One step of the state, waited for.
    fn step(&mut self) -> Result<(), ClientError> {
        match self.state.next_step(Instant::now()) {
            Step::Submit(request) => {
                let answer = self.client.request(request);
                self.state.answer(Instant::now(), answer)?;
            }
            Step::Wait(until) => {
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
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
    pub fn shutdown(mut self, commit: bool) -> Result<(), ClientError> {
        let committed = if commit {
            self.commit()
        } else {
            self.finish_in_flight()
        };
        let left = match self.state.leave_call() {
            Some(call) => self
                .client
                .request(call.request)
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

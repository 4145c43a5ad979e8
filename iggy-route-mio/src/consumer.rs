//! A consumer of one stream and topic (the SDK 0.11.0's `IggyConsumer`) for blocking
//! code: a single consumer or a member of a consumer group, read message by message as an
//! [`Iterator`]. The core's consumer state decides every request (join, sync, polls,
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
use std::time::Instant;

use iggy_route_core::client::ClientError;
use iggy_route_core::client::consumer::{ConsumerState, ConsumerStats, ReceivedMessage, Step};

use crate::Client;
use crate::responder::Outcome;

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
    /// The consumer that carries out `state`'s requests on `client`.
    pub(crate) fn new(client: Client, state: ConsumerState) -> Self {
        Self {
            client,
            state,
            in_flight: None,
        }
    }

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

    /// One step of the state, waited for: its request submitted and answered, or its
    /// wait slept. A client shut down is `Closed` at once: no answer will ever come, so
    /// the state is not asked to retry.
    fn step(&mut self) -> Result<(), ClientError> {
        match self.state.next_step(Instant::now()) {
            Step::Submit(request) => match self.client.request(request) {
                Err(ClientError::Closed) => return Err(ClientError::Closed),
                answer => self.state.answer(Instant::now(), answer)?,
            },
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

//! The load of a nemesis run, as both adapters run it (`load_tokio.rs`, `load_mio.rs`):
//! - two plain senders per adapter on one client, each call a batch of 1 to 5 messages
//!   to a partition drawn by id, balanced, or by one of eight message keys;
//! - two background producers per adapter on the same client: calls of one message
//!   (batches of 1) and calls of 100 messages (batches of 100);
//! - a plain consumer per adapter (the adapter's own `TopicConsumer`, every partition);
//! - two members of one consumer group per adapter, each on a client of its own, which
//!   commit what they hand out.
//!
//! A member runs the core's `ConsumerState` through its client's `request` with the very
//! loop of the adapters' `TopicConsumer`, so that the run sees each offset write it makes
//! (the adapters' consumer keeps those to itself).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use iggy_route_core::Reply;
use iggy_route_core::Request;
use iggy_route_core::client::ClientError;
use iggy_route_core::client::consumer::{
    AutoCommit, ConsumerConfig, ConsumerIdentity, ReceivedMessage,
};
use iggy_route_core::client::producer::BackgroundConfig;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Identifier, Name};

use super::ledger::{Commit, HandOut, Kind, Ledger, RequestRecord, payload};
use crate::scripted::clients::Adapter;
use crate::sim::members::describe;
use crate::sim::rng::SimRng;

/// Room for a 2-core machine shared by three servers and the clients: a call may end this
/// much after its deadline (a thread that is not scheduled, a timer that fires late).
pub const SLACK: Duration = Duration::from_secs(2);

/// The clients' request timeout: longer than an election (about 20 s), so that a send
/// waits one out instead of failing.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A direct call: the router takes it at once (the load never fills its queues: a few
/// hundred requests at most against 10,000, 2,000 per partition), so it ends within its
/// request timeout.
pub const DIRECT_BOUND: Duration = REQUEST_TIMEOUT.saturating_add(SLACK);

/// A background call made while `ahead` calls of its producer are unsettled. Each call of
/// the run's producers is one batch (a call is never split, and a batch holds one call at
/// these batch lengths); batches are submitted in order, at most `max_in_flight` at once,
/// and each ends within a request timeout of getting room in the router and waits at most
/// as long for that room (the producer's documented bound). So the call's batch is
/// submitted once the batches ahead of it have ended, `max_in_flight` at a time, and the
/// call ends within one such round more. A producer keeps taking calls while a partition
/// cannot take sends (its buffer holds 100,000 messages), so `ahead` can grow large.
pub fn background_bound(ahead: usize) -> Duration {
    let in_flight = BackgroundConfig::default().max_in_flight.max(1);
    let rounds = u32::try_from(ahead / in_flight + 1).unwrap_or(u32::MAX);
    (REQUEST_TIMEOUT * 2)
        .saturating_mul(rounds)
        .saturating_add(SLACK)
}

/// The message keys of keyed sends.
pub const KEYS: usize = 8;

/// Pause between two calls of a plain sender.
pub const PLAIN_PACE: Duration = Duration::from_millis(20);
/// Pause between two one-message calls of a background producer.
pub const SINGLE_PACE: Duration = Duration::from_millis(20);
/// Pause between two 100-message calls of a background producer.
pub const BULK_PACE: Duration = Duration::from_millis(500);
/// Messages of a bulk call (and its producer's batch length).
pub const BULK: u32 = 100;

/// What every load task shares.
#[derive(Debug, Clone)]
pub struct Load {
    /// The stream's name.
    pub stream: String,
    /// The topic's name.
    pub topic: String,
    /// The consumer group's name.
    pub group: String,
    /// The topic's partitions.
    pub partitions: u32,
    /// The record.
    pub ledger: Arc<Ledger>,
    /// Set when the load is to stop.
    pub stop: Arc<AtomicBool>,
    /// The run's seed.
    pub seed: u64,
}

impl Load {
    /// Whether the load is to stop.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// A seeded random source of its own for one task.
    pub fn rng(&self, stream: u64) -> SimRng {
        SimRng::new(self.seed, 1_000 + stream)
    }

    /// A group member's consumer configuration: 50 messages a poll, offsets committed
    /// before each next poll of a partition, the group made beforehand.
    pub fn member_config(&self) -> Result<ConsumerConfig, ClientError> {
        let mut config = ConsumerConfig::new(
            Identifier::Named(Name::new(&self.stream)?),
            Identifier::Named(Name::new(&self.topic)?),
            ConsumerIdentity::Group(Identifier::Named(Name::new(&self.group)?)),
        );
        config.batch_length = 50;
        config.auto_commit = AutoCommit::AfterPoll;
        config.create_group = false;
        Ok(config)
    }
}

/// A plain sender's next call: its partitioning and its message count.
pub fn draw_plain(rng: &mut SimRng, partitions: u32) -> (Kind, Partitioning, u32) {
    let count = u32::try_from(rng.range(1, 5)).unwrap_or(1);
    match rng.index(3) {
        0 => {
            let partition = u32::try_from(rng.index(partitions as usize)).unwrap_or(0);
            (
                Kind::Partition(partition),
                Partitioning::partition_id(partition),
                count,
            )
        }
        1 => (Kind::Balanced, Partitioning::balanced(), count),
        _ => {
            let key = format!("key-{}", rng.index(KEYS));
            let partitioning = Partitioning::messages_key(key.clone().into_bytes())
                .unwrap_or_else(|_| Partitioning::balanced());
            (Kind::Key(key), partitioning, count)
        }
    }
}

/// The partitioning a background producer of `kind` is built with.
pub fn partitioning(kind: &Kind) -> Result<Partitioning, String> {
    match kind {
        Kind::Partition(partition) => Ok(Partitioning::partition_id(*partition)),
        Kind::Balanced => Ok(Partitioning::balanced()),
        Kind::Key(key) => Partitioning::messages_key(key.clone().into_bytes())
            .map_err(|error| format!("key {key}: {error}")),
    }
}

/// The bookkeeping of one consumer: what it handed out and, for a member, what it wrote.
#[derive(Debug)]
pub struct ConsumerBook {
    ledger: Arc<Ledger>,
    consumer: usize,
    /// Per partition, the highest offset handed out.
    handed_max: BTreeMap<u32, u64>,
}

/// A request a member submitted and has not had answered yet.
#[derive(Debug)]
pub struct Submitted {
    what: String,
    asked: String,
    started: Duration,
    /// An offset write: partition, offset, the highest offset handed out then.
    commit: Option<(u32, u64, Option<u64>)>,
}

impl ConsumerBook {
    /// The book of a new consumer of `adapter`.
    pub fn new(ledger: &Arc<Ledger>, name: &str, adapter: Adapter, member: bool) -> Self {
        let consumer = ledger.consumer(name, adapter, member);
        Self {
            ledger: Arc::clone(ledger),
            consumer,
            handed_max: BTreeMap::new(),
        }
    }

    /// Records a message handed out while the consumer had joined `membership` times.
    pub fn handed(&mut self, membership: u64, received: &ReceivedMessage) {
        let message = &received.message;
        let highest = self
            .handed_max
            .entry(received.partition_id)
            .or_insert(message.offset);
        *highest = (*highest).max(message.offset);
        self.ledger.handout(HandOut {
            consumer: self.consumer,
            membership,
            partition: received.partition_id,
            offset: message.offset,
            id: message.id,
            payload_ok: message.payload == payload(message.id),
            at: self.ledger.now(),
        });
    }

    /// Records an error the consumer returned to its caller.
    pub fn failed(&self, error: &str) {
        let now = self.ledger.now();
        self.ledger.request(RequestRecord {
            consumer: self.consumer,
            what: "consumer error".to_owned(),
            started: now,
            ended_at: now,
            bound: DIRECT_BOUND,
            error: Some(error.to_owned()),
            detail: String::new(),
        });
    }

    /// Notes `request` going out now.
    #[allow(
        clippy::wildcard_enum_match_arm,
        reason = "`Request` is non_exhaustive; a consumer sends none of the others"
    )]
    pub fn submitting(&self, request: &Request) -> Submitted {
        let (what, commit) = match request {
            Request::StoreOffset(store) => (
                "store offset".to_owned(),
                Some((
                    store.partition_id,
                    store.offset,
                    self.handed_max.get(&store.partition_id).copied(),
                )),
            ),
            Request::Poll(_) => ("poll".to_owned(), None),
            Request::Command(command) => (format!("command {}", command.code), None),
            _ => ("other".to_owned(), None),
        };
        Submitted {
            what,
            asked: describe(request),
            started: self.ledger.now(),
            commit,
        }
    }

    /// Records the answer to `submitted`.
    pub fn answered(&self, submitted: Submitted, answer: &Result<Reply, ClientError>) {
        let ended_at = self.ledger.now();
        let error = answer.as_ref().err().map(ToString::to_string);
        if let Some((partition, offset, handed_max)) = submitted.commit {
            self.ledger.commit(Commit {
                consumer: self.consumer,
                partition,
                offset,
                handed_max,
                at: submitted.started,
                error: error.clone(),
            });
        }
        self.ledger.request(RequestRecord {
            consumer: self.consumer,
            what: submitted.what,
            started: submitted.started,
            ended_at,
            bound: DIRECT_BOUND,
            error,
            detail: format!("{} -> {}", submitted.asked, answered(answer)),
        });
    }
}

/// A consumer's answer in short: a poll's partition and count, other replies as they
/// print (a consumer's replies carry no credentials), cut short.
fn answered(answer: &Result<Reply, ClientError>) -> String {
    match answer {
        Ok(Reply::Polled(polled)) => format!(
            "polled partition {} x{} (current {})",
            polled.partition_id,
            polled.messages.len(),
            polled.current_offset
        ),
        Ok(other) => format!("{other:?}").chars().take(200).collect(),
        Err(error) => format!("error: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_background_call_waits_one_round_per_full_set_of_batches_ahead() {
        let round = REQUEST_TIMEOUT * 2;
        assert_eq!(background_bound(0), round + SLACK);
        assert_eq!(background_bound(15), round + SLACK);
        assert_eq!(background_bound(16), round * 2 + SLACK);
    }
}

//! What the nemesis run's load did, call by call, for the checker: every send with its
//! messages, its partitioning, its start and end and how it ended; every message a consumer
//! handed out; every offset a group member wrote; every consumer request with its time.
//!
//! Every message carries an id of its own (run tag, source, counter) and a payload made from
//! that id, so that the checker can find each one in the partitions it reads back and tell a
//! message of this run from anything else.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::wire::Message;
use iggy_route_core::{RequestError, SendReceipt};

pub use super::ledger_consumers::{Commit, ConsumerInfo, HandOut, RequestRecord};
use crate::demo::timeline::Timeline;
use crate::scripted::clients::Adapter;

/// How a send's partition was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `Partitioning::PartitionId`.
    Partition(u32),
    /// `Partitioning::Balanced`.
    Balanced,
    /// `Partitioning::MessagesKey` with this key.
    Key(String),
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Acknowledged, with what its receipt named.
    Acked {
        /// The receipt's partition.
        partition: u32,
        /// The offset of the call's first message (`None`: the server did not say).
        base_offset: Option<u64>,
        /// The replica that admitted it, when the client knew.
        replica: Option<u32>,
    },
    /// `OutcomeUnknown`: the link went with the call in flight; it may be stored.
    Unknown(String),
    /// `TimedOut` in doubt: it may be stored (`RequestError::TimedOut`'s documentation).
    /// One not in doubt is `Failed`: nothing of it may be stored.
    TimedOut(String),
    /// Ended by the run's own shutdown of its client (`RequestError::Shutdown`, `Closed`)
    /// once it gave up waiting for the load, which it does only when the server did not
    /// recover: a call on the wire then may be stored.
    CutShort(String),
    /// Any other failure: nothing of it may be stored.
    Failed(String),
}

impl Ended {
    /// The end of a call that returned `result`.
    pub fn of(result: Result<&SendReceipt, &ClientError>) -> Ended {
        match result {
            Ok(receipt) => Ended::Acked {
                partition: receipt.partition_id,
                base_offset: receipt.base_offset,
                replica: receipt.replica,
            },
            Err(error) => Ended::error(error),
        }
    }

    /// The end of a call that failed with `error`.
    #[allow(
        clippy::wildcard_enum_match_arm,
        reason = "`ClientError` is non_exhaustive; only the two above leave a send's fate open"
    )]
    pub fn error(error: &ClientError) -> Ended {
        match error {
            ClientError::Request(RequestError::OutcomeUnknown { .. }) => {
                Ended::Unknown(error.to_string())
            }
            ClientError::Request(RequestError::TimedOut { in_doubt: true, .. }) => {
                Ended::TimedOut(error.to_string())
            }
            ClientError::Request(RequestError::Shutdown) | ClientError::Closed => {
                Ended::CutShort(error.to_string())
            }
            other => Ended::Failed(other.to_string()),
        }
    }
}

/// One send call: a direct send, or one call of a background producer.
#[derive(Debug, Clone)]
pub struct SendCall {
    /// Index of its source in [`Records::sources`].
    pub source: usize,
    /// Its place among its source's calls (the order they were made in).
    pub seq: u64,
    /// How its partition was chosen.
    pub kind: Kind,
    /// The id of its first message; the others follow one by one.
    pub first_id: u128,
    /// How many messages it carried.
    pub count: u32,
    /// When it was called, from the start of the run.
    pub started: Duration,
    /// When it returned (a background call: when its delivery settled).
    pub ended_at: Duration,
    /// The longest it may take by the clients' documented deadlines (plus the slack).
    pub bound: Duration,
    /// How it ended.
    pub ended: Ended,
}

/// Who made send calls.
#[derive(Debug, Clone)]
pub struct Source {
    /// Its name in the report.
    pub name: String,
    /// Its adapter.
    pub adapter: Adapter,
    /// The counter of its next message id: every id below it went into a call, recorded
    /// or not (a call still unsettled when the run gave up on its load is not).
    pub issued: Arc<AtomicU64>,
}

impl Source {
    /// Whether `id` went into a call of source `source` of this run (tagged `tag`).
    pub fn issued(sources: &[Source], tag: u32, id: u128) -> bool {
        let counter = u64::try_from(id & u128::from(u64::MAX)).unwrap_or(u64::MAX);
        let source = usize::try_from((id >> 64) & 0xffff_ffff).unwrap_or(usize::MAX);
        id >> 96 == u128::from(tag)
            && sources
                .get(source)
                .is_some_and(|s| counter < s.issued.load(Ordering::Relaxed))
    }
}

/// Everything recorded.
#[derive(Debug, Default)]
pub struct Records {
    /// The tag every message id of the run starts with.
    pub run_tag: u32,
    /// Who sent.
    pub sources: Vec<Source>,
    /// Every send call, in the order they ended.
    pub sends: Vec<SendCall>,
    /// Every consumer.
    pub consumers: Vec<ConsumerInfo>,
    /// Every hand-out.
    pub handouts: Vec<HandOut>,
    /// Every offset write of a member.
    pub commits: Vec<Commit>,
    /// Every consumer request of a member.
    pub requests: Vec<RequestRecord>,
    /// Messages acknowledged per 100 ms, per adapter (tokio first, then mio).
    pub timelines: [Timeline; 2],
    /// Per partition, the replica that admitted its latest acknowledged send.
    pub primaries: BTreeMap<u32, u32>,
    /// Per partition, when a send to it was last acknowledged.
    pub last_ack: BTreeMap<u32, Duration>,
}

/// The shared, locked record of a run.
#[derive(Debug)]
pub struct Ledger {
    start: Instant,
    start_wall: std::time::SystemTime,
    run_tag: u32,
    records: Mutex<Records>,
}

/// Hands out the message ids of one source: run tag, source and a counter.
#[derive(Debug)]
pub struct Ids {
    /// The source's index in [`Records::sources`].
    pub source: usize,
    base: u128,
    next: u64,
    seq: u64,
    issued: Arc<AtomicU64>,
}

impl Ids {
    /// The first id of a call of `count` messages, and the call's place in the source.
    pub fn take(&mut self, count: u32) -> (u128, u64) {
        let first = self.base | u128::from(self.next);
        self.next += u64::from(count);
        self.issued.store(self.next, Ordering::Relaxed);
        self.seq += 1;
        (first, self.seq - 1)
    }
}

/// The payload of message `id`: the checker knows a message of this run by it.
pub fn payload(id: u128) -> Bytes {
    Bytes::from(format!("nemesis {id:032x}"))
}

/// The messages `first`, `first + 1`, ... of a call of `count`.
pub fn messages(first: u128, count: u32) -> Vec<Message> {
    (0..u128::from(count))
        .map(|n| Message {
            id: first + n,
            payload: payload(first + n),
            ..Message::default()
        })
        .collect()
}

/// The index of an adapter's timeline.
pub fn adapter_index(adapter: Adapter) -> usize {
    match adapter {
        Adapter::Tokio => 0,
        Adapter::Mio => 1,
    }
}

impl Ledger {
    /// A ledger whose clock starts now; `seed` picks the run's tag.
    pub fn new(seed: u64) -> Ledger {
        // Never zero: an id of zero would be replaced by the router's own.
        let run_tag = u32::try_from(seed & 0x7fff_ffff).unwrap_or(0) | 0x4000_0000;
        Ledger {
            start: Instant::now(),
            start_wall: std::time::SystemTime::now(),
            run_tag,
            records: Mutex::new(Records {
                run_tag,
                ..Records::default()
            }),
        }
    }

    /// The time since the start of the run.
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// The run's start by the wall clock, to line the run's times up with the logs.
    pub fn start_wall(&self) -> std::time::SystemTime {
        self.start_wall
    }

    fn lock(&self) -> MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new source of sends, and its ids.
    pub fn source(&self, name: &str, adapter: Adapter) -> Ids {
        let mut records = self.lock();
        let source = records.sources.len();
        let issued = Arc::new(AtomicU64::new(1));
        records.sources.push(Source {
            name: name.to_owned(),
            adapter,
            issued: Arc::clone(&issued),
        });
        Ids {
            source,
            base: (u128::from(self.run_tag) << 96) | ((source as u128) << 64),
            next: 1,
            seq: 0,
            issued,
        }
    }

    /// Records a send call that ended.
    pub fn send(&self, call: SendCall) {
        let mut records = self.lock();
        let adapter = records.sources[call.source].adapter;
        if let Ended::Acked {
            partition, replica, ..
        } = &call.ended
        {
            records.timelines[adapter_index(adapter)].record_ack(
                call.ended_at,
                u64::from(call.count),
                Some(*partition),
            );
            if let Some(replica) = replica {
                records.primaries.insert(*partition, *replica);
            }
            let last = records.last_ack.entry(*partition).or_default();
            *last = (*last).max(call.ended_at);
        }
        records.sends.push(call);
    }

    /// A new consumer; its index.
    pub fn consumer(&self, name: &str, adapter: Adapter, member: bool) -> usize {
        let mut records = self.lock();
        records.consumers.push(ConsumerInfo {
            name: name.to_owned(),
            adapter,
            member,
        });
        records.consumers.len() - 1
    }

    /// Records a hand-out.
    pub fn handout(&self, handout: HandOut) {
        self.lock().handouts.push(handout);
    }

    /// Records an offset write.
    pub fn commit(&self, commit: Commit) {
        self.lock().commits.push(commit);
    }

    /// Records a consumer request.
    pub fn request(&self, request: RequestRecord) {
        self.lock().requests.push(request);
    }

    /// Per partition, the replica that admitted its latest acknowledged send.
    pub fn primaries(&self) -> BTreeMap<u32, u32> {
        self.lock().primaries.clone()
    }

    /// The partitions of `0..partitions` that had no send acknowledged since `since`.
    pub fn silent_since(&self, since: Duration, partitions: u32) -> Vec<u32> {
        let records = self.lock();
        (0..partitions)
            .filter(|p| records.last_ack.get(p).is_none_or(|at| *at < since))
            .collect()
    }

    /// Messages acknowledged so far.
    pub fn acknowledged(&self) -> u64 {
        self.lock()
            .sends
            .iter()
            .filter(|call| matches!(call.ended, Ended::Acked { .. }))
            .map(|call| u64::from(call.count))
            .sum()
    }

    /// Everything recorded (the load is over).
    pub fn take(&self) -> Records {
        std::mem::take(&mut *self.lock())
    }
}

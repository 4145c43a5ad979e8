//! The routers' bounded workload: 30 to 80 sends each of small batches, to explicit
//! partitions or by message key, spread over the workload span (sometimes in bursts).
//!
//! Sends planned after the run's `CREATE_PARTITIONS` (see `ops.rs`) may name the
//! partition it adds.
//!
//! Every message's payload names its router, its batch (the router's own send sequence)
//! and its place in the batch, so the checker can account for each one in the logs.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use iggy_route_core::partitioning::{Partitioning, resolve_partition};
use iggy_route_core::wire::{Identifier, Message};
use iggy_route_core::{Request, SendRequest};

use super::nodes::SimTopic;
use super::ops::{Ops, PLAN_ADMIN};
use super::rng::SimRng;
use super::scenario::Scenario;

/// Who wrote a message: (router, batch, index in the batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MessageTag {
    /// The router.
    pub router: u32,
    /// The router's batch number: batches are numbered in submission order.
    pub batch: u32,
    /// The message's index in its batch.
    pub index: u32,
}

impl MessageTag {
    const LEN: usize = 12;

    /// The payload: the tag, then `padding` filler bytes.
    pub fn payload(self, padding: usize) -> Bytes {
        let mut out = BytesMut::with_capacity(Self::LEN + padding);
        out.put_u32_le(self.router);
        out.put_u32_le(self.batch);
        out.put_u32_le(self.index);
        out.put_bytes(b'.', padding);
        out.freeze()
    }

    /// The tag of a payload written by [`MessageTag::payload`].
    pub fn parse(payload: &[u8]) -> Option<Self> {
        let field = |at: usize| {
            payload
                .get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes)
        };
        if payload.len() < Self::LEN {
            return None;
        }
        Some(Self {
            router: field(0)?,
            batch: field(4)?,
            index: field(8)?,
        })
    }
}

/// One send a router submits.
#[derive(Debug, Clone)]
pub struct PlannedSend {
    /// When it is submitted.
    pub at: Duration,
    /// Which router submits it.
    pub router: usize,
    /// The router's batch number.
    pub batch: u32,
    /// The partition it must land in.
    pub partition: u32,
    /// The request.
    pub request: Request,
    /// Messages in the batch.
    pub messages: u32,
    /// The message key of a keyed send (`partition` is where it resolves under the
    /// topic's first partition count).
    pub key: Option<Bytes>,
    /// A balanced send: it may land in any partition (`partition` is 0, a placeholder),
    /// which its receipt or the log settles.
    pub balanced: bool,
}

/// Every router's planned sends, in submission order.
#[derive(Debug)]
pub struct Workload {
    sends: VecDeque<PlannedSend>,
    end: Duration,
}

impl Workload {
    /// The plan of `scenario` against `topic`.
    pub fn generate(scenario: &Scenario, topic: SimTopic) -> Self {
        let mut rng = SimRng::new(scenario.seed, 0x0040_4C0A_D000);
        // Balanced sends came later: a stream of their own keeps every earlier draw.
        let mut balancing = SimRng::new(scenario.seed, 0x0BA1_A5CE);
        let span = scenario.workload_span.as_micros() as u64;
        let mut sends = Vec::new();
        let add_partition_at =
            PLAN_ADMIN.then(|| Ops::add_partition_at(scenario).as_micros() as u64);
        for router in 0..scenario.routers {
            let count = rng.range(30, 80);
            let mean_gap = span / count;
            let mut at = rng.range(10_000, 60_000);
            for batch in 0..count as u32 {
                // A quarter of the sends come in bursts (no gap), the rest spread out.
                if !rng.chance(25) {
                    at += rng.range(0, 2 * mean_gap);
                }
                let added = add_partition_at.is_some_and(|from| at > from);
                let (partitioning, partition, key) = if rng.chance(50) {
                    let partition = if added && rng.chance(30) {
                        topic.partitions
                    } else {
                        rng.range(0, u64::from(topic.partitions) - 1) as u32
                    };
                    if balancing.chance(30) {
                        (Partitioning::Balanced, 0, None)
                    } else {
                        (Partitioning::partition_id(partition), partition, None)
                    }
                } else {
                    let key = Bytes::from(format!("key-{}", rng.range(0, 7)));
                    let partition = resolve_partition(&key, topic.partitions).unwrap_or(0);
                    (Partitioning::MessagesKey(key.clone()), partition, Some(key))
                };
                let balanced = partitioning == Partitioning::Balanced;
                let messages = rng.range(1, 3) as u32;
                let batch_messages = (0..messages)
                    .map(|index| {
                        let tag = MessageTag {
                            router: router as u32,
                            batch,
                            index,
                        };
                        Message {
                            // 0: the router stamps an id from its seeded source.
                            id: 0,
                            origin_timestamp: at,
                            payload: tag.payload(rng.index(24)),
                            user_headers: Bytes::new(),
                        }
                    })
                    .collect();
                sends.push(PlannedSend {
                    at: Duration::from_micros(at),
                    router,
                    batch,
                    partition,
                    request: Request::Send(SendRequest {
                        stream: Identifier::Numeric(topic.stream),
                        topic: Identifier::Numeric(topic.topic),
                        partitioning,
                        messages: batch_messages,
                    }),
                    messages,
                    key,
                    balanced,
                });
            }
        }
        sends.sort_by_key(|send| (send.at, send.router, send.batch));
        let end = sends.last().map_or(Duration::ZERO, |send| send.at);
        Self {
            sends: sends.into(),
            end,
        }
    }

    /// When the next send is due.
    pub fn next_at(&self) -> Option<Duration> {
        self.sends.front().map(|send| send.at)
    }

    /// The next send if it is due by `now`.
    pub fn pop_due(&mut self, now: Duration) -> Option<PlannedSend> {
        if self.next_at()? <= now {
            self.sends.pop_front()
        } else {
            None
        }
    }

    /// When the last send is submitted.
    pub fn end(&self) -> Duration {
        self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_survives_its_payload() {
        let tag = MessageTag {
            router: 3,
            batch: 70,
            index: 2,
        };
        assert_eq!(MessageTag::parse(&tag.payload(5)), Some(tag));
        assert_eq!(MessageTag::parse(b"short"), None);
    }
}

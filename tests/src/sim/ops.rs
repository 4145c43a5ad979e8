//! The routers' requests other than sends: auto-commit polls (`Next`, per-router
//! consumer), plain polls (`Offset(k)`), consumer offset writes, `GET_TOPIC`, once per
//! seed a `CREATE_PARTITIONS` adding one partition, and the consumer group's requests:
//! most routers join the group (early), sync it and poll it (`Offset(k)`), and some leave
//! it (late). They are planned up front like the
//! sends; what depends on the logs (the offset a plain poll starts at, the offset a store
//! writes) is drawn from a planned number when the request is submitted, so that it lies
//! within the partition's current log.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::client::Call;
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, PollingStrategy};
use iggy_route_core::{
    AdminRequest, CommandRequest, Plane, PollRequest, Request, StoreOffsetRequest,
};

use super::nodes::SimTopic;
use super::rng::SimRng;
use super::scenario::{PARTITIONS, Scenario};

/// Plan plain polls and auto-commit polls. Set to `false` to leave polls out.
pub const PLAN_POLLS: bool = true;
/// Plan consumer offset writes.
pub const PLAN_STORES: bool = true;
/// Plan `GET_TOPIC` reads and the one `CREATE_PARTITIONS`.
pub const PLAN_ADMIN: bool = true;
/// Plan the consumer group's joins, syncs, polls and leaves.
pub const PLAN_GROUPS: bool = true;
/// Plan, in half the seeds, a few raw commands of a retired code, which the cluster
/// answers by evicting the session.
pub const PLAN_EVICTED: bool = true;

/// The router that submits the run's one `CREATE_PARTITIONS`.
pub const ADD_PARTITION_ROUTER: usize = 0;

/// The id of the consumer group the simulation creates with its topic.
pub const GROUP: u32 = 0;

/// The most messages one poll asks for.
pub const POLL_COUNT_MAX: u64 = 4;

/// The consumer of router `router`'s auto-commit polls.
pub fn poll_consumer(router: usize) -> u32 {
    100 + router as u32
}

/// The consumer of router `router`'s offset writes (not the polls' own: a write moves
/// the offset wherever it says, which would break the polls' "never repeat" rule).
pub fn store_consumer(router: usize) -> u32 {
    1_000 + router as u32
}

/// The consumer of router `router`'s plain polls (they commit nothing).
fn plain_consumer(router: usize) -> u32 {
    2_000 + router as u32
}

fn consumer(id: u32) -> Consumer {
    Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(id),
    }
}

/// What a planned request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// An auto-commit poll with `Next` of `count` messages.
    AutoPoll {
        /// The partition.
        partition: u32,
        /// Most messages.
        count: u32,
    },
    /// A plain poll from `Offset(pick % (log length + 1))`.
    PlainPoll {
        /// The partition.
        partition: u32,
        /// Most messages.
        count: u32,
        /// Draws the start offset at submit time.
        pick: u64,
    },
    /// A consumer offset write of `pick % log length` (skipped while the log is empty).
    Store {
        /// The partition.
        partition: u32,
        /// Draws the offset at submit time.
        pick: u64,
    },
    /// `GET_TOPIC` of the workload's topic.
    GetTopic,
    /// `CREATE_PARTITIONS` adding one partition to the workload's topic.
    AddPartition,
    /// `JOIN_CONSUMER_GROUP` of the group.
    Join,
    /// `SYNC_CONSUMER_GROUP` of the group.
    Sync,
    /// A poll of the group from `Offset(pick % (log length + 1))`, without auto-commit.
    GroupPoll {
        /// The partition.
        partition: u32,
        /// Most messages.
        count: u32,
        /// Draws the start offset at submit time.
        pick: u64,
    },
    /// `LEAVE_CONSUMER_GROUP` of the group.
    Leave,
    /// A raw command of a retired code (on the session plane): the node evicts the
    /// session for it, which must end this request, once, and nothing else.
    Evicted,
}

/// One planned request.
#[derive(Debug, Clone, Copy)]
pub struct PlannedOp {
    /// When it is submitted.
    pub at: Duration,
    /// Which router submits it.
    pub router: usize,
    /// What it does.
    pub kind: OpKind,
}

impl PlannedOp {
    /// The request, given the partition's log length now; `None` when it cannot be made
    /// (a store to an empty log). Also returns the offset a plain poll starts at or a
    /// store writes.
    pub fn request(&self, topic: SimTopic, log_len: u64) -> Option<(Request, u64)> {
        let stream = Identifier::Numeric(topic.stream);
        let topic_id = Identifier::Numeric(topic.topic);
        let router = self.router;
        match self.kind {
            OpKind::AutoPoll { partition, count } => Some((
                Request::Poll(PollRequest {
                    consumer: consumer(poll_consumer(router)),
                    stream,
                    topic: topic_id,
                    partition_id: Some(partition),
                    strategy: PollingStrategy::Next,
                    count,
                    auto_commit: true,
                }),
                0,
            )),
            OpKind::PlainPoll {
                partition,
                count,
                pick,
            } => {
                let from = pick % (log_len + 1);
                let request = Request::Poll(PollRequest {
                    consumer: consumer(plain_consumer(router)),
                    stream,
                    topic: topic_id,
                    partition_id: Some(partition),
                    strategy: PollingStrategy::Offset(from),
                    count,
                    auto_commit: false,
                });
                Some((request, from))
            }
            OpKind::Store { partition, pick } => {
                if log_len == 0 {
                    return None;
                }
                let offset = pick % log_len;
                let request = Request::StoreOffset(StoreOffsetRequest {
                    consumer: consumer(store_consumer(router)),
                    stream,
                    topic: topic_id,
                    partition_id: partition,
                    offset,
                });
                Some((request, offset))
            }
            OpKind::GetTopic => Some((
                Request::Admin(AdminRequest::GetTopic {
                    stream,
                    topic: topic_id,
                }),
                0,
            )),
            OpKind::AddPartition => Some((
                Request::Admin(AdminRequest::CreatePartitions {
                    stream,
                    topic: topic_id,
                    partitions_count: 1,
                }),
                0,
            )),
            OpKind::GroupPoll {
                partition,
                count,
                pick,
            } => {
                let from = pick % (log_len + 1);
                let request = Request::Poll(PollRequest {
                    consumer: Consumer {
                        kind: ConsumerKind::ConsumerGroup,
                        id: Identifier::Numeric(GROUP),
                    },
                    stream,
                    topic: topic_id,
                    partition_id: Some(partition),
                    strategy: PollingStrategy::Offset(from),
                    count,
                    auto_commit: false,
                });
                Some((request, from))
            }
            OpKind::Join => {
                let call = Call::join_consumer_group(topic.stream, topic.topic, GROUP).ok()?;
                Some((call.request, 0))
            }
            OpKind::Sync => {
                let call = Call::sync_consumer_group(topic.stream, topic.topic, GROUP).ok()?;
                Some((call.request, 0))
            }
            OpKind::Leave => {
                let call = Call::leave_consumer_group(topic.stream, topic.topic, GROUP).ok()?;
                Some((call.request, 0))
            }
            OpKind::Evicted => Some((
                Request::Command(CommandRequest {
                    code: crate::cluster::RETIRED_CODE,
                    body: Bytes::new(),
                    plane: Plane::Session,
                }),
                0,
            )),
        }
    }

    /// The partition it reads or writes, if any.
    pub fn partition(&self) -> Option<u32> {
        match self.kind {
            OpKind::AutoPoll { partition, .. }
            | OpKind::PlainPoll { partition, .. }
            | OpKind::GroupPoll { partition, .. }
            | OpKind::Store { partition, .. } => Some(partition),
            OpKind::GetTopic
            | OpKind::AddPartition
            | OpKind::Join
            | OpKind::Sync
            | OpKind::Leave
            | OpKind::Evicted => None,
        }
    }
}

/// Every router's planned requests other than sends, in submission order.
#[derive(Debug)]
pub struct Ops {
    ops: VecDeque<PlannedOp>,
    end: Duration,
}

impl Ops {
    /// When the one `CREATE_PARTITIONS` of `scenario` is submitted (by router 0): sends
    /// planned after it may name the new partition.
    pub fn add_partition_at(scenario: &Scenario) -> Duration {
        scenario.workload_span * 3 / 10
    }

    /// The plan of `scenario`: every request lands within `span` of the start.
    pub fn generate(scenario: &Scenario) -> Self {
        let mut rng = SimRng::new(scenario.seed, 0x0095_0C0A_D000);
        let span = scenario.workload_span.as_micros() as u64;
        let mut ops = Vec::new();
        for router in 0..scenario.routers {
            let count = rng.range(15, 40);
            for _ in 0..count {
                let at = Duration::from_micros(rng.range(20_000, span));
                let partition = rng.range(0, u64::from(PARTITIONS) - 1) as u32;
                let messages = rng.range(1, POLL_COUNT_MAX) as u32;
                let pick = rng.next_u64();
                let kind = match rng.range(0, 9) {
                    0..=3 => OpKind::AutoPoll {
                        partition,
                        count: messages,
                    },
                    4..=6 => OpKind::PlainPoll {
                        partition,
                        count: messages,
                        pick,
                    },
                    7 | 8 => OpKind::Store { partition, pick },
                    _ => OpKind::GetTopic,
                };
                let planned = match kind {
                    OpKind::AutoPoll { .. } | OpKind::PlainPoll { .. } => PLAN_POLLS,
                    OpKind::Store { .. } => PLAN_STORES,
                    OpKind::GetTopic | OpKind::AddPartition => PLAN_ADMIN,
                    OpKind::Join | OpKind::Sync | OpKind::GroupPoll { .. } | OpKind::Leave => {
                        PLAN_GROUPS
                    }
                    OpKind::Evicted => PLAN_EVICTED,
                };
                if planned {
                    ops.push(PlannedOp { at, router, kind });
                }
            }
        }
        if PLAN_GROUPS {
            Self::plan_group(scenario, &mut ops);
        }
        if PLAN_EVICTED {
            Self::plan_evicted(scenario, &mut ops);
        }
        if PLAN_ADMIN {
            ops.push(PlannedOp {
                at: Self::add_partition_at(scenario),
                router: ADD_PARTITION_ROUTER,
                kind: OpKind::AddPartition,
            });
        }
        ops.sort_by_key(|op| (op.at, op.router));
        let end = ops.last().map_or(Duration::ZERO, |op| op.at);
        Self {
            ops: ops.into(),
            end,
        }
    }

    /// The consumer group's requests: three routers in four join in the first third of
    /// the span, sync twice and poll the group a few times, and one joiner in three
    /// leaves in the last third (some of its syncs and polls come after).
    fn plan_group(scenario: &Scenario, ops: &mut Vec<PlannedOp>) {
        let mut rng = SimRng::new(scenario.seed, 0x0061_0C0A_D000);
        let span = scenario.workload_span.as_micros() as u64;
        for router in 0..scenario.routers {
            if !rng.chance(75) {
                continue;
            }
            let joined = rng.range(20_000, span / 3);
            ops.push(PlannedOp {
                at: Duration::from_micros(joined),
                router,
                kind: OpKind::Join,
            });
            for _ in 0..2 {
                ops.push(PlannedOp {
                    at: Duration::from_micros(rng.range(joined, span)),
                    router,
                    kind: OpKind::Sync,
                });
            }
            for _ in 0..rng.range(3, 8) {
                ops.push(PlannedOp {
                    at: Duration::from_micros(rng.range(joined, span)),
                    router,
                    kind: OpKind::GroupPoll {
                        partition: rng.range(0, u64::from(PARTITIONS) - 1) as u32,
                        count: rng.range(1, POLL_COUNT_MAX) as u32,
                        pick: rng.next_u64(),
                    },
                });
            }
            if rng.chance(33) {
                ops.push(PlannedOp {
                    at: Duration::from_micros(rng.range(span * 2 / 3, span)),
                    router,
                    kind: OpKind::Leave,
                });
            }
        }
    }

    /// In half the seeds, one to three requests the cluster evicts the session for, from a
    /// stream of draws of their own (every other draw of the plan stays as it was).
    fn plan_evicted(scenario: &Scenario, ops: &mut Vec<PlannedOp>) {
        let mut rng = SimRng::new(scenario.seed, 0x00E7_1C7E_D000);
        if !rng.chance(50) {
            return;
        }
        let span = scenario.workload_span.as_micros() as u64;
        for _ in 0..rng.range(1, 3) {
            ops.push(PlannedOp {
                at: Duration::from_micros(rng.range(20_000, span)),
                router: rng.range(0, scenario.routers as u64 - 1) as usize,
                kind: OpKind::Evicted,
            });
        }
    }

    /// When the next request is due.
    pub fn next_at(&self) -> Option<Duration> {
        self.ops.front().map(|op| op.at)
    }

    /// Per router of `routers`: whether a join of the group is still planned for it.
    pub fn joiners(&self, routers: usize) -> Vec<bool> {
        (0..routers)
            .map(|router| {
                self.ops
                    .iter()
                    .any(|op| op.router == router && op.kind == OpKind::Join)
            })
            .collect()
    }

    /// When the last request is submitted.
    pub fn end(&self) -> Duration {
        self.end
    }

    /// The next request if it is due by `now`.
    pub fn pop_due(&mut self, now: Duration) -> Option<PlannedOp> {
        if self.next_at()? <= now {
            self.ops.pop_front()
        } else {
            None
        }
    }
}

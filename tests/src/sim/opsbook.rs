//! The books of the requests other than sends ([`super::ops`]), and their rules:
//! - every request completes exactly once, and by the end every request has completed;
//! - a successful poll answers for the partition asked, with messages that are in that
//!   partition's log, at consecutive offsets; a plain poll's start where it asked;
//! - a router's auto-commit polls of one partition never receive an offset twice, and a
//!   poll submitted after another completed starts after everything that one received
//!   (checked while the routers route polls to primaries: without routing commands an
//!   auto-commit poll goes to the coordinator, and a backup commits nothing);
//! - the cluster's stored offset of a poll consumer only moves forward;
//! - after a successful offset write the stored offset is the value written, or one
//!   written by the same router's writes that were not over when this one was submitted;
//! - `GET_TOPIC` finds the topic with a partition count the topic has had;
//! - `CREATE_PARTITIONS` is not answered with success twice for one request, and once the
//!   router that added the partition has its answer, its sends to the new partition are
//!   no longer refused as out of range (seed 824 once showed a topic read that predated
//!   the router's own write being taken as current; the core now reads it again);
//! - a group poll is answered like a plain poll, or with the re-sync answer (partition
//!   `u32::MAX`, nothing read: not a partition the member owns now); a sync with
//!   partitions the topic has had, or with "not a member", which between a router's
//!   successful join and its leave is allowed only if the router lost its member link
//!   (counted in its stats by the end of the run): syncs carry the member's id wherever
//!   they go.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use iggy_route_core::wire::ConsumerGroupAssignment;
use iggy_route_core::{Outcome, Reply, RequestError, RequestId};

use crate::cluster::StoredMessage;

use super::ops::{OpKind, PlannedOp};
use super::scenario::PARTITIONS;

#[derive(Debug)]
struct Record {
    op: PlannedOp,
    /// A plain poll's start, a store's offset.
    value: u64,
    /// Submission sequence number (over all requests of the run).
    seq: u64,
    /// For an auto-commit poll: the highest offset received by the router's polls of the
    /// partition that had completed when it was submitted.
    floor: Option<u64>,
    done: bool,
}

#[derive(Debug, Clone, Copy)]
struct StoreRec {
    value: u64,
    submitted: u64,
    completed: Option<u64>,
}

/// Counts for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpsTally {
    /// Polls that succeeded.
    pub polls_ok: u64,
    /// Messages those polls returned.
    pub polled: u64,
    /// Offset writes that succeeded.
    pub stores_ok: u64,
    /// Admin requests that succeeded.
    pub admin_ok: u64,
    /// Requests that ended with an error.
    pub failed: u64,
    /// Acked sends to the partition added during the run.
    pub new_partition_acks: u64,
    /// Syncs answered with an assignment.
    pub syncs_as_member: u64,
    /// Group polls that read messages (so were answered as the member).
    pub group_polls_read: u64,
    /// Group polls answered with the re-sync poll.
    pub group_resyncs: u64,
    /// Requests the cluster evicted the session for, each ended by its eviction.
    pub evicted: u64,
}

/// See the module doc.
#[derive(Debug)]
pub struct OpsBook {
    /// Whether the auto-commit rules hold for this run (routing commands throughout).
    strict_auto: bool,
    requests: BTreeMap<(usize, RequestId), Record>,
    received: BTreeMap<(usize, u32), BTreeSet<u64>>,
    /// Per (router, partition): highest offset received by completed auto-commit polls.
    completed_high: BTreeMap<(usize, u32), u64>,
    stores: BTreeMap<(usize, u32), Vec<StoreRec>>,
    /// Last stored offset seen per (partition, consumer) of the poll consumers.
    stored_seen: BTreeMap<(u32, u32), u64>,
    /// Partition counts the topic has had.
    counts: Vec<u32>,
    /// The router whose `CREATE_PARTITIONS` succeeded, with when.
    created: Option<(usize, Duration)>,
    /// Sends to the added partition: (router, id) to submission time.
    new_partition_sends: BTreeMap<(usize, RequestId), Duration>,
    /// Per router: when (sequence number) its join completed with success.
    joined: BTreeMap<usize, u64>,
    /// Per router: when it submitted a leave.
    leaving: BTreeMap<usize, u64>,
    /// Per router: the first sync or group poll answered as to a stranger while it was a
    /// member (judged at the end, against its lost memberships).
    stranger: BTreeMap<usize, String>,
    /// Routers a fault cut a connection of while it held a membership on the nodes' side.
    cut_members: BTreeSet<usize>,
    /// Per router: the partitions its last sync as a member assigned it.
    assigned: BTreeMap<usize, Vec<u32>>,
    seq: u64,
    tally: OpsTally,
}

impl OpsBook {
    /// Empty books; `strict_auto`: see the module doc.
    pub fn new(strict_auto: bool) -> Self {
        Self {
            strict_auto,
            requests: BTreeMap::new(),
            received: BTreeMap::new(),
            completed_high: BTreeMap::new(),
            stores: BTreeMap::new(),
            stored_seen: BTreeMap::new(),
            counts: vec![PARTITIONS],
            created: None,
            new_partition_sends: BTreeMap::new(),
            joined: BTreeMap::new(),
            leaving: BTreeMap::new(),
            stranger: BTreeMap::new(),
            cut_members: BTreeSet::new(),
            assigned: BTreeMap::new(),
            seq: 0,
            tally: OpsTally::default(),
        }
    }

    /// Whether `(router, id)` is one of these requests.
    pub fn owns(&self, router: usize, id: RequestId) -> bool {
        self.requests.contains_key(&(router, id))
    }

    /// `submit` accepted `op` as `id`; `value` as [`PlannedOp::request`] returned it.
    pub fn submitted(&mut self, id: RequestId, op: PlannedOp, value: u64) -> Result<(), String> {
        self.seq += 1;
        let seq = self.seq;
        let floor = match (op.kind, op.partition()) {
            (OpKind::AutoPoll { .. }, Some(p)) => self.completed_high.get(&(op.router, p)).copied(),
            _ => None,
        };
        if let (OpKind::Store { .. }, Some(p)) = (op.kind, op.partition()) {
            self.stores
                .entry((op.router, p))
                .or_default()
                .push(StoreRec {
                    value,
                    submitted: seq,
                    completed: None,
                });
        }
        if op.kind == OpKind::Leave {
            self.leaving.entry(op.router).or_insert(seq);
        }
        let record = Record {
            op,
            value,
            seq,
            floor,
            done: false,
        };
        if self.requests.insert((op.router, id), record).is_some() {
            return Err(format!("router {} reused request id {id}", op.router));
        }
        Ok(())
    }

    /// A consumer-group member of `router` ended (`members.rs`): whatever membership the
    /// router had may be over, so from now on its syncs are not judged as a member's.
    pub fn membership_ended(&mut self, router: usize) {
        self.leaving.entry(router).or_insert(self.seq);
    }

    /// A send to partition `partition` was accepted as `id` at `now`.
    pub fn send_submitted(&mut self, router: usize, id: RequestId, partition: u32, now: Duration) {
        if partition >= PARTITIONS {
            self.new_partition_sends.insert((router, id), now);
        }
    }

    /// A send completed: the added partition's rule.
    pub fn send_completed(
        &mut self,
        router: usize,
        id: RequestId,
        outcome: &Outcome,
    ) -> Result<(), String> {
        let Some(at) = self.new_partition_sends.remove(&(router, id)) else {
            return Ok(());
        };
        match outcome {
            Ok(_) => self.tally.new_partition_acks += 1,
            Err(RequestError::PartitionOutOfRange { partition, count }) => {
                if let Some((creator, created_at)) = self.created
                    && creator == router
                    && at > created_at
                {
                    return Err(format!(
                        "router {router} added partition {partition} at {created_at:?}, but its send \
                         {id} to it, submitted at {at:?}, failed as out of range of {count}"
                    ));
                }
            }
            Err(_) => {}
        }
        Ok(())
    }

    /// The topic now has `count` partitions.
    pub fn topic_grew(&mut self, count: u32) {
        if self.counts.last() != Some(&count) {
            self.counts.push(count);
        }
    }

    /// Router `router` completed `id` at `now`. `logs` are the partitions' logs;
    /// `stored(partition, consumer)` the cluster's stored offset.
    pub fn completed(
        &mut self,
        router: usize,
        id: RequestId,
        outcome: &Outcome,
        now: Duration,
        logs: &[&[StoredMessage]],
        stored: &dyn Fn(u32, u32) -> Option<u64>,
    ) -> Result<(), String> {
        self.seq += 1;
        let seq = self.seq;
        let Some(record) = self.requests.get_mut(&(router, id)) else {
            return Err(format!(
                "router {router} completed {id}, which it never accepted"
            ));
        };
        if record.done {
            return Err(format!(
                "router {router} completed {id} ({:?}) twice, now with {outcome:?}",
                record.op.kind
            ));
        }
        record.done = true;
        let op = record.op;
        let (value, submitted, floor) = (record.value, record.seq, record.floor);
        if let (OpKind::Store { .. }, Some(p)) = (op.kind, op.partition())
            && let Some(rec) = self
                .stores
                .get_mut(&(router, p))
                .and_then(|list| list.iter_mut().find(|r| r.submitted == submitted))
        {
            rec.completed = Some(seq);
        }
        let what = format!("router {router} {id} {:?}", op.kind);
        if op.kind == OpKind::Evicted {
            // Never a success; ended by the eviction, or (its leader unreachable, its link
            // lost under it, its deadline) by the rules of any other write.
            return match outcome {
                Err(iggy_route_core::RequestError::Evicted { reason, .. })
                    if *reason
                        == iggy_route_core::wire::EvictionReason::InvalidRequestOperation =>
                {
                    self.tally.evicted += 1;
                    Ok(())
                }
                Ok(reply) => Err(format!("{what}: completed with {reply:?}")),
                Err(_) => {
                    self.tally.failed += 1;
                    Ok(())
                }
            };
        }
        let reply = match outcome {
            Ok(reply) => reply,
            Err(_) => {
                self.tally.failed += 1;
                return Ok(());
            }
        };
        let member = self.joined.get(&router).is_some_and(|&at| at < submitted)
            && self.leaving.get(&router).is_none_or(|&at| at > seq);
        match (op.kind, reply) {
            (OpKind::GroupPoll { .. }, Reply::Polled(polled))
                if polled.partition_id == u32::MAX && polled.messages.is_empty() =>
            {
                // Also a member's answer for a partition it does not own (now): the sync
                // it was picked from may predate a rebalance.
                self.tally.group_resyncs += 1;
            }
            (OpKind::Sync, Reply::Payload(payload)) => {
                match ConsumerGroupAssignment::decode(&payload.0) {
                    Ok(Some(assignment)) => {
                        let most = self.counts.iter().copied().max().unwrap_or(0);
                        if assignment.partitions.iter().any(|&p| p >= most) {
                            return Err(format!("{what}: assigned {assignment:?}"));
                        }
                        self.tally.syncs_as_member += 1;
                        self.assigned.insert(router, assignment.partitions);
                    }
                    Ok(None) if member => {
                        self.stranger.entry(router).or_insert(what);
                    }
                    Ok(None) => {}
                    Err(error) => return Err(format!("{what}: undecodable sync: {error}")),
                }
            }
            (OpKind::Join, Reply::Payload(_)) => {
                self.joined.entry(router).or_insert(seq);
            }
            (OpKind::Leave, Reply::Payload(_)) => {}
            (
                OpKind::AutoPoll { partition, count }
                | OpKind::PlainPoll {
                    partition, count, ..
                }
                | OpKind::GroupPoll {
                    partition, count, ..
                },
                Reply::Polled(polled),
            ) => {
                self.tally.polls_ok += 1;
                self.tally.polled += polled.messages.len() as u64;
                if matches!(op.kind, OpKind::GroupPoll { .. }) && !polled.messages.is_empty() {
                    self.tally.group_polls_read += 1;
                }
                if polled.partition_id != partition {
                    return Err(format!(
                        "{what}: answered for partition {}",
                        polled.partition_id
                    ));
                }
                if polled.messages.len() > count as usize {
                    return Err(format!("{what}: {} messages", polled.messages.len()));
                }
                let log = logs.get(partition as usize).copied().unwrap_or(&[]);
                let plain = matches!(op.kind, OpKind::PlainPoll { .. } | OpKind::GroupPoll { .. });
                let first = polled.messages.first().map(|m| m.offset);
                if plain && first.is_some_and(|f| f != value) {
                    return Err(format!("{what}: asked from {value}, got {first:?} first"));
                }
                for (i, message) in (0u64..).zip(&polled.messages) {
                    let expected = first.unwrap_or(0) + i;
                    let stored = usize::try_from(message.offset)
                        .ok()
                        .and_then(|o| log.get(o));
                    if message.offset != expected
                        || stored.is_none_or(|s| s.payload != message.payload)
                    {
                        return Err(format!(
                            "{what}: message {i} at offset {} does not match the log (expected offset {expected})",
                            message.offset
                        ));
                    }
                }
                if !plain && self.strict_auto {
                    self.check_auto(router, partition, floor, &polled.messages, &what)?;
                }
            }
            (OpKind::Store { partition, .. }, Reply::OffsetStored) => {
                self.tally.stores_ok += 1;
                let now_stored = stored(partition, super::ops::store_consumer(router));
                let allowed: Vec<u64> = self
                    .stores
                    .get(&(router, partition))
                    .map(|list| {
                        list.iter()
                            .filter(|r| {
                                r.submitted == submitted
                                    || r.completed.is_none_or(|c| c > submitted)
                            })
                            .map(|r| r.value)
                            .collect()
                    })
                    .unwrap_or_default();
                if !now_stored.is_some_and(|s| allowed.contains(&s)) {
                    return Err(format!(
                        "{what}: wrote {value}, but the cluster holds {now_stored:?} (allowed {allowed:?})"
                    ));
                }
            }
            (OpKind::GetTopic, Reply::Topic(found)) => {
                self.tally.admin_ok += 1;
                let count = found.as_ref().map(|t| t.partitions.len() as u32);
                if !count.is_some_and(|c| self.counts.contains(&c)) {
                    return Err(format!(
                        "{what}: found {count:?} partitions, the topic had {:?}",
                        self.counts
                    ));
                }
            }
            (OpKind::AddPartition, Reply::PartitionsCreated) => {
                self.tally.admin_ok += 1;
                self.created = Some((router, now));
            }
            (_, other) => return Err(format!("{what}: completed with {other:?}")),
        }
        Ok(())
    }

    fn check_auto(
        &mut self,
        router: usize,
        partition: u32,
        floor: Option<u64>,
        messages: &[iggy_route_core::wire::PolledMessage],
        what: &str,
    ) -> Result<(), String> {
        let received = self.received.entry((router, partition)).or_default();
        for message in messages {
            if floor.is_some_and(|f| message.offset <= f) {
                return Err(format!(
                    "{what}: offset {} is not after {floor:?}, received by a poll completed before it was submitted",
                    message.offset
                ));
            }
            if !received.insert(message.offset) {
                return Err(format!("{what}: offset {} received twice", message.offset));
            }
        }
        if let Some(last) = messages.last() {
            let high = self.completed_high.entry((router, partition)).or_insert(0);
            *high = (*high).max(last.offset);
        }
        Ok(())
    }

    /// Check the stored offsets of the poll consumers (after every step): they only move
    /// forward.
    pub fn check_stored(
        &mut self,
        routers: usize,
        stored: &dyn Fn(u32, u32) -> Option<u64>,
    ) -> Result<(), String> {
        for partition in 0..PARTITIONS {
            for router in 0..routers {
                let consumer = super::ops::poll_consumer(router);
                let Some(now) = stored(partition, consumer) else {
                    continue;
                };
                let seen = self.stored_seen.entry((partition, consumer)).or_insert(now);
                if now < *seen {
                    return Err(format!(
                        "the stored offset of consumer {consumer} on partition {partition} went back from {seen} to {now}"
                    ));
                }
                *seen = now;
            }
        }
        Ok(())
    }

    /// The partition a group poll of `router` asks for: one its last sync assigned it
    /// (picked by `pick`), else `planned`.
    pub fn group_partition(&self, router: usize, planned: u32, pick: u64) -> u32 {
        match self.assigned.get(&router) {
            Some(partitions) if !partitions.is_empty() => {
                partitions[(pick % partitions.len() as u64) as usize]
            }
            Some(_) | None => planned,
        }
    }

    /// A fault cut a connection of `router` that held a group membership on the nodes' side:
    /// the membership ended there, whether or not the router ever counts it lost.
    pub fn membership_cut(&mut self, router: usize) {
        self.cut_members.insert(router);
    }

    /// Whether every accepted request has completed.
    pub fn all_completed(&self) -> bool {
        self.requests.values().all(|r| r.done)
    }

    /// The end-of-run check: nothing left pending, and no member answered as a stranger
    /// by a router that never lost a membership, by its own count (`memberships_lost(router)`)
    /// or by a fault that cut its member connection.
    pub fn finish(&self, memberships_lost: &dyn Fn(usize) -> u64) -> Result<(), String> {
        if let Some(((router, id), r)) = self.requests.iter().find(|(_, r)| !r.done) {
            return Err(format!(
                "router {router} request {id} ({:?}) never completed",
                r.op.kind
            ));
        }
        match self.stranger.iter().find(|(router, _)| {
            memberships_lost(**router) == 0 && !self.cut_members.contains(*router)
        }) {
            Some((_, what)) => Err(format!(
                "{what}: answered as to a stranger while a member, and no membership was lost"
            )),
            None => Ok(()),
        }
    }

    /// Counts for the report.
    pub fn tally(&self) -> OpsTally {
        self.tally
    }
}

#[cfg(test)]
#[path = "opsbook_tests.rs"]
mod tests;

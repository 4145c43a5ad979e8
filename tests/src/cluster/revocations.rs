//! The cooperative handover of a consumer group's partitions: which partitions a join finds
//! in flight, and when a pending revocation completes ([`super::groups`] keeps the
//! revocations themselves). As the server does it (its source at the snapshot of
//! `docs/real-cluster.md`):
//!
//! - Every replica of a partition keeps, per group, the highest offset it served the group
//!   in a poll that returned messages, raised on each such poll before any auto-commit, in
//!   memory only and cleared by a purge: `last_polled_offsets` in
//!   `core/partitions/src/iggy_partition.rs`, raised by `LastPolledCtx::record` in
//!   `core/partitions/src/poll_plan.rs`. The model keeps it per node
//!   ([`super::partition::Partition::note_group_poll`]) and drops a node's marks when the
//!   node stops.
//! - A join is applied on the metadata leader, which first reads its own replica of each of
//!   the topic's partitions: a partition is in flight when the group has a mark there, its
//!   committed offset there is not at or past it, and some member owns the partition; a
//!   mark on a partition nobody owns is a departed member's and is dropped
//!   (`gather_in_flight`, `core/server/src/consumer_group.rs`).
//! - While a revocation is pending the leader's reconciler looks at it on every consensus
//!   tick, 10 ms (`TICK_INTERVAL` in `core/consensus/src/vsr_timeout.rs`; the wake in
//!   `core/shard/src/router.rs`), and completes it, through a committed metadata op, when
//!   its replica holds no mark for the group, or a committed offset at or past the mark,
//!   or the revocation is at least the rebalancing timeout old (30 s by default,
//!   `core/server/config.toml`): `reconcile_pending_revocations` in
//!   `core/server/src/partition_reconciler.rs`. Only the metadata leader can commit it
//!   (`submit_complete_revocation_in_process` bounces elsewhere), so only its replica's
//!   view counts.
//!
//! The model runs that tick on its own clock, the time the driver or the simulation passes
//! in: the ticks fall on the multiples of [`REVOCATION_TICK`]. Nothing changes the model
//! between two requests, so when the clock moves from `from` to `to` a revocation the state
//! lets complete does so at the first tick after `from`, and one that only times out at the
//! first tick at or past its deadline, if that is not after `to`. The result is the same
//! whenever a request looks, however coarse or late the clock moves, and no timer is
//! needed: a request is what looks.
//!
//! A group's committed offset is what the leader's replica holds for it
//! ([`Partition::offset_seen_by`]). The model keys a group's offsets by the identifier the
//! request named the group with, the server by the group's id: where both keys hold one,
//! the higher counts.

use std::collections::BTreeSet;
use std::time::Duration;

use super::catalog::{Catalog, Lookup, Topic, partitions_count};
use super::groups::Group;
use super::partition::{OffsetOwner, Partition};
use super::state::NodeId;

/// How often the metadata leader's reconciler looks at the pending revocations: the
/// server's consensus tick.
pub const REVOCATION_TICK: Duration = Duration::from_millis(10);

/// How long a revocation may wait for its source to drain the partition before it is
/// completed anyway: the server's default `rebalancing_timeout`.
pub const REBALANCING_TIMEOUT: Duration = Duration::from_secs(30);

/// The partitions of `topic` that group `group` has in flight as `node`'s replicas see
/// them; drops the marks of partitions no member owns, as the server does at a join.
pub(super) fn in_flight(topic: &mut Topic, group: Lookup<'_>, node: NodeId) -> BTreeSet<u32> {
    let Some(group) = topic.groups.find(group) else {
        return BTreeSet::new();
    };
    let assigned = group.assigned();
    let mut in_flight = BTreeSet::new();
    for partition in &mut topic.partitions {
        let Some(polled) = partition.last_polled(node, group.id) else {
            continue;
        };
        if committed(partition, node, group).is_some_and(|at| at >= polled) {
            continue;
        }
        if assigned.contains(&partition.id) {
            in_flight.insert(partition.id);
        } else {
            partition.forget_last_polled(node, group.id);
        }
    }
    in_flight
}

/// A revocation the reconciler completes, and when.
struct Due {
    at: u64,
    stream: u32,
    topic: u32,
    group: u32,
    source: u128,
    partition: u32,
}

/// Completes every pending revocation the reconciler of `leader` would have completed while
/// the clock moved from `from` (exclusive) to `to` (inclusive) µs; returns the time of each
/// completion, in the order they happened, for the metadata commits they are.
pub(super) fn settle(
    catalog: &mut Catalog,
    leader: NodeId,
    timeout: Duration,
    (from, to): (u64, u64),
) -> Vec<u64> {
    let tick = micros(REVOCATION_TICK);
    let first_tick = (from / tick + 1).saturating_mul(tick);
    if first_tick > to {
        return Vec::new();
    }
    let timeout = micros(timeout);
    let mut due: Vec<Due> = Vec::new();
    for stream in catalog.streams() {
        for topic in stream.topics.values() {
            for group in topic.groups.all() {
                for (source, revocation) in group.revocations() {
                    let drained = topic
                        .partition(revocation.partition)
                        .is_none_or(|partition| drained(partition, leader, group));
                    let deadline = revocation.since.saturating_add(timeout);
                    let timed_out = deadline.div_ceil(tick).saturating_mul(tick);
                    let at = if drained {
                        first_tick
                    } else {
                        timed_out.max(first_tick)
                    };
                    if at <= to {
                        due.push(Due {
                            at,
                            stream: stream.id,
                            topic: topic.id,
                            group: group.id,
                            source,
                            partition: revocation.partition,
                        });
                    }
                }
            }
        }
    }
    // Stable: within one tick, in the reconciler's walk order (streams, topics, groups,
    // members, revocations).
    due.sort_by_key(|due| due.at);
    let mut completed = Vec::with_capacity(due.len());
    for due in due {
        let Ok(topic) = catalog.topic_mut(Lookup::Id(due.stream), Lookup::Id(due.topic)) else {
            continue;
        };
        let partitions = partitions_count(topic);
        if topic
            .groups
            .complete_revocation(due.group, due.source, due.partition, partitions)
        {
            completed.push(due.at);
        }
    }
    completed
}

/// Whether any group of the catalog has a revocation pending.
pub(super) fn any_pending(catalog: &Catalog) -> bool {
    catalog
        .streams()
        .flat_map(|stream| stream.topics.values())
        .any(|topic| topic.groups.any_revoking())
}

/// `node` stopped: the marks its replicas held in memory are gone with its process.
pub(super) fn forget_node(catalog: &mut Catalog, node: NodeId) {
    let streams: Vec<u32> = catalog.streams().map(|stream| stream.id).collect();
    for id in streams {
        let Some(stream) = catalog.stream_mut(Lookup::Id(id)) else {
            continue;
        };
        for topic in stream.topics.values_mut() {
            for partition in &mut topic.partitions {
                partition.forget_polls_of(node);
            }
        }
    }
}

/// Nothing of the partition is in flight for the group as `node`'s replica sees it: it
/// served the group nothing, or the group committed at or past what it served.
fn drained(partition: &Partition, node: NodeId, group: &Group) -> bool {
    partition
        .last_polled(node, group.id)
        .is_none_or(|polled| committed(partition, node, group).is_some_and(|at| at >= polled))
}

/// The group's committed offset on the partition as `node`'s replica holds it.
fn committed(partition: &Partition, node: NodeId, group: &Group) -> Option<u64> {
    let by_id = partition.offset_seen_by(node, &OffsetOwner::GroupId(group.id));
    let by_name = partition.offset_seen_by(node, &OffsetOwner::GroupName(group.name.clone()));
    by_id.max(by_name)
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

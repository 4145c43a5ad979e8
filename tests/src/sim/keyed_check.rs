//! Which partition each key reached, and when, across the run's one partition-count change
//! (`CREATE_PARTITIONS` by [`ADD_PARTITION_ROUTER`], see `ops.rs`).
//!
//! Recorded: when the change committed in the cluster model (the step after which the new
//! count exists on the metadata leader; followers may answer the old one for a while), every
//! keyed batch's router, submit time and key, every `Event::PartitionsChanged` of every
//! router, and, as the logs grow, the partition each keyed batch landed in. A batch whose
//! key maps to the same partition under both counts says nothing and is skipped; any other
//! tells which count its router resolved it against.
//!
//! # What is checked, and why the core promises it
//!
//! In `iggy-route-core/src/routing/topics.rs` a keyed send resolves against the count in
//! the topic's cache (`TopicState::info`) when it is submitted, or, if it has to wait for a
//! read, against the count that read put there (`count_read`, then `resolve`). The count in
//! the cache changes in exactly two ways: `count_read`, which emits
//! `Event::PartitionsChanged { from, to }` whenever the count it replaces differs, and
//! being forgotten (`info = None`), after which the next `count_read` has nothing to differ
//! from. A count that differs from the one sends resolved against until then without an
//! event breaks the event's promise ("each change is reported", `partitioning.rs`). So,
//! with events ordered against submits and landings by a sequence number:
//!
//! 1. **Known count.** If a router's last event before a batch's submit moved it to `c`,
//!    and no event between the submit and the moment the landing is seen moved it to the
//!    count the batch did resolve against, the batch resolved against `c`. Breaking this is
//!    a violation: in particular a keyed batch resolved against the old count by a router
//!    that had already announced the new one.
//! 2. **Announced change.** If a router's keyed batch `Y` landed (was seen) before its
//!    batch `X` was submitted, and they resolved against different counts, the router
//!    emitted `PartitionsChanged { from: Y's count, to: X's count }` between `Y`'s submit
//!    and the moment `X`'s landing is seen. This is the "keyed router sees the event once
//!    it resolves against the new count, from the old count to the new" check.
//!
//! # What is only counted
//!
//! Staleness: a keyed batch of a router other than the one that added the partition,
//! submitted after the change committed, resolved against the old count. The documented
//! bound (`PARTITION_COUNT_MAX_AGE` = 1 s plus one topic read) is *not* a promise about
//! submit times: the background read of an old count is started by a request resolving
//! against it (`enqueue_for_topic` resolves first, then `refresh_topic`), so the first
//! keyed send of a router that sent nothing to the topic for a while is resolved against
//! the old count however long after the change it comes, and a read may be answered by a
//! follower whose copy lags the leader, or fail (a background refresh is not retried until
//! the next request). A time rule would thus fail on correct runs; rule 1 is the part of
//! the bound the core can be held to (once the new count is read, nothing resolves against
//! the old). Every stale batch and the largest staleness are reported, as is how many were
//! submitted later than the change plus [`STALE_LATE`].

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::partitioning::resolve_partition;

use crate::cluster::StoredMessage;

use super::ops::ADD_PARTITION_ROUTER;
use super::workload::{MessageTag, PlannedSend};

/// Stale batches submitted later than this after the change are counted apart: the
/// documented bound (1 s plus one topic read, here a generous 1 s for the read).
pub const STALE_LATE: Duration = Duration::from_secs(2);

/// Whether a keyed batch that breaks rule 1 or 2 fails the run. It did on most seeds
/// before the core kept a topic's last count while it reads the count again (an explicit
/// send beyond a cached count, a send or read answered "not found"): the read that followed
/// installed its count with nothing to compare it with, and no event was emitted although
/// keyed sends now hashed over another count (seed 0: router 1's explicit send to the
/// added partition moved it from 4 to 5 partitions silently; seed 175: router 2 announced
/// 4 -> 5, a send answered "not found" made it forget the count, and a read answered by a
/// lagging follower took it back to 4 silently). Off, they are only counted
/// (`KeyedTally::changes_silent`).
pub const SILENT_CHANGE_FAILS: bool = true;

/// The counters of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyedTally {
    /// Keyed batches of routers other than the one that added the partition, submitted
    /// after the change committed, whose landing tells the count they resolved against.
    pub after_change: u64,
    /// Of those, the ones resolved against the old count.
    pub stale: u64,
    /// Of those, the ones submitted later than the change plus [`STALE_LATE`].
    pub stale_late: u64,
    /// The longest from the change to the submit of a stale batch.
    pub stale_max: Duration,
    /// `PartitionsChanged` events the routers emitted.
    pub events: u64,
    /// Routers whose keyed batches moved from one count to another, each checked for its
    /// event (rule 2).
    pub changes_announced: u64,
    /// Batches that broke rule 1 or 2: the router changed its count without the event
    /// (see [`SILENT_CHANGE_FAILS`]).
    pub changes_silent: u64,
}

#[derive(Debug)]
struct Submitted {
    router: usize,
    key: Bytes,
    at: Duration,
    seq: u64,
}

#[derive(Debug, Clone, Copy)]
struct Landing {
    submitted: u64,
    seen: u64,
    count: u32,
}

#[derive(Debug, Clone, Copy)]
struct Change {
    seq: u64,
    at: Duration,
    from: u32,
    to: u32,
}

/// See the module doc.
#[derive(Debug)]
pub struct KeyedCheck {
    seq: u64,
    old: u32,
    new: u32,
    /// When the change committed, and its sequence number.
    change: Option<(Duration, u64)>,
    /// Keyed batches accepted and not yet seen in a log, by (router, batch).
    waiting: BTreeMap<(u32, u32), Submitted>,
    scanned: Vec<usize>,
    /// Per router: its `PartitionsChanged` events, in order.
    events: Vec<Vec<Change>>,
    /// Per router: its keyed batches seen in the logs that tell their count, in order.
    landings: Vec<Vec<Landing>>,
    tally: KeyedTally,
}

impl KeyedCheck {
    /// The books of `routers` routers on a topic of `partitions` partitions, to which the
    /// run adds one.
    pub fn new(routers: usize, partitions: u32) -> Self {
        Self {
            seq: 0,
            old: partitions,
            new: partitions + 1,
            change: None,
            waiting: BTreeMap::new(),
            scanned: vec![0; partitions as usize + 1],
            events: vec![Vec::new(); routers],
            landings: vec![Vec::new(); routers],
            tally: KeyedTally::default(),
        }
    }

    fn next(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The topic has `count` partitions from now (`at`) on the metadata leader.
    pub fn changed(&mut self, count: u32, at: Duration) -> Result<(), String> {
        if count != self.new || self.change.is_some() {
            return Err(format!(
                "the topic went to {count} partitions; the run adds one partition to {} once",
                self.old
            ));
        }
        let seq = self.next();
        self.change = Some((at, seq));
        Ok(())
    }

    /// `send` was accepted by its router (call before its router's outputs are drained).
    pub fn submitted(&mut self, send: &PlannedSend) {
        let Some(key) = &send.key else {
            return;
        };
        let seq = self.next();
        let submitted = Submitted {
            router: send.router,
            key: key.clone(),
            at: send.at,
            seq,
        };
        self.waiting
            .insert((send.router as u32, send.batch), submitted);
    }

    /// Router `router` emitted `PartitionsChanged { from, to }`.
    pub fn event(&mut self, router: usize, from: u32, to: u32, at: Duration) {
        let seq = self.next();
        self.tally.events += 1;
        if let Some(events) = self.events.get_mut(router) {
            events.push(Change { seq, at, from, to });
        }
    }

    /// Look at the entries of `partition` added since the last scan.
    pub fn scan(&mut self, partition: u32, log: &[StoredMessage]) -> Result<(), String> {
        let index = partition as usize;
        if self.scanned.len() <= index {
            self.scanned.resize(index + 1, 0);
        }
        let start = self.scanned[index];
        self.scanned[index] = log.len();
        for message in log.iter().skip(start) {
            let Some(tag) = MessageTag::parse(&message.payload) else {
                continue;
            };
            let Some(sent) = self.waiting.remove(&(tag.router, tag.batch)) else {
                continue;
            };
            let old = resolve_partition(&sent.key, self.old);
            let new = resolve_partition(&sent.key, self.new);
            let count = match Some(partition) {
                _ if old == new => continue,
                p if p == old => self.old,
                p if p == new => self.new,
                // Not where the key resolves under either count: the ledger's to report.
                _ => continue,
            };
            let seen = self.next();
            self.landed(&sent, tag.batch, count, seen)?;
        }
        Ok(())
    }

    fn landed(
        &mut self,
        sent: &Submitted,
        batch: u32,
        count: u32,
        seen: u64,
    ) -> Result<(), String> {
        let router = sent.router;
        let events = self.events.get(router).map_or(&[][..], Vec::as_slice);
        let between =
            |from: u64, to: u64| events.iter().filter(move |e| e.seq > from && e.seq < to);
        let what = || {
            format!(
                "router {router} batch {batch} key {:?} submitted at {:?} resolved against {count} partitions",
                String::from_utf8_lossy(&sent.key),
                sent.at
            )
        };
        // Rule 1: the count the router's events announced at the submit.
        let mut silent = false;
        if let Some(known) = events.iter().rev().find(|e| e.seq < sent.seq)
            && known.to != count
            && !between(sent.seq, seen).any(|e| e.to == count)
        {
            silent = true;
            if SILENT_CHANGE_FAILS {
                return Err(format!(
                    "{}, but its last PartitionsChanged before the submit ({} -> {} at {:?}) set {} \
                 and none since set {count}",
                    what(),
                    known.from,
                    known.to,
                    known.at,
                    known.to
                ));
            }
        }
        // Rule 2: a change between two of its batches is announced, from one count to the other.
        let landings = self.landings.get(router).map_or(&[][..], Vec::as_slice);
        if let Some(before) = landings.iter().rev().find(|l| l.seen < sent.seq)
            && before.count != count
        {
            if between(before.submitted, seen).any(|e| e.from == before.count && e.to == count) {
                self.tally.changes_announced += 1;
            } else if SILENT_CHANGE_FAILS {
                return Err(format!(
                    "{}, after an earlier keyed batch resolved against {}, with no \
                     PartitionsChanged {{ from: {}, to: {count} }} between (its events: {:?})",
                    what(),
                    before.count,
                    before.count,
                    events
                ));
            } else {
                silent = true;
            }
        }
        if silent {
            self.tally.changes_silent += 1;
        }
        if let Some(landings) = self.landings.get_mut(router) {
            landings.push(Landing {
                submitted: sent.seq,
                seen,
                count,
            });
        }
        if let Some((at, seq)) = self.change
            && sent.seq > seq
            && router != ADD_PARTITION_ROUTER
        {
            self.tally.after_change += 1;
            if count == self.old {
                let staleness = sent.at.saturating_sub(at);
                self.tally.stale += 1;
                self.tally.stale_max = self.tally.stale_max.max(staleness);
                if staleness > STALE_LATE {
                    self.tally.stale_late += 1;
                }
            }
        }
        Ok(())
    }

    /// The counters.
    pub fn tally(&self) -> KeyedTally {
        self.tally
    }

    /// The counters as the fields of a report (every other field its default).
    pub fn report(&self) -> super::SimReport {
        let tally = self.tally;
        super::SimReport {
            keyed_after_change: tally.after_change,
            keyed_stale: tally.stale,
            keyed_stale_late: tally.stale_late,
            keyed_stale_max: tally.stale_max,
            partitions_changed_events: tally.events,
            keyed_changes_announced: tally.changes_announced,
            keyed_changes_silent: tally.changes_silent,
            ..super::SimReport::default()
        }
    }
}

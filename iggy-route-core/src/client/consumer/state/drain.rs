//! A partition handed over while the member still holds some of it.
//!
//! When a member joins, the server does not take a partition from its owner while the
//! owner has polled it past its stored offset: the partition stays the owner's (in the
//! group's listing, and for offset writes), but leaves its sync answers and its polls are
//! fenced, until the owner stores the last offset it polled (or the server's rebalancing
//! timeout passes). The owner is meant to *drain* it: hand out what it polled and store the
//! last of it; only then does the newcomer get the partition, from that offset, with
//! nothing read twice.
//!
//! A sync cannot tell such a partition from one moved at once (a member left, or the join
//! did not see the partition in flight), so the member reads the group's listing: the
//! member that owns every partition of the member's last sync is the member itself, and
//! the partition is still its own when that member lists it too. A listing carries no
//! generation, so a sync sent after it must show the generation of the sync that gave the
//! partition up (nothing changed in between: the partition did not move away and come
//! back). Then the member hands out what it polled; else it drops it (its next owner reads
//! it after the stored offset). Any later change of generation checks again.
//! Once every polled message is taken, the member reads the group's stored offset and, when
//! nobody stored past it, stores the last offset it handed out (as the auto-commit policy
//! stores, or when the caller commits), which completes the hand-over. That write goes out
//! only right after its read (within `poll_interval`): a member that went away in between
//! reads again, so a write never steps back past what another member stored.

use std::time::Instant;

use super::{ConsumerState, Position};
use crate::client::consumer::AutoCommit;
use crate::wire::ConsumerGroupMember;

/// A partition given up in a sync while its polled messages are not all taken or stored.
#[derive(Debug, Clone, Copy)]
pub(super) struct Drain {
    pub(super) position: Position,
    stage: Stage,
    /// The generation of the sync that gave the partition up (or of the last check).
    generation: u64,
}

/// How far a drain has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The group's listing is read: is the partition still this member's?
    Check,
    /// The listing says so: a sync sent after it must show the same generation.
    AwaitSync,
    /// Still its own: its polled messages are handed out.
    Confirmed,
    /// Every polled message was taken: the stored offset is read before the last write.
    ReadBeforeStore,
    /// Read at this instant, nobody stored past this member: the last offset handed out
    /// is stored next.
    Store(Instant),
}

/// What a drain asks next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DrainAsk {
    /// The group's listing (members and their partitions).
    Listing,
    /// A sync, to see the generation unchanged since the listing.
    Sync,
    /// The group's stored offset of the partition.
    Read(u32),
    /// An offset write of the partition.
    Store(u32, u64),
}

/// Marks a ready message that waits for its partition's check: never handed out before.
pub(super) const AWAITS_CHECK: u64 = u64::MAX;

impl ConsumerState {
    /// Starts draining `partition`, given up in a sync, with its `position`; nothing to
    /// drain drops it.
    /// Only after a single change: after more, the partition may have been another
    /// member's, read and stored on, before it was given up.
    pub(super) fn start_drain(
        &mut self,
        partition: u32,
        position: Position,
        (from, generation): (u64, u64),
    ) {
        let polled = self.ready.iter().any(|(_, m)| m.partition_id == partition);
        if generation != from + 1 || (!polled && position.uncommitted().is_none()) {
            return;
        }
        for (answered_at, message) in &mut self.ready {
            if message.partition_id == partition {
                *answered_at = AWAITS_CHECK;
            }
        }
        let drain = Drain {
            position,
            stage: Stage::Check,
            generation,
        };
        self.draining.insert(partition, drain);
    }

    /// What a draining partition asks at `now`: the group's listing, the stored offset,
    /// or the last offset handed out once every polled message of it is taken.
    pub(super) fn drain_due(&mut self, now: Instant) -> Option<DrainAsk> {
        let bound = self.config.poll_interval;
        let storing = self.commit_requested || self.config.auto_commit != AutoCommit::Never;
        let partitions: Vec<u32> = self.draining.keys().copied().collect();
        for partition in partitions {
            let taken_all = !self.ready.iter().any(|(_, m)| m.partition_id == partition);
            let Some(drain) = self.draining.get_mut(&partition) else {
                continue;
            };
            if drain.stage == Stage::Confirmed && storing && taken_all {
                drain.stage = Stage::ReadBeforeStore;
            }
            let ask = match drain.stage {
                Stage::Check => Some(DrainAsk::Listing),
                Stage::AwaitSync => Some(DrainAsk::Sync),
                Stage::ReadBeforeStore => Some(DrainAsk::Read(partition)),
                Stage::Store(at) if now <= at + bound => drain
                    .position
                    .uncommitted()
                    .map(|offset| DrainAsk::Store(partition, offset)),
                // Read too long ago (the caller went away): read again.
                Stage::Store(_) => {
                    drain.stage = Stage::ReadBeforeStore;
                    Some(DrainAsk::Read(partition))
                }
                Stage::Confirmed => None,
            };
            if ask.is_some() {
                return ask;
            }
        }
        None
    }

    /// The group's listing: each partition being checked is kept when the member that
    /// owns every partition of this member's last sync owns it too.
    pub(super) fn drain_listing(&mut self, members: &[ConsumerGroupMember]) {
        let own = &self.partitions;
        let me = members
            .iter()
            .find(|member| !own.is_empty() && own.iter().all(|p| member.partitions.contains(p)));
        let checked: Vec<u32> = self
            .draining
            .iter()
            .filter(|(_, drain)| drain.stage == Stage::Check)
            .map(|(partition, _)| *partition)
            .collect();
        for partition in checked {
            if me.is_some_and(|member| member.partitions.contains(&partition)) {
                if let Some(drain) = self.draining.get_mut(&partition) {
                    drain.stage = Stage::AwaitSync;
                }
            } else {
                self.draining.remove(&partition);
                self.drop_ready(partition);
            }
        }
    }

    /// A sync at `generation` that does not list the draining partitions: one whose
    /// listing check waits for it is confirmed when nothing changed since it was given up
    /// (or last checked); after a change, every drain checks again.
    pub(super) fn drain_synced(&mut self, generation: u64) {
        let partitions: Vec<u32> = self.draining.keys().copied().collect();
        for partition in partitions {
            let Some(drain) = self.draining.get_mut(&partition) else {
                continue;
            };
            if generation > drain.generation + 1 {
                // More than one change: it may have moved away and come back meanwhile.
                self.draining.remove(&partition);
                self.drop_ready(partition);
            } else if drain.generation != generation {
                drain.generation = generation;
                drain.stage = Stage::Check;
                for (answered_at, message) in &mut self.ready {
                    if message.partition_id == partition {
                        *answered_at = AWAITS_CHECK;
                    }
                }
            } else if drain.stage == Stage::AwaitSync {
                self.confirm_drain(partition);
            }
        }
    }

    /// The group's stored offset of a draining partition, read at `now` before its last
    /// write.
    pub(super) fn drain_read(&mut self, now: Instant, partition: u32, stored: Option<u64>) {
        let Some(drain) = self.draining.get_mut(&partition) else {
            return;
        };
        if stored > drain.position.committed {
            // Someone else stored past this member: the partition moved on without it.
            self.draining.remove(&partition);
            self.drop_ready(partition);
        } else if drain.stage == Stage::ReadBeforeStore {
            drain.stage = Stage::Store(now);
        }
    }

    /// The last write of a draining partition was answered (stored, or fenced: it moved
    /// meanwhile): either way the drain is over, and the partition is not this member's.
    pub(super) fn drain_answered(&mut self, partition: u32) {
        self.draining.remove(&partition);
        self.drop_ready(partition);
    }

    /// A draining partition is listed again: it is read on as one listed after changes
    /// the member did not see (from the stored offset), its polled messages dropped.
    pub(super) fn end_drain(&mut self, partition: u32) -> Option<Position> {
        let drain = self.draining.remove(&partition)?;
        self.drop_ready(partition);
        Some(drain.position)
    }

    /// The membership ended: nothing of it is handed out or stored now.
    pub(super) fn end_every_drain(&mut self) {
        let partitions: Vec<u32> = self.draining.keys().copied().collect();
        for partition in partitions {
            self.end_drain(partition);
        }
    }

    fn confirm_drain(&mut self, partition: u32) {
        if let Some(drain) = self.draining.get_mut(&partition) {
            drain.stage = Stage::Confirmed;
        }
        for (answered_at, message) in &mut self.ready {
            if message.partition_id == partition {
                *answered_at = 0;
            }
        }
    }

    fn drop_ready(&mut self, partition: u32) {
        self.ready.retain(|(_, m)| m.partition_id != partition);
    }
}

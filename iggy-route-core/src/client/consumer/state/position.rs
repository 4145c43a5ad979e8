//! What a consumer keeps of each partition, and of its last sync.

use std::time::Instant;

use crate::wire::ConsumerGroupAssignment;

/// What one partition's reading has come to.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Position {
    /// The next offset to read; `None` before the first poll.
    pub(super) next: Option<u64>,
    /// The last offset handed out: taken by the caller, not only polled.
    pub(super) handed_out: Option<u64>,
    /// The last offset stored.
    pub(super) committed: Option<u64>,
    /// Not polled before this instant.
    pub(super) idle_until: Option<Instant>,
    /// The first poll starts after the group's stored offset, not where the configured
    /// strategy says: the partition was taken over from another member.
    pub(super) from_stored: bool,
    /// [`ConsumerState::takes`] when the caller last took a message of it.
    pub(super) taken_at: u64,
    /// The partition may have been another member's since the member last read it: the
    /// next poll starts after the group's stored offset, to learn whether someone else
    /// stored past this position, and nothing is committed before its answer.
    pub(super) verify: bool,
    /// The group has nothing stored for the partition (read before its first poll): the
    /// configured strategy says where it starts.
    pub(super) nothing_stored: bool,
    /// When a read showed nobody else stored past this member's offset (a commit of the
    /// partition goes out only right after one).
    pub(super) stored_read_at: Option<Instant>,
    /// Automatic commits of it that failed in a row: it idles for longer after each, so that
    /// a partition whose primary cannot store its offset does not hold up the others.
    pub(super) commit_failures: u32,
}

impl Position {
    /// The offset handed out and not stored yet, if any (none while it is verified: it may
    /// lie behind what another member stored).
    pub(super) fn uncommitted(&self) -> Option<u64> {
        let handed_out = self.handed_out?;
        (!self.verify && self.committed < Some(handed_out)).then_some(handed_out)
    }
}

/// A member's assignment as a sync showed it.
#[derive(Debug, Clone)]
pub(super) struct View {
    pub(super) generation: u64,
    pub(super) partitions: Vec<u32>,
}

impl View {
    /// Whether `partition`, listed in `next`, stayed this member's from this view to it:
    /// listed in both, with no other membership change in between (the server bumps the
    /// generation once per change).
    pub(super) fn kept(&self, next: &ConsumerGroupAssignment, partition: u32) -> bool {
        (next.generation == self.generation || next.generation == self.generation + 1)
            && self.partitions.contains(&partition)
    }
}

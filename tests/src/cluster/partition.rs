//! One partition of the test cluster: its primary, its append-only log (ids and checksums
//! of every message, payloads of the newest: see [`super::log`]), its consumer offsets and
//! the request ids it has committed (for same-connection replay dedup).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use super::log::PartitionLog;
use super::state::NodeId;

/// How many committed request ids the partition dedup remembers per client: the real
/// server keeps a 128-bit window (protocol §13.5).
const DEDUP_WINDOW: usize = 128;

/// Who owns a consumer offset: a consumer or a consumer group, by id or name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum OffsetOwner {
    /// A single consumer with a numeric id.
    ConsumerId(u32),
    /// A single consumer with a string id.
    ConsumerName(String),
    /// A consumer group with a numeric id.
    GroupId(u32),
    /// A consumer group with a string id.
    GroupName(String),
}

/// One message as the partition log stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// Offset in the partition, assigned in order of admission.
    pub offset: u64,
    /// The message id the producer sent.
    pub id: u128,
    /// Server timestamp (µs) of the batch that carried it.
    pub timestamp: u64,
    /// Producer timestamp (µs).
    pub origin_timestamp: u64,
    /// Payload bytes.
    pub payload: Bytes,
    /// Raw user-header TLV bytes (may be empty).
    pub user_headers: Bytes,
}

/// A message handed to [`Partition::append`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage {
    /// Producer-chosen id.
    pub id: u128,
    /// Producer timestamp (µs).
    pub origin_timestamp: u64,
    /// Payload bytes.
    pub payload: Bytes,
    /// Raw user-header TLV bytes.
    pub user_headers: Bytes,
}

/// A purge acknowledged but not yet applied to a partition's log and offsets (see
/// [`super::state::PURGE_RECONCILE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingPurge {
    /// When the wipe lands (µs, the model's clock).
    pub due_micros: u64,
    /// The log's next offset when the purge was acknowledged: the counters the server
    /// reports (`GET_TOPIC`, `GET_STREAM`, `GET_STATS`) were zeroed then, and count only
    /// what was stored since.
    pub counted_from: u64,
    /// The log's size then, likewise.
    pub size_counted_from: u64,
}

/// One partition: its primary, its log and its consumer offsets.
#[derive(Debug, Clone)]
pub struct Partition {
    /// 0-based partition id.
    pub id: u32,
    /// Creation time (µs).
    pub created_at: u64,
    /// The node that admits writes and primary-only polls for this partition.
    pub primary: NodeId,
    /// The consensus view this partition's group last named a primary in (see
    /// [`Partition::view_naming_primary`]).
    view: u32,
    /// The append-only log.
    pub log: PartitionLog,
    /// Stored consumer offsets: the replicated ones, as the primary holds them (and every
    /// replica once replication reaches it).
    pub offsets: BTreeMap<OffsetOwner, u64>,
    /// Offsets a backup committed for itself alone: an auto-commit poll served by a backup
    /// moves that backup's copy and nothing else (seen on the real cluster: the backup then
    /// serves and reports its own offset, the primary still has none). The next offset
    /// the primary commits for that consumer replaces them.
    local_offsets: BTreeMap<(NodeId, OffsetOwner), u64>,
    /// Committed request ids per client id, for same-connection replay dedup (§13.5).
    committed_requests: BTreeMap<u128, BTreeSet<u64>>,
    /// A purge acknowledged whose wipe has not landed yet.
    pending_purge: Option<PendingPurge>,
    /// The highest offset each node served each consumer group (by group id), what the
    /// server keeps as `last_polled_offsets`: every replica its own, in memory only, so a
    /// node that served the group nothing, or restarted since, has none (see
    /// [`super::revocations`]).
    last_polled: BTreeMap<(NodeId, u32), u64>,
}

impl Partition {
    /// The group's view as a replica reports it on a refusal: its primary is
    /// `view % nodes`, as on the real server. Tests and the simulation move `primary`
    /// directly; the view follows here, to the first later view that names it, so it only
    /// grows.
    pub fn view_naming_primary(&mut self, nodes: usize) -> u32 {
        let nodes = u32::try_from(nodes.max(1)).unwrap_or(u32::MAX);
        let primary = u32::try_from(self.primary).unwrap_or(0) % nodes;
        if self.view % nodes != primary {
            self.view += (primary + nodes - self.view % nodes) % nodes;
        }
        self.view
    }

    pub(super) fn new(id: u32, created_at: u64, primary: NodeId) -> Self {
        Self {
            id,
            created_at,
            primary,
            view: 0,
            log: PartitionLog::default(),
            offsets: BTreeMap::new(),
            local_offsets: BTreeMap::new(),
            committed_requests: BTreeMap::new(),
            pending_purge: None,
            last_polled: BTreeMap::new(),
        }
    }

    /// `node` served group `group` messages up to `last`: its mark only grows.
    pub fn note_group_poll(&mut self, node: NodeId, group: u32, last: u64) {
        let mark = self.last_polled.entry((node, group)).or_insert(last);
        *mark = (*mark).max(last);
    }

    /// The highest offset `node` served group `group`, if it served it any.
    pub fn last_polled(&self, node: NodeId, group: u32) -> Option<u64> {
        self.last_polled.get(&(node, group)).copied()
    }

    /// Drop `node`'s mark for group `group`.
    pub fn forget_last_polled(&mut self, node: NodeId, group: u32) {
        self.last_polled.remove(&(node, group));
    }

    /// `node` stopped: its process, and every mark it held in memory, is gone.
    pub fn forget_polls_of(&mut self, node: NodeId) {
        self.last_polled.retain(|(holder, _), _| *holder != node);
    }

    /// The offset `owner` has stored as `node` sees it: the backup's own copy where an
    /// auto-commit it served left one, the replicated one otherwise.
    pub fn offset_seen_by(&self, node: NodeId, owner: &OffsetOwner) -> Option<u64> {
        self.local_offsets
            .get(&(node, owner.clone()))
            .or_else(|| self.offsets.get(owner))
            .copied()
    }

    /// An auto-commit poll served by `node` read up to `offset`: the primary stores it for
    /// every replica, a backup for itself only.
    pub fn auto_commit(&mut self, node: NodeId, owner: OffsetOwner, offset: u64) {
        if node == self.primary {
            self.store_offset(owner, offset);
        } else {
            self.local_offsets.insert((node, owner), offset);
        }
    }

    /// A committed offset write (on the primary): it replaces every replica's copy.
    pub fn store_offset(&mut self, owner: OffsetOwner, offset: u64) {
        self.local_offsets.retain(|(_, local), _| *local != owner);
        self.offsets.insert(owner, offset);
    }

    /// A committed offset delete (on the primary). Whether there was a replicated offset.
    pub fn delete_offset(&mut self, owner: &OffsetOwner) -> bool {
        self.local_offsets.retain(|(_, local), _| local != owner);
        self.offsets.remove(owner).is_some()
    }

    /// The offset the next message gets.
    pub fn next_offset(&self) -> u64 {
        self.log.next_offset()
    }

    /// The offset of the last message, 0 for an empty log (as the server reports it).
    pub fn current_offset(&self) -> u64 {
        self.next_offset().saturating_sub(1)
    }

    /// Sum of payload and header bytes, a stand-in for the on-disk size, as the server's
    /// counters report it: only what was stored since a purge still to land.
    pub fn size_bytes(&self) -> u64 {
        let from = self
            .pending_purge
            .map_or(0, |purge| purge.size_counted_from);
        self.log.size_bytes().saturating_sub(from)
    }

    /// How many messages the server's counters report to a copy complete up to `horizon`
    /// (µs; `None`: complete): those it holds, less the ones a purge still to land has
    /// already taken off the counters.
    pub fn messages_count(&self, horizon: Option<u64>) -> u64 {
        let from = self.pending_purge.map_or(0, |purge| purge.counted_from);
        self.held_by(horizon).saturating_sub(from)
    }

    /// The current offset the server's counters report to a copy complete up to `horizon`:
    /// that of the last message the copy holds, 0 when it holds none, and 0 as well right
    /// after a purge until something is stored again (the purge zeroed the counter; a
    /// send before the wipe sets it to the offset it got, counted on from before the purge).
    pub fn reported_current_offset(&self, horizon: Option<u64>) -> u64 {
        if self.pending_purge.is_some() && self.messages_count(horizon) == 0 {
            return 0;
        }
        self.held_by(horizon).saturating_sub(1)
    }

    /// The purge acknowledged and not yet applied, if there is one.
    pub fn pending_purge(&self) -> Option<PendingPurge> {
        self.pending_purge
    }

    /// A purge of this partition was acknowledged: its counters restart now, and its log
    /// and consumer offsets are wiped at `due_micros` ([`Partition::settle_purge`]). What
    /// is stored or polled before then works on the old log, and is wiped with it: the
    /// server fences every op assigned before its reset ran. A second purge before the wipe
    /// restarts the counters again and is applied by the same wipe (the server's reconciler
    /// applies the newest committed generation once).
    pub fn schedule_purge(&mut self, due_micros: u64) {
        let due_micros = self
            .pending_purge
            .map_or(due_micros, |pending| pending.due_micros.min(due_micros));
        self.pending_purge = Some(PendingPurge {
            due_micros,
            counted_from: self.log.next_offset(),
            size_counted_from: self.log.size_bytes(),
        });
    }

    /// Apply the pending purge if it is due at `now_micros`: the log restarts empty at offset
    /// 0 and the consumer offsets (and the groups' last polled offsets) are gone. Returns the
    /// due time of a purge still pending.
    pub fn settle_purge(&mut self, now_micros: u64) -> Option<u64> {
        let pending = self.pending_purge?;
        if now_micros < pending.due_micros {
            return Some(pending.due_micros);
        }
        self.log = PartitionLog::default();
        self.offsets.clear();
        self.local_offsets.clear();
        // The server clears the marks with the offsets: a pre-purge mark would hold a
        // revocation until its timeout (`IggyPartition::purge`).
        self.last_polled.clear();
        self.pending_purge = None;
        None
    }

    /// Append a batch stamped with `timestamp`, holding at most `window_bytes` of payloads
    /// ([`super::log::Retention::payload_bytes`]); returns the base offset.
    pub fn append(
        &mut self,
        timestamp: u64,
        messages: Vec<NewMessage>,
        window_bytes: usize,
    ) -> u64 {
        self.log.append(timestamp, messages, window_bytes)
    }

    /// Record that `(client, request)` committed here. Returns false when it already had:
    /// a replay that must not be appended twice.
    pub fn record_request(&mut self, client: u128, request: u64) -> bool {
        let seen = self.committed_requests.entry(client).or_default();
        if !seen.insert(request) {
            return false;
        }
        while seen.len() > DEDUP_WINDOW {
            seen.pop_first();
        }
        true
    }

    /// How many messages (from offset 0) a copy complete up to `horizon` (µs; `None`:
    /// complete) holds.
    pub fn held_by(&self, horizon: Option<u64>) -> u64 {
        self.log.held_by(horizon)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn message(payload: &'static [u8]) -> NewMessage {
        NewMessage {
            id: 1,
            origin_timestamp: 5,
            payload: Bytes::from_static(payload),
            user_headers: Bytes::new(),
        }
    }

    #[test]
    fn append_assigns_offsets_in_order_and_read_is_bounded() {
        let mut partition = Partition::new(0, 1, 0);
        let window = super::super::log::Retention::DEFAULT_PAYLOAD_BYTES;
        assert_eq!(
            partition.append(10, vec![message(b"a"), message(b"b")], window),
            0
        );
        assert_eq!(partition.append(11, vec![message(b"c")], window), 2);
        assert_eq!(partition.current_offset(), 2);
        let read = partition.log.read(1, 10, None).unwrap();
        let offsets: Vec<u64> = read.iter().map(|m| m.offset).collect();
        assert_eq!(offsets, vec![1, 2]);
        assert_eq!(read[1].payload, Bytes::from_static(b"c"));
        assert!(
            partition
                .log
                .read(u64::MAX, u64::MAX, None)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_replayed_request_is_recognised() {
        let mut partition = Partition::new(0, 1, 0);
        assert!(partition.record_request(7, 1));
        assert!(!partition.record_request(7, 1));
        assert!(partition.record_request(8, 1));
    }

    #[test]
    fn the_dedup_window_is_bounded() {
        let mut partition = Partition::new(0, 1, 0);
        for request in 1..=1000 {
            assert!(partition.record_request(7, request));
        }
        assert!(!partition.record_request(7, 1000));
        assert!(partition.record_request(7, 1), "aged out of the window");
    }
}

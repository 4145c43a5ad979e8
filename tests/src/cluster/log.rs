//! A partition's log, kept so that a long run's memory stays flat.
//!
//! The log keeps two things:
//! - an **index of every message**, one [`BatchRecord`] per append (one send): its base
//!   offset, server timestamp, first message id, producer timestamp and a checksum over
//!   every payload and user-header of the batch. A batch whose ids count up by one from the
//!   first and whose messages share one producer timestamp (what a producer that numbers its
//!   messages, and the adapters' stamping, give) costs 56 bytes however many messages it
//!   holds; any other batch adds its ids (16 bytes each) and, if they differ, its producer
//!   timestamps (8 bytes each). Ids, offsets, order and counts, the facts the tests check
//!   exactly-once and order against, are never dropped.
//! - a **payload window**: the newest messages in full (payload and user headers copied out
//!   of the frame they came in, so that a held message never pins a whole read buffer), at
//!   most [`Retention::payload_bytes`] per partition, each message counted with its record's
//!   size. Older payloads are dropped.
//!
//! A read of an offset whose payload was dropped either regenerates the batch with
//! [`Retention::regenerate`] (a test whose payloads are a function of the message id, such
//! as the chaos test, registers one) and checks it against the batch's checksum, or, without
//! a generator or when the checksum differs, fails with [`Evicted`]; the poll handler turns
//! that into `InvalidOffset (4100)`, so a test that reads too far back gets a typed error
//! and never a wrong payload.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use twox_hash::XxHash3_64;

use super::partition::{NewMessage, StoredMessage};

/// Rebuilds the payload of the message with this id (user headers empty).
pub type Regenerate = Arc<dyn Fn(u128) -> Bytes + Send + Sync>;

/// How much of each partition's payloads a cluster keeps.
#[derive(Clone)]
pub struct Retention {
    /// Payload window per partition, in bytes of payload, user headers and per-message
    /// record. The default (16 MiB) holds every payload of the tests that read payloads
    /// back from the log, and bounds the chaos test's. The demo keeps 1 MiB (it reads only
    /// counts): growing and compacting a large window runs under the cluster's one lock.
    pub payload_bytes: usize,
    /// Regenerates dropped payloads; `None`: reads of them fail with [`Evicted`].
    pub regenerate: Option<Regenerate>,
}

impl Retention {
    /// The default window.
    pub const DEFAULT_PAYLOAD_BYTES: usize = 16 << 20;
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            payload_bytes: Self::DEFAULT_PAYLOAD_BYTES,
            regenerate: None,
        }
    }
}

impl fmt::Debug for Retention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retention")
            .field("payload_bytes", &self.payload_bytes)
            .field("regenerate", &self.regenerate.is_some())
            .finish()
    }
}

/// A read reached a message whose payload is no longer held and could not be rebuilt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    /// The first such offset.
    pub offset: u64,
}

impl fmt::Display for Evicted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the payload at offset {} was dropped", self.offset)
    }
}

/// One append. The id is two halves so that the record is 8-aligned: a `u128` field would
/// pad it from 56 to 64 bytes, an eighth more memory for the longest runs.
#[derive(Debug, Clone)]
struct BatchRecord {
    first_id: [u64; 2],
    base_offset: u64,
    timestamp: u64,
    origin_timestamp: u64,
    checksum: u64,
    irregular: Option<Box<Irregular>>,
}

/// What a batch that does not count up from its first id, or whose producer timestamps
/// differ, needs besides its record. An empty list means "as the record says".
#[derive(Debug, Clone)]
struct Irregular {
    ids: Box<[u128]>,
    origins: Box<[u64]>,
}

impl BatchRecord {
    fn first_id(&self) -> u128 {
        (u128::from(self.first_id[0]) << 64) | u128::from(self.first_id[1])
    }

    fn id(&self, index: usize) -> u128 {
        match &self.irregular {
            Some(irregular) if !irregular.ids.is_empty() => irregular.ids[index],
            _ => self.first_id().wrapping_add(index as u128),
        }
    }

    fn origin(&self, index: usize) -> u64 {
        match &self.irregular {
            Some(irregular) if !irregular.origins.is_empty() => irregular.origins[index],
            _ => self.origin_timestamp,
        }
    }
}

/// The checksum of a batch: xxh3-64 of every payload and header, chained through the seed,
/// with the lengths mixed in so that moving bytes between messages changes it.
fn batch_checksum<'a>(bodies: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> u64 {
    bodies.fold(0, |seed, (payload, headers)| {
        let seed = XxHash3_64::oneshot_with_seed(seed ^ payload.len() as u64, payload);
        XxHash3_64::oneshot_with_seed(seed ^ headers.len() as u64, headers)
    })
}

fn window_cost(message: &StoredMessage) -> usize {
    std::mem::size_of::<StoredMessage>() + message.payload.len() + message.user_headers.len()
}

/// The log of one partition: see the module doc.
#[derive(Debug, Clone, Default)]
pub struct PartitionLog {
    batches: Vec<BatchRecord>,
    len: u64,
    bytes: u64,
    /// The newest messages in full; `window[window_skip..]` are held, the ones before it
    /// are spent shells waiting for the next compaction (their payloads already dropped).
    window: Vec<StoredMessage>,
    window_skip: usize,
    window_bytes: usize,
}

impl PartitionLog {
    /// Messages stored.
    pub fn len(&self) -> usize {
        usize::try_from(self.len).unwrap_or(usize::MAX)
    }

    /// Whether nothing was stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The offset the next message gets.
    pub fn next_offset(&self) -> u64 {
        self.len
    }

    /// Sum of payload and header bytes ever stored, held or not.
    pub fn size_bytes(&self) -> u64 {
        self.bytes
    }

    /// The first offset whose payload is held.
    pub fn first_held(&self) -> u64 {
        self.len - (self.window.len() - self.window_skip) as u64
    }

    /// The held messages, oldest first, starting at [`PartitionLog::first_held`].
    pub fn held(&self) -> &[StoredMessage] {
        &self.window[self.window_skip..]
    }

    /// Every message in full, if no payload was ever dropped.
    pub fn complete(&self) -> Option<&[StoredMessage]> {
        (self.first_held() == 0).then(|| self.held())
    }

    /// Append a batch stamped with `timestamp`, keeping at most `window_bytes` of payload
    /// window; returns the base offset.
    pub fn append(
        &mut self,
        timestamp: u64,
        messages: Vec<NewMessage>,
        window_bytes: usize,
    ) -> u64 {
        let base_offset = self.len;
        let Some(first) = messages.first() else {
            return base_offset;
        };
        let (first_id, first_origin) = (first.id, first.origin_timestamp);
        let counts_up = (0u128..)
            .zip(&messages)
            .all(|(index, m)| m.id == first_id.wrapping_add(index));
        let one_origin = messages.iter().all(|m| m.origin_timestamp == first_origin);
        let irregular = (!counts_up || !one_origin).then(|| {
            Box::new(Irregular {
                ids: if counts_up {
                    Box::default()
                } else {
                    messages.iter().map(|m| m.id).collect()
                },
                origins: if one_origin {
                    Box::default()
                } else {
                    messages.iter().map(|m| m.origin_timestamp).collect()
                },
            })
        });
        let checksum = batch_checksum(
            messages
                .iter()
                .map(|m| (m.payload.as_ref(), m.user_headers.as_ref())),
        );
        self.batches.push(BatchRecord {
            first_id: [(first_id >> 64) as u64, first_id as u64],
            base_offset,
            timestamp,
            origin_timestamp: first_origin,
            checksum,
            irregular,
        });
        for message in messages {
            let stored = StoredMessage {
                offset: self.len,
                id: message.id,
                timestamp,
                origin_timestamp: message.origin_timestamp,
                payload: Bytes::copy_from_slice(&message.payload),
                user_headers: Bytes::copy_from_slice(&message.user_headers),
            };
            self.bytes += (stored.payload.len() + stored.user_headers.len()) as u64;
            self.window_bytes += window_cost(&stored);
            self.window.push(stored);
            self.len += 1;
        }
        self.evict(window_bytes);
        base_offset
    }

    /// Drop the oldest held payloads until the window fits in `budget`.
    fn evict(&mut self, budget: usize) {
        while self.window_bytes > budget && self.window_skip < self.window.len() {
            let spent = &mut self.window[self.window_skip];
            self.window_bytes -= window_cost(spent);
            spent.payload = Bytes::new();
            spent.user_headers = Bytes::new();
            self.window_skip += 1;
        }
        // Compact once the shells outnumber the held messages: each shell is moved at most
        // once per doubling, so appends stay amortised O(1) and shells at most 2x the window.
        if self.window_skip > 1024 && self.window_skip * 2 > self.window.len() {
            self.window.drain(..self.window_skip);
            self.window_skip = 0;
        }
    }

    /// How many messages (from offset 0) a copy complete up to `horizon` (µs; `None`:
    /// complete) holds. Batch timestamps increase with offsets.
    pub fn held_by(&self, horizon: Option<u64>) -> u64 {
        horizon.map_or(self.len, |horizon| {
            let next = self.batches.partition_point(|b| b.timestamp <= horizon);
            self.batches.get(next).map_or(self.len, |b| b.base_offset)
        })
    }

    /// The offset of the first message stamped at or after `from`, or the next offset.
    pub fn first_at_or_after(&self, from: u64) -> u64 {
        let next = self.batches.partition_point(|b| b.timestamp < from);
        self.batches.get(next).map_or(self.len, |b| b.base_offset)
    }

    /// The index of the batch holding `offset` (`offset < len`).
    fn batch_of(&self, offset: u64) -> usize {
        self.batches.partition_point(|b| b.base_offset <= offset) - 1
    }

    fn batch_end(&self, index: usize) -> u64 {
        self.batches
            .get(index + 1)
            .map_or(self.len, |b| b.base_offset)
    }

    /// The ids of the messages from `start` on, at most `count`, from the index alone.
    pub fn ids(&self, start: u64, count: usize) -> Vec<u128> {
        let end = start.saturating_add(count as u64).min(self.len);
        let mut ids = Vec::with_capacity(end.saturating_sub(start) as usize);
        let mut offset = start;
        while offset < end {
            let index = self.batch_of(offset);
            let batch = &self.batches[index];
            let until = self.batch_end(index).min(end);
            ids.extend((offset..until).map(|at| batch.id((at - batch.base_offset) as usize)));
            offset = until;
        }
        ids
    }

    /// Messages from `start` on, at most `count`, in full: held ones from the window, older
    /// ones rebuilt with `regenerate` and checked against their batch's checksum.
    ///
    /// # Errors
    /// [`Evicted`] when a dropped payload cannot be rebuilt exactly.
    pub fn read(
        &self,
        start: u64,
        count: u64,
        regenerate: Option<&Regenerate>,
    ) -> Result<Vec<StoredMessage>, Evicted> {
        let end = start.saturating_add(count).min(self.len);
        let mut out = Vec::with_capacity(end.saturating_sub(start).min(1 << 16) as usize);
        let held_from = self.first_held();
        let mut offset = start;
        while offset < end.min(held_from) {
            let index = self.batch_of(offset);
            let rebuilt = self.rebuild(index, regenerate).ok_or(Evicted { offset })?;
            let until = self.batch_end(index).min(end);
            let skip = (offset - self.batches[index].base_offset) as usize;
            out.extend(
                rebuilt
                    .into_iter()
                    .skip(skip)
                    .take((until - offset) as usize),
            );
            offset = until;
        }
        if offset < end {
            let from = (offset - held_from) as usize;
            let to = (end - held_from) as usize;
            out.extend_from_slice(&self.held()[from..to]);
        }
        Ok(out)
    }

    /// Batch `index` rebuilt in full, if there is a generator and it gives back exactly
    /// the bytes that were stored.
    fn rebuild(&self, index: usize, regenerate: Option<&Regenerate>) -> Option<Vec<StoredMessage>> {
        let regenerate = regenerate?;
        let batch = &self.batches[index];
        let len = (self.batch_end(index) - batch.base_offset) as usize;
        let messages: Vec<StoredMessage> = (0..len)
            .map(|i| StoredMessage {
                offset: batch.base_offset + i as u64,
                id: batch.id(i),
                timestamp: batch.timestamp,
                origin_timestamp: batch.origin(i),
                payload: regenerate(batch.id(i)),
                user_headers: Bytes::new(),
            })
            .collect();
        let checksum = batch_checksum(
            messages
                .iter()
                .map(|m| (m.payload.as_ref(), m.user_headers.as_ref())),
        );
        (checksum == batch.checksum).then_some(messages)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn numbered(first: u128, count: u128) -> Vec<NewMessage> {
        (first..first + count)
            .map(|id| NewMessage {
                id,
                origin_timestamp: 9,
                payload: payload(id),
                user_headers: Bytes::new(),
            })
            .collect()
    }

    fn payload(id: u128) -> Bytes {
        Bytes::from(format!("message {id}"))
    }

    #[test]
    fn a_batch_record_is_56_bytes() {
        assert_eq!(std::mem::size_of::<BatchRecord>(), 56);
    }

    #[test]
    fn dropped_payloads_are_refused_or_rebuilt_exactly() {
        let mut log = PartitionLog::default();
        // A window of about two messages: every batch but the last loses its payloads.
        let budget = 2 * (std::mem::size_of::<StoredMessage>() + 10);
        for batch in 0..5u128 {
            assert_eq!(
                log.append(100 + batch as u64, numbered(batch * 3, 3), budget),
                (batch * 3) as u64
            );
        }
        assert_eq!(log.len(), 15);
        assert!(log.held().len() <= 2 && !log.held().is_empty());
        assert!(log.complete().is_none());
        assert_eq!(log.ids(2, 5), vec![2, 3, 4, 5, 6]);
        assert_eq!(log.read(0, 3, None), Err(Evicted { offset: 0 }));
        let regenerate: Regenerate = Arc::new(payload);
        let all = log.read(0, 100, Some(&regenerate)).unwrap();
        let expected: Vec<(u64, u128, Bytes, u64)> = (0..15u64)
            .map(|o| (o, u128::from(o), payload(u128::from(o)), 100 + o / 3))
            .collect();
        let got: Vec<(u64, u128, Bytes, u64)> = all
            .into_iter()
            .map(|m| (m.offset, m.id, m.payload, m.timestamp))
            .collect();
        assert_eq!(got, expected);
        let liar: Regenerate = Arc::new(|id| Bytes::from(format!("message {id}!")));
        assert_eq!(log.read(4, 1, Some(&liar)), Err(Evicted { offset: 4 }));
    }

    #[test]
    fn irregular_batches_keep_their_ids_and_stamps() {
        let mut log = PartitionLog::default();
        let mut messages = numbered(10, 3);
        messages[1].id = 99;
        messages[1].payload = payload(99);
        messages[2].origin_timestamp = 7;
        log.append(5, messages, 0);
        assert_eq!(log.ids(0, 10), vec![10, 99, 12]);
        let regenerate: Regenerate = Arc::new(payload);
        let rebuilt = log.read(0, 3, Some(&regenerate)).unwrap();
        let origins: Vec<u64> = rebuilt.iter().map(|m| m.origin_timestamp).collect();
        assert_eq!(origins, vec![9, 9, 7]);
    }

    #[test]
    fn the_window_stays_within_its_budget_over_a_long_run() {
        let mut log = PartitionLog::default();
        let budget = 64 << 10;
        for batch in 0..20_000u128 {
            log.append(batch as u64, numbered(batch * 10, 10), budget);
            assert!(log.window_bytes <= budget);
        }
        assert_eq!(log.len(), 200_000);
        // Shells are compacted: the vector never holds more than twice the window.
        assert!(log.window.len() <= 2 * log.held().len() + 1025);
        assert_eq!(log.held_by(Some(19_999)), 200_000);
        assert_eq!(log.held_by(Some(4)), 50);
        assert_eq!(log.first_at_or_after(5), 50);
        assert_eq!(log.held().last().unwrap().id, 199_999);
    }
}

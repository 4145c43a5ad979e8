//! The books of a run: every submitted send, how it completed, and every message the
//! partition logs hold. It checks the delivery rules as the run goes:
//! - every request completes exactly once, and by the end every request has completed;
//! - an acknowledged batch is in its partition's log exactly once (at least once when the
//!   router opted into `AtLeastOnce`), in the partition it was meant for, at the offset
//!   the receipt names;
//! - with `AtMostOnce` no message is ever in a log twice, so a send that ended in doubt
//!   (`OutcomeUnknown`, `TimedOut` in doubt) is there at most once;
//! - under either guarantee a send that failed otherwise (a `TimedOut` not in doubt among
//!   them, or never accepted) is not there at all;
//! - one router's messages to one partition appear in the order they were submitted;
//! - a keyed batch lands in the partition its key resolves to under a partition count
//!   the topic has had (the count changes once per run), and in only that one.

use std::collections::BTreeMap;

use bytes::Bytes;
use iggy_route_core::partitioning::resolve_partition;
use iggy_route_core::{DeliveryGuarantee, Outcome, Reply, RequestId};

use crate::cluster::StoredMessage;

use super::workload::{MessageTag, PlannedSend};

/// How a send ended, as far as the log is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// `Ok(Reply::Sent)`.
    Acked,
    /// `OutcomeUnknown` or `TimedOut` in doubt (`RequestError::in_doubt`): it may or may
    /// not be in the log.
    Unknown,
    /// Any other error, or refused by `submit`: it must not be in the log.
    Failed,
}

#[derive(Debug)]
struct Batch {
    partition: u32,
    messages: u32,
    ending: Option<Ending>,
    /// The message key of a keyed batch: its partition depends on the count the router
    /// resolved it under.
    key: Option<Bytes>,
    /// The partition is settled (seen in a log or in a receipt).
    pinned: bool,
    /// A balanced batch: any partition the topic had may take it.
    balanced: bool,
}

impl Batch {
    /// Whether the batch may land in `partition`, and settle it there if so.
    fn settle(&mut self, partition: u32, counts: &[u32]) -> bool {
        if partition == self.partition {
            self.pinned = true;
            return true;
        }
        let allowed = if self.balanced {
            counts.iter().any(|&count| partition < count)
        } else {
            let Some(key) = &self.key else {
                return false;
            };
            counts
                .iter()
                .any(|&count| resolve_partition(key, count) == Some(partition))
        };
        if self.pinned || !allowed {
            return false;
        }
        self.partition = partition;
        self.pinned = true;
        true
    }
}

/// Counts of how requests ended, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Requests accepted by `submit`.
    pub submitted: u64,
    /// Sends refused by `submit` (`QueueFull`).
    pub rejected: u64,
    /// Acknowledged sends.
    pub acked: u64,
    /// Sends that ended in doubt (`OutcomeUnknown`, `TimedOut` in doubt).
    pub unknown: u64,
    /// Sends that ended with any other error.
    pub failed: u64,
}

/// See the module doc.
#[derive(Debug)]
pub struct Ledger {
    delivery: DeliveryGuarantee,
    requests: BTreeMap<(usize, RequestId), (u32, u32)>,
    batches: BTreeMap<(u32, u32), Batch>,
    copies: BTreeMap<MessageTag, u32>,
    /// Per partition: log entries already checked.
    scanned: Vec<usize>,
    /// Per (router, partition): the last message seen there for the first time.
    last_first: BTreeMap<(u32, u32), MessageTag>,
    /// Acks whose log entries are still to be verified (after this step's scan).
    fresh_acks: Vec<(u32, u32, Option<u64>)>,
    /// Partition counts the topic has had.
    counts: Vec<u32>,
    tally: Tally,
}

impl Ledger {
    /// Empty books for a topic of `partitions` partitions.
    pub fn new(delivery: DeliveryGuarantee, partitions: u32) -> Self {
        Self {
            delivery,
            requests: BTreeMap::new(),
            batches: BTreeMap::new(),
            copies: BTreeMap::new(),
            scanned: vec![0; partitions as usize],
            last_first: BTreeMap::new(),
            fresh_acks: Vec::new(),
            counts: vec![partitions],
            tally: Tally::default(),
        }
    }

    /// `submit` accepted `send` as `id` (or refused it, with `id` `None`).
    pub fn submitted(&mut self, id: Option<RequestId>, send: &PlannedSend) -> Result<(), String> {
        let key = (send.router as u32, send.batch);
        let ending = match id {
            Some(id) => {
                if self.requests.insert((send.router, id), key).is_some() {
                    return Err(format!("router {} reused request id {id}", send.router));
                }
                self.tally.submitted += 1;
                None
            }
            None => {
                self.tally.rejected += 1;
                Some(Ending::Failed)
            }
        };
        let batch = Batch {
            partition: send.partition,
            messages: send.messages,
            ending,
            key: send.key.clone(),
            pinned: false,
            balanced: send.balanced,
        };
        self.batches.insert(key, batch);
        Ok(())
    }

    /// Router `router` completed request `id`.
    pub fn completed(
        &mut self,
        router: usize,
        id: RequestId,
        outcome: &Outcome,
    ) -> Result<(), String> {
        let Some(&key) = self.requests.get(&(router, id)) else {
            return Err(format!(
                "router {router} completed {id}, which it never accepted"
            ));
        };
        let Some(batch) = self.batches.get_mut(&key) else {
            return Err(format!("no batch for {key:?}"));
        };
        if let Some(earlier) = batch.ending {
            return Err(format!(
                "router {router} completed {id} twice (first {earlier:?}, now {outcome:?})"
            ));
        }
        let ending = match outcome {
            Ok(Reply::Sent(receipt)) => {
                if !batch.settle(receipt.partition_id, &self.counts)
                    || receipt.messages != batch.messages
                {
                    return Err(format!(
                        "router {router} batch {}: receipt {receipt:?} does not match partition {} with {} messages",
                        key.1, batch.partition, batch.messages
                    ));
                }
                self.fresh_acks.push((key.0, key.1, receipt.base_offset));
                self.tally.acked += 1;
                Ending::Acked
            }
            Ok(other) => return Err(format!("router {router}: a send completed with {other:?}")),
            Err(error) if error.in_doubt() => {
                self.tally.unknown += 1;
                Ending::Unknown
            }
            Err(_) => {
                self.tally.failed += 1;
                Ending::Failed
            }
        };
        batch.ending = Some(ending);
        let messages = batch.messages;
        if ending == Ending::Failed {
            let stored = self.copies_of(key.0, key.1, messages);
            if stored > 0 {
                return Err(format!(
                    "router {router} batch {} failed with {outcome:?} but is in the log",
                    key.1
                ));
            }
        }
        Ok(())
    }

    /// Check the log entries of `partition` added since the last scan.
    pub fn scan(&mut self, partition: u32, log: &[StoredMessage]) -> Result<(), String> {
        let Some(scanned) = self.scanned.get_mut(partition as usize) else {
            return Err(format!("no partition {partition} in the books"));
        };
        let start = *scanned;
        *scanned = log.len();
        for (offset, message) in log.iter().enumerate().skip(start) {
            let Some(tag) = MessageTag::parse(&message.payload) else {
                return Err(format!(
                    "partition {partition} offset {offset}: untagged payload"
                ));
            };
            let Some(batch) = self.batches.get_mut(&(tag.router, tag.batch)) else {
                return Err(format!(
                    "partition {partition} offset {offset}: {tag:?} was never submitted"
                ));
            };
            if !batch.settle(partition, &self.counts) {
                return Err(format!(
                    "{tag:?} landed in partition {partition}, not {}",
                    batch.partition
                ));
            }
            let copies = self.copies.entry(tag).or_insert(0);
            *copies += 1;
            if *copies > 1 {
                if self.delivery == DeliveryGuarantee::AtMostOnce {
                    return Err(format!(
                        "{tag:?} is in partition {partition} twice under AtMostOnce (now at offset {offset})"
                    ));
                }
                continue;
            }
            if batch.ending == Some(Ending::Failed) {
                return Err(format!(
                    "{tag:?} failed definitely but reached the log at {offset}"
                ));
            }
            let last = self
                .last_first
                .entry((tag.router, partition))
                .or_insert(tag);
            if *last > tag {
                return Err(format!(
                    "partition {partition} offset {offset}: {tag:?} after {last:?}: out of submission order"
                ));
            }
            *last = tag;
        }
        Ok(())
    }

    /// Verify the acks of this step against the scanned logs. Call after [`Ledger::scan`].
    pub fn verify_acks(&mut self, logs: &[&[StoredMessage]]) -> Result<(), String> {
        for (router, batch_id, base_offset) in std::mem::take(&mut self.fresh_acks) {
            let Some(batch) = self.batches.get(&(router, batch_id)) else {
                continue;
            };
            for index in 0..batch.messages {
                let tag = MessageTag {
                    router,
                    batch: batch_id,
                    index,
                };
                let copies = self.copies.get(&tag).copied().unwrap_or(0);
                let expected_once = self.delivery == DeliveryGuarantee::AtMostOnce;
                if copies == 0 || (expected_once && copies != 1) {
                    return Err(format!("acknowledged {tag:?} is in the log {copies} times"));
                }
            }
            if let Some(offset) = base_offset {
                let log = logs.get(batch.partition as usize).copied().unwrap_or(&[]);
                let at = usize::try_from(offset).ok().and_then(|o| log.get(o));
                let tag = at.and_then(|m| MessageTag::parse(&m.payload));
                let first = MessageTag {
                    router,
                    batch: batch_id,
                    index: 0,
                };
                if tag != Some(first) {
                    return Err(format!(
                        "the receipt of {first:?} names offset {offset}, which holds {tag:?}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The topic now has `partitions` partitions.
    pub fn grow(&mut self, partitions: u32) {
        if self.counts.last() != Some(&partitions) {
            self.counts.push(partitions);
        }
        if self.scanned.len() < partitions as usize {
            self.scanned.resize(partitions as usize, 0);
        }
    }

    /// Whether every accepted request has completed.
    pub fn all_completed(&self) -> bool {
        self.requests
            .values()
            .all(|key| self.batches.get(key).is_some_and(|b| b.ending.is_some()))
    }

    /// The end-of-run check: nothing left pending.
    pub fn finish(&self) -> Result<(), String> {
        for ((router, id), key) in &self.requests {
            if self.batches.get(key).is_none_or(|b| b.ending.is_none()) {
                return Err(format!(
                    "router {router} request {id} (batch {}) never completed",
                    key.1
                ));
            }
        }
        Ok(())
    }

    /// How requests ended.
    pub fn tally(&self) -> Tally {
        self.tally
    }

    fn copies_of(&self, router: u32, batch: u32, messages: u32) -> u32 {
        (0..messages)
            .map(|index| {
                let tag = MessageTag {
                    router,
                    batch,
                    index,
                };
                self.copies.get(&tag).copied().unwrap_or(0)
            })
            .sum()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use iggy_route_core::RequestError;
    use iggy_route_core::partitioning::Partitioning;
    use iggy_route_core::wire::Identifier;
    use iggy_route_core::{NodeId, Request, SendReceipt, SendRequest};

    use super::*;

    fn planned(batch: u32) -> PlannedSend {
        PlannedSend {
            at: Duration::ZERO,
            router: 0,
            batch,
            partition: 0,
            request: Request::Send(SendRequest {
                stream: Identifier::Numeric(1),
                topic: Identifier::Numeric(1),
                partitioning: Partitioning::partition_id(0),
                messages: Vec::new(),
            }),
            messages: 1,
            key: None,
            balanced: false,
        }
    }

    fn stored(batch: u32) -> StoredMessage {
        let tag = MessageTag {
            router: 0,
            batch,
            index: 0,
        };
        StoredMessage {
            offset: 0,
            id: 1,
            timestamp: 0,
            origin_timestamp: 0,
            payload: tag.payload(0),
            user_headers: Bytes::new(),
        }
    }

    fn sent(base_offset: u64) -> Outcome {
        Ok(Reply::Sent(SendReceipt {
            partition_id: 0,
            base_offset: Some(base_offset),
            messages: 1,
            node: NodeId(0),
            replica: None,
        }))
    }

    fn ledger_with(batches: u32) -> Ledger {
        let mut ledger = Ledger::new(DeliveryGuarantee::AtMostOnce, 1);
        for batch in 0..batches {
            ledger
                .submitted(Some(RequestId(u64::from(batch))), &planned(batch))
                .unwrap();
        }
        ledger
    }

    #[test]
    fn an_acked_batch_in_the_log_once_passes_and_a_second_completion_fails() {
        let mut ledger = ledger_with(1);
        let log = vec![stored(0)];
        ledger.scan(0, &log).unwrap();
        ledger.completed(0, RequestId(0), &sent(0)).unwrap();
        ledger.verify_acks(&[&log]).unwrap();
        assert!(ledger.finish().is_ok());
        assert!(ledger.completed(0, RequestId(0), &sent(0)).is_err());
    }

    #[test]
    fn an_ack_without_its_message_in_the_log_fails() {
        let mut ledger = ledger_with(1);
        ledger.completed(0, RequestId(0), &sent(0)).unwrap();
        assert!(ledger.verify_acks(&[&[]]).is_err());
    }

    #[test]
    fn a_duplicate_or_reordered_message_fails() {
        let mut ledger = ledger_with(2);
        assert!(ledger.scan(0, &[stored(0), stored(0)]).is_err());
        let mut ledger = ledger_with(2);
        assert!(ledger.scan(0, &[stored(1), stored(0)]).is_err());
    }

    #[test]
    fn a_definite_failure_must_not_be_in_the_log() {
        let mut ledger = ledger_with(1);
        ledger.scan(0, &[stored(0)]).unwrap();
        let failed = Err(RequestError::NoRoute {
            partition: iggy_route_core::PartitionKey {
                topic: iggy_route_core::TopicKey {
                    stream: Identifier::Numeric(1),
                    topic: Identifier::Numeric(1),
                },
                partition: 0,
            },
        });
        assert!(ledger.completed(0, RequestId(0), &failed).is_err());
    }

    #[test]
    fn a_balanced_batch_settles_in_any_partition_but_only_in_one() {
        let mut ledger = Ledger::new(DeliveryGuarantee::AtMostOnce, 3);
        let send = PlannedSend {
            balanced: true,
            ..planned(0)
        };
        ledger.submitted(Some(RequestId(0)), &send).unwrap();
        let receipt = Ok(Reply::Sent(SendReceipt {
            partition_id: 2,
            base_offset: Some(0),
            messages: 1,
            node: NodeId(0),
            replica: None,
        }));
        ledger.completed(0, RequestId(0), &receipt).unwrap();
        assert!(ledger.scan(1, &[stored(0)]).is_err(), "a second partition");
        let mut ledger = Ledger::new(DeliveryGuarantee::AtMostOnce, 3);
        ledger.submitted(Some(RequestId(0)), &send).unwrap();
        assert!(ledger.scan(3, &[stored(0)]).is_err(), "beyond the count");
        ledger.scan(2, &[stored(0)]).unwrap();
        ledger.completed(0, RequestId(0), &receipt).unwrap();
        ledger.verify_acks(&[&[], &[], &[stored(0)]]).unwrap();
    }

    #[test]
    fn a_request_never_completed_fails_the_finish() {
        let ledger = ledger_with(1);
        assert!(!ledger.all_completed());
        assert!(ledger.finish().is_err());
    }
}

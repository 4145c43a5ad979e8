//! The consumers' part of the nemesis checker:
//! - every message a consumer handed out is stored at the offset it was handed out with,
//!   with the same id and its own payload;
//! - a plain consumer hands each message out once (it keeps its own position); a group
//!   member hands each message out at most once while its membership holds (the same
//!   number of joins): a member that lost its membership and joined again may be handed
//!   what nobody had committed, which is counted;
//! - every offset a member writes is at or below the highest offset of that partition it
//!   had handed out when it sent the write;
//! - the group's stored offset of each partition at the end is one some member handed out;
//! - every consumer handed messages out after the last fault, but a member whose
//!   membership was lost (its member link went with a node): the real server keeps such a
//!   member in the group, with its partitions, on the nodes that survive (it drops the
//!   members of a node's lost connections only when that node replays its own log at a
//!   restart), so a member that joins again may be given no partition for as long as the
//!   ghost stays, and its partitions are read by nobody. That is counted, not failed:
//!   [`ConsumerSummary::stalled`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::checker::Findings;
use super::ledger::Records;
use super::readback::Readback;

/// One consumer's figures.
#[derive(Debug, Clone, Default)]
pub struct ConsumerSummary {
    /// Its name.
    pub name: String,
    /// Messages handed out.
    pub handed: u64,
    /// Messages handed out again after the member joined again.
    pub again_after_rejoin: u64,
    /// Times it joined (members).
    pub joins: u64,
    /// Offset writes sent, and those that failed.
    pub commits: (u64, u64),
    /// Errors it returned and requests that failed.
    pub errors: u64,
    /// When it last handed a message out.
    pub last_handout: Option<Duration>,
    /// A member that lost its membership and handed nothing out after the last fault.
    pub stalled: bool,
}

/// Checks the consumers; `last_whole` is when the cluster was whole after the last fault,
/// `lost` the names of the clients that lost a consumer-group membership.
pub fn check(
    records: &Records,
    readback: &Readback,
    last_whole: Option<Duration>,
    lost: &BTreeSet<String>,
    findings: &mut Findings,
) {
    let mut summaries: Vec<ConsumerSummary> = records
        .consumers
        .iter()
        .map(|consumer| ConsumerSummary {
            name: consumer.name.clone(),
            ..ConsumerSummary::default()
        })
        .collect();
    // (consumer, partition, offset) -> the memberships it was handed out in.
    let mut seen: BTreeMap<(usize, u32, u64), BTreeSet<u64>> = BTreeMap::new();
    let mut handed_max: BTreeMap<u32, u64> = BTreeMap::new();
    for handout in &records.handouts {
        let name = &records.consumers[handout.consumer].name;
        let summary = &mut summaries[handout.consumer];
        summary.handed += 1;
        summary.joins = summary.joins.max(handout.membership);
        summary.last_handout = Some(handout.at);
        let stored = readback
            .logs
            .get(handout.partition as usize)
            .and_then(|log| {
                usize::try_from(handout.offset)
                    .ok()
                    .and_then(|at| log.get(at))
            });
        if stored.map(|stored| stored.id) != Some(handout.id) || !handout.payload_ok {
            findings.violations.push(format!(
                "{name} handed out id {:x} at partition {} offset {} (payload as sent: {}), \
                 where the log holds {:?}",
                handout.id, handout.partition, handout.offset, handout.payload_ok, stored
            ));
        }
        if records.consumers[handout.consumer].member {
            let highest = handed_max
                .entry(handout.partition)
                .or_insert(handout.offset);
            *highest = (*highest).max(handout.offset);
        }
        let memberships = seen
            .entry((handout.consumer, handout.partition, handout.offset))
            .or_default();
        if memberships.contains(&handout.membership) {
            findings.violations.push(format!(
                "{name} handed out partition {} offset {} twice in membership {} (at {:.1} s)",
                handout.partition,
                handout.offset,
                handout.membership,
                handout.at.as_secs_f64()
            ));
        } else if !memberships.is_empty() {
            summary.again_after_rejoin += 1;
        }
        memberships.insert(handout.membership);
    }
    for commit in &records.commits {
        let summary = &mut summaries[commit.consumer];
        summary.commits.0 += 1;
        summary.commits.1 += u64::from(commit.error.is_some());
        if commit
            .handed_max
            .is_none_or(|highest| commit.offset > highest)
        {
            findings.violations.push(format!(
                "{} wrote offset {} of partition {} at {:.1} s, having handed out up to {:?}",
                records.consumers[commit.consumer].name,
                commit.offset,
                commit.partition,
                commit.at.as_secs_f64(),
                commit.handed_max
            ));
        }
    }
    for request in &records.requests {
        summaries[request.consumer].errors += u64::from(request.error.is_some());
    }
    for (partition, stored) in &readback.group_offsets {
        if let Some(stored) = stored
            && handed_max
                .get(partition)
                .is_none_or(|highest| stored > highest)
        {
            findings.violations.push(format!(
                "the group's stored offset of partition {partition} is {stored}, past what \
                 its members handed out ({:?})",
                handed_max.get(partition)
            ));
        }
    }
    if let Some(whole) = last_whole {
        for summary in &mut summaries {
            if summary.last_handout.is_none_or(|last| last < whole) {
                if lost.contains(&summary.name) {
                    summary.stalled = true;
                    continue;
                }
                findings.violations.push(format!(
                    "{} handed nothing out after the last fault (last at {:?})",
                    summary.name, summary.last_handout
                ));
            }
        }
    }
    findings.group_read_after = last_whole.map(|whole| {
        records
            .handouts
            .iter()
            .filter(|h| records.consumers[h.consumer].member && h.at >= whole)
            .map(|h| h.partition)
            .collect()
    });
    findings.consumers = summaries;
}

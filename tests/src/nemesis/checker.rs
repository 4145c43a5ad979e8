//! The checker of a nemesis run, over what the load recorded and what the partitions hold
//! at the end (read from their primaries once the cluster was whole and settled):
//! - every message stored is one of the run's, with its own payload, stored once, and
//!   every partition's offsets run 0, 1, 2, ... without a gap;
//! - every acknowledged call's messages are stored exactly once, at the offsets its
//!   receipt named, in its receipt's partition;
//! - a source's acknowledged calls to one partition are stored in the order it made them;
//! - every keyed call of one key went to one partition;
//! - an `OutcomeUnknown` call or a `TimedOut` one in doubt (which may be stored: `RequestError`'s
//!   documentation), or one cut short by the run's own shutdown of its clients (only when
//!   the server did not recover), is stored whole or not at all, and is counted either way;
//! - nothing of a call reported failed otherwise is stored;
//! - every call ended within its bound (its deadline plus [`SLACK`](super::load::SLACK));
//! - the consumers' promises (`check_consumers.rs`);
//! - each client's session moves and reconnects stay within a bound per fault
//!   (`recovery.rs`);
//! - after every fault, sends were acknowledged again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use iggy_route_core::Stats;

use super::faults::Fault;
use super::ledger::{Ended, Kind, Records, Source};
use super::readback::Readback;

/// Violations printed in full; the rest are counted.
pub const SHOWN: usize = 40;

/// What the calls came to.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    /// Send calls.
    pub calls: u64,
    /// Acknowledged calls, and their messages.
    pub acked: (u64, u64),
    /// `OutcomeUnknown` calls: stored, not stored.
    pub unknown: (u64, u64),
    /// `TimedOut` calls: stored, not stored.
    pub timed_out: (u64, u64),
    /// Calls cut short by the run's own shutdown of a client: stored, not stored.
    pub cut_short: (u64, u64),
    /// Other failures, by error.
    pub failed: BTreeMap<String, u64>,
    /// Acknowledged calls whose receipt named no offset.
    pub no_offset: u64,
    /// Messages stored in all.
    pub stored: u64,
    /// Messages stored of calls that never settled (the run gave up on its load).
    pub unsettled_stored: u64,
    /// The longest call, and its share of its bound.
    pub longest_call: (Duration, f64),
}

/// What the checker found.
#[derive(Debug, Default)]
pub struct Findings {
    /// The counts.
    pub counts: Counts,
    /// Per fault, its recovery.
    pub recoveries: Vec<super::recovery::Recovery>,
    /// The partitions some group member handed out a message of after the last fault.
    pub group_read_after: Option<BTreeSet<u32>>,
    /// Per consumer, its figures.
    pub consumers: Vec<super::check_consumers::ConsumerSummary>,
    /// Every broken promise.
    pub violations: Vec<String>,
}

impl Findings {
    fn violation(&mut self, text: String) {
        self.violations.push(text);
    }
}

/// Checks a run; see the module documentation.
/// `run` is the length of the load: no fault's stall is measured past it.
pub fn check(
    records: &Records,
    readback: &Readback,
    faults: &[Fault],
    stats: &[(String, Stats)],
    run: Duration,
) -> Findings {
    let mut findings = Findings::default();
    let stored = check_logs(records, readback, &mut findings);
    check_sends(records, &stored, &mut findings);
    check_order_and_keys(records, &mut findings);
    check_bounds(records, &mut findings);
    let last_whole = faults.iter().filter_map(|fault| fault.whole_again).max();
    let lost = stats
        .iter()
        .filter(|(_, stats)| stats.memberships_lost > 0)
        .map(|(name, _)| name.clone())
        .collect();
    super::check_consumers::check(records, readback, last_whole, &lost, &mut findings);
    let moves = super::recovery::session_moves_bound(faults);
    let reconnects = super::recovery::reconnects_bound(faults);
    for (client, stats) in stats {
        if stats.session_moves > moves {
            findings.violation(format!(
                "{client}: {} session moves, more than {moves} for {} faults",
                stats.session_moves,
                faults.len()
            ));
        }
        if stats.reconnects > reconnects {
            findings.violation(format!(
                "{client}: {} reconnects, more than {reconnects} for {} faults",
                stats.reconnects,
                faults.len()
            ));
        }
    }
    findings.recoveries =
        super::recovery::recoveries(records, faults, run, &mut findings.violations);
    if readback.settled_at.is_none() {
        findings.violation("server: the cluster did not settle after the run".to_owned());
    }
    for problem in &readback.problems {
        findings.violation(format!("read back: {problem}"));
    }
    findings
}

/// Checks every partition's log; returns where each id is stored.
fn check_logs(
    records: &Records,
    readback: &Readback,
    findings: &mut Findings,
) -> HashMap<u128, (u32, u64)> {
    let calls: BTreeMap<u128, usize> = records
        .sends
        .iter()
        .enumerate()
        .map(|(index, call)| (call.first_id, index))
        .collect();
    let mut stored = HashMap::new();
    for (partition, log) in (0u32..).zip(&readback.logs) {
        for (index, message) in (0u64..).zip(log) {
            findings.counts.stored += 1;
            if message.offset != index {
                findings.violation(format!(
                    "partition {partition}: the message at place {index} has offset {}",
                    message.offset
                ));
            }
            let known = calls
                .range(..=message.id)
                .next_back()
                .is_some_and(|(_, &call)| {
                    let call = &records.sends[call];
                    message.id < call.first_id + u128::from(call.count)
                });
            if !known && Source::issued(&records.sources, records.run_tag, message.id) {
                findings.counts.unsettled_stored += 1;
            } else if !known {
                findings.violation(format!(
                    "partition {partition} offset {}: id {:x} was never sent",
                    message.offset, message.id
                ));
            }
            if !message.payload_ok {
                findings.violation(format!(
                    "partition {partition} offset {}: id {:x} has another payload",
                    message.offset, message.id
                ));
            }
            if let Some((first_partition, first_offset)) =
                stored.insert(message.id, (partition, message.offset))
            {
                findings.violation(format!(
                    "id {:x} stored twice: partition {first_partition} offset {first_offset} \
                     and partition {partition} offset {}",
                    message.id, message.offset
                ));
            }
        }
    }
    stored
}

fn check_sends(records: &Records, stored: &HashMap<u128, (u32, u64)>, findings: &mut Findings) {
    for call in &records.sends {
        findings.counts.calls += 1;
        let name = &records.sources[call.source].name;
        let places: Vec<Option<(u32, u64)>> = (0..u128::from(call.count))
            .map(|n| stored.get(&(call.first_id + n)).copied())
            .collect();
        let found = places.iter().flatten().count();
        match &call.ended {
            Ended::Acked {
                partition,
                base_offset,
                replica,
            } => {
                findings.counts.acked.0 += 1;
                findings.counts.acked.1 += u64::from(call.count);
                findings.counts.no_offset += u64::from(base_offset.is_none());
                let base = base_offset.or(places.first().copied().flatten().map(|(_, o)| o));
                for (n, place) in (0u64..).zip(&places) {
                    let expected = base.map(|base| (*partition, base + n));
                    if *place != expected || place.is_none() {
                        findings.violation(format!(
                            "{name} call {} acknowledged at partition {partition} offset \
                             {base_offset:?} (called at {:.3} s, acknowledged at {:.3} s by \
                             replica {replica:?}): message {n} is at {place:?}",
                            call.seq,
                            call.started.as_secs_f64(),
                            call.ended_at.as_secs_f64()
                        ));
                        break;
                    }
                }
            }
            Ended::Unknown(_) | Ended::TimedOut(_) | Ended::CutShort(_) => {
                let whole = found == places.len() && contiguous(&places);
                let tally = match call.ended {
                    Ended::Unknown(_) => &mut findings.counts.unknown,
                    Ended::TimedOut(_) => &mut findings.counts.timed_out,
                    Ended::CutShort(_) | Ended::Acked { .. } | Ended::Failed(_) => {
                        &mut findings.counts.cut_short
                    }
                };
                if whole {
                    tally.0 += 1;
                } else if found == 0 {
                    tally.1 += 1;
                } else {
                    findings.violation(format!(
                        "{name} call {} ({:?}) is stored in part: {places:?}",
                        call.seq, call.ended
                    ));
                }
            }
            Ended::Failed(error) => {
                *findings.counts.failed.entry(error.clone()).or_default() += 1;
                if found > 0 {
                    findings.violation(format!(
                        "{name} call {} failed ({error}) but {found} of its {} messages are \
                         stored: {places:?}",
                        call.seq, call.count
                    ));
                }
            }
        }
    }
}

/// Whether the places are one partition's consecutive offsets.
fn contiguous(places: &[Option<(u32, u64)>]) -> bool {
    let mut expected = None;
    for place in places {
        let Some((partition, offset)) = place else {
            return false;
        };
        if let Some((p, o)) = expected
            && (p, o) != (*partition, *offset)
        {
            return false;
        }
        expected = Some((*partition, offset + 1));
    }
    true
}

fn check_order_and_keys(records: &Records, findings: &mut Findings) {
    let mut by_lane: BTreeMap<(usize, u32), Vec<(u64, u64)>> = BTreeMap::new();
    let mut keys: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for call in &records.sends {
        let Ended::Acked {
            partition,
            base_offset,
            ..
        } = &call.ended
        else {
            continue;
        };
        if let Some(offset) = base_offset {
            by_lane
                .entry((call.source, *partition))
                .or_default()
                .push((call.seq, *offset));
        }
        if let Kind::Key(key) = &call.kind {
            keys.entry(key).or_default().insert(*partition);
        }
    }
    for ((source, partition), mut calls) in by_lane {
        calls.sort_unstable();
        if let Some(pair) = calls.windows(2).find(|pair| pair[1].1 <= pair[0].1) {
            findings.violation(format!(
                "{}: call {} is stored at {} in partition {partition}, before call {} at {}",
                records.sources[source].name, pair[1].0, pair[1].1, pair[0].0, pair[0].1
            ));
        }
    }
    for (key, partitions) in keys {
        if partitions.len() > 1 {
            findings.violation(format!("key {key} went to partitions {partitions:?}"));
        }
    }
}

fn check_bounds(records: &Records, findings: &mut Findings) {
    let mut late = Vec::new();
    let mut longest = (Duration::ZERO, 0.0);
    let mut time = |name: &str, what: String, started: Duration, ended: Duration, bound| {
        let took = ended.saturating_sub(started);
        let share = took.as_secs_f64() / Duration::as_secs_f64(&bound);
        if took > longest.0 {
            longest = (took, share);
        }
        if took > bound {
            late.push(format!(
                "{name} {what} took {:.1} s (from {:.1} s), more than its {:.0} s bound",
                took.as_secs_f64(),
                started.as_secs_f64(),
                bound.as_secs_f64()
            ));
        }
    };
    for call in &records.sends {
        let name = &records.sources[call.source].name;
        time(
            name,
            format!("call {}", call.seq),
            call.started,
            call.ended_at,
            call.bound,
        );
    }
    for request in &records.requests {
        let name = &records.consumers[request.consumer].name;
        time(
            name,
            request.what.clone(),
            request.started,
            request.ended_at,
            request.bound,
        );
    }
    findings.counts.longest_call = longest;
    for text in late {
        findings.violation(text);
    }
}

#[cfg(test)]
mod tests {
    use super::contiguous;

    #[test]
    fn a_call_is_stored_whole_only_at_consecutive_offsets_of_one_partition() {
        assert!(contiguous(&[Some((1, 5)), Some((1, 6)), Some((1, 7))]));
        assert!(!contiguous(&[Some((1, 5)), Some((1, 7))]));
        assert!(!contiguous(&[Some((1, 5)), Some((2, 6))]));
        assert!(!contiguous(&[Some((1, 5)), None]));
    }
}

//! What the faults of a nemesis run cost: each fault's recovery (from the cluster whole
//! again to the first acknowledged send, and to one on every partition; the longest a
//! partition went without one), and the bounds per fault of a client's session moves and
//! reconnects.

use std::collections::BTreeMap;
use std::time::Duration;

use super::faults::Fault;
use super::ledger::{Ended, Records};

/// The recovery of one fault.
#[derive(Debug, Clone, Default)]
pub struct Recovery {
    /// From the cluster whole again to the first acknowledged send.
    pub first_ack: Option<Duration>,
    /// From the cluster whole again until every partition had an acknowledged send.
    pub every_partition: Option<Duration>,
    /// The longest a partition went without an acknowledged send from the fault to the
    /// end of its quiet gap, and which partition.
    pub longest_stall: (Duration, Option<u32>),
}

/// A client's session moves allowed over `faults`: a session moves only when its node is
/// unreachable, so at most once per node a fault takes out, and once more if the next
/// node it tries is the other one out (or answers every sign-in "not now" while it elects,
/// which the client leaves after 12 answers).
pub fn session_moves_bound(faults: &[Fault]) -> u64 {
    faults
        .iter()
        .map(|fault| 2 * fault.nodes_down() as u64)
        .sum()
}

/// A client's reconnects allowed over `faults`: a reconnect is a connection opened to a
/// node after a link to it was lost. The redial backoff tops out at 2 s (jittered down to
/// about 1 s), so while a node is out a client dials it about once a second; once it is
/// back, and while the cluster elects (up to 20 s), each of its links there (eight data
/// links, the session, a member link) may be lost and opened again once more.
pub fn reconnects_bound(faults: &[Fault]) -> u64 {
    faults
        .iter()
        .map(|fault| {
            let out = fault
                .whole_again
                .map_or(Duration::from_secs(60), |whole| whole - fault.started);
            fault.nodes_down() as u64 * (out.as_secs() + 20 + 10)
        })
        .sum()
}

/// Each fault's recovery; a fault after which no send was acknowledged is a violation.
pub fn recoveries(
    records: &Records,
    faults: &[Fault],
    run: Duration,
    violations: &mut Vec<String>,
) -> Vec<Recovery> {
    let mut recoveries = Vec::new();
    let mut acks: BTreeMap<u32, Vec<Duration>> = BTreeMap::new();
    for call in &records.sends {
        if let Ended::Acked { partition, .. } = &call.ended {
            acks.entry(*partition).or_default().push(call.ended_at);
        }
    }
    for times in acks.values_mut() {
        times.sort_unstable();
    }
    for fault in faults {
        let mut recovery = Recovery::default();
        if let Some(whole) = fault.whole_again {
            let firsts: Vec<Option<Duration>> = acks
                .values()
                .map(|times| first_from(times, whole))
                .collect();
            recovery.first_ack = firsts.iter().flatten().min().map(|at| *at - whole);
            recovery.every_partition = firsts
                .iter()
                .copied()
                .collect::<Option<Vec<_>>>()
                .and_then(|all| all.into_iter().max())
                .map(|at| at - whole);
            if !fault.unrecovered.is_empty() {
                violations.push(format!(
                    "server: fault {}: partitions {:?} took no send after the cluster was \
                     whole again (the server did not recover them: see its logs)",
                    fault.number, fault.unrecovered
                ));
            }
            if recovery.first_ack.is_none() {
                violations.push(format!(
                    "fault {}: no send acknowledged after the cluster was whole again",
                    fault.number
                ));
            }
        }
        let until = fault.quiet_until.min(run).max(fault.started);
        for (partition, times) in &acks {
            let stall = longest_gap(times, fault.started, until);
            if stall > recovery.longest_stall.0 {
                recovery.longest_stall = (stall, Some(*partition));
            }
        }
        recoveries.push(recovery);
    }
    recoveries
}

fn first_from(times: &[Duration], from: Duration) -> Option<Duration> {
    let at = times.partition_point(|time| *time < from);
    times.get(at).copied()
}

/// The longest stretch of `from..until` without a time of `times`.
fn longest_gap(times: &[Duration], from: Duration, until: Duration) -> Duration {
    let mut last = from;
    let mut longest = Duration::ZERO;
    for &time in times
        .iter()
        .filter(|time| **time >= from && **time <= until)
    {
        longest = longest.max(time - last);
        last = time;
    }
    longest.max(until.saturating_sub(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    #[test]
    fn the_longest_gap_counts_the_window_edges() {
        let times = [s(2), s(3), s(9)];
        assert_eq!(longest_gap(&times, s(0), s(10)), s(6));
        assert_eq!(longest_gap(&times, s(4), s(20)), s(11));
        assert_eq!(longest_gap(&[], s(1), s(5)), s(4));
        assert_eq!(first_from(&times, s(3)), Some(s(3)));
        assert_eq!(first_from(&times, s(10)), None);
    }
}

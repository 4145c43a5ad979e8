//! Primaries on the move: the faults of the `moving` and `crash` scenarios, planned from
//! the start of a run, played against the cluster while the load runs, and the recovery
//! time of every partition they hit.
//!
//! Recovery is measured the same way for every client: from the first refusal of a send to
//! the moved partition (or, in a crash, from the instant the node stopped) to the first
//! acknowledgement of a send to that partition after it.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::load::{OutageWindow, latency_histogram};
use super::timeline::Timeline;
use super::{NODES, PARTITIONS};

/// After a crash, acknowledgements this soon are replies the node wrote before it stopped
/// (still being read): the recovery of its partitions counts from the crash plus this.
/// Loopback delivers a written reply in microseconds; no partition of a stopped node can be
/// served again this soon (that takes a view change).
pub const IN_FLIGHT_GRACE: Duration = Duration::from_millis(1);

/// What the fault player does to the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// A controlled move: `partition`'s primary becomes `to`; the old primary refuses its
    /// sends from that instant.
    Move {
        partition: u32,
        from: usize,
        to: usize,
    },
    /// `node` stops without a word: its listener closes and its links are cut.
    /// `partitions` are the ones it led; `chained` the ones led by the node before it in
    /// the replica chain, whose commits now wait for the server's prepare retransmit
    /// (250 ms on the real server: `docs/real-cluster.md`), whatever the
    /// client does.
    Crash {
        node: usize,
        partitions: Vec<u32>,
        chained: Vec<u32>,
    },
    /// The view change after a crash: each partition moves to its new primary.
    ViewChange { moves: Vec<(u32, usize)> },
    /// The stopped node comes back (as a backup of everything it led).
    Restart { node: usize },
}

impl Fault {
    /// A short label for the chart and the JSON.
    pub fn label(&self) -> String {
        match self {
            Fault::Move {
                partition,
                from,
                to,
            } => format!("move p{partition} {from}->{to}"),
            Fault::Crash { node, .. } => format!("crash node {node}"),
            Fault::ViewChange { .. } => "view change".to_owned(),
            Fault::Restart { node } => format!("restart node {node}"),
        }
    }
}

/// A fault at an offset from the start of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timed {
    /// Planned or actual offset from the start of the run.
    pub at: Duration,
    /// The fault.
    pub fault: Fault,
}

/// The faults of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// In time order.
    pub faults: Vec<Timed>,
}

impl FaultPlan {
    /// `moving`: every `every` from the first one until the end of the run, the next
    /// partition (0, 1, 2, ...) moves to the node after its primary. `primaries[p]` is
    /// partition `p`'s primary at the start; it is updated as the plan moves them.
    pub fn moving(duration: Duration, every: Duration, primaries: &mut [usize]) -> Self {
        let mut faults = Vec::new();
        let mut at = every;
        let mut next = 0u32;
        while at < duration && !every.is_zero() && !primaries.is_empty() {
            let partition = next % primaries.len() as u32;
            let from = primaries[partition as usize];
            let to = (from + 1) % NODES;
            primaries[partition as usize] = to;
            faults.push(Timed {
                at,
                fault: Fault::Move {
                    partition,
                    from,
                    to,
                },
            });
            next += 1;
            at += every;
        }
        Self { faults }
    }

    /// `crash`: `node` stops a quarter into the run; `view_change` later (when that is
    /// not `None`: a real cluster runs its own) every partition it led moves to the next
    /// node; it comes back three quarters into the run.
    pub fn crash(
        duration: Duration,
        node: usize,
        view_change: Option<Duration>,
        primaries: &[usize],
    ) -> Self {
        let led_by = |leader: usize| -> Vec<u32> {
            (0..primaries.len() as u32)
                .filter(|&p| primaries[p as usize] == leader)
                .collect()
        };
        let partitions = led_by(node);
        let chained = led_by((node + NODES - 1) % NODES);
        let crash_at = duration / 4;
        let restart_at = duration * 3 / 4;
        let mut faults = vec![Timed {
            at: crash_at,
            fault: Fault::Crash {
                node,
                partitions: partitions.clone(),
                chained,
            },
        }];
        if let Some(delay) = view_change {
            let moves = partitions
                .iter()
                .map(|&p| (p, (node + 1) % NODES))
                .collect();
            faults.push(Timed {
                at: (crash_at + delay).min(restart_at),
                fault: Fault::ViewChange { moves },
            });
        }
        faults.push(Timed {
            at: restart_at,
            fault: Fault::Restart { node },
        });
        Self { faults }
    }

    /// The window during which a crashed node is down, and the partitions it led.
    pub fn outage(&self) -> Option<OutageWindow> {
        let (from, partitions) = self.faults.iter().find_map(|timed| {
            if let Fault::Crash { partitions, .. } = &timed.fault {
                Some((timed.at, partitions))
            } else {
                None
            }
        })?;
        let to = self
            .faults
            .iter()
            .find_map(|timed| matches!(timed.fault, Fault::Restart { .. }).then_some(timed.at))
            .unwrap_or(Duration::MAX);
        let mask = |partitions: &[u32]| {
            partitions
                .iter()
                .filter(|&&p| p < 64)
                .fold(0u64, |mask, &p| mask | (1 << p))
        };
        let slowed = self.faults.iter().find_map(|timed| {
            if let Fault::Crash { chained, .. } = &timed.fault {
                Some(mask(chained))
            } else {
                None
            }
        });
        Some(OutageWindow {
            from,
            to,
            affected: mask(partitions) | slowed.unwrap_or(0),
        })
    }
}

/// The node a crash on a real cluster stops: `preferred` when it leads a partition;
/// otherwise (an earlier crash moved its partitions away) the node other than `spared` (the
/// clients' first seed, which holds their sessions) that leads the most, so that every
/// client's run stops a node with partitions to move.
pub fn crash_target(preferred: usize, spared: usize, primaries: &[usize]) -> usize {
    let leads = |node: usize| primaries.iter().filter(|&&p| p == node).count();
    if leads(preferred) > 0 {
        return preferred;
    }
    (0..NODES)
        .filter(|&node| node != spared && leads(node) > 0)
        .max_by_key(|&node| (leads(node), std::cmp::Reverse(node)))
        .unwrap_or(preferred)
}

/// Plays `plan` from `epoch`: sleeps until each fault's instant, applies it with `apply`,
/// and returns each fault with the offset at which it was in force (after `apply`
/// returned: a crash is in force once the node's links are cut, and replies it wrote
/// before then are not the recovery's).
pub fn play(epoch: Instant, plan: &FaultPlan, mut apply: impl FnMut(&Fault)) -> Vec<Timed> {
    let mut happened = Vec::with_capacity(plan.faults.len());
    for timed in &plan.faults {
        let due = epoch + timed.at;
        let wait = due.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        apply(&timed.fault);
        let at = Instant::now().saturating_duration_since(epoch);
        happened.push(Timed {
            at,
            fault: timed.fault.clone(),
        });
    }
    happened
}

/// What the faults of a run cost one client.
#[derive(Debug)]
pub struct Recovery {
    /// The faults as they happened (offsets from the start of the run).
    pub faults: Vec<Timed>,
    /// One sample per partition a fault hit: from its first refusal (or the crash) to
    /// its next acknowledged send, µs.
    pub micros: Histogram<u64>,
    /// The same samples in fault order, for the chart.
    pub samples: Vec<Duration>,
    /// Partitions hit that never saw an acknowledged send afterwards.
    pub unrecovered: u64,
}

impl Recovery {
    /// Recovery times of every partition `faults` hit. `refusals` are the offsets of
    /// refused sends per partition id (empty where the cluster does not report them; a
    /// move then counts from the move itself).
    pub fn measure(faults: Vec<Timed>, refusals: &[(Duration, u32)], timeline: &Timeline) -> Self {
        let mut micros = latency_histogram();
        let mut samples = Vec::new();
        let mut unrecovered = 0;
        for (index, timed) in faults.iter().enumerate() {
            let starts: Vec<(u32, Duration)> = match &timed.fault {
                Fault::Move { partition, .. } => {
                    // The first refusal after the move, before the partition's next move.
                    let until = faults[index + 1..]
                        .iter()
                        .find(|later| matches!(later.fault, Fault::Move { partition: p, .. } if p == *partition))
                        .map_or(Duration::MAX, |later| later.at);
                    let first_refusal = refusals
                        .iter()
                        .filter(|(at, p)| p == partition && *at >= timed.at && *at < until)
                        .map(|(at, _)| *at)
                        .min();
                    vec![(*partition, first_refusal.unwrap_or(timed.at))]
                }
                Fault::Crash { partitions, .. } => partitions
                    .iter()
                    .map(|&p| (p, timed.at + IN_FLIGHT_GRACE))
                    .collect(),
                Fault::ViewChange { .. } | Fault::Restart { .. } => Vec::new(),
            };
            for (partition, start) in starts {
                match timeline.first_ack_from(partition, start) {
                    Some(acked) => {
                        let took = acked.saturating_sub(start);
                        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
                        micros.saturating_record(us.max(1));
                        samples.push(took);
                    }
                    None => unrecovered += 1,
                }
            }
        }
        Self {
            faults,
            micros,
            samples,
            unrecovered,
        }
    }

    /// A quantile of the recovery times in ms (0 with no sample).
    pub fn ms(&self, quantile: f64) -> f64 {
        if self.micros.is_empty() {
            return 0.0;
        }
        self.micros.value_at_quantile(quantile) as f64 / 1000.0
    }

    /// The longest recovery in ms.
    pub fn max_ms(&self) -> f64 {
        self.micros.max() as f64 / 1000.0
    }
}

/// Partition `p`'s primary in the `split` layout every failover scenario starts from.
pub fn split_layout() -> Vec<usize> {
    (0..PARTITIONS as usize).map(|p| p % NODES).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn moving_moves_the_next_partition_every_period_to_the_next_node() {
        let mut primaries = split_layout();
        let plan = FaultPlan::moving(Duration::from_millis(7_500), S, &mut primaries);
        assert_eq!(plan.faults.len(), 7, "at 1 s .. 7 s");
        assert_eq!(
            plan.faults[0].fault,
            Fault::Move {
                partition: 0,
                from: 0,
                to: 1
            }
        );
        assert_eq!(
            plan.faults[6].fault,
            Fault::Move {
                partition: 0,
                from: 1,
                to: 2
            },
            "the seventh move is partition 0's second"
        );
        assert_eq!(primaries, vec![2, 2, 0, 1, 2, 0]);
        assert!(plan.outage().is_none());
    }

    #[test]
    fn a_real_crash_stops_a_node_that_leads_partitions_and_spares_the_first_seed() {
        assert_eq!(crash_target(1, 0, &[2, 2, 1, 1, 0, 0]), 1);
        assert_eq!(crash_target(1, 0, &[2, 2, 2, 2, 0, 0]), 2);
        assert_eq!(
            crash_target(1, 0, &[0, 0, 0, 0, 0, 0]),
            1,
            "nothing to move: as asked"
        );
        assert_eq!(crash_target(2, 0, &[1, 0, 0, 0, 0, 0]), 1);
    }

    #[test]
    fn crash_plans_the_outage_of_the_partitions_the_node_led() {
        let plan = FaultPlan::crash(
            Duration::from_secs(8),
            1,
            Some(Duration::from_millis(500)),
            &split_layout(),
        );
        let outage = plan.outage().unwrap();
        assert_eq!(outage.from, Duration::from_secs(2));
        assert_eq!(outage.to, Duration::from_secs(6));
        assert_eq!(
            outage.affected, 0b01_1011,
            "partitions 1 and 4 (led by node 1), 0 and 3 (their commits wait for node 1)"
        );
        assert_eq!(
            plan.faults[1],
            Timed {
                at: Duration::from_millis(2_500),
                fault: Fault::ViewChange {
                    moves: vec![(1, 2), (4, 2)]
                }
            }
        );
    }

    #[test]
    fn recovery_counts_from_the_first_refusal_after_the_move_to_the_next_ack() {
        let mut timeline = Timeline::default();
        let ms = Duration::from_millis;
        timeline.record_ack(ms(900), 1, Some(0));
        timeline.record_ack(ms(1_004), 1, Some(0));
        timeline.record_ack(ms(1_500), 1, Some(3));
        let faults = vec![
            Timed {
                at: ms(1_000),
                fault: Fault::Move {
                    partition: 0,
                    from: 0,
                    to: 1,
                },
            },
            Timed {
                at: ms(1_200),
                fault: Fault::Crash {
                    node: 2,
                    partitions: vec![3, 5],
                    chained: vec![1],
                },
            },
        ];
        // A refusal of partition 0 before the move is not the move's.
        let refusals = [(ms(950), 0), (ms(1_001), 0), (ms(1_002), 0)];
        let recovery = Recovery::measure(faults, &refusals, &timeline);
        // The crash counts from 1 ms after the cut (replies already written arrive first).
        assert_eq!(recovery.samples, vec![ms(3), ms(299)]);
        assert_eq!(
            recovery.unrecovered, 1,
            "partition 5 never acknowledged again"
        );
    }
}

//! The seeded fault schedule: cut connections, stopped and restarted nodes, paused and
//! resumed nodes, partition primaries and the metadata leader moving, slow nodes, and the
//! routing commands switched off and on. It is drawn up front from the seed; faults that pick "some connection" pick
//! by a drawn number at the moment they strike, so the schedule stays a pure function of
//! the seed.

use std::collections::VecDeque;
use std::time::Duration;

use super::rng::SimRng;
use super::scenario::{NODES, PARTITIONS, Scenario};
use crate::cluster::adversary::Misbehaviour;

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Cut one established connection, chosen by `pick` among those up at that moment.
    CutLink {
        /// Chooses the connection.
        pick: u64,
    },
    /// Stop a node: its connections are cut and connects to it are refused.
    StopNode(usize),
    /// Start a stopped node again.
    RestartNode(usize),
    /// A partition-only election.
    MovePrimary {
        /// The partition.
        partition: u32,
        /// Its new primary.
        node: usize,
    },
    /// A metadata-only election.
    MoveLeader(usize),
    /// Hold every reply of a node this long (`Duration::ZERO`: fast again).
    SlowNode {
        /// The node.
        node: usize,
        /// The extra delay of each reply.
        delay: Duration,
    },
    /// Serve (true) or refuse with `InvalidCommand` (false) the routing commands.
    RoutingCommands(bool),
    /// A node misbehaves for a while (see `adversary.rs`).
    Misbehave {
        /// The node.
        node: usize,
        /// What it does.
        behaviour: Misbehaviour,
        /// For how long (past the end of the run: for ever).
        lasts: Duration,
    },
    /// A reply to a request never sent, on one established connection chosen by `pick`.
    StrayReply {
        /// Chooses the connection (and the stray's request number).
        pick: u64,
    },
    /// Pause a node (`pauses.rs`): silent, its connections up, what it is sent held.
    PauseNode(usize),
    /// Resume a paused node: it reads and answers what it was sent meanwhile.
    ResumeNode(usize),
    /// The other nodes elect without a paused one: its partitions and, if it leads the
    /// metadata, the metadata move to `to`.
    ElectAway {
        /// The paused node.
        from: usize,
        /// The node elected in its place.
        to: usize,
    },
}

/// How long a pause lasts before the other nodes elect in the paused node's place: a
/// little past the routers' attempt timeout (400 ms), as on the real cluster a pause of
/// several times its 5 s sets off an election and one under it does not.
const ELECTION_AFTER: Duration = Duration::from_millis(500);

/// Faults in time order.
#[derive(Debug)]
pub struct FaultSchedule {
    faults: VecDeque<(Duration, Fault)>,
}

impl FaultSchedule {
    /// The schedule of `scenario`, striking between 0 and `until`; every stopped node is
    /// restarted and every slow node made fast again before `until` plus a second.
    pub fn generate(scenario: &Scenario, until: Duration) -> Self {
        let mut rng = SimRng::new(scenario.seed, 0xFA17_5C4E);
        let mut faults = Vec::new();
        let Some((gap_min, gap_max)) = scenario.fault_gap() else {
            return Self {
                faults: VecDeque::new(),
            };
        };
        // One node down at a time: a majority of the cluster always runs.
        let mut node_down_until = Duration::ZERO;
        let mut slow_until = Duration::ZERO;
        let mut routing_off_until = Duration::ZERO;
        let mut at = rng.duration(gap_min, gap_max);
        while at < until {
            let node = rng.index(NODES);
            match rng.range(0, 99) {
                0..=29 => faults.push((
                    at,
                    Fault::CutLink {
                        pick: rng.next_u64(),
                    },
                )),
                30..=44 if at >= node_down_until => {
                    let downtime =
                        rng.duration(Duration::from_millis(20), Duration::from_millis(900));
                    faults.push((at, Fault::StopNode(node)));
                    faults.push((at + downtime, Fault::RestartNode(node)));
                    node_down_until = at + downtime;
                }
                45..=69 => faults.push((
                    at,
                    Fault::MovePrimary {
                        partition: rng.range(0, u64::from(PARTITIONS) - 1) as u32,
                        node,
                    },
                )),
                70..=79 => faults.push((at, Fault::MoveLeader(node))),
                80..=89 if at >= slow_until => {
                    let delay = rng.duration(Duration::from_millis(50), Duration::from_millis(700));
                    let lasts =
                        rng.duration(Duration::from_millis(100), Duration::from_millis(900));
                    faults.push((at, Fault::SlowNode { node, delay }));
                    faults.push((
                        at + lasts,
                        Fault::SlowNode {
                            node,
                            delay: Duration::ZERO,
                        },
                    ));
                    slow_until = at + lasts;
                }
                90..=99 if scenario.toggle_routing_commands && at >= routing_off_until => {
                    let lasts = rng.duration(Duration::from_millis(50), Duration::from_millis(800));
                    faults.push((at, Fault::RoutingCommands(false)));
                    faults.push((at + lasts, Fault::RoutingCommands(true)));
                    routing_off_until = at + lasts;
                }
                _ => {}
            }
            at += rng.duration(gap_min, gap_max);
        }
        adversarial_faults(scenario, until, &mut faults);
        pause_faults(scenario, until, &mut faults);
        // A stable sort keeps a stop before a restart scheduled for the same instant.
        faults.sort_by_key(|(at, _)| *at);
        Self {
            faults: faults.into(),
        }
    }

    /// When the next fault strikes.
    pub fn next_at(&self) -> Option<Duration> {
        self.faults.front().map(|(at, _)| *at)
    }

    /// The next fault if it is due by `now`.
    pub fn pop_due(&mut self, now: Duration) -> Option<Fault> {
        if self.next_at()? <= now {
            self.faults.pop_front().map(|(_, fault)| fault)
        } else {
            None
        }
    }

    /// Faults still to come.
    pub fn remaining(&self) -> usize {
        self.faults.len()
    }
}

/// The adversarial faults, drawn from a stream of their own so that the honest schedule of
/// a seed stays what it was: in about half the seeds, a few misbehaving nodes (one of them
/// at a time, each for a while, and now and then for the rest of the run) and stray
/// replies.
fn adversarial_faults(scenario: &Scenario, until: Duration, faults: &mut Vec<(Duration, Fault)>) {
    let mut rng = SimRng::new(scenario.seed, 0xAD7E_5A41);
    if scenario.fault_gap().is_none() || !rng.chance(50) {
        return;
    }
    let mut at = rng.duration(Duration::from_millis(100), Duration::from_millis(800));
    let mut busy_until = Duration::ZERO;
    while at < until {
        match rng.range(0, 9) {
            0..=2 => faults.push((
                at,
                Fault::StrayReply {
                    pick: rng.next_u64(),
                },
            )),
            kind if at >= busy_until => {
                let behaviour = match kind {
                    3 | 4 => Misbehaviour::NotCommitted,
                    5 | 6 => Misbehaviour::LyingRoutes,
                    7 => Misbehaviour::DuplicateReplies,
                    _ => Misbehaviour::Garbage,
                };
                let lasts = if rng.chance(5) {
                    // For ever: past any run's horizon.
                    Duration::from_secs(3_600)
                } else {
                    rng.duration(Duration::from_millis(20), Duration::from_millis(1_500))
                };
                faults.push((
                    at,
                    Fault::Misbehave {
                        node: rng.index(NODES),
                        behaviour,
                        lasts,
                    },
                ));
                busy_until = at + lasts.min(Duration::from_secs(2));
            }
            _ => {}
        }
        at += rng.duration(Duration::from_millis(100), Duration::from_millis(900));
    }
}

/// Pauses, drawn from a stream of their own so that the other faults of a seed stay what
/// they were: in about half the seeds with faults, pauses one after another, mostly short
/// (some over before any link gives up, some past the election), now and then past the
/// routers' request timeout. They may overlap a stopped node, as the real nemesis's
/// restart while paused does; a stop of the paused node ends its pause.
fn pause_faults(scenario: &Scenario, until: Duration, faults: &mut Vec<(Duration, Fault)>) {
    let mut rng = SimRng::new(scenario.seed, 0x9A05_ED00);
    if scenario.fault_gap().is_none() || !rng.chance(50) {
        return;
    }
    let mut at = rng.duration(Duration::from_millis(100), Duration::from_millis(1_000));
    while at < until {
        let node = rng.index(NODES);
        let lasts = if rng.chance(15) {
            rng.duration(Duration::from_millis(3_000), Duration::from_millis(5_000))
        } else {
            rng.duration(Duration::from_millis(50), Duration::from_millis(1_200))
        };
        faults.push((at, Fault::PauseNode(node)));
        if lasts > ELECTION_AFTER {
            let to = (node + 1 + rng.index(NODES - 1)) % NODES;
            faults.push((at + ELECTION_AFTER, Fault::ElectAway { from: node, to }));
        }
        faults.push((at + lasts, Fault::ResumeNode(node)));
        at += lasts + rng.duration(Duration::from_millis(200), Duration::from_millis(1_500));
    }
}

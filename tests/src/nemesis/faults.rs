//! The faults of a nemesis run, drawn from the run's seed one at a time by the injector
//! (`injector.rs`), each followed by a quiet gap in which the cluster recovers (the real
//! server elects about 20 s after a node dies and a restarted node rejoins in about 15 s:
//! `real_cluster::ELECTION_WAIT`, `REJOIN_WAIT`). Three kinds:
//! - **kill**: SIGKILL a node, start it again 3 to 40 s later;
//! - **pause**: SIGSTOP a node for 1 to 15 s, then SIGCONT (a node frozen, not dead: its
//!   sockets stay open and take connections it does not answer);
//! - **restart while paused**: pause one node, kill and start another while it is paused,
//!   resume the first as soon as the second is up (two nodes out only for the length of a
//!   restart, never past 15 s: three nodes need two for a quorum).
//!
//! The target is drawn by role: the node that holds the main clients' sessions (the
//! coordinator), the metadata leader (as the cluster's metadata names it), the node that
//! leads the most partitions (by the latest receipts), or any node. Every action is logged
//! with its time from the start of the run.

use std::time::Duration;

use super::ledger::Ledger;
use crate::real_cluster::{ELECTION_WAIT, REJOIN_WAIT, RealCluster};

/// No fault in the first seconds: the clients learn their routes.
pub const WARM_UP: Duration = Duration::from_secs(10);
/// Longest a node stays killed.
pub const KILL_MAX: Duration = Duration::from_secs(40);
/// Longest a node stays paused.
pub const PAUSE_MAX: Duration = Duration::from_secs(15);
/// What a debug server takes to open its port, for planning only.
const START_ESTIMATE: Duration = Duration::from_secs(5);
/// Starts of a node tried before the run gives up on it.
pub const START_TRIES: usize = 3;

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// SIGKILL, then a start.
    Kill,
    /// SIGSTOP, then SIGCONT.
    Pause,
    /// One node paused while another is killed and started.
    RestartWhilePaused,
}

impl FaultKind {
    /// Its name in the log and the report.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::RestartWhilePaused => "restart while paused",
        }
    }

    /// The run time a fault of this kind needs at least, quiet gap included.
    pub fn needs(self) -> Duration {
        match self {
            FaultKind::Kill => Duration::from_secs(3) + START_ESTIMATE + REJOIN_WAIT + SECOND * 5,
            FaultKind::Pause => SECOND * 12,
            FaultKind::RestartWhilePaused => START_ESTIMATE + ELECTION_WAIT + SECOND * 10,
        }
    }
}

pub const SECOND: Duration = Duration::from_secs(1);

/// Which node a fault is aimed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The node of the main clients' sessions.
    Coordinator,
    /// The metadata leader.
    MetadataLeader,
    /// The node that leads the most partitions.
    Primary,
    /// Any node.
    Any,
}

impl Role {
    /// Its name in the log and the report.
    pub fn name(self) -> &'static str {
        match self {
            Role::Coordinator => "coordinator",
            Role::MetadataLeader => "metadata leader",
            Role::Primary => "primary",
            Role::Any => "any",
        }
    }
}

/// One fault as it happened.
#[derive(Debug, Clone)]
pub struct Fault {
    /// 1, 2, ...
    pub number: usize,
    /// Its kind.
    pub kind: FaultKind,
    /// The role it was aimed at.
    pub role: Role,
    /// The node killed or paused (for a restart while paused: the paused one).
    pub node: usize,
    /// For a restart while paused: the node restarted.
    pub restarted: Option<usize>,
    /// What the target held when it was hit.
    pub held: String,
    /// When it began, from the start of the run.
    pub started: Duration,
    /// How long the node was to stay killed or paused.
    pub hold: Duration,
    /// When every node was running again (`None`: a node did not come back).
    pub whole_again: Option<Duration>,
    /// When the quiet gap after it ended.
    pub quiet_until: Duration,
    /// Every action, with its time.
    pub events: Vec<(Duration, String)>,
    /// Partitions that took no send from the cluster whole again to the end of the quiet
    /// gap: the server did not recover them, and the nemesis stopped.
    pub unrecovered: Vec<u32>,
}

impl Fault {
    /// The nodes it took out.
    pub fn nodes_down(&self) -> usize {
        1 + usize::from(self.restarted.is_some())
    }
}

/// The roles as known when a fault is drawn.
#[derive(Debug, Clone, Default)]
pub struct Roles {
    /// Where the main clients' sessions are believed to be.
    pub coordinator: Option<usize>,
    /// The metadata leader, as the cluster's metadata names it.
    pub leader: Option<usize>,
    /// Per node, the partitions it led by the latest receipts.
    pub led: Vec<Vec<u32>>,
}

/// What `node` held, in words.
pub fn held(node: usize, roles: &Roles) -> String {
    let mut held = Vec::new();
    if roles.coordinator == Some(node) {
        held.push("coordinator".to_owned());
    }
    if roles.leader == Some(node) {
        held.push("metadata leader".to_owned());
    }
    match roles.led.get(node) {
        Some(partitions) if !partitions.is_empty() => {
            held.push(format!("primary of {partitions:?}"));
        }
        _ => {}
    }
    if held.is_empty() {
        "no role".to_owned()
    } else {
        held.join(", ")
    }
}

/// Starts `node`, trying again a few times (a real node may fail to come back, as one did
/// once with a corrupt journal after a kill); whether it came up, and what happened.
pub fn start(
    cluster: &RealCluster,
    ledger: &Ledger,
    node: usize,
) -> (bool, Vec<(Duration, String)>) {
    let mut events = Vec::new();
    for _ in 0..START_TRIES {
        let at = ledger.now();
        let result = cluster.try_ctl("start", node);
        let took = ledger.now().saturating_sub(at).as_secs_f64();
        match result {
            Ok(()) => {
                events.push((at, format!("start node {node} (up in {took:.2} s)")));
                return (true, events);
            }
            Err(error) => {
                let text = format!("start node {node} FAILED after {took:.2} s: {error}");
                events.push((at, text));
                std::thread::sleep(SECOND * 5);
            }
        }
    }
    (false, events)
}

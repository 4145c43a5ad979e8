//! The nemesis's injector: faults one at a time until the run's end, each drawn from the
//! seed (its kind, its role, how long it holds) and aimed at the node holding the role
//! when it is drawn (see `faults.rs`). Every action is printed and kept with its time.

use std::time::{Duration, Instant};

use iggy_route_core::client::Call;

use super::faults::{
    Fault, FaultKind, KILL_MAX, PAUSE_MAX, Role, Roles, SECOND, START_TRIES, WARM_UP, held, start,
};
use super::ledger::Ledger;
use crate::real_cluster::{ELECTION_WAIT, REJOIN_WAIT, RealCluster};
use crate::scripted::clients::TestClient;
use crate::sim::rng::SimRng;

/// Runs faults until the run's end; see the module documentation.
#[derive(Debug)]
pub struct Nemesis<'a> {
    cluster: &'a RealCluster,
    ledger: &'a Ledger,
    rng: SimRng,
    run: Duration,
    /// The topic's partitions.
    partitions: u32,
    /// A client of its own, to read the cluster's metadata.
    observer: Option<TestClient>,
    /// The seeds of the main clients, in order: a session moves to the next one.
    session_order: Vec<usize>,
    /// Where the main clients' sessions are believed to be, and the moves seen so far.
    session: (usize, u64),
    faults: Vec<Fault>,
}

impl<'a> Nemesis<'a> {
    /// A nemesis for a run of `run` from the ledger's start, whose main clients' sessions
    /// started on `coordinator`.
    pub fn new(
        cluster: &'a RealCluster,
        ledger: &'a Ledger,
        seed: u64,
        (run, partitions): (Duration, u32),
        coordinator: usize,
        observer: Option<TestClient>,
    ) -> Self {
        let nodes = cluster.nodes.len();
        let mut session_order = vec![coordinator];
        session_order.extend((0..nodes).filter(|node| *node != coordinator));
        Self {
            cluster,
            ledger,
            rng: SimRng::new(seed, 7),
            run,
            partitions,
            observer,
            session_order,
            session: (coordinator, 0),
            faults: Vec::new(),
        }
    }

    /// Injects faults until the run's end; `moves` reads the main client's session moves.
    /// Returns the faults, or stops early (with what it did) when a node did not come back.
    pub fn run(mut self, moves: &dyn Fn() -> u64) -> Vec<Fault> {
        self.sleep_until(WARM_UP);
        while let Some(kind) = self.draw_kind() {
            let last_down: Vec<usize> = self.faults.last().map_or_else(Vec::new, |fault| {
                std::iter::once(fault.node).chain(fault.restarted).collect()
            });
            self.follow_session(moves(), &last_down);
            let fault = self.inject(kind);
            let whole = fault.whole_again;
            let quiet_until = fault.quiet_until;
            self.faults.push(fault);
            let Some(whole) = whole else {
                break;
            };
            self.sleep_until(quiet_until.min(self.run));
            // Faults on a cluster that did not recover from the last one would test the
            // server's wreck, not the clients: stop, and let the load run on.
            if quiet_until <= self.run && !self.recovered(whole) {
                // The load stops now too: sends to partitions that take none would only
                // pile up in the producers' buffers.
                if let Some(observer) = self.observer.take() {
                    observer.shutdown();
                }
                return self.faults;
            }
        }
        self.sleep_until(self.run);
        if let Some(observer) = self.observer.take() {
            observer.shutdown();
        }
        self.faults
    }

    /// Whether every partition took a send since the cluster was whole again at `whole`;
    /// if not, the last fault says which did not.
    fn recovered(&mut self, whole: Duration) -> bool {
        let silent = self.ledger.silent_since(whole, self.partitions);
        if silent.is_empty() {
            return true;
        }
        if let Some(mut fault) = self.faults.pop() {
            let text = format!(
                "fault {}: partitions {silent:?} took no send since the cluster was whole \
                 again: the server did not recover them; no more faults",
                fault.number
            );
            self.log(&mut fault, text);
            fault.unrecovered = silent;
            self.faults.push(fault);
        }
        false
    }

    /// A kind that fits in what is left of the run, or `None` when none does.
    fn draw_kind(&mut self) -> Option<FaultKind> {
        let left = self.run.saturating_sub(self.ledger.now());
        let weighted = [
            (FaultKind::Kill, 40),
            (FaultKind::Pause, 35),
            (FaultKind::RestartWhilePaused, 25),
        ];
        let roll = self.rng.range(0, 99);
        let mut sum = 0;
        let drawn = weighted
            .iter()
            .find(|(_, weight)| {
                sum += weight;
                roll < sum
            })
            .map_or(FaultKind::Pause, |(kind, _)| *kind);
        [drawn, FaultKind::Pause]
            .into_iter()
            .find(|kind| kind.needs() <= left)
    }

    fn inject(&mut self, kind: FaultKind) -> Fault {
        let roles = self.roles();
        let role = [
            Role::Coordinator,
            Role::MetadataLeader,
            Role::Primary,
            Role::Any,
        ][self.rng.index(4)];
        let nodes = self.cluster.nodes.len();
        let aimed = match role {
            Role::Coordinator => roles.coordinator,
            Role::MetadataLeader => roles.leader,
            Role::Primary => (0..nodes).max_by_key(|node| roles.led.get(*node).map(Vec::len)),
            Role::Any => None,
        }
        .unwrap_or_else(|| self.rng.index(nodes));
        let other = (aimed + 1 + self.rng.index(nodes - 1)) % nodes;
        // A restart while paused aims its role at either of its two nodes.
        let (node, restarted) = match kind {
            FaultKind::RestartWhilePaused if self.rng.chance(50) => (other, Some(aimed)),
            FaultKind::RestartWhilePaused => (aimed, Some(other)),
            FaultKind::Kill | FaultKind::Pause => (aimed, None),
        };
        let left = self.run.saturating_sub(self.ledger.now());
        let hold = match kind {
            FaultKind::Kill => {
                let most = KILL_MAX.min(left.saturating_sub(kind.needs() - SECOND * 3));
                self.rng.duration(SECOND * 3, most.max(SECOND * 3))
            }
            FaultKind::Pause => {
                let most = PAUSE_MAX.min(left.saturating_sub(ELECTION_WAIT));
                self.rng.duration(SECOND, most.max(SECOND))
            }
            FaultKind::RestartWhilePaused => self.rng.duration(SECOND / 2, SECOND * 2),
        };
        let mut fault = Fault {
            number: self.faults.len() + 1,
            kind,
            role,
            node,
            restarted,
            held: held(node, &roles),
            started: self.ledger.now(),
            hold,
            whole_again: None,
            quiet_until: Duration::ZERO,
            events: Vec::new(),
            unrecovered: Vec::new(),
        };
        let target = restarted.map_or_else(String::new, |r| {
            format!(", node {r} restarted ({})", held(r, &roles))
        });
        let text = format!(
            "fault {}: {} of node {node} ({}), aimed at the {}{target}; hold {:.1} s",
            fault.number,
            kind.name(),
            fault.held,
            role.name(),
            hold.as_secs_f64()
        );
        self.log(&mut fault, text);
        let whole = match kind {
            FaultKind::Kill => self.kill(&mut fault),
            FaultKind::Pause => self.pause(&mut fault),
            FaultKind::RestartWhilePaused => self.restart_while_paused(&mut fault),
        };
        let now = self.ledger.now();
        fault.whole_again = whole.then_some(now);
        // Long enough for the elections the fault set off and for a restarted node to
        // rejoin; a short pause sets off none.
        let quiet = match kind {
            FaultKind::Kill => REJOIN_WAIT + self.rng.duration(SECOND * 5, SECOND * 15),
            FaultKind::Pause if hold < SECOND * 5 => {
                SECOND * 10 + self.rng.duration(Duration::ZERO, SECOND * 10)
            }
            FaultKind::Pause => ELECTION_WAIT + self.rng.duration(Duration::ZERO, SECOND * 10),
            FaultKind::RestartWhilePaused => {
                ELECTION_WAIT + self.rng.duration(SECOND * 5, SECOND * 15)
            }
        };
        fault.quiet_until = now + quiet;
        let text = if whole {
            format!("fault {}: cluster whole again", fault.number)
        } else {
            format!("fault {}: a node did not come back", fault.number)
        };
        self.log(&mut fault, text);
        fault
    }

    fn kill(&mut self, fault: &mut Fault) -> bool {
        self.ctl(fault, "kill", fault.node);
        std::thread::sleep(fault.hold);
        let (ok, events) = start(self.cluster, self.ledger, fault.node);
        self.log_all(fault, events);
        ok
    }

    fn pause(&mut self, fault: &mut Fault) -> bool {
        if !self.ctl(fault, "pause", fault.node) {
            return true;
        }
        std::thread::sleep(fault.hold);
        (0..START_TRIES).any(|_| self.ctl(fault, "resume", fault.node))
    }

    fn restart_while_paused(&mut self, fault: &mut Fault) -> bool {
        let Some(restarted) = fault.restarted else {
            return self.pause(fault);
        };
        let paused_at = Instant::now();
        let paused = self.ctl(fault, "pause", fault.node);
        std::thread::sleep(fault.hold);
        self.ctl(fault, "kill", restarted);
        let (cluster, ledger) = (self.cluster, self.ledger);
        let (ok, events) = std::thread::scope(|scope| {
            let starting = scope.spawn(|| start(cluster, ledger, restarted));
            // Resume as soon as the other node is up, and never later than the longest
            // pause: two nodes out of three must not stay out.
            while !starting.is_finished() && paused_at.elapsed() < PAUSE_MAX {
                std::thread::sleep(Duration::from_millis(20));
            }
            if paused {
                self.ctl(fault, "resume", fault.node);
            }
            starting
                .join()
                .unwrap_or_else(|_| (false, vec![(ledger.now(), "start panicked".to_owned())]))
        });
        self.log_all(fault, events);
        ok
    }

    /// Runs the control command and logs it; whether it succeeded.
    /// Logged at the instant it was begun, with how long the command took.
    fn ctl(&self, fault: &mut Fault, action: &str, node: usize) -> bool {
        let at = self.ledger.now();
        let result = self.cluster.try_ctl(action, node);
        let took = self.ledger.now().saturating_sub(at).as_secs_f64();
        let text = match &result {
            Ok(()) => format!("{action} node {node} (done in {took:.2} s)"),
            Err(error) => format!("{action} node {node} FAILED after {took:.2} s: {error}"),
        };
        self.log_all(fault, vec![(at, text)]);
        result.is_ok()
    }

    fn log(&self, fault: &mut Fault, text: String) {
        let at = self.ledger.now();
        println!("nemesis [{:>7.2} s] {text}", at.as_secs_f64());
        fault.events.push((at, text));
    }

    fn log_all(&self, fault: &mut Fault, events: Vec<(Duration, String)>) {
        for (at, text) in events {
            println!("nemesis [{:>7.2} s] {text}", at.as_secs_f64());
            fault.events.push((at, text));
        }
    }

    fn sleep_until(&self, at: Duration) {
        std::thread::sleep(at.saturating_sub(self.ledger.now()));
    }

    /// Follows the main client's session through the moves seen since the last fault:
    /// each one goes to the next seed, past the nodes that fault took out.
    fn follow_session(&mut self, moves: u64, last_down: &[usize]) {
        let (mut node, seen) = self.session;
        for _ in seen..moves {
            let at = self
                .session_order
                .iter()
                .position(|n| *n == node)
                .unwrap_or(0);
            let count = self.session_order.len();
            node = (1..=count)
                .map(|step| self.session_order[(at + step) % count])
                .find(|candidate| !last_down.contains(candidate))
                .unwrap_or(node);
        }
        self.session = (node, moves.max(seen));
    }

    fn roles(&self) -> Roles {
        let mut led = vec![Vec::new(); self.cluster.nodes.len()];
        for (partition, replica) in self.ledger.primaries() {
            if let Some(partitions) = led.get_mut(replica as usize) {
                partitions.push(partition);
            }
        }
        Roles {
            coordinator: Some(self.session.0),
            leader: self.metadata_leader(),
            led,
        }
    }

    /// The metadata leader as the cluster's metadata names it, if the observer could read
    /// it.
    fn metadata_leader(&self) -> Option<usize> {
        let observer = self.observer.as_ref()?;
        let Call { request, reply } = Call::get_cluster_metadata();
        let metadata = reply.extract(observer.request(request).ok()?).ok()?;
        let leader = metadata.leader()?;
        let address = format!("{}:{}", leader.ip, leader.tcp_port);
        self.cluster.nodes.iter().position(|node| *node == address)
    }
}

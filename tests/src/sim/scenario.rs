//! What one seed runs: how many routers, how they are configured, how the network behaves
//! and how rough the faults are. Every knob is drawn from the seed, so a seed names one
//! scenario and `SIM_SEED=n` replays it.

use std::time::Duration;

use iggy_route_core::{Config, Credentials, DeliveryGuarantee};

use super::network::NetworkConfig;
use super::nodes::node_addr;
use super::rng::SimRng;

/// Nodes in the simulated cluster.
pub const NODES: usize = 3;
/// Partitions of the workload's topic.
pub const PARTITIONS: u32 = 4;

/// How often faults strike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultRate {
    /// No faults: the routers must simply work.
    Calm,
    /// A fault every few hundred milliseconds.
    Normal,
    /// A fault every few tens of milliseconds.
    Storm,
}

/// The knobs of one seed.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The run seed.
    pub seed: u64,
    /// Routers (clients) in the run.
    pub routers: usize,
    /// Whether the cluster starts with the routing commands (103 and friends).
    pub routing_commands: bool,
    /// May the fault schedule switch the routing commands off and on.
    pub toggle_routing_commands: bool,
    /// What the routers do with a send whose link closed in flight.
    pub delivery: DeliveryGuarantee,
    /// Small queue bounds, so that `QueueFull` and the bound checks are exercised.
    pub tight_queues: bool,
    /// Data links per node in the routers' pools.
    pub data_links_per_node: usize,
    /// Fault intensity.
    pub fault_rate: FaultRate,
    /// Latencies.
    pub network: NetworkConfig,
    /// How long the workload keeps submitting.
    pub workload_span: Duration,
    /// Most messages a merged frame carries (1: no coalescing).
    pub coalesce_max_messages: u32,
    /// How long a partition's first send waits for more to merge with.
    pub linger: Duration,
    /// Whether the routers act on the view a refusal carries.
    pub follow_refusal_view: bool,
    /// Whether balanced sends pass over stalled partitions and long queues.
    pub balanced_skips_stalled: bool,
    /// The cluster's rebalancing timeout: how long a partition a join revoked from a member
    /// that had it in flight waits for that member to commit it before it moves anyway.
    pub rebalancing_timeout: Duration,
}

impl Scenario {
    /// The scenario of `seed`.
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = SimRng::new(seed, 0x5CE7_A210);
        let routing_commands = !rng.chance(25);
        let fault_rate = match rng.range(0, 9) {
            0 => FaultRate::Calm,
            1..=6 => FaultRate::Normal,
            _ => FaultRate::Storm,
        };
        let latency_max = rng.duration(Duration::from_millis(1), Duration::from_millis(15));
        // Coalescing draws from its own stream, so the knobs above stay what they were for
        // every seed.
        let mut merging = SimRng::new(seed, 0xC0A1_E5CE);
        let coalesce_max_messages = match merging.range(0, 9) {
            0 | 1 => 1,
            2..=5 => merging.range(2, 12) as u32,
            _ => 1_000,
        };
        let linger = if merging.chance(30) {
            merging.duration(Duration::from_micros(200), Duration::from_millis(5))
        } else {
            Duration::ZERO
        };
        // So does following a refusal's view, added later still.
        let follow_refusal_view = !SimRng::new(seed, 0x71E3_0F58).chance(25);
        // And passing stalled partitions over, on balanced sends (added later again).
        let balanced_skips_stalled = !SimRng::new(seed, 0x5C1B_A1ED).chance(25);
        // And the rebalancing timeout (added later still): mostly short enough to strike
        // within a run, sometimes the server's default, which a run never reaches (only a
        // member committing what it polled hands a revoked partition over).
        let mut rebalancing = SimRng::new(seed, 0x4EB0_7A11);
        let rebalancing_timeout = if rebalancing.chance(25) {
            crate::cluster::REBALANCING_TIMEOUT
        } else {
            rebalancing.duration(Duration::from_millis(300), Duration::from_millis(3_000))
        };
        Self {
            seed,
            routers: rng.range(2, 4) as usize,
            routing_commands,
            toggle_routing_commands: routing_commands && rng.chance(20),
            delivery: if rng.chance(20) {
                DeliveryGuarantee::AtLeastOnce
            } else {
                DeliveryGuarantee::AtMostOnce
            },
            tight_queues: rng.chance(30),
            data_links_per_node: rng.range(1, 2) as usize,
            fault_rate,
            network: NetworkConfig {
                latency_min: Duration::from_micros(50),
                latency_max,
                spike_percent: rng.range(0, 5),
                spike_max: Duration::from_millis(60),
                split_percent: rng.range(0, 30),
            },
            workload_span: rng.duration(Duration::from_millis(1_000), Duration::from_millis(3_000)),
            coalesce_max_messages,
            linger,
            follow_refusal_view,
            balanced_skips_stalled,
            rebalancing_timeout,
        }
    }

    /// Router `index`'s configuration. Seeds are rotated per router, so the sessions
    /// start on different nodes; timeouts are short so that a run covers many of them.
    pub fn router_config(&self, index: usize) -> Config {
        let seeds = (0..NODES).map(|n| node_addr((n + index) % NODES)).collect();
        #[allow(clippy::unwrap_used)] // the root credentials fit the wire's limits
        let credentials = Credentials::user("iggy", "iggy").unwrap();
        let mut config = Config::new(seeds, credentials);
        config.request_timeout = Duration::from_secs(4);
        config.attempt_timeout = Duration::from_millis(400);
        config.connect_timeout = Duration::from_millis(300);
        config.reconnect_backoff_initial = Duration::from_millis(20);
        config.reconnect_backoff_max = Duration::from_millis(400);
        config.route_backoff_initial = Duration::from_millis(5);
        config.route_backoff_max = Duration::from_millis(200);
        config.heartbeat_interval = Duration::from_secs(1);
        config.data_link_idle_timeout = Duration::from_secs(2);
        config.data_links_per_node = self.data_links_per_node;
        if self.tight_queues {
            config.max_pending_requests = 12;
            config.max_pending_per_lane = 4;
        } else {
            config.max_pending_requests = 1_000;
            config.max_pending_per_lane = 200;
        }
        config.delivery = self.delivery;
        config.coalesce_max_messages = self.coalesce_max_messages;
        config.linger = self.linger;
        config.follow_refusal_view = self.follow_refusal_view;
        config.balanced_skips_stalled = self.balanced_skips_stalled;
        config
    }

    /// The seed of router `index`, derived from the run seed.
    pub fn router_seed(&self, index: usize) -> u64 {
        SimRng::new(self.seed, 0x2007_E500 + index as u64).next_u64()
    }

    /// The mean gap between faults, `None` when calm.
    pub fn fault_gap(&self) -> Option<(Duration, Duration)> {
        match self.fault_rate {
            FaultRate::Calm => None,
            FaultRate::Normal => Some((Duration::from_millis(50), Duration::from_millis(600))),
            FaultRate::Storm => Some((Duration::from_millis(5), Duration::from_millis(120))),
        }
    }
}

//! The side-by-side demo behind `iggy-route-demo`: the same producer load through
//! iggy-route (tokio and mio adapters) and through the published SDK 0.11.0, against a
//! loopback cluster whose partition primaries sit on one node (`single`) or are spread over
//! the nodes (`split`).
//!
//! Every client runs the same [`Load`]: N producers, each sending fixed-size messages,
//! 100 per send ([`LoadKind::Batch100`]) or one per send ([`LoadKind::SingleMessage`]),
//! keyed so that consecutive sends land on different partitions, until the run's deadline. A send that started before the deadline is waited for and counted, so
//! the SDK's 4 s stalls show in the wall time instead of being cut off silently.

pub mod background_mio;
pub mod background_tokio;
pub mod chart;
pub mod failover;
pub mod hiccup;
pub mod load;
pub mod producer;
pub mod report;
pub mod route_mio;
pub mod route_tokio;
pub mod runner;
pub mod sdk;
pub mod steal;
pub mod timeline;
pub mod topology;

use std::fmt;
use std::time::{Duration, Instant};

use load::OutageWindow;

/// The clients the demo compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum ClientKind {
    /// iggy-route on tokio: one `Client` shared by every producer task.
    #[value(name = "iggy-route-tokio")]
    RouteTokio,
    /// iggy-route on mio: one `Client` shared by every producer thread.
    #[value(name = "iggy-route-mio")]
    RouteMio,
    /// iggy-route on tokio through its background producer: one `Producer` per producer
    /// task on one shared `Client`; `send` buffers, acknowledgements are counted as they
    /// come.
    #[value(name = "iggy-route-tokio-producer")]
    RouteTokioProducer,
    /// iggy-route on mio through its background producer: one `Producer` per producer
    /// thread on one shared `Client`; `send` buffers, acknowledgements are counted as they
    /// come.
    #[value(name = "iggy-route-mio-producer")]
    RouteMioProducer,
    /// The published SDK `iggy 0.11.0`, one `IggyClient` per producer task.
    #[value(name = "iggy-sdk-0.11.0")]
    Sdk,
}

impl ClientKind {
    /// The name printed in the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            ClientKind::RouteTokio => "iggy-route-tokio",
            ClientKind::RouteMio => "iggy-route-mio",
            ClientKind::RouteMioProducer => "iggy-route-mio-producer",
            ClientKind::RouteTokioProducer => "iggy-route-tokio-producer",
            ClientKind::Sdk => "iggy-sdk-0.11.0",
        }
    }

    /// True for the clients built on iggy-route.
    pub fn is_iggy_route(self) -> bool {
        match self {
            ClientKind::RouteTokio
            | ClientKind::RouteMio
            | ClientKind::RouteTokioProducer
            | ClientKind::RouteMioProducer => true,
            ClientKind::Sdk => false,
        }
    }
}

impl fmt::Display for ClientKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the partition primaries are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Scenario {
    /// Every primary and the metadata leader on node 0 (a fresh cluster).
    Single,
    /// Primaries spread round-robin over the nodes, the metadata leader on node 0 (after
    /// failovers).
    Split,
    /// Primaries split as in `split`, and every second one partition's primary moves to
    /// the next node (a controlled move: the old primary refuses at once).
    Moving,
    /// Primaries split as in `split`; a quarter into the run a node stops without a word
    /// (links cut), its partitions move after a view change, and it comes back three
    /// quarters in. With `--cluster --ctl`, the same against a real cluster.
    Crash,
    /// A real cluster given with `--cluster`: whatever state it is in.
    External,
}

impl Scenario {
    /// The name printed in the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Single => "single",
            Scenario::Split => "split",
            Scenario::Moving => "moving",
            Scenario::Crash => "crash",
            Scenario::External => "external",
        }
    }
}

impl Scenario {
    /// True for the scenarios whose primaries move during the run.
    pub fn has_faults(self) -> bool {
        matches!(self, Scenario::Moving | Scenario::Crash)
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The shapes of load the demo runs: how many messages each send carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum LoadKind {
    /// 100 messages per send: a batching producer, where throughput is the measure.
    #[value(name = "batch100")]
    Batch100,
    /// One message per send: a producer that sends each event as it comes, where every
    /// send pays a whole round trip and its commit.
    #[value(name = "single-message")]
    SingleMessage,
}

impl LoadKind {
    /// The name printed in the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            LoadKind::Batch100 => "batch100",
            LoadKind::SingleMessage => "single-message",
        }
    }

    /// Messages per send call.
    pub fn messages_per_send(self) -> usize {
        match self {
            LoadKind::Batch100 => 100,
            LoadKind::SingleMessage => 1,
        }
    }

    /// Messages a background producer keeps unacknowledged by default: measured on the
    /// embedded cluster as the window that keeps the producers' p99 under 20 ms in both
    /// scenarios without giving up their throughput (with 1-message sends a larger window
    /// only queues: at 1,000 the p99 was 27 ms and the rate no higher; 100-message batches
    /// need 10 calls out to keep the frames full).
    pub fn default_producer_window(self) -> usize {
        match self {
            LoadKind::Batch100 => 1_000,
            LoadKind::SingleMessage => 500,
        }
    }
}

impl fmt::Display for LoadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The producer load every client runs.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Which load: how many messages each send carries.
    pub kind: LoadKind,
    /// Concurrent producers (tasks or threads).
    pub producers: usize,
    /// Partitions of the topic the load writes ([`PARTITIONS`] on the embedded cluster; a
    /// real cluster's run may ask for another count, such as one for a control run).
    pub partitions: u32,
    /// Payload bytes per message.
    pub payload_bytes: usize,
    /// How long producers start new sends.
    pub duration: Duration,
    /// How long to wait, after the deadline, for sends still in flight before cutting them
    /// off. The SDK's stall is about 4 s per send, so this must be well above that.
    pub drain_grace: Duration,
    /// Give the SDK `nodelay=true`. With its default (`false`, Nagle's algorithm on) a
    /// lockstep send on loopback takes ~44 ms at p50 instead of under 1 ms (measured; it
    /// looks like Nagle meeting delayed ACKs): a cost of the SDK's default, not of routing.
    pub sdk_nodelay: bool,
    /// Messages a background producer keeps unacknowledged (sent and not yet acknowledged)
    /// before its `send` loop waits for the oldest call's acknowledgement: `None` takes the
    /// load's [`LoadKind::default_producer_window`].
    pub producer_window: Option<usize>,
    /// The instant the run's clock starts from, when its faults are scheduled from it
    /// (`None`: the clock starts when the producers do).
    pub epoch: Option<Instant>,
    /// The node outage planned in the run, if any.
    pub outage: Option<OutageWindow>,
    /// iggy-route's `Config::follow_refusal_view` (the demo's `--ignore-refusal-view`
    /// turns it off to measure a move without it).
    pub follow_refusal_view: bool,
    /// The embedded cluster serves TLS only, and every client (iggy-route through its
    /// connection string, the SDK through its own) connects with TLS, trusting the
    /// cluster's CA: the demo's `--tls`, to show what TLS costs per send.
    pub tls: bool,
    /// Messages per second offered by all producers together, evenly paced (`None`: each
    /// producer sends as fast as it is answered, or as its window lets it). A paced load
    /// shows whether a client keeps a rate through faults; an unpaced one, what it can
    /// carry at most on this machine.
    pub rate: Option<u64>,
}

impl Load {
    /// Messages per send call.
    pub fn messages_per_send(&self) -> usize {
        self.kind.messages_per_send()
    }

    /// A paced load's time between two sends of one producer (see
    /// [`Load::pace_is_measurable`]).
    pub fn pace(&self) -> Option<Duration> {
        let rate = self.rate.filter(|&rate| rate > 0)?;
        let per_producer = self.producers.max(1) as u64 * self.messages_per_send() as u64;
        Some(Duration::from_nanos(
            per_producer.saturating_mul(1_000_000_000) / rate,
        ))
    }

    /// Whether the pace, if any, is long enough to be kept: at least 1 µs between two
    /// sends of one producer (a faster rate would schedule every send at the start).
    pub fn pace_is_measurable(&self) -> bool {
        self.pace()
            .is_none_or(|pace| pace >= Duration::from_micros(1))
    }

    /// Messages a background producer keeps unacknowledged.
    pub fn producer_window(&self) -> usize {
        self.producer_window
            .unwrap_or_else(|| self.kind.default_producer_window())
            .max(1)
    }
}

/// Partitions of the demo topic.
pub const PARTITIONS: u32 = 6;

/// Nodes of the embedded cluster.
pub const NODES: usize = 3;

/// Stream and topic names, used by the embedded cluster and created on `--cluster` ones.
pub const STREAM_NAME: &str = "iggy-route-demo";
/// See [`STREAM_NAME`].
pub const TOPIC_NAME: &str = "load";

//! Adapter parity for waiting for room: one table of scenarios, each run on the tokio and
//! on the mio client against the loopback cluster, each asserting the same outcomes on
//! both. The rule lives in the core's router (`Router::submit_waiting`); the adapters only
//! hand calls to it, so any difference here is an adapter that works a rule out itself.
//!
//! Every scenario runs on a fresh three-node cluster: the session on node 0 (whose replies
//! are never held), partition `p`'s primary on node `1 + p`, and one warm-up send per
//! partition so that routes and data links exist before replies are held. Calls start one
//! after another, each given a moment to reach the client's loop, so that they wait in a
//! known order; the outcomes asserted never depend on how long that moment is, only on the
//! order, which a call that has to wait for room keeps.

#![allow(clippy::unwrap_used)]

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::Message;
use iggy_route_core::{Config, RequestError};
use iggy_route_tests::cluster::TestCluster;

/// The ids a fresh test cluster gives its first stream and topic.
const STREAM: u32 = 0;
const TOPIC: u32 = 0;
const PARTITIONS: u32 = 2;

/// The moment a started call is given to reach the client's loop before the next starts.
const ARRIVAL: Duration = Duration::from_millis(150);

/// How long a scenario may wait for any one outcome before it fails.
const OUTCOME_BOUND: Duration = Duration::from_secs(30);

/// A call's outcome as the table states it: the same words for both adapters.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Sent,
    QueueFull(usize),
    Closed,
    Shutdown,
    /// Written and unanswered when it ended: it may have been stored.
    Unknown,
    TimedOut,
    Other(String),
}

impl Seen {
    fn of<T>(outcome: Result<T, ClientError>) -> Self {
        match outcome {
            Ok(_) => Self::Sent,
            Err(ClientError::QueueFull { limit }) => Self::QueueFull(limit),
            Err(ClientError::Closed) => Self::Closed,
            Err(ClientError::Request(RequestError::Shutdown)) => Self::Shutdown,
            Err(ClientError::Request(RequestError::TimedOut { .. })) => Self::TimedOut,
            Err(ClientError::Request(RequestError::OutcomeUnknown { .. })) => Self::Unknown,
            Err(other) => Self::Other(format!("{other:?}")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Adapter {
    Tokio,
    Mio,
}

enum AnyClient {
    Tokio(iggy_route_tokio::Client),
    Mio(iggy_route_mio::Client),
}

/// A call started and not yet heard from.
struct Call {
    outcome: mpsc::Receiver<Seen>,
    /// Drops the call's future (tokio); a blocking mio call cannot be dropped.
    abort: Option<tokio::task::AbortHandle>,
}

impl Call {
    fn outcome(self) -> Seen {
        self.outcome
            .recv_timeout(OUTCOME_BOUND)
            .expect("every call ends within its bounds")
    }
}

/// One scenario's cluster and client.
struct Run {
    runtime: tokio::runtime::Runtime,
    cluster: TestCluster,
    client: AnyClient,
}

impl Run {
    fn start(adapter: Adapter, configure: fn(&mut Config)) -> Self {
        iggy_route_tests::error_events::install();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let cluster = runtime.block_on(TestCluster::start(3));
        let ids = cluster.create_stream_and_topic("parity", "waiting", PARTITIONS);
        assert_eq!(ids, (STREAM, TOPIC));
        for partition in 0..PARTITIONS {
            let node = 1 + usize::try_from(partition).unwrap();
            assert!(cluster.set_primary(STREAM, TOPIC, partition, node));
        }
        let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
        config.request_timeout = Duration::from_secs(10);
        configure(&mut config);
        let client = match adapter {
            Adapter::Tokio => AnyClient::Tokio(
                runtime
                    .block_on(iggy_route_tokio::Client::connect(config))
                    .unwrap(),
            ),
            Adapter::Mio => AnyClient::Mio(iggy_route_mio::Client::connect(config).unwrap()),
        };
        let run = Self {
            runtime,
            cluster,
            client,
        };
        for partition in 0..PARTITIONS {
            assert_eq!(run.try_send(partition, "warm-up"), Seen::Sent);
        }
        run
    }

    /// Holds the replies of partition `partition`'s primary for `delay`.
    fn hold(&self, partition: u32, delay: Duration) {
        let node = 1 + usize::try_from(partition).unwrap();
        self.cluster.set_reply_delay(node, delay);
    }

    /// Starts a send that may wait for room, and gives it a moment to arrive.
    fn send(&self, partition: u32, tag: &str) -> Call {
        let (report, outcome) = mpsc::channel();
        let messages = message(tag);
        let partitioning = Partitioning::PartitionId(partition);
        let abort = match &self.client {
            AnyClient::Tokio(client) => {
                let client = client.clone();
                let task = self.runtime.spawn(async move {
                    let sent = client.send(STREAM, TOPIC, partitioning, messages).await;
                    let _ = report.send(Seen::of(sent));
                });
                Some(task.abort_handle())
            }
            AnyClient::Mio(client) => {
                let client = client.clone();
                thread::spawn(move || {
                    let sent = client.send(STREAM, TOPIC, partitioning, messages);
                    let _ = report.send(Seen::of(sent));
                });
                None
            }
        };
        thread::sleep(ARRIVAL);
        Call { outcome, abort }
    }

    /// A send that never waits for room.
    fn try_send(&self, partition: u32, tag: &str) -> Seen {
        let messages = message(tag);
        let partitioning = Partitioning::PartitionId(partition);
        match &self.client {
            AnyClient::Tokio(client) => Seen::of(self.runtime.block_on(client.try_send(
                STREAM,
                TOPIC,
                partitioning,
                messages,
            ))),
            AnyClient::Mio(client) => {
                Seen::of(client.try_send(STREAM, TOPIC, partitioning, messages))
            }
        }
    }

    /// Drops a started call (its caller gives up).
    fn drop_call(&self, call: Call) {
        let abort = call.abort.expect("only a tokio call can be dropped");
        abort.abort();
        thread::sleep(ARRIVAL);
    }

    fn shutdown(&self) {
        match &self.client {
            AnyClient::Tokio(client) => self.runtime.block_on(client.shutdown()),
            AnyClient::Mio(client) => client.shutdown(),
        }
    }

    /// The payloads stored in a partition after its warm-up, in offset order.
    fn stored(&self, partition: u32) -> Vec<String> {
        self.cluster
            .partition_log(STREAM, TOPIC, partition)
            .into_iter()
            .skip(1)
            .map(|stored| String::from_utf8(stored.payload.to_vec()).unwrap())
            .collect()
    }

    fn finish(self) {
        self.shutdown();
        self.runtime.block_on(self.cluster.shutdown());
        iggy_route_tests::error_events::assert_none();
    }
}

fn message(tag: &str) -> Vec<Message> {
    vec![Message {
        payload: Bytes::from(tag.to_owned()),
        ..Message::default()
    }]
}

/// What a scenario saw: each call's outcome by name, then what each partition stored.
type Saw = Vec<(&'static str, Seen)>;

struct Scenario {
    name: &'static str,
    /// The mio client's calls block their thread: there is no call to drop.
    tokio_only: bool,
    configure: fn(&mut Config),
    play: fn(&Run) -> Saw,
    expected: fn() -> Saw,
}

fn bounds(total: usize, per_lane: usize) -> impl Fn(&mut Config) {
    move |config| {
        config.max_pending_requests = total;
        config.max_pending_per_lane = per_lane;
    }
}

fn stored(run: &Run) -> Saw {
    let tags = |partition| run.stored(partition).join(",");
    vec![
        ("p0 stored", Seen::Other(tags(0))),
        ("p1 stored", Seen::Other(tags(1))),
    ]
}

fn stored_as(p0: &str, p1: &str) -> Saw {
    vec![
        ("p0 stored", Seen::Other(p0.to_owned())),
        ("p1 stored", Seen::Other(p1.to_owned())),
    ]
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "a try is refused at once when the router is full",
        tokio_only: false,
        configure: |config| bounds(1, 1)(config),
        play: |run| {
            run.hold(0, Duration::from_millis(800));
            let holding = run.send(0, "holding");
            let tried = run.try_send(1, "tried");
            let mut saw = vec![("try", tried), ("holding", holding.outcome())];
            saw.extend(stored(run));
            saw
        },
        expected: || {
            let mut saw = vec![("try", Seen::QueueFull(1)), ("holding", Seen::Sent)];
            saw.extend(stored_as("holding", ""));
            saw
        },
    },
    Scenario {
        name: "a try is refused while a call waits, even where there is room",
        tokio_only: false,
        configure: |config| bounds(4, 1)(config),
        play: |run| {
            run.hold(0, Duration::from_millis(800));
            let holding = run.send(0, "holding");
            let waiting = run.send(0, "waiting");
            let tried = run.try_send(1, "tried");
            let mut saw = vec![
                ("try", tried),
                ("holding", holding.outcome()),
                ("waiting", waiting.outcome()),
                ("try when nothing waits", run.try_send(1, "later")),
            ];
            saw.extend(stored(run));
            saw
        },
        expected: || {
            let mut saw = vec![
                ("try", Seen::QueueFull(1)),
                ("holding", Seen::Sent),
                ("waiting", Seen::Sent),
                ("try when nothing waits", Seen::Sent),
            ];
            saw.extend(stored_as("holding,waiting", "later"));
            saw
        },
    },
    Scenario {
        name: "calls wait for room and are let in in the order they came",
        tokio_only: false,
        configure: |config| bounds(2, 2)(config),
        play: |run| {
            run.hold(0, Duration::from_millis(600));
            let calls: Vec<Call> = ["s0", "s1", "s2", "s3"]
                .into_iter()
                .map(|tag| run.send(0, tag))
                .collect();
            let mut saw: Saw = ["s0", "s1", "s2", "s3"]
                .into_iter()
                .zip(calls)
                .map(|(tag, call)| (tag, call.outcome()))
                .collect();
            saw.extend(stored(run));
            saw
        },
        expected: || {
            let mut saw: Saw = ["s0", "s1", "s2", "s3"]
                .into_iter()
                .map(|tag| (tag, Seen::Sent))
                .collect();
            saw.extend(stored_as("s0,s1,s2,s3", ""));
            saw
        },
    },
    Scenario {
        name: "a wait ends at its deadline with QueueFull naming the bound",
        tokio_only: false,
        configure: |config| {
            bounds(1, 1)(config);
            config.request_timeout = Duration::from_millis(800);
            // The held reply outlasts both deadlines without the link giving up first.
            config.attempt_timeout = Duration::from_secs(30);
            config.heartbeat_interval = Duration::from_secs(30);
        },
        play: |run| {
            run.hold(0, Duration::from_secs(5));
            let holding = run.send(0, "holding");
            let waiting = run.send(0, "waiting");
            let mut saw = vec![
                ("waiting", waiting.outcome()),
                ("holding", holding.outcome()),
            ];
            saw.extend(stored(run));
            saw
        },
        expected: || {
            let mut saw = vec![("waiting", Seen::QueueFull(1)), ("holding", Seen::TimedOut)];
            saw.extend(stored_as("holding", ""));
            saw
        },
    },
    Scenario {
        name: "the line holds max_pending_requests calls and refuses the next at once",
        tokio_only: false,
        configure: |config| bounds(1, 1)(config),
        play: |run| {
            run.hold(0, Duration::from_secs(30));
            let holding = run.send(0, "holding");
            let waiting = run.send(1, "waiting");
            let refused = run.send(1, "refused").outcome();
            run.shutdown();
            let mut saw = vec![
                ("refused", refused),
                ("waiting", waiting.outcome()),
                ("holding", holding.outcome()),
            ];
            saw.extend(stored(run));
            saw
        },
        expected: || {
            let mut saw = vec![
                ("refused", Seen::QueueFull(1)),
                ("waiting", Seen::Closed),
                ("holding", Seen::Unknown),
            ];
            saw.extend(stored_as("holding", ""));
            saw
        },
    },
    Scenario {
        name: "shutdown ends the calls waiting for room with Closed",
        tokio_only: false,
        configure: |config| bounds(2, 1)(config),
        play: |run| {
            run.hold(0, Duration::from_secs(30));
            let holding = run.send(0, "holding");
            let first = run.send(0, "w0");
            let second = run.send(0, "w1");
            run.shutdown();
            let mut saw = vec![
                ("w0", first.outcome()),
                ("w1", second.outcome()),
                ("holding", holding.outcome()),
                ("after shutdown", run.send(0, "late").outcome()),
                ("try after shutdown", run.try_send(0, "late")),
            ];
            saw.extend(stored(run));
            saw
        },
        expected: || {
            let mut saw = vec![
                ("w0", Seen::Closed),
                ("w1", Seen::Closed),
                ("holding", Seen::Unknown),
                ("after shutdown", Seen::Closed),
                ("try after shutdown", Seen::Closed),
            ];
            saw.extend(stored_as("holding", ""));
            saw
        },
    },
    Scenario {
        name: "a call dropped while it waits is withdrawn and never sent",
        tokio_only: true,
        configure: |config| bounds(2, 1)(config),
        play: |run| {
            run.hold(0, Duration::from_millis(1_500));
            let holding = run.send(0, "holding");
            let dropped = run.send(0, "dropped");
            run.drop_call(dropped);
            // The next call's arrival is an input: the client looks for dropped calls.
            let next = run.send(0, "next");
            let mut saw = vec![("holding", holding.outcome()), ("next", next.outcome())];
            saw.extend(stored(run));
            saw
        },
        expected: || {
            let mut saw = vec![("holding", Seen::Sent), ("next", Seen::Sent)];
            saw.extend(stored_as("holding,next", ""));
            saw
        },
    },
];

fn play(scenario: &Scenario, adapter: Adapter) -> Saw {
    let started = Instant::now();
    let run = Run::start(adapter, scenario.configure);
    let saw = (scenario.play)(&run);
    run.finish();
    eprintln!("{adapter:?}: {} ({:?})", scenario.name, started.elapsed());
    saw
}

/// Each scenario on both adapters: the outcomes the table states, the same on each.
#[test]
fn every_scenario_ends_the_same_on_both_adapters() {
    let mut failures = Vec::new();
    for scenario in SCENARIOS {
        let expected = (scenario.expected)();
        let adapters: &[Adapter] = if scenario.tokio_only {
            &[Adapter::Tokio]
        } else {
            &[Adapter::Tokio, Adapter::Mio]
        };
        for &adapter in adapters {
            let saw = play(scenario, adapter);
            if saw != expected {
                failures.push(format!(
                    "{adapter:?}: {}\n  saw      {saw:?}\n  expected {expected:?}",
                    scenario.name
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

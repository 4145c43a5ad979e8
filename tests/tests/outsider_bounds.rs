//! An outsider's adversarial tests of the adapters' documented bounds: backpressure (the
//! waiting line, its bounds, `try_` calls, shutdown, dropped calls), every call ending
//! within `request_timeout` whatever the cluster does, and background producers with a
//! one-message buffer. Each scenario runs on both adapters where it can, against the
//! loopback cluster, and reads what the cluster stored back.

#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::wildcard_enum_match_arm
)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::Message;
use iggy_route_core::{Config, RequestError};
use iggy_route_tests::cluster::TestCluster;

const STREAM: u32 = 0;
const TOPIC: u32 = 0;
const PARTITIONS: u32 = 2;

/// Generous slack on top of a bound: the tests assert behaviour, not speed.
const MARGIN: Duration = Duration::from_millis(1_500);
/// How long a test waits for an outcome before calling it a hang.
const HANG: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Sent(Option<u64>),
    QueueFull,
    Closed,
    Shutdown,
    TimedOut,
    Unknown,
    Other(String),
}

impl Seen {
    fn of(outcome: Result<iggy_route_core::SendReceipt, ClientError>) -> Self {
        match outcome {
            Ok(receipt) => Self::Sent(receipt.base_offset),
            Err(ClientError::QueueFull { .. }) => Self::QueueFull,
            Err(ClientError::Closed) => Self::Closed,
            Err(ClientError::Request(RequestError::Shutdown)) => Self::Shutdown,
            Err(ClientError::Request(RequestError::TimedOut { .. })) => Self::TimedOut,
            Err(ClientError::Request(RequestError::OutcomeUnknown { .. })) => Self::Unknown,
            Err(other) => Self::Other(format!("{other:?}")),
        }
    }
    fn sent(&self) -> bool {
        matches!(self, Self::Sent(_))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Adapter {
    Tokio,
    Mio,
}

const BOTH: [Adapter; 2] = [Adapter::Tokio, Adapter::Mio];

#[derive(Clone)]
enum AnyClient {
    Tokio(iggy_route_tokio::Client),
    Mio(iggy_route_mio::Client),
}

/// A started call: its outcome and how long it took from the call.
struct Call {
    tag: String,
    outcome: mpsc::Receiver<(Seen, Duration)>,
    abort: Option<tokio::task::AbortHandle>,
    /// When the call itself was made (on its task or thread).
    entered: Arc<std::sync::OnceLock<Instant>>,
}

impl Call {
    fn outcome(&self) -> (Seen, Duration) {
        self.outcome
            .recv_timeout(HANG)
            .unwrap_or_else(|_| panic!("call {} hung past {HANG:?}", self.tag))
    }
}

struct Run {
    runtime: tokio::runtime::Runtime,
    cluster: TestCluster,
    client: AnyClient,
}

impl Run {
    /// Three nodes; session on node 0; partition `p`'s primary on node `1 + p`.
    fn start(adapter: Adapter, configure: impl FnOnce(&mut Config)) -> Self {
        iggy_route_tests::error_events::install();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let cluster = runtime.block_on(TestCluster::start(3));
        let ids = cluster.create_stream_and_topic("outsider", "bounds", PARTITIONS);
        assert_eq!(ids, (STREAM, TOPIC));
        for partition in 0..PARTITIONS {
            assert!(cluster.set_primary(STREAM, TOPIC, partition, 1 + partition as usize));
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
            let (seen, _) = run.send(partition, "warm-up").outcome();
            assert!(seen.sent(), "warm-up: {seen:?}");
        }
        run
    }

    fn hold(&self, partition: u32, delay: Duration) {
        self.cluster.set_reply_delay(1 + partition as usize, delay);
    }

    /// Starts a send; for tokio, polled once so that calls reach the driver in order; for
    /// mio, on its own thread (the caller staggers them when order matters).
    fn send(&self, partition: u32, tag: &str) -> Call {
        self.send_with(partition, tag, false)
    }

    fn send_with(&self, partition: u32, tag: &str, try_only: bool) -> Call {
        let (report, outcome) = mpsc::channel();
        let messages = message(tag);
        let partitioning = Partitioning::PartitionId(partition);
        let started = Instant::now();
        let entered = Arc::new(std::sync::OnceLock::new());
        let abort = match &self.client {
            AnyClient::Tokio(client) => {
                let entered_at = Arc::clone(&entered);
                let client = client.clone();
                let task = self.runtime.spawn(async move {
                    let _ = entered_at.set(Instant::now());
                    let sent = if try_only {
                        client.try_send(STREAM, TOPIC, partitioning, messages).await
                    } else {
                        client.send(STREAM, TOPIC, partitioning, messages).await
                    };
                    let _ = report.send((Seen::of(sent), started.elapsed()));
                });
                Some(task.abort_handle())
            }
            AnyClient::Mio(client) => {
                let entered_at = Arc::clone(&entered);
                let client = client.clone();
                thread::spawn(move || {
                    let _ = entered_at.set(Instant::now());
                    let sent = if try_only {
                        client.try_send(STREAM, TOPIC, partitioning, messages)
                    } else {
                        client.send(STREAM, TOPIC, partitioning, messages)
                    };
                    let _ = report.send((Seen::of(sent), started.elapsed()));
                });
                None
            }
        };
        Call {
            tag: tag.to_owned(),
            outcome,
            abort,
            entered,
        }
    }

    fn try_send(&self, partition: u32, tag: &str) -> (Seen, Duration) {
        self.send_with(partition, tag, true).outcome()
    }

    fn shutdown(&self) {
        match &self.client {
            AnyClient::Tokio(client) => self.runtime.block_on(client.shutdown()),
            AnyClient::Mio(client) => client.shutdown(),
        }
    }

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
    }
}

fn message(tag: &str) -> Vec<Message> {
    vec![Message {
        payload: Bytes::from(tag.to_owned()),
        ..Message::default()
    }]
}

/// Lets started calls reach the client's loop.
fn settle() {
    thread::sleep(Duration::from_millis(300));
}

#[path = "outsider_bounds/deadlines.rs"]
mod deadlines;
#[path = "outsider_bounds/line.rs"]
mod line;
#[path = "outsider_bounds/producer_failures.rs"]
mod producer_failures;
#[path = "outsider_bounds/producers.rs"]
mod producers;

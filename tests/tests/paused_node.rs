//! A paused node on the loopback cluster, through both adapters. A paused server process
//! (SIGSTOP) is not a crashed one: its sockets stay open, the kernel still accepts
//! connections and buffers what clients write, and once resumed it reads and answers all
//! of it, with the cluster's state as it then is. The real cluster's nemesis pauses nodes
//! for 1 to 15 s; the clients must neither hang on the silent node nor lose or duplicate a
//! message when it comes back.
//!
//! Times here are scaled down: the attempt timeout (the silence after which a link counts
//! as dead) is 1 s instead of 5 s, and a "long" pause outlasts it.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::Message;
use iggy_route_core::{Config, RequestError, SendReceipt, Stats};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tokio::ClientError;

const STREAM: u32 = 0;
const TOPIC: u32 = 0;
/// Silence on a link past this closes it.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);
/// The whole life of a call; no call here may take longer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(8);

#[derive(Debug, Clone, Copy)]
enum Adapter {
    Tokio,
    Mio,
}

/// A 3-node cluster on its own runtime, stream 0 / topic 0 with partition `p`'s primary on
/// node `p + 1` (the sessions start on node 0), and a client of either adapter.
struct Harness {
    cluster: TestCluster,
    runtime: tokio::runtime::Runtime,
}

impl Drop for Harness {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            iggy_route_tests::error_events::assert_none();
        }
    }
}

impl Harness {
    fn start() -> Self {
        iggy_route_tests::error_events::install();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let cluster = runtime.block_on(TestCluster::start(3));
        assert_eq!(
            cluster.create_stream_and_topic("paused", "load", 2),
            (STREAM, TOPIC)
        );
        for partition in 0..2 {
            cluster.set_primary(STREAM, TOPIC, partition, partition as usize + 1);
        }
        Self { cluster, runtime }
    }

    fn client(&self, adapter: Adapter) -> AnyClient {
        let mut config = Config::from_connection_string(&self.cluster.connection_string()).unwrap();
        config.request_timeout = REQUEST_TIMEOUT;
        config.attempt_timeout = ATTEMPT_TIMEOUT;
        config.connect_timeout = Duration::from_millis(500);
        match adapter {
            Adapter::Tokio => AnyClient::Tokio(
                self.runtime
                    .block_on(iggy_route_tokio::Client::connect(config))
                    .unwrap(),
                self.runtime.handle().clone(),
            ),
            Adapter::Mio => AnyClient::Mio(iggy_route_mio::Client::connect(config).unwrap()),
        }
    }

    /// The ids stored in `partition`, in offset order.
    fn stored(&self, partition: u32) -> Vec<u128> {
        self.cluster
            .partition_log(STREAM, TOPIC, partition)
            .iter()
            .map(|message| message.id)
            .collect()
    }

    fn logins(&self) -> Vec<u64> {
        (0..3).map(|node| self.cluster.stats(node).logins).collect()
    }
}

#[derive(Clone)]
enum AnyClient {
    Tokio(iggy_route_tokio::Client, tokio::runtime::Handle),
    Mio(iggy_route_mio::Client),
}

impl AnyClient {
    fn send(&self, partition: u32, id: u128) -> Result<SendReceipt, RequestError> {
        let messages = vec![Message {
            id,
            payload: Bytes::from(format!("message {id}")),
            ..Message::default()
        }];
        let partitioning = Partitioning::partition_id(partition);
        let result = match self {
            AnyClient::Tokio(client, runtime) => {
                runtime.block_on(client.send(STREAM, TOPIC, partitioning, messages))
            }
            AnyClient::Mio(client) => client.send(STREAM, TOPIC, partitioning, messages),
        };
        result.map_err(|error| {
            let ClientError::Request(error) = error else {
                panic!("a send failed outside the request: {error}");
            };
            error
        })
    }

    fn stats(&self) -> Stats {
        match self {
            AnyClient::Tokio(client, _) => client.stats(),
            AnyClient::Mio(client) => client.stats(),
        }
    }

    fn shutdown(&self) {
        match self {
            AnyClient::Tokio(client, runtime) => runtime.block_on(client.shutdown()),
            AnyClient::Mio(client) => client.shutdown(),
        }
    }
}

/// Runs `send` on a thread of its own, so the test can pause and resume nodes meanwhile.
fn send_in_background(
    client: &AnyClient,
    partition: u32,
    id: u128,
) -> std::thread::JoinHandle<Result<SendReceipt, RequestError>> {
    let client = client.clone();
    std::thread::spawn(move || client.send(partition, id))
}

macro_rules! on_both_adapters {
    ($scenario:ident) => {
        mod $scenario {
            use super::Adapter;

            #[test]
            fn tokio() {
                super::$scenario(Adapter::Tokio);
            }

            #[test]
            fn mio() {
                super::$scenario(Adapter::Mio);
            }
        }
    };
}

on_both_adapters!(a_pause_shorter_than_the_attempt_timeout_only_delays_the_send);
on_both_adapters!(a_send_held_by_a_paused_primary_is_unknown_and_never_stored_behind_later_ones);
on_both_adapters!(a_paused_session_node_stalls_no_send_to_other_primaries);
on_both_adapters!(a_pause_past_the_request_timeout_ends_every_call_within_its_bound);

/// The node answers once resumed, on the same links: the send is acknowledged, nothing
/// reconnects and the session stays.
fn a_pause_shorter_than_the_attempt_timeout_only_delays_the_send(adapter: Adapter) {
    let harness = Harness::start();
    let client = harness.client(adapter);
    client.send(0, 1).unwrap();
    let logins = harness.logins();

    harness.cluster.pause_node(1);
    let sending = send_in_background(&client, 0, 2);
    std::thread::sleep(ATTEMPT_TIMEOUT / 3);
    assert!(!sending.is_finished(), "a paused primary answered");
    harness.cluster.resume_node(1);
    let receipt = sending.join().unwrap().unwrap();

    assert_eq!(receipt.base_offset, Some(1));
    assert_eq!(harness.stored(0), vec![1, 2]);
    assert_eq!(harness.logins(), logins, "a link was opened again");
    assert_eq!(client.stats().session_moves, 0);
    client.shutdown();
}

/// The primary is paused past the attempt timeout and the cluster elects another: the send
/// it holds ends `OutcomeUnknown` within the bound, the next one reaches the new primary,
/// and when the old one resumes and reads the first, it refuses it as a backup. Stored:
/// the second only, once.
fn a_send_held_by_a_paused_primary_is_unknown_and_never_stored_behind_later_ones(adapter: Adapter) {
    let harness = Harness::start();
    let client = harness.client(adapter);
    client.send(0, 1).unwrap();

    harness.cluster.pause_node(1);
    let held = send_in_background(&client, 0, 2);
    std::thread::sleep(ATTEMPT_TIMEOUT / 2);
    harness.cluster.set_primary(STREAM, TOPIC, 0, 2);
    let held = held.join().unwrap();
    assert!(
        matches!(held, Err(RequestError::OutcomeUnknown { .. })),
        "the send the paused primary held: {held:?}"
    );
    let receipt = client.send(0, 3).unwrap();
    assert_eq!(receipt.base_offset, Some(1));

    harness.cluster.resume_node(1);
    // The resumed node reads what it was sent while paused; give it time to, then look.
    std::thread::sleep(Duration::from_millis(300));
    let after = client.send(0, 4).unwrap();
    assert_eq!(after.base_offset, Some(2));
    assert_eq!(harness.stored(0), vec![1, 3, 4]);
    assert_eq!(
        client.stats().session_moves,
        0,
        "the session's node never paused"
    );
    client.shutdown();
}

/// The session's node (also the metadata leader) is paused for three attempt timeouts:
/// sends to primaries on the other nodes are acknowledged while it is paused, the session
/// moves at most once, and nothing moves again after it resumes.
///
/// A sign-in written to the paused node shortly before the resume may still time out just
/// after it (its deadline is one attempt timeout after it was written), and that move is
/// the pause's: the moves are counted once every exchange written during the pause has
/// had its deadline, an attempt timeout after the resume.
fn a_paused_session_node_stalls_no_send_to_other_primaries(adapter: Adapter) {
    let harness = Harness::start();
    let client = harness.client(adapter);
    client.send(0, 1).unwrap();
    client.send(1, 2).unwrap();

    harness.cluster.pause_node(0);
    harness.cluster.set_metadata_leader(1);
    let paused = Arc::new(AtomicBool::new(true));
    let resumer = {
        let paused = Arc::clone(&paused);
        let cluster_pause = ATTEMPT_TIMEOUT * 3;
        std::thread::spawn(move || {
            std::thread::sleep(cluster_pause);
            paused.store(false, Ordering::SeqCst);
        })
    };
    let mut during = 0u32;
    let mut id = 10u128;
    while paused.load(Ordering::SeqCst) {
        let partition = (id % 2) as u32;
        client.send(partition, id).unwrap();
        if paused.load(Ordering::SeqCst) {
            during += 1;
        }
        id += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    resumer.join().unwrap();
    harness.cluster.resume_node(0);
    assert!(
        during >= 10,
        "only {during} sends were acknowledged while the session's node was paused"
    );
    let settled = Instant::now() + ATTEMPT_TIMEOUT + Duration::from_millis(200);
    while Instant::now() < settled {
        client.send((id % 2) as u32, id).unwrap();
        id += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    let moves = client.stats().session_moves;
    assert!(moves <= 1, "{moves} session moves for one paused node");
    for _ in 0..20 {
        client.send((id % 2) as u32, id).unwrap();
        id += 1;
    }
    std::thread::sleep(ATTEMPT_TIMEOUT * 2);
    assert_eq!(
        client.stats().session_moves,
        moves,
        "the session moved after the resume"
    );
    let stored: usize = (0..2).map(|p| harness.stored(p).len()).sum();
    assert_eq!(
        stored,
        (id - 10) as usize + 2,
        "every acknowledged send, once"
    );
    client.shutdown();
}

/// The primary is paused for longer than a call may last and nobody is elected: every call
/// to it ends within its request timeout, as "may have been stored", never hangs and never
/// is reported failed. When the node resumes it reads those calls from the sockets the
/// client closed and stores them, once each.
fn a_pause_past_the_request_timeout_ends_every_call_within_its_bound(adapter: Adapter) {
    let harness = Harness::start();
    let client = harness.client(adapter);
    client.send(0, 1).unwrap();

    harness.cluster.pause_node(1);
    let started = Instant::now();
    let first = send_in_background(&client, 0, 2);
    std::thread::sleep(ATTEMPT_TIMEOUT * 2);
    let second = send_in_background(&client, 0, 3);
    let first = first.join().unwrap();
    let second = second.join().unwrap();
    let took = started.elapsed();
    for ended in [&first, &second] {
        assert!(
            matches!(
                ended,
                Err(RequestError::OutcomeUnknown { .. } | RequestError::TimedOut { .. })
            ),
            "a call to a silent primary ended {ended:?}"
        );
    }
    assert!(
        took < ATTEMPT_TIMEOUT * 2 + REQUEST_TIMEOUT + Duration::from_secs(2),
        "the calls to a silent primary took {took:?}"
    );
    harness.cluster.resume_node(1);
    // The resumed node reads the held calls at once; the next send needs a new link.
    std::thread::sleep(Duration::from_millis(300));
    let after = client.send(0, 4).unwrap();
    let stored = harness.stored(0);
    eprintln!("stored after the pause: {stored:?}");
    assert_eq!(stored.first(), Some(&1));
    assert_eq!(
        stored.last(),
        Some(&4),
        "a held call was stored after a later one"
    );
    assert_eq!(after.base_offset, Some(stored.len() as u64 - 1));
    let mut ids = stored.clone();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), stored.len(), "stored twice: {stored:?}");
    client.shutdown();
}

/// A primary silent for 8 s with nobody elected: each lookup names it again, and the client
/// went on asking at the speed of the lookups' round trip (330 and 379 lookups in 8 s, for
/// one waiting send). The rechecks now slow down while the answer stays the same.
#[test]
fn a_silent_primary_is_looked_up_a_few_times_a_second_not_per_round_trip() {
    const SILENCE: Duration = Duration::from_secs(8);
    for adapter in [Adapter::Tokio, Adapter::Mio] {
        let harness = Harness::start();
        let client = harness.client(adapter);
        client.send(0, 1).unwrap();
        let before = client.stats().lookups;
        harness.cluster.pause_node(1);
        let started = Instant::now();
        let mut id = 10;
        while started.elapsed() < SILENCE {
            let ended = client.send(0, id);
            assert!(ended.is_err(), "a silent primary acknowledged {id}");
            id += 1;
        }
        let lookups = client.stats().lookups - before;
        harness.cluster.resume_node(1);
        eprintln!("{adapter:?}: {lookups} lookups in {SILENCE:?} of one silent primary");
        assert!(
            lookups <= 8 * SILENCE.as_secs(),
            "{adapter:?}: {lookups} lookups in {SILENCE:?} of one silent primary"
        );
        client.send(0, id).unwrap();
        client.shutdown();
    }
}

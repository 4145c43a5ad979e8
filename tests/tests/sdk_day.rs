//! An SDK user's day through each adapter's own `Client`, against the loopback cluster: the
//! scenario of `sdk_day/mod.rs`, on a cluster of three nodes whose partitions'
//! primaries are spread, so that each plane's command goes to a node of its own.

#![allow(clippy::unwrap_used, unreachable_pub)]

#[macro_use]
#[path = "sdk_day/mod.rs"]
mod sdk_day;

use std::sync::{Arc, LazyLock};

use iggy_route_core::Config;
use iggy_route_tests::cluster::TestCluster;
use tokio::runtime::Runtime;

/// The runtime the async client's calls are made on, from the test thread.
static CLIENTS: LazyLock<Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
});

macro_rules! on_tokio {
    ($call:expr) => {
        CLIENTS.block_on($call)
    };
}

macro_rules! blocking {
    ($call:expr) => {
        $call
    };
}

macro_rules! connect_tokio {
    ($config:expr) => {
        CLIENTS.block_on(iggy_route_tokio::Client::connect($config))
    };
}

macro_rules! connect_mio {
    ($config:expr) => {
        iggy_route_mio::Client::connect($config)
    };
}

/// A loopback cluster of three nodes on a runtime of its own, and the day's place on it.
struct Loopback {
    cluster: Arc<TestCluster>,
    place: sdk_day::Place,
    _runtime: Runtime,
}

impl Drop for Loopback {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            iggy_route_tests::error_events::assert_none();
        }
    }
}

fn loopback(prefix: &str) -> Loopback {
    iggy_route_tests::error_events::install();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cluster = Arc::new(runtime.block_on(TestCluster::start(3)));
    let mut root = Config::from_connection_string(&cluster.connection_string()).unwrap();
    // The session on node 2, the metadata leader on node 0, and each partition's primary
    // on the node after its number: every plane's command has a node of its own to go to.
    root.seeds.rotate_right(1);
    let spreader = Arc::clone(&cluster);
    let spread: sdk_day::Spread = Arc::new(move |stream, topic, partitions| {
        for partition in 0..partitions {
            let node = usize::try_from(partition + 1).unwrap() % 3;
            assert!(spreader.set_primary(stream, topic, partition, node));
        }
    });
    let place = sdk_day::Place {
        root: sdk_day::quick(root),
        prefix: prefix.to_owned(),
        spread: Some(spread),
        nodes: 3,
    };
    Loopback {
        cluster,
        place,
        _runtime: runtime,
    }
}

#[test]
fn tokio_messaging() {
    let world = loopback("tokio");
    let client = connect_tokio!(world.place.root.clone()).unwrap();
    messaging_day!(client, world.place, on_tokio);
    on_tokio!(client.shutdown());
    assert_eq!(world.cluster.node_count(), 3);
}

#[test]
fn mio_messaging() {
    let world = loopback("mio");
    let client = connect_mio!(world.place.root.clone()).unwrap();
    messaging_day!(client, world.place, blocking);
    client.shutdown();
}

#[test]
fn tokio_streams_and_topics() {
    let world = loopback("tokio");
    let client = connect_tokio!(world.place.root.clone()).unwrap();
    metadata_day!(client, world.place, on_tokio);
    on_tokio!(client.shutdown());
}

#[test]
fn mio_streams_and_topics() {
    let world = loopback("mio");
    let client = connect_mio!(world.place.root.clone()).unwrap();
    metadata_day!(client, world.place, blocking);
    client.shutdown();
}

#[test]
fn tokio_system_reads_and_logout() {
    let world = loopback("tokio");
    let client = connect_tokio!(world.place.root.clone()).unwrap();
    system_day!(client, world.place, on_tokio);
    logout_day!(client, on_tokio);
    on_tokio!(client.shutdown());
}

#[test]
fn mio_system_reads_and_logout() {
    let world = loopback("mio");
    let client = connect_mio!(world.place.root.clone()).unwrap();
    system_day!(client, world.place, blocking);
    logout_day!(client, blocking);
    client.shutdown();
}

#[test]
fn tokio_users_permissions_and_tokens() {
    let world = loopback("tokio");
    let root = connect_tokio!(world.place.root.clone()).unwrap();
    users_day!(root, world.place, on_tokio, connect_tokio);
    on_tokio!(root.shutdown());
}

#[test]
fn mio_users_permissions_and_tokens() {
    let world = loopback("mio");
    let root = connect_mio!(world.place.root.clone()).unwrap();
    users_day!(root, world.place, blocking, connect_mio);
    root.shutdown();
}

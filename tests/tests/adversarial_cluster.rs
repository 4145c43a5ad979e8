//! Both adapters against the loopback cluster while its nodes misbehave in turn: a primary
//! that answers 57 and commits nothing, a coordinator whose route answers name a backup,
//! a node that writes every reply twice, one that answers every frame with garbage, and one
//! that puts a reply to a request never sent in front of every reply.
//! Throughout, nothing is acknowledged that the cluster did not store, nothing is stored
//! twice, the session never moves, and once the misbehaviour ends every partition takes
//! sends again.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::RequestError;
use iggy_route_core::client::ClientError;
use iggy_route_tests::cluster::adversary::Misbehaviour;
use iggy_route_tests::cluster::{ClusterConfig, TestCluster};
use iggy_route_tests::scripted::clients::{Adapter, TestClient, short_config};

const PARTITIONS: u32 = 3;

/// One phase of the run: which node misbehaves how, for how long.
const PHASES: [(usize, Misbehaviour, u64); 5] = [
    (1, Misbehaviour::NotCommitted, 400),
    (0, Misbehaviour::LyingRoutes, 400),
    (2, Misbehaviour::DuplicateReplies, 300),
    (2, Misbehaviour::Garbage, 300),
    (1, Misbehaviour::StrayReplies, 300),
];

fn run(adapter: Adapter) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The scripted test client writes topic 1/1: ids from 1, as on the servers the
    // protocol document describes.
    let cluster = runtime.block_on(TestCluster::start_with(ClusterConfig {
        first_id: 1,
        ..ClusterConfig::new(3)
    }));
    let (stream, topic) = cluster.create_stream_and_topic("adversarial", "events", PARTITIONS);
    assert_eq!((stream, topic), (1, 1), "the test client writes topic 1/1");
    for partition in 0..PARTITIONS {
        assert!(cluster.set_primary(stream, topic, partition, partition as usize));
    }
    // The session on node 0 (the first seed), which answers the route lookups.
    let seeds: Vec<String> = cluster.addrs().iter().map(ToString::to_string).collect();
    let mut config = short_config(seeds);
    config.request_timeout = Duration::from_secs(2);
    config.attempt_timeout = Duration::from_millis(500);
    let client = TestClient::connect(adapter, config).unwrap();

    let mut acknowledged = BTreeSet::new();
    let mut unknown = 0u32;
    let mut sequence = 0u64;
    let mut send = |client: &TestClient, partition: u32| {
        sequence += 1;
        let payload = Bytes::from(format!("{adapter:?}-{partition}-{sequence}"));
        match client.send(partition, payload.clone()) {
            Ok(receipt) => {
                assert_eq!(receipt.partition_id, partition);
                acknowledged.insert((partition, payload));
            }
            Err(ClientError::Request(
                RequestError::OutcomeUnknown { .. } | RequestError::TimedOut { .. },
            )) => unknown += 1,
            Err(other) => panic!("{adapter:?}: partition {partition}: {other}"),
        }
    };
    for (node, behaviour, millis) in PHASES {
        let lasts = Duration::from_millis(millis);
        cluster.misbehave(node, behaviour, lasts);
        if behaviour == Misbehaviour::LyingRoutes {
            // Partition 0's primary moves: its next send is refused, and every lookup
            // until the lies end names a backup that refuses too.
            assert!(cluster.set_primary(stream, topic, 0, 1));
        }
        let started = Instant::now();
        let mut partition = 0;
        while started.elapsed() < lasts + Duration::from_millis(100) {
            send(&client, partition);
            partition = (partition + 1) % PARTITIONS;
        }
    }
    // Every misbehaviour is over: each partition takes a send at once.
    for partition in 0..PARTITIONS {
        let started = Instant::now();
        send(&client, partition);
        assert!(started.elapsed() < Duration::from_millis(500));
    }
    let stats = client.stats();
    client.shutdown();

    let counts = cluster.adversary_counts();
    assert!(counts.not_committed > 0, "{counts:?}");
    assert!(counts.lies > 0, "{counts:?}");
    assert!(counts.duplicated > 0, "{counts:?}");
    assert!(counts.garbage > 0, "{counts:?}");
    assert!(counts.strays > 0, "{counts:?}");
    assert!(stats.replays > 0, "{stats:?}");
    assert!(stats.protocol_violations > 0, "{stats:?}");
    assert_eq!(stats.session_moves, 0, "{stats:?}");

    let mut stored = BTreeSet::new();
    for partition in 0..PARTITIONS {
        for message in cluster.partition_log(stream, topic, partition) {
            let fresh = stored.insert((partition, message.payload.clone()));
            assert!(fresh, "{:?} stored twice", message.payload);
        }
    }
    let lost: Vec<_> = acknowledged.difference(&stored).collect();
    assert!(lost.is_empty(), "acknowledged but not stored: {lost:?}");
    assert!(
        acknowledged.len() > 20,
        "{} acknowledged, {unknown} unknown",
        acknowledged.len()
    );
    runtime.block_on(cluster.shutdown());
}

#[test]
fn tokio_client_keeps_every_promise_while_nodes_misbehave() {
    iggy_route_tests::error_events::install();
    run(Adapter::Tokio);
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn mio_client_keeps_every_promise_while_nodes_misbehave() {
    iggy_route_tests::error_events::install();
    run(Adapter::Mio);
    iggy_route_tests::error_events::assert_none();
}

//! A backup's refusal names the partition's primary by its view, through both
//! adapters against the loopback cluster set up as the real one (no routing commands, so
//! routes are found by refusal): each partition led away from the first node tried costs
//! one refusal, not one per backup in the roster, and a controlled move costs one refusal
//! and one resend. With `Config::follow_refusal_view` off the old cost comes back, which
//! is what this test failed with before the view was read.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use iggy_route_core::{Reply, Request, Stats};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tests::real_cluster::send;
use iggy_route_tests::scripted::clients::{Adapter, TestClient, short_config};

const ADAPTERS: [Adapter; 2] = [Adapter::Tokio, Adapter::Mio];

/// Six partitions led round-robin by nodes 0, 1, 2; no routing commands.
fn split_cluster(runtime: &tokio::runtime::Runtime) -> (TestCluster, u32, u32) {
    runtime.block_on(async {
        let cluster = TestCluster::start(3).await;
        cluster.set_routing_commands(false);
        let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 6);
        for partition in 0..6 {
            cluster.set_primary(stream, topic, partition, partition as usize % 3);
        }
        (cluster, stream, topic)
    })
}

fn client(cluster: &TestCluster, adapter: Adapter, follow: bool) -> TestClient {
    let seeds = (0..3).map(|node| cluster.addr(node).to_string()).collect();
    let config = {
        let mut config = short_config(seeds);
        config.follow_refusal_view = follow;
        config.request_timeout = Duration::from_secs(10);
        config
    };
    TestClient::connect(adapter, config).unwrap()
}

fn admitted_by(client: &TestClient, request: Request) -> u32 {
    let reply = client.request(request).unwrap();
    let Reply::Sent(receipt) = reply else {
        panic!("a send answered with {reply:?}");
    };
    receipt.node.0
}

fn learn_every_partition(client: &TestClient) -> Stats {
    for partition in 0..6 {
        let node = admitted_by(client, send("orders", "events", partition, 0, "learn"));
        assert_eq!(node, partition % 3, "partition {partition}");
    }
    client.stats()
}

#[test]
fn learning_split_primaries_costs_one_refusal_per_partition_led_elsewhere() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for adapter in ADAPTERS {
        let (cluster, _, _) = split_cluster(&runtime);
        let following = client(&cluster, adapter, true);
        let stats = learn_every_partition(&following);
        // Node 0 is tried first; partitions 1, 2, 4, 5 are led elsewhere.
        assert_eq!(stats.refusals, 4, "{adapter:?}");
        assert_eq!(stats.refusal_views_followed, 4, "{adapter:?}");
        following.shutdown();

        let ignoring = client(&cluster, adapter, false);
        let stats = learn_every_partition(&ignoring);
        // Discovery in roster order: node 2's partitions are refused by nodes 0 and 1.
        assert_eq!(stats.refusals, 6, "{adapter:?}");
        assert_eq!(stats.refusal_views_followed, 0, "{adapter:?}");
        ignoring.shutdown();
        runtime.block_on(cluster.shutdown());
    }
}

#[test]
fn a_controlled_move_costs_one_refusal_and_goes_straight_to_the_new_primary() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for adapter in ADAPTERS {
        let (cluster, stream, topic) = split_cluster(&runtime);
        let client = client(&cluster, adapter, true);
        learn_every_partition(&client);
        // Partition 2 (led by node 2) moves to node 1: node 2 refuses, naming node 1; node
        // 0, first in the roster, is never tried.
        let before = client.stats();
        let node0_refusals = cluster.stats(0).refusals;
        cluster.set_primary(stream, topic, 2, 1);
        let node = admitted_by(&client, send("orders", "events", 2, 0, "moved"));
        let after = client.stats();
        assert_eq!(node, 1, "{adapter:?}");
        assert_eq!(after.refusals - before.refusals, 1, "{adapter:?}");
        assert_eq!(
            after.refusal_views_followed - before.refusal_views_followed,
            1,
            "{adapter:?}"
        );
        assert_eq!(
            cluster.stats(0).refusals,
            node0_refusals,
            "{adapter:?}: node 0 was never asked"
        );
        assert_eq!(after.session_moves, 0);
        client.shutdown();
        runtime.block_on(cluster.shutdown());
    }
}

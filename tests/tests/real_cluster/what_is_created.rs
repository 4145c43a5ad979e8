//! What is created is sent to at once: a topic and partitions this client created, and a
//! topic another client created, through a session on every node and on both adapters.

use iggy_route_tests::real_cluster::{
    RealCluster, admin, admitted_by, create_partitions, create_stream, create_topic, send,
    unique_name,
};

use super::{ADAPTERS, serial};

#[test]
fn by_us_through_any_coordinator_is_sent_to_at_once() {
    let Some(cluster) = RealCluster::from_env("create_then_send") else {
        return;
    };
    let _serial = serial();
    for adapter in ADAPTERS {
        for coordinator in 0..cluster.nodes.len() {
            let client = cluster.client(adapter, coordinator);
            let stream = unique_name("route-fresh");
            admin(&client, create_stream(&stream));
            admin(&client, create_topic(&stream, "events", 2));
            let first = client.request(send(&stream, "events", 1, 0, "first"));
            assert!(
                admitted_by(first).is_ok(),
                "{adapter:?} via node {coordinator}: create-then-send"
            );
            admin(&client, create_partitions(&stream, "events", 2));
            for partition in [3, 2] {
                let sent = client.request(send(&stream, "events", partition, 0, "added"));
                let sent = admitted_by(sent);
                assert!(
                    sent.is_ok(),
                    "{adapter:?} via node {coordinator}: add-then-send to {partition}: {sent:?}"
                );
            }
            client.shutdown();
        }
    }
}

/// What another client creates is sent to at once, whichever node the sender's session is
/// on: a session on the metadata leader reads the new topic at once, before the nodes of its
/// partitions' primaries may have applied it.
#[test]
fn by_another_client_is_sent_to_at_once_from_any_coordinator() {
    let Some(cluster) = RealCluster::from_env("other_creates_then_send") else {
        return;
    };
    let _serial = serial();
    let creator = cluster.client(ADAPTERS[0], 0);
    for adapter in ADAPTERS {
        for coordinator in 0..cluster.nodes.len() {
            let sender = cluster.client(adapter, coordinator);
            let stream = unique_name("route-theirs");
            admin(&creator, create_stream(&stream));
            admin(&creator, create_topic(&stream, "events", 3));
            for partition in [2, 0, 1] {
                let sent = admitted_by(sender.request(send(&stream, "events", partition, 0, "x")));
                assert!(
                    sent.is_ok(),
                    "{adapter:?} via node {coordinator}: send to {partition} of another's topic: {sent:?}"
                );
            }
            sender.shutdown();
        }
    }
    creator.shutdown();
}

//! The published SDK `iggy 0.11.0`, as an independent client, drives the consumer-group
//! commands against the loopback cluster: create (and the name taken), get by id and by
//! name, list, join, leave, delete, and group polls without a partition, for which the SDK
//! syncs its assignment (`SYNC_CONSUMER_GROUP`) and picks among its own partitions. If the
//! SDK decodes what the model answers and each member reads only its own partitions, the
//! model speaks the group commands the way the server does.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use bytes::Bytes;
use iggy::prelude::*;
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tests::real_cluster::{RealCluster, unique_name};

async fn sdk_client(addr: &str) -> IggyClient {
    let url = format!("iggy://iggy:iggy@{addr}");
    let client = IggyClient::from_connection_string(&url).unwrap();
    client.connect().await.unwrap();
    client
}

fn named(name: &str) -> Identifier {
    Identifier::named(name).unwrap()
}

fn code(result: Result<impl std::fmt::Debug, IggyError>) -> u32 {
    match result {
        Err(error) => error.as_code(),
        Ok(value) => panic!("expected an error, got {value:?}"),
    }
}

/// The partitions a member's group polls (no partition given) read from.
async fn partitions_polled(
    client: &IggyClient,
    shop: &str,
    group: &Consumer,
    polls: usize,
) -> BTreeSet<u32> {
    let mut seen = BTreeSet::new();
    for _ in 0..polls {
        let polled = client
            .poll_messages(
                &named(shop),
                &named("orders"),
                None,
                group,
                &PollingStrategy::offset(0),
                10,
                false,
            )
            .await
            .unwrap();
        assert_eq!(
            polled.messages.len(),
            2,
            "each partition holds two messages"
        );
        seen.insert(polled.partition_id);
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_administers_groups_and_its_members_poll_their_own_partitions() {
    let cluster = TestCluster::start(3).await;
    groups_day(&cluster.addr(0).to_string(), "shop").await;
}

/// The same against the real cluster named by `IGGY_ROUTE_REAL_CLUSTER` (skipped without
/// it): the oracle for the model's answers, ids and assignments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_administers_groups_on_the_real_cluster() {
    let Some(cluster) = RealCluster::from_env("sdk_groups") else {
        return;
    };
    groups_day(&cluster.nodes[0], &unique_name("sdk-groups")).await;
}

/// The SDK's own client on node `addr` (the metadata leader, where the SDK settles), with a
/// stream named `shop`.
async fn groups_day(addr: &str, shop: &str) {
    let first = sdk_client(addr).await;
    let second = sdk_client(addr).await;
    // The stream and topic come from our own client: the real server refuses the options
    // block the SDK 0.11.0 sends with `create_topic` (`UnsupportedOptionKey("")`).
    let url = format!("iggy://iggy:iggy@{addr}");
    let config = iggy_route_core::Config::from_connection_string(&url).unwrap();
    let ours = iggy_route_tokio::Client::connect(config).await.unwrap();
    ours.create_stream(shop).await.unwrap();
    ours.create_topic(shop, "orders", 3).await.unwrap();
    ours.shutdown().await;
    let (stream, topic) = (named(shop), named("orders"));
    for partition in 0..3 {
        let mut messages: Vec<IggyMessage> = (0..2)
            .map(|i| {
                IggyMessage::builder()
                    .payload(Bytes::from(format!("p{partition}-{i}")))
                    .build()
                    .unwrap()
            })
            .collect();
        first
            .send_messages(
                &stream,
                &topic,
                &Partitioning::partition_id(partition),
                &mut messages,
            )
            .await
            .unwrap();
    }

    let created = first
        .create_consumer_group(&stream, &topic, "billing")
        .await
        .unwrap();
    assert_eq!(
        (created.id, created.partitions_count, created.members_count),
        (0, 3, 0)
    );
    assert_eq!(
        code(
            first
                .create_consumer_group(&stream, &topic, "billing")
                .await
        ),
        5004
    );
    first
        .create_consumer_group(&stream, &topic, "audit")
        .await
        .unwrap();
    // The real server lists groups in its hash map's order, so only the set is compared.
    let listed: BTreeSet<(u32, String)> = first
        .get_consumer_groups(&stream, &topic)
        .await
        .unwrap()
        .into_iter()
        .map(|g| (g.id, g.name))
        .collect();
    assert_eq!(
        listed,
        BTreeSet::from([(0, "billing".into()), (1, "audit".into())])
    );
    let by_name = first
        .get_consumer_group(&stream, &topic, &named("audit"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_name.id, 1);
    let missing = Identifier::numeric(9).unwrap();
    assert!(
        first
            .get_consumer_group(&stream, &topic, &missing)
            .await
            .unwrap()
            .is_none()
    );

    let billing = Identifier::numeric(0).unwrap();
    let consumer = Consumer::group(billing.clone());
    first
        .join_consumer_group(&stream, &topic, &billing)
        .await
        .unwrap();
    // Both join before anything is polled: on the real server a partition polled past its
    // committed offset is handed over only once drained (or after 30 s), which the model
    // does not do (see `cluster/groups.rs`).
    second
        .join_consumer_group(&stream, &topic, &billing)
        .await
        .unwrap();
    let group = first
        .get_consumer_group(&stream, &topic, &billing)
        .await
        .unwrap()
        .unwrap();
    let assigned: Vec<Vec<u32>> = group.members.iter().map(|m| m.partitions.clone()).collect();
    assert_eq!(
        assigned,
        vec![vec![0, 1], vec![2]],
        "a join moves only the excess"
    );
    let mine = partitions_polled(&first, shop, &consumer, 4).await;
    let theirs = partitions_polled(&second, shop, &consumer, 2).await;
    assert_eq!(mine, BTreeSet::from([0, 1]));
    assert_eq!(theirs, BTreeSet::from([2]));

    first
        .leave_consumer_group(&stream, &topic, &billing)
        .await
        .unwrap();
    let group = second
        .get_consumer_group(&stream, &topic, &billing)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(group.members_count, 1);
    assert_eq!(group.members[0].partitions, vec![0, 1, 2]);
    assert_eq!(
        code(first.leave_consumer_group(&stream, &topic, &billing).await),
        5006
    );
    first
        .delete_consumer_group(&stream, &topic, &billing)
        .await
        .unwrap();
    assert_eq!(
        code(first.delete_consumer_group(&stream, &topic, &billing).await),
        5000
    );
    first.delete_stream(&stream).await.unwrap();
}

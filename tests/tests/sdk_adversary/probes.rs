//! Focused probes.

use super::*;
#[allow(unused_imports)]
use super::{
    bad_input::*, breaks::*, faults::*, guards::*, messages::*, secrets::*, session_states::*,
    users::*,
};

/// A 3-node cluster with `orders`/`events` of `partitions` partitions holding `per`
/// messages each (ids partition*100 + 1..), sent by a setup client.
pub(crate) async fn cluster_with_messages(
    partitions: u32,
    per: u32,
) -> (Arc<TestCluster>, u32, u32) {
    let cluster = Arc::new(TestCluster::start(3).await);
    let (s, t) = cluster.create_stream_and_topic("orders", "events", partitions);
    let setup = sdk_on(&cluster).await;
    for partition in 0..partitions {
        let mut batch: Vec<IggyMessage> = (1..=per)
            .map(|i| message(u128::from(partition * 100 + i), b"m", None))
            .collect();
        setup
            .send_messages(
                &numeric(s),
                &numeric(t),
                &Partitioning::partition_id(partition),
                &mut batch,
            )
            .await
            .unwrap();
    }
    setup.shutdown().await.unwrap();
    // Past the backups' lag.
    tokio::time::sleep(Duration::from_millis(600)).await;
    (cluster, s, t)
}

/// The group-poll program: one member joins, polls `Next` with auto-commit without a
/// partition six times, and reads the group's stored offsets.
pub(crate) async fn group_auto_commit_program(client: &dyn Client) -> Vec<String> {
    group_auto_commit_program_named(client, "g").await
}

pub(crate) async fn group_auto_commit_program_named(
    client: &dyn Client,
    group: &str,
) -> Vec<String> {
    let (stream, topic) = (named("orders"), named("events"));
    let mut seen = Vec::new();
    client
        .create_consumer_group(&stream, &topic, group)
        .await
        .unwrap();
    client
        .join_consumer_group(&stream, &topic, &named(group))
        .await
        .unwrap();
    let member = Consumer::group(named(group));
    for _ in 0..6 {
        let polled = poll(
            client,
            &stream,
            &topic,
            None,
            &member,
            PollingStrategy::next(),
            10,
            true,
        )
        .await
        .unwrap();
        seen.push(format!(
            "partition {} ids {:?}",
            polled.partition_id,
            polled
                .messages
                .iter()
                .map(|m| m.header.id)
                .collect::<Vec<_>>()
        ));
    }
    for partition in 0..2 {
        let offset = client
            .get_consumer_offset(&member, &stream, &topic, Some(partition))
            .await
            .unwrap()
            .map(|o| o.stored_offset);
        seen.push(format!("partition {partition} stored {offset:?}"));
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_polls_with_auto_commit_without_a_partition_commit_as_the_sdks_do() {
    let (cluster, _, _) = cluster_with_messages(2, 3).await;
    let sdk = sdk_on(&cluster).await;
    let expected = group_auto_commit_program(&*sdk).await;
    sdk.shutdown().await.unwrap();

    let (cluster, _, _) = cluster_with_messages(2, 3).await;
    let route = route_on(&cluster).await;
    let got = group_auto_commit_program(&*route).await;
    route.shutdown().await.unwrap();
    assert_eq!(got, expected, "iggy-route (left) vs the SDK (right)");
}

/// Member `a` polls every partition without committing, `b` joins (the excess partition
/// `a` has in flight is handed over cooperatively), then `a` polls `Next` with auto-commit
/// without a partition, and the group's offsets are read.
pub(crate) async fn group_handover_program(a: &dyn Client, b: &dyn Client) -> Vec<String> {
    let (stream, topic) = (named("orders"), named("events"));
    let g = named("g");
    let member = Consumer::group(g.clone());
    let mut seen = Vec::new();
    a.create_consumer_group(&stream, &topic, "g").await.unwrap();
    a.join_consumer_group(&stream, &topic, &g).await.unwrap();
    // A program that joins twice (the second join is a no-op for the server).
    a.join_consumer_group(&stream, &topic, &g).await.unwrap();
    for _ in 0..4 {
        let polled = poll(
            a,
            &stream,
            &topic,
            None,
            &member,
            PollingStrategy::offset(0),
            10,
            false,
        )
        .await
        .unwrap();
        seen.push(format!(
            "a peeks partition {}: {}",
            polled.partition_id,
            polled.messages.len()
        ));
    }
    b.join_consumer_group(&stream, &topic, &g).await.unwrap();
    a.refresh_consumer_group_assignments().await;
    for _ in 0..4 {
        let polled = poll(
            a,
            &stream,
            &topic,
            None,
            &member,
            PollingStrategy::next(),
            10,
            true,
        )
        .await
        .unwrap();
        seen.push(format!(
            "a reads partition {}: {:?}",
            polled.partition_id,
            polled
                .messages
                .iter()
                .map(|m| m.header.id)
                .collect::<Vec<_>>()
        ));
        let polled = poll(
            b,
            &stream,
            &topic,
            None,
            &member,
            PollingStrategy::next(),
            10,
            true,
        )
        .await
        .unwrap();
        seen.push(format!(
            "b reads partition {}: {:?}",
            polled.partition_id,
            polled
                .messages
                .iter()
                .map(|m| m.header.id)
                .collect::<Vec<_>>()
        ));
    }
    for partition in 0..3 {
        let offset = a
            .get_consumer_offset(&member, &stream, &topic, Some(partition))
            .await
            .unwrap()
            .map(|o| o.stored_offset);
        seen.push(format!("partition {partition} stored {offset:?}"));
    }
    seen
}

#[ignore = "open break: after another member's join and a refresh, the rotation starts on another partition than the SDK's"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_polls_after_a_refresh_take_the_partitions_in_the_sdks_order() {
    let (cluster, _, _) = cluster_with_messages(3, 2).await;
    let (a, b) = (sdk_on(&cluster).await, sdk_on(&cluster).await);
    let expected = group_handover_program(&*a, &*b).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();

    let (cluster, _, _) = cluster_with_messages(3, 2).await;
    let (a, b) = (route_on(&cluster).await, route_on(&cluster).await);
    let got = group_handover_program(&*a, &*b).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    assert_eq!(got, expected, "iggy-route (left) vs the SDK (right)");
}

pub(crate) async fn store_then_group_program(client: &dyn Client, first: &str) -> Vec<String> {
    let (stream, topic) = (named("orders"), named("events"));
    let c = Consumer::new(numeric(2));
    let mut seen = Vec::new();
    match first {
        "store" => seen.push(format!(
            "{:?}",
            client
                .store_consumer_offset(&c, &stream, &topic, Some(1), 1)
                .await
        )),
        "get" => seen.push(format!(
            "{:?}",
            client
                .get_consumer_offset(&c, &stream, &topic, Some(1))
                .await
        )),
        "autocommit" => seen.push(format!(
            "{:?}",
            poll(
                client,
                &stream,
                &topic,
                Some(1),
                &c,
                PollingStrategy::next(),
                1,
                true
            )
            .await
            .map(|p| p.messages.len())
        )),
        "delete" => seen.push(format!(
            "{:?}",
            client
                .delete_consumer_offset(&c, &stream, &topic, Some(1))
                .await
        )),
        _ => {}
    }
    seen.extend(group_auto_commit_program(client).await);
    seen
}

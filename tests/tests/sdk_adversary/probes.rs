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
/// `a` has in flight is handed over cooperatively), `a` asks for its assignment to be read
/// again when `refresh`, then `a` polls `Next` with auto-commit without a partition, and
/// the group's offsets are read.
pub(crate) async fn group_handover_program(
    a: &dyn Client,
    b: &dyn Client,
    refresh: bool,
) -> Vec<String> {
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
    if refresh {
        a.refresh_consumer_group_assignments().await;
    }
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

/// Runs the hand-over on the SDK and on iggy-route, each on a fresh cluster.
async fn handover_on_both(refresh: bool) -> (Vec<String>, Vec<String>) {
    let (cluster, _, _) = cluster_with_messages(3, 2).await;
    let (a, b) = (sdk_on(&cluster).await, sdk_on(&cluster).await);
    let sdk = group_handover_program(&*a, &*b, refresh).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();

    let (cluster, _, _) = cluster_with_messages(3, 2).await;
    let (a, b) = (route_on(&cluster).await, route_on(&cluster).await);
    let route = group_handover_program(&*a, &*b, refresh).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    (sdk, route)
}

/// Within a heartbeat interval of the join, both clients go on with the assignment they
/// read: the partition `a` no longer polls is fenced, the assignment read again, and the
/// rotation starts over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_polls_after_another_members_join_take_the_partitions_in_the_sdks_order() {
    let (sdk, route) = handover_on_both(false).await;
    assert_eq!(route, sdk, "iggy-route (left) vs the SDK (right)");
}

/// An explicit `refresh_consumer_group_assignments` reads the assignment again, as the
/// trait documents, and the new generation starts the rotation on its first partition.
/// The SDK's `IggyClient` does not pass the call on to its transport (only its heartbeat
/// refreshes), so there it changes nothing: a documented difference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_refresh_reads_the_new_assignment_which_the_sdks_iggy_client_ignores() {
    let (sdk_refreshed, route_refreshed) = handover_on_both(true).await;
    let (sdk_plain, _) = handover_on_both(false).await;
    assert_eq!(
        sdk_refreshed, sdk_plain,
        "the SDK's IggyClient ignores the call"
    );
    let reads = |trace: &[String]| -> Vec<String> {
        trace
            .iter()
            .filter(|line| line.starts_with("a reads"))
            .cloned()
            .collect()
    };
    assert_eq!(
        reads(&route_refreshed),
        [
            "a reads partition 0: [1, 2]",
            "a reads partition 1: [101, 102]",
            "a reads partition 0: []",
            "a reads partition 1: []"
        ],
        "iggy-route after a refresh: {route_refreshed:?}"
    );
    assert_eq!(
        reads(&sdk_refreshed),
        [
            "a reads partition 1: [101, 102]",
            "a reads partition 0: [1, 2]",
            "a reads partition 1: []",
            "a reads partition 0: []"
        ],
        "the SDK's rotation goes on from before the join: {sdk_refreshed:?}"
    );
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

/// `a` and `b` join, `b` leaves (its partitions are `a`'s at once, though nothing of `a`'s
/// is taken away, so no poll of `a`'s is ever fenced), one message goes to each partition,
/// and `a` polls without a partition, auto-committing, until it has read all three or 4 s
/// passed. Returns the partitions it read them from.
async fn widened_assignment_program(a: &dyn Client, b: &dyn Client) -> Vec<u32> {
    let (stream, topic, g) = (named("orders"), named("events"), named("g"));
    let member = Consumer::group(g.clone());
    a.create_consumer_group(&stream, &topic, "g").await.unwrap();
    a.join_consumer_group(&stream, &topic, &g).await.unwrap();
    b.join_consumer_group(&stream, &topic, &g).await.unwrap();
    // `a` reads its assignment (and what is stored) now, while `b` is a member.
    for _ in 0..3 {
        poll(
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
    }
    b.leave_consumer_group(&stream, &topic, &g).await.unwrap();
    for partition in 0..3 {
        let mut one = vec![message(u128::from(1000 + partition), b"new", None)];
        a.send_messages(
            &stream,
            &topic,
            &Partitioning::partition_id(partition),
            &mut one,
        )
        .await
        .unwrap();
    }
    let mut read_from = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(4);
    while read_from.len() < 3 && Instant::now() < deadline {
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
        for m in &polled.messages {
            if m.header.id >= 1000 {
                read_from.push(polled.partition_id);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    read_from.sort_unstable();
    read_from
}

/// A member whose assignment grew, with no poll of its own fenced, polls its new partitions
/// within a heartbeat interval (1 s here), as the SDK's heartbeat refresh has it do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_assignment_grew_polls_its_new_partitions_within_a_heartbeat() {
    let (cluster, _, _) = cluster_with_messages(3, 1).await;
    let sdk_with_heartbeat = || async {
        let plain = cluster.sdk_connection_string(0);
        let joiner = if plain.contains('?') { '&' } else { '?' };
        let connection = format!("{plain}{joiner}heartbeat_interval=1s");
        let client = IggyClient::from_connection_string(&connection).unwrap();
        client.connect().await.unwrap();
        client
    };
    let (a, b) = (sdk_with_heartbeat().await, sdk_with_heartbeat().await);
    let sdk = widened_assignment_program(&a, &b).await;
    let _ = a.shutdown().await;
    let _ = b.shutdown().await;
    assert_eq!(
        sdk,
        [0, 1, 2],
        "the SDK reads every partition after the leave"
    );

    let (cluster, _, _) = cluster_with_messages(3, 1).await;
    let route_with_heartbeat = || async {
        let mut config = route_config(&cluster);
        config.seeds.rotate_right(1);
        config.heartbeat_interval = Duration::from_secs(1);
        iggy_route_tokio::Client::connect(config).await.unwrap()
    };
    let (a, b) = (route_with_heartbeat().await, route_with_heartbeat().await);
    let route = widened_assignment_program(&a, &b).await;
    a.shutdown().await;
    b.shutdown().await;
    assert_eq!(route, sdk, "iggy-route (left) vs the SDK (right)");
}

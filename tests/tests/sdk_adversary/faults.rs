//! Outcomes under faults.

use super::*;
#[allow(unused_imports)]
use super::{
    bad_input::*, breaks::*, guards::*, messages::*, probes::*, secrets::*, session_states::*,
    users::*,
};

pub(crate) async fn route_with_timeout(
    cluster: &TestCluster,
    timeout: Duration,
) -> Arc<dyn Client> {
    let mut config = route_config(cluster);
    config.request_timeout = timeout;
    config.seeds.rotate_right(1);
    Arc::new(iggy_route_tokio::Client::connect(config).await.unwrap())
}

pub(crate) fn stored_ids(cluster: &TestCluster, s: u32, t: u32, partition: u32) -> Vec<u128> {
    cluster
        .partition_log(s, t, partition)
        .iter()
        .map(|m| m.id)
        .collect()
}

pub(crate) type Call<'a> = (
    &'static str,
    Pin<Box<dyn Future<Output = Option<u32>> + Send + 'a>>,
);

pub(crate) fn every_call<'a>(
    c: &'a dyn Client,
    stream: &'a Identifier,
    topic: &'a Identifier,
) -> Vec<Call<'a>> {
    macro_rules! call {
        ($future:expr) => {
            Box::pin(async move { $future.await.err().map(|e: IggyError| e.as_code()) })
        };
    }
    vec![
        ("ping", call!(c.ping())),
        ("get_me", call!(c.get_me())),
        ("get_stats", call!(c.get_stats())),
        ("get_clients", call!(c.get_clients())),
        ("get_client", call!(c.get_client(1))),
        ("get_cluster_metadata", call!(c.get_cluster_metadata())),
        (
            "snapshot",
            call!(c.snapshot(
                SnapshotCompression::Deflated,
                vec![SystemSnapshotType::Test]
            )),
        ),
        ("get_streams", call!(c.get_streams())),
        ("get_stream", call!(c.get_stream(stream))),
        ("create_stream", call!(c.create_stream("deadline"))),
        (
            "update_stream",
            call!(c.update_stream(stream, "orders", &StreamUpdateOptions::default())),
        ),
        ("purge_stream", call!(c.purge_stream(&named("missing")))),
        ("delete_stream", call!(c.delete_stream(&named("missing")))),
        ("get_topics", call!(c.get_topics(stream))),
        ("get_topic", call!(c.get_topic(stream, topic))),
        (
            "create_topic",
            call!(c.create_topic(stream, "t2", &TopicCreateOptions::default())),
        ),
        (
            "update_topic",
            call!(c.update_topic(stream, topic, "events", &TopicUpdateOptions::default())),
        ),
        (
            "purge_topic",
            call!(c.purge_topic(stream, &named("missing"))),
        ),
        (
            "delete_topic",
            call!(c.delete_topic(stream, &named("missing"))),
        ),
        (
            "create_partitions",
            call!(c.create_partitions(stream, &named("missing"), 1)),
        ),
        (
            "delete_partitions",
            call!(c.delete_partitions(stream, &named("missing"), 1)),
        ),
        (
            "delete_segments",
            call!(c.delete_segments(stream, topic, 0, 1)),
        ),
        (
            "send_messages",
            Box::pin(async move {
                let mut one = vec![message(77, b"deadline", None)];
                c.send_messages(stream, topic, &Partitioning::partition_id(0), &mut one)
                    .await
                    .err()
                    .map(|e| e.as_code())
            }),
        ),
        (
            "send_messages balanced",
            Box::pin(async move {
                let mut one = vec![message(78, b"deadline", None)];
                c.send_messages(stream, topic, &Partitioning::balanced(), &mut one)
                    .await
                    .err()
                    .map(|e| e.as_code())
            }),
        ),
        (
            "poll_messages",
            call!(async {
                c.poll_messages(
                    stream,
                    topic,
                    Some(0),
                    &Consumer::new(numeric(1)),
                    &PollingStrategy::next(),
                    1,
                    true,
                )
                .await
            }),
        ),
        (
            "group poll",
            call!(async {
                c.poll_messages(
                    stream,
                    topic,
                    None,
                    &Consumer::group(named("g")),
                    &PollingStrategy::next(),
                    1,
                    true,
                )
                .await
            }),
        ),
        (
            "flush_unsaved_buffer",
            call!(c.flush_unsaved_buffer(stream, topic, 0, false)),
        ),
        (
            "store_consumer_offset",
            call!(async {
                c.store_consumer_offset(&Consumer::new(numeric(1)), stream, topic, Some(0), 0)
                    .await
            }),
        ),
        (
            "get_consumer_offset",
            call!(async {
                c.get_consumer_offset(&Consumer::new(numeric(1)), stream, topic, Some(0))
                    .await
            }),
        ),
        (
            "delete_consumer_offset",
            call!(async {
                c.delete_consumer_offset(&Consumer::new(numeric(1)), stream, topic, Some(0))
                    .await
            }),
        ),
        (
            "create_consumer_group",
            call!(c.create_consumer_group(stream, topic, "g2")),
        ),
        (
            "get_consumer_group",
            call!(c.get_consumer_group(stream, topic, &named("g"))),
        ),
        (
            "get_consumer_groups",
            call!(c.get_consumer_groups(stream, topic)),
        ),
        (
            "join_consumer_group",
            call!(c.join_consumer_group(stream, topic, &named("g"))),
        ),
        (
            "leave_consumer_group",
            call!(c.leave_consumer_group(stream, topic, &named("g"))),
        ),
        (
            "delete_consumer_group",
            call!(async { c.delete_consumer_group(stream, topic, &named("g3")).await }),
        ),
        ("get_users", call!(c.get_users())),
        ("get_user", call!(c.get_user(&numeric(0)))),
        (
            "create_user",
            call!(c.create_user("deadline", "password", UserStatus::Active, None)),
        ),
        (
            "update_user",
            call!(c.update_user(
                &named("nobody"),
                Some("nobody2"),
                None,
                &UserUpdateOptions::default()
            )),
        ),
        (
            "update_permissions",
            call!(c.update_permissions(&named("nobody"), None)),
        ),
        (
            "change_password",
            call!(c.change_password(&named("nobody"), "password", "password2")),
        ),
        ("delete_user", call!(c.delete_user(&named("nobody")))),
        (
            "get_personal_access_tokens",
            call!(c.get_personal_access_tokens()),
        ),
        (
            "create_personal_access_token",
            call!(c.create_personal_access_token("t", IggyExpiry::NeverExpire)),
        ),
        (
            "delete_personal_access_token",
            call!(c.delete_personal_access_token("t")),
        ),
        ("login_user", call!(c.login_user("iggy", "iggy"))),
        (
            "refresh_consumer_group_assignments",
            Box::pin(async move {
                c.refresh_consumer_group_assignments().await;
                None
            }),
        ),
        ("logout_user", call!(c.logout_user())),
        ("disconnect", call!(c.disconnect())),
        ("connect", call!(c.connect())),
        ("shutdown", call!(c.shutdown())),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_returns_within_its_deadline_when_no_node_answers() {
    let cluster = TestCluster::start(3).await;
    let (s, t) = cluster.create_stream_and_topic("orders", "events", 2);
    assert!(cluster.set_primary(s, t, 1, 1));
    let timeout = Duration::from_secs(1);
    let client = route_with_timeout(&cluster, timeout).await;
    let (stream, topic) = (named("orders"), named("events"));
    client
        .create_consumer_group(&stream, &topic, "g")
        .await
        .unwrap();
    client
        .join_consumer_group(&stream, &topic, &named("g"))
        .await
        .unwrap();
    let mut one = vec![message(1, b"warm", None)];
    client
        .send_messages(&stream, &topic, &Partitioning::partition_id(0), &mut one)
        .await
        .unwrap();
    for node in 0..3 {
        cluster.set_reply_delay(node, Duration::from_secs(60));
    }
    let mut late = Vec::new();
    for (name, call) in every_call(&*client, &stream, &topic) {
        let started = Instant::now();
        let outcome = tokio::time::timeout(Duration::from_secs(20), call).await;
        let took = started.elapsed();
        println!("{name}: {outcome:?} in {took:?}");
        if took > 2 * timeout + Duration::from_millis(500) {
            late.push(format!("{name} took {took:?} ({outcome:?})"));
        }
    }
    assert!(
        late.is_empty(),
        "calls past twice request_timeout ({timeout:?}):\n{}",
        late.join("\n")
    );
}

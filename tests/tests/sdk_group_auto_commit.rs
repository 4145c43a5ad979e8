//! A group's auto-commit poll whose commit the server fences. The SDK's poll is one request:
//! the server serves it and stores the group's offset together, or refuses it. iggy-route
//! writes the poll without its commit and then the group's offset write (the server keeps
//! a backup's commit to itself), so between the two the partition may become another
//! member's, or the member may leave. The write is then refused, the offset does not move,
//! and the messages are the next owner's to read: the poll must fail as the SDK's would
//! have, or the group reads them twice.
//!
//! Each scenario runs on the SDK's `IggyClient` (the reference) and on iggy-route through
//! the same `&dyn Client` code, and asserts that the member reads each message once.

#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use iggy::prelude::*;
use iggy_route_core::Config;
use iggy_route_tests::cluster::TestCluster;

/// Messages per partition; partition `p` holds ids `p * 100 + 1 ..`.
const PER_PARTITION: u32 = 3;
const PARTITIONS: u32 = 3;
/// Late enough that the group changes while the poll's reply is on its way.
const REPLY_DELAY: Duration = Duration::from_millis(600);

fn named(name: &str) -> Identifier {
    Identifier::named(name).unwrap()
}

/// Every id the scenario's messages carry, in order.
fn every_id() -> Vec<u128> {
    (0..PARTITIONS)
        .flat_map(|p| (1..=PER_PARTITION).map(move |i| u128::from(p * 100 + i)))
        .collect()
}

/// A 3-node cluster whose `orders`/`events` partitions all have node 1 as their primary,
/// filled through the SDK.
async fn cluster_with_messages() -> Arc<TestCluster> {
    let cluster = Arc::new(TestCluster::start(3).await);
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", PARTITIONS);
    let setup = sdk_client(&cluster).await;
    for partition in 0..PARTITIONS {
        let mut batch: Vec<IggyMessage> = (1..=PER_PARTITION)
            .map(|i| {
                IggyMessage::builder()
                    .id(u128::from(partition * 100 + i))
                    .payload(Bytes::from_static(b"m"))
                    .build()
                    .unwrap()
            })
            .collect();
        let partitioning = Partitioning::partition_id(partition);
        let (s, t) = (named("orders"), named("events"));
        setup
            .send_messages(&s, &t, &partitioning, &mut batch)
            .await
            .unwrap();
    }
    setup.shutdown().await.unwrap();
    for partition in 0..PARTITIONS {
        assert!(cluster.set_primary(stream, topic, partition, 1));
    }
    // Past the backups' lag.
    tokio::time::sleep(Duration::from_millis(600)).await;
    cluster
}

async fn sdk_client(cluster: &TestCluster) -> Arc<dyn Client> {
    let url = format!(
        "{}?heartbeat_interval=300ms",
        cluster.sdk_connection_string(0)
    );
    let client = IggyClient::from_connection_string(&url).unwrap();
    client.connect().await.unwrap();
    Arc::new(client)
}

async fn route_client(cluster: &TestCluster) -> Arc<dyn Client> {
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(5);
    config.heartbeat_interval = Duration::from_millis(300);
    Arc::new(iggy_route_tokio::Client::connect(config).await.unwrap())
}

async fn client(cluster: &TestCluster, sdk: bool) -> Arc<dyn Client> {
    if sdk {
        sdk_client(cluster).await
    } else {
        route_client(cluster).await
    }
}

/// One auto-commit group poll of up to `count` messages from the member's next partition.
async fn poll(client: &dyn Client, count: u32) -> Result<Vec<u128>, IggyError> {
    let polled = client
        .poll_messages(
            &named("orders"),
            &named("events"),
            None,
            &Consumer::group(named("g")),
            &PollingStrategy::next(),
            count,
            true,
        )
        .await?;
    Ok(polled.messages.iter().map(|m| m.header.id).collect())
}

/// Polls until the member has read every message or 4 s passed, then a few more times:
/// anything handed out again shows then.
async fn read_the_rest(client: &dyn Client, read: &mut Vec<u128>) {
    let by = tokio::time::Instant::now() + Duration::from_secs(4);
    let mut extra = 0;
    while tokio::time::Instant::now() < by && extra < 6 {
        if let Ok(ids) = poll(client, 10).await {
            read.extend(ids);
        }
        let mut unique = read.clone();
        unique.sort_unstable();
        unique.dedup();
        if unique.len() == every_id().len() {
            extra += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a member read, each id once and none missing.
fn assert_read_once(read: &[u128], who: &str) {
    let mut sorted = read.to_vec();
    sorted.sort_unstable();
    assert_eq!(sorted, every_id(), "{who} read {read:?}");
}

/// A poll of up to two messages by `member`, in flight (node 1 answers late) while
/// `change` is made to the group; the poll's outcome.
async fn poll_while(
    cluster: &TestCluster,
    member: &Arc<dyn Client>,
    change: impl Future<Output = Result<(), IggyError>>,
) -> Result<Vec<u128>, IggyError> {
    cluster.set_reply_delay(1, REPLY_DELAY);
    let in_flight = tokio::spawn({
        let member = Arc::clone(member);
        async move { poll(&*member, 2).await }
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    change.await.unwrap();
    let flown = tokio::time::timeout(Duration::from_secs(8), in_flight)
        .await
        .expect("the in-flight poll ends within its bounds")
        .unwrap();
    cluster.set_reply_delay(1, Duration::ZERO);
    flown
}

/// A member's poll of its third partition is in flight (node 1 answers late) when a second
/// member joins and takes that partition, then leaves again without polling: the partition
/// is the first member's again. Returns what the first member read.
async fn partition_away_and_back(sdk: bool) -> Vec<u128> {
    let cluster = cluster_with_messages().await;
    let (a, b) = (client(&cluster, sdk).await, client(&cluster, sdk).await);
    let (s, t, g) = (named("orders"), named("events"), named("g"));
    a.create_consumer_group(&s, &t, "g").await.unwrap();
    a.join_consumer_group(&s, &t, &g).await.unwrap();
    let mut read = Vec::new();
    for _ in 0..2 {
        read.extend(poll(&*a, 1).await.unwrap());
    }
    let flown = poll_while(&cluster, &a, b.join_consumer_group(&s, &t, &g)).await;
    b.leave_consumer_group(&s, &t, &g).await.unwrap();
    read.extend(flown.unwrap_or_default());
    read_the_rest(&*a, &mut read).await;
    let _ = a.shutdown().await;
    let _ = b.shutdown().await;
    read
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_in_flight_while_its_partition_moves_away_and_back_is_read_once() {
    assert_read_once(&partition_away_and_back(true).await, "the SDK");
    assert_read_once(&partition_away_and_back(false).await, "iggy-route");
}

/// A member leaves while its own poll is in flight (node 1 answers late), then joins again
/// and reads on. Returns what it read and the in-flight poll's outcome code (0 for `Ok`).
async fn leave_while_in_flight(sdk: bool) -> (Vec<u128>, u32) {
    let cluster = cluster_with_messages().await;
    let a = client(&cluster, sdk).await;
    let (s, t, g) = (named("orders"), named("events"), named("g"));
    a.create_consumer_group(&s, &t, "g").await.unwrap();
    a.join_consumer_group(&s, &t, &g).await.unwrap();
    let mut read = poll(&*a, 1).await.unwrap();
    let flown = poll_while(&cluster, &a, a.leave_consumer_group(&s, &t, &g)).await;
    let code = flown.as_ref().map_or_else(IggyError::as_code, |_| 0);
    read.extend(flown.unwrap_or_default());
    a.join_consumer_group(&s, &t, &g).await.unwrap();
    read_the_rest(&*a, &mut read).await;
    let _ = a.shutdown().await;
    (read, code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_in_flight_while_its_member_leaves_is_read_once_after_joining_again() {
    let (sdk_read, sdk_code) = leave_while_in_flight(true).await;
    assert_read_once(&sdk_read, "the SDK");
    let (read, code) = leave_while_in_flight(false).await;
    assert_read_once(&read, "iggy-route");
    // The SDK's poll reached the server after the leave; iggy-route's was served before it,
    // and its commit was refused: both tell the caller it is no member.
    assert_eq!((sdk_code, code), (5006, 5006));
}

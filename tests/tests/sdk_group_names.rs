//! A consumer group joined by name and then polled, read and left by number, on the SDK's
//! `IggyClient` and on iggy-route through the same program (`group_names/program.rs`),
//! against the loopback cluster. The server resolves a group before it looks at a
//! membership or an offset, so both clients must see one group whatever names it; the
//! router keeps a membership under the identifiers its join used, and the SDK layer
//! writes a joined group's requests with those.

#![allow(clippy::unwrap_used)]

#[path = "group_names/program.rs"]
mod program;

use std::sync::Arc;
use std::time::Duration;

use iggy::prelude::*;
use iggy_route_core::Config;
use iggy_route_tests::cluster::TestCluster;

use program::{EXPECTED, RECREATED, group_names_program, recreated_by_another_program};

async fn on_the_model(sdk: bool) -> Vec<String> {
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("shop", "orders", 1);
    let client: Box<dyn Client> = if sdk {
        let client = IggyClient::from_connection_string(&cluster.sdk_connection_string(0)).unwrap();
        client.connect().await.unwrap();
        Box::new(client)
    } else {
        let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
        config.request_timeout = Duration::from_secs(5);
        Box::new(iggy_route_tokio::Client::connect(config).await.unwrap())
    };
    let lines = group_names_program(&*client, "shop", "orders").await;
    let _ = client.shutdown().await;
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_named_by_name_or_number_is_one_group_on_the_sdk() {
    assert_eq!(on_the_model(true).await, EXPECTED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_named_by_name_or_number_is_one_group_on_iggy_route() {
    assert_eq!(on_the_model(false).await, EXPECTED);
}

async fn sdk_client(cluster: &TestCluster) -> Box<dyn Client> {
    let client = IggyClient::from_connection_string(&cluster.sdk_connection_string(0)).unwrap();
    client.connect().await.unwrap();
    Box::new(client)
}

/// [`recreated_by_another_program`] on `sdk`'s client or iggy-route; the other client is
/// the SDK's.
async fn recreated_on_the_model(sdk: bool) -> Vec<String> {
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("shop", "orders", 1);
    let client: Arc<dyn Client> = if sdk {
        Arc::from(sdk_client(&cluster).await)
    } else {
        route_client(&cluster).await
    };
    let other = sdk_client(&cluster).await;
    let lines = recreated_by_another_program(&*client, &*other, "shop", "orders").await;
    let _ = client.shutdown().await;
    let _ = other.shutdown().await;
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_created_again_by_another_client_is_a_new_group_on_the_sdk() {
    assert_eq!(recreated_on_the_model(true).await, RECREATED);
}

/// Joined by its numbers, the group is found by them; once another client has deleted it
/// and created it again, its name names the new group, which this client is not in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_created_again_by_another_client_is_a_new_group_on_iggy_route() {
    assert_eq!(recreated_on_the_model(false).await, RECREATED);
}

fn named(name: &str) -> Identifier {
    Identifier::named(name).unwrap()
}

fn numeric(id: u32) -> Identifier {
    Identifier::numeric(id).unwrap()
}

async fn route_client(cluster: &TestCluster) -> Arc<dyn Client> {
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(5);
    Arc::new(iggy_route_tokio::Client::connect(config).await.unwrap())
}

async fn members(client: &dyn Client, stream: &str, topic: &str) -> u32 {
    client
        .get_consumer_group(&named(stream), &named(topic), &named("g"))
        .await
        .unwrap()
        .map_or(0, |group| group.members_count)
}

/// Joins of one group by four sets of identifiers at once are one membership, as the
/// SDK's one connection is one member: joined by its ids, whatever names it. One leave
/// by numbers ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_at_once_by_different_identifiers_are_one_membership() {
    let cluster = TestCluster::start(3).await;
    let (stream, topic) = cluster.create_stream_and_topic("shop", "orders", 2);
    let client = route_client(&cluster).await;
    let group = client
        .create_consumer_group(&named("shop"), &named("orders"), "g")
        .await
        .unwrap()
        .id;
    let forms = [
        (named("shop"), named("orders"), named("g")),
        (numeric(stream), numeric(topic), numeric(group)),
        (named("shop"), numeric(topic), numeric(group)),
        (numeric(stream), named("orders"), named("g")),
    ];
    let joins = forms.into_iter().map(|(s, t, g)| {
        let client = Arc::clone(&client);
        tokio::spawn(async move { client.join_consumer_group(&s, &t, &g).await })
    });
    for join in joins.collect::<Vec<_>>() {
        join.await.unwrap().unwrap();
    }
    assert_eq!(members(&*client, "shop", "orders").await, 1);
    client
        .leave_consumer_group(&numeric(stream), &numeric(topic), &numeric(group))
        .await
        .unwrap();
    assert_eq!(members(&*client, "shop", "orders").await, 0);
    let _ = client.shutdown().await;
}

/// A stream and a topic this client renames after its join: the group named by the new
/// names is the one it joined, as with the SDK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_is_found_by_the_new_names_of_a_stream_and_topic_this_client_renamed() {
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("shop", "orders", 1);
    let client = route_client(&cluster).await;
    let (s, t, g) = (named("shop"), named("orders"), named("g"));
    client.create_consumer_group(&s, &t, "g").await.unwrap();
    client.join_consumer_group(&s, &t, &g).await.unwrap();
    client
        .update_stream(&s, "store", &StreamUpdateOptions::default())
        .await
        .unwrap();
    client
        .update_topic(&named("store"), &t, "sales", &TopicUpdateOptions::default())
        .await
        .unwrap();
    let (s, t) = (named("store"), named("sales"));
    let polled = client
        .poll_messages(
            &s,
            &t,
            None,
            &Consumer::group(g.clone()),
            &PollingStrategy::next(),
            1,
            true,
        )
        .await;
    assert!(polled.is_ok(), "a member's poll: {polled:?}");
    client.leave_consumer_group(&s, &t, &g).await.unwrap();
    assert_eq!(members(&*client, "store", "sales").await, 0);
    let _ = client.shutdown().await;
}

/// Natively (the router keeps a membership under the names its join used), a group whose
/// topic another client renamed: the leave by the old names is answered "not found", and it
/// reports that, yet the member link is closed all the same, so the client is no member of
/// the group under its new names either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leave_answered_not_found_still_ends_the_membership_natively() {
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("shop", "orders", 1);
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(5);
    let client = iggy_route_tokio::Client::connect(config).await.unwrap();
    let other = sdk_client(&cluster).await;
    other
        .create_consumer_group(&named("shop"), &named("orders"), "g")
        .await
        .unwrap();
    client
        .join_consumer_group("shop", "orders", "g")
        .await
        .unwrap();
    assert_eq!(members(&*other, "shop", "orders").await, 1);
    other
        .update_topic(
            &named("shop"),
            &named("orders"),
            "sales",
            &TopicUpdateOptions::default(),
        )
        .await
        .unwrap();
    let left = client.leave_consumer_group("shop", "orders", "g").await;
    assert!(left.is_err(), "the old names name nothing now: {left:?}");
    let mut left_over = members(&*other, "shop", "sales").await;
    for _ in 0..20 {
        if left_over == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left_over = members(&*other, "shop", "sales").await;
    }
    assert_eq!(left_over, 0, "the member link was closed");
    client.shutdown().await;
    let _ = other.shutdown().await;
}

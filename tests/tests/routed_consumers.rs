//! Routed polls and offset writes through the tokio adapter: an auto-commit poll goes to
//! the partition's primary (103 on the session's node, then 14 and 104 on a data link to
//! the primary) and commits there; an offset write goes to the primary too; when the
//! primary moves, the next one is refused once and rerouted; the session never moves.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Message, PollingStrategy, code};
use iggy_route_core::{Config, PollRequest};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tokio::Client;

/// The ids a fresh test cluster gives its first stream and topic (0-based, as on the real
/// cluster).
const STREAM: u32 = 0;
/// See [`STREAM`].
const TOPIC: u32 = 0;

fn consumer(id: u32) -> Consumer {
    Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(id),
    }
}

fn auto_commit_poll(partition: u32, count: u32) -> PollRequest {
    PollRequest {
        consumer: consumer(7),
        stream: Identifier::Numeric(STREAM),
        topic: Identifier::Numeric(TOPIC),
        partition_id: Some(partition),
        strategy: PollingStrategy::Next,
        count,
        auto_commit: true,
    }
}

async fn start() -> (TestCluster, Client) {
    start_with(true).await
}

/// [`start`] on a cluster without the routing commands, as the real one is.
async fn start_without_routing_commands() -> (TestCluster, Client) {
    start_with(false).await
}

async fn start_with(routing_commands: bool) -> (TestCluster, Client) {
    iggy_route_tests::error_events::install();
    let cluster = TestCluster::start(3).await;
    cluster.set_routing_commands(routing_commands);
    let ids = cluster.create_stream_and_topic("orders", "events", 3);
    assert_eq!(ids, (STREAM, TOPIC));
    // The session sits on node 0 (the first seed); no partition's primary is there.
    for (partition, node) in [(0, 1), (1, 2), (2, 1)] {
        assert!(cluster.set_primary(STREAM, TOPIC, partition, node));
    }
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(5);
    let client = Client::connect(config).await.unwrap();
    let messages = (0..10u128)
        .map(|i| Message {
            id: i + 1,
            payload: Bytes::from(format!("m{i}")),
            ..Message::default()
        })
        .collect();
    client
        .send(STREAM, TOPIC, Partitioning::PartitionId(1), messages)
        .await
        .unwrap();
    (cluster, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_commit_polls_are_served_and_committed_on_the_primary_while_the_session_stays() {
    let (cluster, client) = start().await;
    let logins = cluster.total_logins();
    let first = client.poll_request(auto_commit_poll(1, 4)).await.unwrap();
    let ids: Vec<u128> = first.messages.iter().map(|m| m.id).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    assert_eq!(
        cluster.consumer_offset(STREAM, TOPIC, 1, 7),
        Some(3),
        "committed on the primary"
    );
    let second = client.poll_request(auto_commit_poll(1, 4)).await.unwrap();
    let ids: Vec<u128> = second.messages.iter().map(|m| m.id).collect();
    assert_eq!(
        ids,
        [5, 6, 7, 8],
        "the next poll continues from the committed offset"
    );

    let primary = cluster.stats(2);
    assert_eq!(
        primary.requests(code::POLL_MESSAGES_ON_PRIMARY),
        2,
        "both polls on the primary"
    );
    assert!(
        primary.requests(code::ATTACH_CONSUMER_SESSION) >= 1,
        "attached before polling"
    );
    assert!(
        cluster.stats(0).requests(code::GET_POLL_ROUTING) >= 1,
        "looked up on the session's node"
    );
    assert_eq!(cluster.stats(0).requests(code::POLL_MESSAGES_ON_PRIMARY), 0);
    assert_eq!(cluster.total_refusals(), 0);
    assert!(
        cluster.total_logins() <= logins + 1,
        "at most the data link to node 2 signed in"
    );
    assert_eq!(client.stats().session_moves, 0);
    client.shutdown().await;
    cluster.shutdown().await;
    iggy_route_tests::error_events::assert_none();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_writes_go_to_the_primary_and_follow_it_when_it_moves() {
    let (cluster, client) = start().await;
    client
        .store_offset(consumer(9), STREAM, TOPIC, 1, 3)
        .await
        .unwrap();
    assert_eq!(cluster.consumer_offset(STREAM, TOPIC, 1, 9), Some(3));
    assert_eq!(cluster.stats(2).requests(code::STORE_CONSUMER_OFFSET), 1);

    assert!(cluster.set_primary(STREAM, TOPIC, 1, 0));
    client
        .store_offset(consumer(9), STREAM, TOPIC, 1, 5)
        .await
        .unwrap();
    assert_eq!(cluster.consumer_offset(STREAM, TOPIC, 1, 9), Some(5));
    // The old primary was asked once more and did not admit it (refused, or found the
    // offset past its own copy, which the model lets lag once it is a backup).
    assert_eq!(cluster.stats(2).requests(code::STORE_CONSUMER_OFFSET), 2);
    assert_eq!(
        cluster.stats(0).requests(code::STORE_CONSUMER_OFFSET),
        1,
        "then written on the new one"
    );
    assert_eq!(client.stats().session_moves, 0);
    client.shutdown().await;
    cluster.shutdown().await;
    iggy_route_tests::error_events::assert_none();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_primary_reroutes_the_next_auto_commit_poll_at_once() {
    let (cluster, client) = start().await;
    client.poll_request(auto_commit_poll(1, 2)).await.unwrap();
    assert!(cluster.set_primary(STREAM, TOPIC, 1, 0));
    let started = std::time::Instant::now();
    let next = client.poll_request(auto_commit_poll(1, 2)).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let ids: Vec<u128> = next.messages.iter().map(|m| m.id).collect();
    assert_eq!(ids, [3, 4], "the committed offset carried over");
    assert_eq!(cluster.stats(0).requests(code::POLL_MESSAGES_ON_PRIMARY), 1);
    assert_eq!(client.stats().session_moves, 0);
    client.shutdown().await;
    cluster.shutdown().await;
    iggy_route_tests::error_events::assert_none();
}

/// Without the routing commands (as on the real cluster), a plain auto-commit poll is served
/// by whichever node routing picks, and a backup keeps a commit to itself. A consumer that
/// never sent does not know the primary: its commits must still reach it, so that another
/// consumer process (or this one, once its polls go to the primary) continues from them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_routing_commands_a_consumer_that_never_sent_commits_on_the_primary() {
    let (cluster, producer) = start_without_routing_commands().await;
    producer.shutdown().await;
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(5);

    let consumer = Client::connect(config.clone()).await.unwrap();
    // The node that serves a poll before the primary is known may be a backup, which has
    // only what replication brought it so far.
    let caught_up = tokio::time::Instant::now() + Duration::from_secs(5);
    let first = loop {
        let polled = consumer.poll_request(auto_commit_poll(1, 4)).await.unwrap();
        if !polled.messages.is_empty() || tokio::time::Instant::now() > caught_up {
            break polled;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let ids: Vec<u128> = first.messages.iter().map(|m| m.id).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    assert_eq!(
        cluster.consumer_offset(STREAM, TOPIC, 1, 7),
        Some(3),
        "the commit reached the primary"
    );
    let second = consumer.poll_request(auto_commit_poll(1, 4)).await.unwrap();
    let ids: Vec<u128> = second.messages.iter().map(|m| m.id).collect();
    assert_eq!(ids, [5, 6, 7, 8]);
    assert_eq!(consumer.stats().session_moves, 0);
    consumer.shutdown().await;

    // Another consumer process goes on from the durable offset, wherever it polls.
    let next = Client::connect(config).await.unwrap();
    let third = next.poll_request(auto_commit_poll(1, 4)).await.unwrap();
    let ids: Vec<u128> = third.messages.iter().map(|m| m.id).collect();
    assert_eq!(ids, [9, 10]);
    assert_eq!(cluster.consumer_offset(STREAM, TOPIC, 1, 7), Some(9));
    // Nothing more to read: an empty poll stores nothing and answers at once.
    let empty = next.poll_request(auto_commit_poll(1, 4)).await.unwrap();
    assert!(empty.messages.is_empty());
    next.shutdown().await;
    cluster.shutdown().await;
    iggy_route_tests::error_events::assert_none();
}

/// Two auto-commit polls of one consumer in flight at once, without the routing commands:
/// the second reads from where the first's commit left the offset (the commit goes first in
/// the partition's queue), so no message is read twice and the offset never goes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_auto_commit_polls_of_one_consumer_read_each_message_once() {
    let (cluster, producer) = start_without_routing_commands().await;
    // The producer's sends taught it the primary: its polls go there at once.
    let polls: Vec<_> = (0..5)
        .map(|_| {
            let client = producer.clone();
            tokio::spawn(async move { client.poll_request(auto_commit_poll(1, 2)).await })
        })
        .collect();
    let mut replies = Vec::new();
    for poll in polls {
        replies.push(poll.await.unwrap());
    }
    let mut seen: Vec<u128> = replies
        .into_iter()
        .flat_map(|reply| reply.unwrap().messages.into_iter().map(|m| m.id))
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (1..=10).collect::<Vec<u128>>(), "each message once");
    assert_eq!(cluster.consumer_offset(STREAM, TOPIC, 1, 7), Some(9));
    producer.shutdown().await;
    cluster.shutdown().await;
    iggy_route_tests::error_events::assert_none();
}

/// The offset write of an auto-commit poll that cannot be made (the primary is down for the
/// whole of the request's time): the caller still gets the messages the poll read, as the
/// server's own auto-commit would give them, and the durable offset stays where it was, so
/// they are read again later. Nothing read is lost to a failed commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_cannot_be_made_still_hands_over_the_messages_read() {
    let (cluster, producer) = start_without_routing_commands().await;
    producer.shutdown().await;
    // Partition 1's primary is node 2; nodes 0 and 1 hold copies and refuse writes.
    cluster.stop_node(2).await;
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_millis(800);
    let consumer = Client::connect(config).await.unwrap();
    let caught_up = tokio::time::Instant::now() + Duration::from_secs(5);
    let polled = loop {
        let polled = consumer.poll_request(auto_commit_poll(1, 4)).await.unwrap();
        if !polled.messages.is_empty() || tokio::time::Instant::now() > caught_up {
            break polled;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let ids: Vec<u128> = polled.messages.iter().map(|m| m.id).collect();
    assert_eq!(ids, [1, 2, 3, 4], "the messages read, though not committed");
    assert_eq!(cluster.consumer_offset(STREAM, TOPIC, 1, 7), None);
    consumer.shutdown().await;
    cluster.shutdown().await;
}

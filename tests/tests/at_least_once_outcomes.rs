//! Under `DeliveryGuarantee::AtLeastOnce` a send whose link is lost with it in flight may be
//! stored already, and is written again. Whatever then ends the copy written again (the
//! user's sign-in refused when the link is opened again, its permissions gone, the client
//! shut down while it waits), the send may be stored: it must end in doubt (`OutcomeUnknown`;
//! 57 through the SDK traits), never with an error that says "not stored".
//!
//! Found by a tester who had not read the code: each of these ended with the sign-in's,
//! the refusal's or the shutdown's error while the first copy was in the log.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use iggy::prelude::{
    Client as SdkClient, Identifier, IggyMessage, Partitioning as SdkPartitioning,
};
use iggy_route_core::client::ClientError;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{GlobalPermissions, Message, Permissions, UserStatus};
use iggy_route_core::{Config, DeliveryGuarantee};
use iggy_route_tests::cluster::TestCluster;

/// The primary (node 1) stores a send at once and answers it `HELD` later.
const HELD: Duration = Duration::from_secs(4);

/// A client signed in as `user` (whose password is `secret-1`), or as root without one.
fn config(cluster: &TestCluster, user: Option<&str>) -> Config {
    let credentials = user.map_or_else(|| "iggy:iggy@".to_owned(), |u| format!("{u}:secret-1@"));
    let url = cluster
        .connection_string()
        .replace("iggy:iggy@", &credentials);
    let mut config = Config::from_connection_string(&url).unwrap();
    config.request_timeout = Duration::from_millis(2500);
    config.delivery = DeliveryGuarantee::AtLeastOnce;
    // The session on node 2, away from the primary.
    config.seeds.rotate_right(1);
    config
}

/// A client signed in as `user` (see [`config`]) whose link to the primary is open: one
/// send was answered.
async fn warm_client(
    cluster: &TestCluster,
    (s, t): (u32, u32),
    user: Option<&str>,
) -> iggy_route_tokio::Client {
    let client = iggy_route_tokio::Client::connect(config(cluster, user))
        .await
        .unwrap();
    client
        .send(s, t, Partitioning::PartitionId(0), vec![message(1)])
        .await
        .unwrap();
    client
}

fn message(id: u128) -> Message {
    Message {
        id,
        payload: Bytes::from_static(b"x"),
        ..Message::default()
    }
}

fn copies(cluster: &TestCluster, (s, t): (u32, u32), id: u128) -> usize {
    cluster
        .partition_log(s, t, 0)
        .iter()
        .filter(|m| m.id == id)
        .count()
}

/// How a send ended, and whether that may be said of one stored `stored` times.
fn kept(outcome: &Result<(), ClientError>, stored: usize) -> bool {
    match outcome {
        Ok(()) => stored >= 1,
        Err(error) => error.in_doubt() || stored == 0,
    }
}

/// A send held by the primary; its link to the primary is lost after `meanwhile` ran.
/// Returns its outcome and how many times it is stored.
async fn lost_then<F: std::future::Future<Output = ()>>(
    cluster: &TestCluster,
    (s, t): (u32, u32),
    client: &iggy_route_tokio::Client,
    id: u128,
    meanwhile: F,
) -> (Result<(), ClientError>, usize) {
    cluster.set_reply_delay(1, HELD);
    let sender = client.clone();
    let send = tokio::spawn(async move {
        sender
            .send(s, t, Partitioning::PartitionId(0), vec![message(id)])
            .await
            .map(drop)
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    meanwhile.await;
    cluster.set_reply_delay(1, Duration::ZERO);
    cluster.drop_connections(1);
    let outcome = send.await.unwrap();
    // A copy written late would show now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    (outcome, copies(cluster, (s, t), id))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_lost_in_flight_and_then_refused_is_never_reported_not_stored() {
    let cluster = TestCluster::start(3).await;
    let topic = cluster.create_stream_and_topic("lost", "events", 1);
    assert!(cluster.set_primary(topic.0, topic.1, 0, 1));
    let root = iggy_route_tokio::Client::connect(
        Config::from_connection_string(&cluster.connection_string()).unwrap(),
    )
    .await
    .unwrap();
    let mut wrong = Vec::new();
    for (n, change) in ["inactive", "deleted", "no permissions"]
        .into_iter()
        .enumerate()
    {
        let user = format!("user{n}");
        let all = Permissions {
            global: GlobalPermissions::ALL,
            streams: vec![],
        };
        root.create_user(&user, "secret-1", UserStatus::Active, Some(all))
            .await
            .unwrap();
        let client = warm_client(&cluster, topic, Some(&user)).await;
        let id = 100 + n as u128;
        let revoke = async {
            let changed = match change {
                "inactive" => {
                    root.update_user(user.as_str(), None, Some(UserStatus::Inactive))
                        .await
                }
                "deleted" => root.delete_user(user.as_str()).await,
                _ => {
                    let none = Permissions {
                        global: GlobalPermissions::default(),
                        streams: vec![],
                    };
                    root.update_permissions(user.as_str(), Some(none)).await
                }
            };
            changed.unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let (outcome, stored) = lost_then(&cluster, topic, &client, id, revoke).await;
        if !kept(&outcome, stored) {
            wrong.push(format!("{change}: {outcome:?}, stored {stored} times"));
        }
        client.shutdown().await;
    }
    root.shutdown().await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_lost_in_flight_when_the_client_shuts_down_is_in_doubt() {
    let cluster = TestCluster::start(3).await;
    let topic = cluster.create_stream_and_topic("shut", "events", 1);
    assert!(cluster.set_primary(topic.0, topic.1, 0, 1));
    let client = warm_client(&cluster, topic, None).await;
    // The primary stopped: its copy written again waits for a link when the client shuts
    // down.
    cluster.set_reply_delay(1, HELD);
    let sender = client.clone();
    let send = tokio::spawn(async move {
        sender
            .send(
                topic.0,
                topic.1,
                Partitioning::PartitionId(0),
                vec![message(7)],
            )
            .await
            .map(drop)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    cluster.stop_node(1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    client.shutdown().await;
    let outcome = send.await.unwrap();
    let stored = copies(&cluster, topic, 7);
    assert_eq!(stored, 1, "the primary stored it before it stopped");
    assert!(kept(&outcome, stored), "{outcome:?}, stored {stored} times");
}

/// The same through the SDK traits: an error other than 57 says "not stored".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_sdk_traits_a_send_lost_in_flight_then_shut_down_is_57() {
    let cluster = TestCluster::start(3).await;
    let topic = cluster.create_stream_and_topic("shut", "events", 1);
    assert!(cluster.set_primary(topic.0, topic.1, 0, 1));
    let client: Arc<dyn SdkClient> = Arc::new(
        iggy_route_tokio::Client::connect(config(&cluster, None))
            .await
            .unwrap(),
    );
    let stream = Identifier::named("shut").unwrap();
    let events = Identifier::named("events").unwrap();
    let one = |id: u128| {
        vec![
            IggyMessage::builder()
                .id(id)
                .payload(Bytes::from_static(b"x"))
                .build()
                .unwrap(),
        ]
    };
    let partition = SdkPartitioning::partition_id(0);
    client
        .send_messages(&stream, &events, &partition, &mut one(1))
        .await
        .unwrap();
    cluster.set_reply_delay(1, HELD);
    let sender = Arc::clone(&client);
    let send = tokio::spawn(async move {
        let mut batch = one(7);
        sender
            .send_messages(&stream, &events, &partition, &mut batch)
            .await
            .map_err(|error| error.as_code())
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    cluster.stop_node(1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = client.shutdown().await;
    let outcome = send.await.unwrap();
    let stored = copies(&cluster, topic, 7);
    assert_eq!(stored, 1, "the primary stored it before it stopped");
    assert_eq!(outcome, Err(57), "may have been stored");
}

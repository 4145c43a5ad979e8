//! Payload encryption through the SDK's traits: the SDK's `IggyClient` with an encryptor and
//! `iggy_route_tokio::Client::with_encryptor` with the same key read each other's messages,
//! payloads and typed user headers alike, on plain and group polls; the server holds only
//! sealed bytes; a reader without the key sees ciphertext and one with another key gets
//! `CannotDecryptData`.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use iggy::prelude::*;
use iggy_route_core::Config;
use iggy_route_tests::cluster::TestCluster;

fn encryptor(key: u8) -> Arc<EncryptorKind> {
    Arc::new(EncryptorKind::Aes256Gcm(
        Aes256GcmEncryptor::new(&[key; 32]).unwrap(),
    ))
}

fn named(name: &str) -> Identifier {
    Identifier::named(name).unwrap()
}

/// A message with a typed header naming its writer and number.
fn message(writer: &str, n: u32) -> IggyMessage {
    let headers = BTreeMap::from([
        (
            HeaderKey::from_str("writer").unwrap(),
            HeaderValue::from_str(writer).unwrap(),
        ),
        (HeaderKey::from_str("n").unwrap(), HeaderValue::from(n)),
    ]);
    IggyMessage::builder()
        .payload(Bytes::from(format!("{writer} order {n}")))
        .user_headers(headers)
        .build()
        .unwrap()
}

/// (payload, headers) of each message, in order.
fn contents(messages: &[IggyMessage]) -> Vec<(Bytes, BTreeMap<HeaderKey, HeaderValue>)> {
    messages
        .iter()
        .map(|m| {
            (
                m.payload.clone(),
                m.user_headers_map().unwrap().unwrap_or_default(),
            )
        })
        .collect()
}

async fn sdk_client(cluster: &TestCluster, key: u8) -> IggyClient {
    let client = IggyClientBuilder::from_connection_string(&cluster.sdk_connection_string(0))
        .unwrap()
        .with_encryptor(encryptor(key))
        .build()
        .unwrap();
    client.connect().await.unwrap();
    client
}

async fn route_client(cluster: &TestCluster, key: Option<u8>) -> iggy_route_tokio::Client {
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(5);
    let client = iggy_route_tokio::Client::connect(config).await.unwrap();
    match key {
        Some(key) => client.with_encryptor(encryptor(key)),
        None => client,
    }
}

async fn send(client: &dyn Client, partition: u32, messages: &mut [IggyMessage]) {
    client
        .send_messages(
            &named("orders"),
            &named("events"),
            &Partitioning::partition_id(partition),
            messages,
        )
        .await
        .unwrap();
}

async fn poll(client: &dyn Client, partition: u32) -> Result<PolledMessages, IggyError> {
    client
        .poll_messages(
            &named("orders"),
            &named("events"),
            Some(partition),
            &Consumer::new(Identifier::numeric(1).unwrap()),
            &PollingStrategy::offset(0),
            100,
            false,
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_and_iggy_route_read_each_others_sealed_messages_with_the_same_key() {
    let cluster = TestCluster::start(3).await;
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 2);
    // Every primary on node 0, the SDK's one node: the SDK 0.11.0 reads where its session is.
    let sdk = sdk_client(&cluster, 7).await;
    let route = route_client(&cluster, Some(7)).await;

    let batch = |writer: &str| (0..3).map(|n| message(writer, n)).collect::<Vec<_>>();
    let plain_sdk = batch("sdk");
    let mut sent = batch("sdk");
    send(&sdk, 0, &mut sent).await;
    let plain_route = batch("route");
    let mut routed = batch("route");
    send(&route, 1, &mut routed).await;
    // Both write the sealed bytes back into the caller's messages.
    for (sealed, plain) in sent
        .iter()
        .zip(&plain_sdk)
        .chain(routed.iter().zip(&plain_route))
    {
        assert_ne!(sealed.payload, plain.payload);
        assert_eq!(sealed.header.payload_length as usize, sealed.payload.len());
    }

    let by_route = poll(&route, 0).await.unwrap();
    assert_eq!(contents(&by_route.messages), contents(&plain_sdk));
    let by_sdk = poll(&sdk, 1).await.unwrap();
    assert_eq!(contents(&by_sdk.messages), contents(&plain_route));
    // The ids the writers minted come back with the messages.
    let ids = |messages: &[IggyMessage]| messages.iter().map(|m| m.header.id).collect::<Vec<_>>();
    assert_eq!(ids(&by_route.messages), ids(&sent));
    assert_eq!(ids(&by_sdk.messages), ids(&routed));

    // The server holds sealed bytes only.
    for partition in 0..2 {
        for stored in cluster.partition_log(stream, topic, partition) {
            let payload = String::from_utf8_lossy(&stored.payload).into_owned();
            assert!(!payload.contains("order"), "stored in the clear: {payload}");
        }
    }
    let _ = sdk.shutdown().await;
    route.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_key_a_poll_sees_ciphertext_and_with_another_it_fails_as_the_sdks_does() {
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("orders", "events", 1);
    let sdk = sdk_client(&cluster, 7).await;
    let mut sent = vec![message("sdk", 1)];
    send(&sdk, 0, &mut sent).await;

    let keyless = route_client(&cluster, None).await;
    let raw = poll(&keyless, 0).await.unwrap();
    assert_eq!(
        raw.messages[0].payload, sent[0].payload,
        "the sealed bytes as stored"
    );
    assert_eq!(raw.messages[0].user_headers, sent[0].user_headers);

    let wrong = route_client(&cluster, Some(8)).await;
    let refused = poll(&wrong, 0).await.unwrap_err();
    let sdk_wrong = sdk_client(&cluster, 8).await;
    let sdk_refused = poll(&sdk_wrong, 0).await.unwrap_err();
    assert_eq!(refused, IggyError::CannotDecryptData);
    assert_eq!(refused, sdk_refused);

    // A message written in the clear cannot be opened either, short or long.
    for payload in [&b"x"[..], b"a message written without a key"] {
        let mut clear = vec![
            IggyMessage::builder()
                .payload(Bytes::from_static(payload))
                .build()
                .unwrap(),
        ];
        send(&keyless, 0, &mut clear).await;
    }
    let reader = route_client(&cluster, Some(7)).await;
    assert_eq!(
        poll(&reader, 0).await.unwrap_err(),
        IggyError::CannotDecryptData
    );
    for client in [&keyless, &wrong, &reader] {
        client.shutdown().await;
    }
    let _ = sdk.shutdown().await;
    let _ = sdk_wrong.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_member_opens_what_it_polls() {
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("orders", "events", 2);
    let sdk = sdk_client(&cluster, 7).await;
    let plain: Vec<IggyMessage> = (0..4).map(|n| message("sdk", n)).collect();
    for partition in 0..2 {
        let mut sealed: Vec<IggyMessage> = (partition * 2..partition * 2 + 2)
            .map(|n| message("sdk", n))
            .collect();
        send(&sdk, partition, &mut sealed).await;
    }

    let route = route_client(&cluster, Some(7)).await;
    let (stream, topic, group) = (named("orders"), named("events"), named("readers"));
    ConsumerGroupClient::create_consumer_group(&route, &stream, &topic, "readers")
        .await
        .unwrap();
    ConsumerGroupClient::join_consumer_group(&route, &stream, &topic, &group)
        .await
        .unwrap();
    let mut read = Vec::new();
    for _ in 0..4 {
        let polled = MessageClient::poll_messages(
            &route,
            &stream,
            &topic,
            None,
            &Consumer::group(group.clone()),
            &PollingStrategy::next(),
            10,
            true,
        )
        .await
        .unwrap();
        read.extend(polled.messages);
    }
    let mut got = contents(&read);
    let mut expected = contents(&plain);
    got.sort_by(|a, b| a.0.cmp(&b.0));
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, expected);
    route.shutdown().await;
    let _ = sdk.shutdown().await;
}

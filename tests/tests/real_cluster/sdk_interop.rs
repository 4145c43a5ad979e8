//! The SDK 0.11.0's `IggyClient` and iggy-route through the SDK's traits, side by side on
//! the real server: messages sealed by the SDK's encryptor read the same through iggy-route
//! with the same key and the other way round, and a user-header block that is no list of
//! headers (as sealed headers are not) is stored and read back byte for byte.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use bytes::Bytes;
use iggy::prelude::*;
use iggy_route_tests::real_cluster::{
    RealCluster, admin, admitted_by, create_stream, create_topic, send, unique_name,
};
use iggy_route_tests::scripted::clients::Adapter;

use super::{DAY_RUNTIME, serial};

fn encryptor() -> Arc<EncryptorKind> {
    Arc::new(EncryptorKind::Aes256Gcm(
        Aes256GcmEncryptor::new(&[42; 32]).unwrap(),
    ))
}

fn message(writer: &str, n: u32, headers: Option<Bytes>) -> IggyMessage {
    let payload = Bytes::from(format!("{writer} {n}"));
    let Some(block) = headers else {
        let typed = BTreeMap::from([(
            HeaderKey::from_str("writer").unwrap(),
            HeaderValue::from_str(writer).unwrap(),
        )]);
        return IggyMessage::builder()
            .payload(payload)
            .user_headers(typed)
            .build()
            .unwrap();
    };
    let mut message = IggyMessage::builder().payload(payload).build().unwrap();
    message.header.user_headers_length = u32::try_from(block.len()).unwrap();
    message.user_headers = Some(block);
    message
}

fn contents(messages: &[IggyMessage]) -> Vec<(Bytes, Option<Bytes>)> {
    messages
        .iter()
        .map(|m| (m.payload.clone(), m.user_headers.clone()))
        .collect()
}

async fn send_to(client: &dyn Client, stream: &str, topic: &str, messages: &mut [IggyMessage]) {
    let (stream, topic) = (
        Identifier::named(stream).unwrap(),
        Identifier::named(topic).unwrap(),
    );
    client
        .send_messages(&stream, &topic, &Partitioning::partition_id(0), messages)
        .await
        .unwrap();
}

async fn poll_from(client: &dyn Client, stream: &str, topic: &str, offset: u64) -> PolledMessages {
    client
        .poll_messages(
            &Identifier::named(stream).unwrap(),
            &Identifier::named(topic).unwrap(),
            Some(0),
            &Consumer::new(Identifier::numeric(1).unwrap()),
            &PollingStrategy::offset(offset),
            100,
            false,
        )
        .await
        .unwrap()
}

#[test]
fn sealed_messages_and_raw_header_blocks_read_the_same_through_both_clients() {
    let Some(cluster) = RealCluster::from_env("sdk_interop") else {
        return;
    };
    let _serial = serial();
    let stream = unique_name("route-sealed");
    let topic = "events";
    let admin_client = cluster.client(Adapter::Tokio, 0);
    admin(&admin_client, create_stream(&stream));
    admin(&admin_client, create_topic(&stream, topic, 1));
    // The SDK 0.11.0 sends and reads on its one node: the partition's primary.
    let primary = admitted_by(admin_client.request(send(&stream, topic, 0, 0, "probe"))).unwrap();
    admin_client.shutdown();
    let Some(url) = cluster.sdk_connection_string(primary as usize) else {
        println!("sdk_interop: skipped (a TLS cluster)");
        return;
    };
    DAY_RUNTIME.block_on(async {
        let sdk = IggyClientBuilder::from_connection_string(&url)
            .unwrap()
            .with_encryptor(encryptor())
            .build()
            .unwrap();
        sdk.connect().await.unwrap();
        let config = cluster.config(0);
        let route = iggy_route_tokio::Client::connect(config.clone())
            .await
            .unwrap()
            .with_encryptor(encryptor());
        let keyless = iggy_route_tokio::Client::connect(config).await.unwrap();

        let mut by_sdk: Vec<IggyMessage> = (0..3).map(|n| message("sdk", n, None)).collect();
        send_to(&sdk, &stream, topic, &mut by_sdk).await;
        let read = poll_from(&route, &stream, topic, 1).await;
        let plain: Vec<IggyMessage> = (0..3).map(|n| message("sdk", n, None)).collect();
        assert_eq!(contents(&read.messages), contents(&plain));

        let mut by_route: Vec<IggyMessage> = (0..3).map(|n| message("route", n, None)).collect();
        send_to(&route, &stream, topic, &mut by_route).await;
        let read = poll_from(&sdk, &stream, topic, 4).await;
        let plain: Vec<IggyMessage> = (0..3).map(|n| message("route", n, None)).collect();
        assert_eq!(contents(&read.messages), contents(&plain));

        let block = Bytes::from_static(b"\xff\x00not a list of headers");
        let mut raw = vec![message("raw", 0, Some(block.clone()))];
        send_to(&keyless, &stream, topic, &mut raw).await;
        let read = poll_from(&keyless, &stream, topic, 7).await;
        assert_eq!(read.messages.len(), 1);
        assert_eq!(read.messages[0].user_headers.as_ref(), Some(&block));
        println!(
            "sdk_interop: node {primary}: 3 sealed by the SDK opened by iggy-route, 3 the other \
             way, a raw header block stored as given"
        );
        let _ = sdk.shutdown().await;
        route.shutdown().await;
        keyless.shutdown().await;
    });
}

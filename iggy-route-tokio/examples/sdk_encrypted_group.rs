//! An SDK 0.11.0 program with payload encryption and a consumer group, written only against
//! the SDK's traits, that runs on either client: the SDK's own `IggyClient` (with `--sdk`)
//! or iggy-route's (the default, feature `sdk`). Only `build_client` differs between the
//! two. A producer sends orders with typed headers, sealed with an AES-256-GCM key; a
//! member of a consumer group polls them with auto-commit and opens them; the program
//! checks that every order came back once, with its headers, and prints how long it took.
//! Messages sealed by one client open with the other given the same key.
//!
//! iggy-route runs it on any cluster, primaries split or not:
//!
//! ```text
//! cargo run --release -p iggy-route-tests --bin iggy-route-test-cluster -- --split --port-base 8090
//! cargo run --release -p iggy-route-tokio --features sdk --example tokio-sdk-encrypted-group
//! ```
//!
//! The SDK 0.11.0 commits a group's offsets on a cluster of more than one node only through
//! the routing commands, which the server built from the public source does not serve (it
//! answers `InvalidCommand`), so its side runs on one node:
//!
//! ```text
//! cargo run --release -p iggy-route-tests --bin iggy-route-test-cluster -- --nodes 1 --port-base 8090
//! cargo run --release -p iggy-route-tokio --features sdk --example tokio-sdk-encrypted-group -- iggy://iggy:iggy@127.0.0.1:8090 --sdk
//! ```
//!
//! The connection string is the first argument that does not start with `--`, else
//! `IGGY_CONNECTION_STRING`, else `iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092`.
//! The SDK's client takes one node: it is given the first. The key is a fixed example key;
//! a real program reads its own from a secret store.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy::prelude::{
    Aes256GcmEncryptor, Client, Consumer, EncryptorKind, HeaderKey, HeaderValue, Identifier,
    IggyClientBuilder, IggyError, IggyMessage, Partitioning, PollingStrategy,
};
use iggy_route_tokio::IntoIggyError;

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const GROUP: &str = "example-sealed-readers";
const ORDERS: u32 = 20;
/// An example key (32 bytes, base64): never use a key written in source.
const KEY: &str = "ZXhhbXBsZS1rZXktMzItYnl0ZXMtbG9uZy0wMTIzNDU=";

/// The one place that knows which client runs the program.
async fn build_client(connection_string: &str, sdk: bool) -> Result<Arc<dyn Client>, IggyError> {
    let encryptor = Arc::new(EncryptorKind::Aes256Gcm(
        Aes256GcmEncryptor::from_base64_key(KEY)?,
    ));
    if sdk {
        let first_node = sdk_connection_string(connection_string);
        let client = IggyClientBuilder::from_connection_string(&first_node)?
            .with_encryptor(encryptor)
            .build()?;
        client.connect().await?;
        return Ok(Arc::new(client));
    }
    let client = iggy_route_tokio::Client::from_connection_string(connection_string)
        .await
        .map_err(IntoIggyError::into_iggy_error)?
        .with_encryptor(encryptor);
    Ok(Arc::new(client))
}

#[tokio::main]
async fn main() -> Result<(), IggyError> {
    let sdk = std::env::args().any(|arg| arg == "--sdk");
    let client = build_client(&connection_string(), sdk).await?;
    let kind = if sdk {
        "the SDK's IggyClient"
    } else {
        "iggy-route"
    };
    println!("running on {kind}");
    let result = run(client.as_ref()).await;
    client.shutdown().await?;
    result
}

/// The SDK program: nothing here knows which client it holds.
async fn run(client: &dyn Client) -> Result<(), IggyError> {
    let stream = Identifier::from_str(STREAM)?;
    let topic = Identifier::from_str(TOPIC)?;
    let group = Identifier::from_str(GROUP)?;
    if client.get_stream(&stream).await?.is_none() {
        client.create_stream(STREAM).await?;
    }
    if client.get_topic(&stream, &topic).await?.is_none() {
        eprintln!("{STREAM}/{TOPIC} does not exist: start the test cluster with --split");
        return Err(IggyError::TopicNameNotFound(
            TOPIC.to_owned(),
            STREAM.to_owned(),
        ));
    }
    if client
        .get_consumer_group(&stream, &topic, &group)
        .await?
        .is_none()
    {
        client.create_consumer_group(&stream, &topic, GROUP).await?;
    }
    client.join_consumer_group(&stream, &topic, &group).await?;
    // The group starts where it left off: drain what earlier runs left, unread.
    while !poll_group(client, (&stream, &topic), &group)
        .await?
        .is_empty()
    {}

    let run_id = std::process::id();
    let started = Instant::now();
    for order in 0..ORDERS {
        let headers = BTreeMap::from([
            (HeaderKey::from_str("order")?, HeaderValue::from(order)),
            (
                HeaderKey::from_str("run")?,
                HeaderValue::from_str(&run_id.to_string())?,
            ),
        ]);
        let mut messages = vec![
            IggyMessage::builder()
                .payload(Bytes::from(format!("order {order}: 3 widgets")))
                .user_headers(headers)
                .build()?,
        ];
        let key = Partitioning::messages_key_str(&format!("customer-{}", order % 5))?;
        client
            .send_messages(&stream, &topic, &key, &mut messages)
            .await?;
    }
    let sent = started.elapsed();

    let mut read = BTreeSet::new();
    let give_up = Instant::now() + Duration::from_secs(10);
    while read.len() < ORDERS as usize && Instant::now() < give_up {
        let messages = poll_group(client, (&stream, &topic), &group).await?;
        if messages.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for message in messages {
            let headers = message.user_headers_map()?.unwrap_or_default();
            let this_run = run_id.to_string();
            let run = headers.get(&HeaderKey::from_str("run")?);
            if run.map(|value| value.as_str()).transpose()? != Some(this_run.as_str()) {
                continue;
            }
            let order = headers
                .get(&HeaderKey::from_str("order")?)
                .ok_or(IggyError::InvalidFormat)?
                .as_uint32()?;
            if !message
                .payload
                .starts_with(format!("order {order}:").as_bytes())
            {
                return Err(IggyError::InvalidFormat);
            }
            if !read.insert(order) {
                eprintln!("order {order} handed out twice");
                return Err(IggyError::Error);
            }
        }
    }
    client.leave_consumer_group(&stream, &topic, &group).await?;
    println!(
        "sent {ORDERS} sealed orders with typed headers in {sent:?}; the group member opened \
         {} of them, each once",
        read.len()
    );
    if read.len() == ORDERS as usize {
        Ok(())
    } else {
        Err(IggyError::Error)
    }
}

/// One poll of the group, as a member: the client picks the member's partitions in turn.
async fn poll_group(
    client: &dyn Client,
    (stream, topic): (&Identifier, &Identifier),
    group: &Identifier,
) -> Result<Vec<IggyMessage>, IggyError> {
    let polled = client
        .poll_messages(
            stream,
            topic,
            None,
            &Consumer::group(group.clone()),
            &PollingStrategy::next(),
            10,
            true,
        )
        .await?;
    Ok(polled.messages)
}

fn connection_string() -> String {
    std::env::args()
        .skip(1)
        .find(|arg| !arg.starts_with("--"))
        .or_else(|| std::env::var("IGGY_CONNECTION_STRING").ok())
        .unwrap_or_else(|| {
            "iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092".to_owned()
        })
}

/// The connection string with its first node only: the SDK's client connects to one.
fn sdk_connection_string(connection_string: &str) -> String {
    let (head, query) = connection_string
        .split_once('?')
        .map_or((connection_string, None), |(head, query)| {
            (head, Some(query))
        });
    let first = head.split(',').next().unwrap_or(head);
    match query {
        Some(query) => format!("{first}?{query}"),
        None => first.to_owned(),
    }
}

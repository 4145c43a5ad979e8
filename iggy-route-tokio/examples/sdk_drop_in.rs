//! A program written only against the SDK 0.11.0's traits (`Arc<dyn iggy_common::Client>`,
//! `IggyMessage`, typed user headers, `IggyError`) that runs on either client: the SDK's
//! own `IggyClient` (with `--sdk`) or iggy-route's (the default, feature `sdk`). Only
//! `build_client` differs between the two; everything below it is the SDK program as it
//! was. It sends keyed messages with typed headers, reads every partition back and checks
//! that each message came back with its headers, then prints how long the sends took.
//!
//! With the primaries split over the nodes, the SDK's client stalls about 4 s on most sends
//! whose partition's primary is not on its node (a backup refuses them, it replays the
//! refusal, then moves its session); iggy-route sends each to its primary at once.
//!
//! Against the test cluster, with every partition's primary on a different node:
//!
//! ```text
//! cargo run --release -p iggy-route-tests --bin iggy-route-test-cluster -- --split --port-base 8090
//! cargo run --release -p iggy-route-tokio --features sdk --example tokio-sdk-drop-in
//! cargo run --release -p iggy-route-tokio --features sdk --example tokio-sdk-drop-in -- --sdk
//! ```
//!
//! The connection string is the first argument that is not `--sdk`, else
//! `IGGY_CONNECTION_STRING`, else `iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092`.
//! The SDK's client takes one node: it is given the first.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy::prelude::{
    Client, Consumer, HeaderKey, HeaderValue, Identifier, IggyClient, IggyError, IggyMessage,
    Partitioning, PollingStrategy, TopicCreateOptions,
};
use iggy_route_tokio::IntoIggyError;

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const PARTITIONS: u32 = 3;
const MESSAGES: u32 = 30;

/// The one place that knows which client runs the program.
async fn build_client(connection_string: &str, sdk: bool) -> Result<Arc<dyn Client>, IggyError> {
    if sdk {
        let first_node = sdk_connection_string(connection_string);
        let client = IggyClient::from_connection_string(&first_node)?;
        client.connect().await?;
        return Ok(Arc::new(client));
    }
    let client = iggy_route_tokio::Client::from_connection_string(connection_string)
        .await
        .map_err(IntoIggyError::into_iggy_error)?;
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
    run(client.as_ref()).await
}

/// The SDK program: nothing here knows which client it holds.
async fn run(client: &dyn Client) -> Result<(), IggyError> {
    let stream = Identifier::from_str(STREAM)?;
    let topic = Identifier::from_str(TOPIC)?;
    if client.get_stream(&stream).await?.is_none() {
        client.create_stream(STREAM).await?;
    }
    let existing = client.get_topic(&stream, &topic).await?;
    if existing.is_none() {
        let options = TopicCreateOptions {
            partitions_count: Some(PARTITIONS),
            ..TopicCreateOptions::default()
        };
        client.create_topic(&stream, TOPIC, &options).await?;
    }
    let partitions = client
        .get_topic(&stream, &topic)
        .await?
        .map_or(PARTITIONS, |details| details.partitions_count);
    let mut before = BTreeMap::new();
    for partition in 0..partitions {
        before.insert(
            partition,
            next_offset(client, &stream, &topic, partition).await?,
        );
    }

    let run_id = std::process::id();
    let started = Instant::now();
    let mut sent = BTreeSet::new();
    for index in 0..MESSAGES {
        let key = Partitioning::messages_key_str(&format!("customer-{}", index % 10))?;
        let headers = BTreeMap::from([
            (HeaderKey::from_str("order")?, HeaderValue::from(index)),
            (
                HeaderKey::from_str("run")?,
                HeaderValue::from_str(&run_id.to_string())?,
            ),
        ]);
        let mut messages = vec![
            IggyMessage::builder()
                .payload(Bytes::from(format!("order {index}")))
                .user_headers(headers)
                .build()?,
        ];
        client
            .send_messages(&stream, &topic, &key, &mut messages)
            .await?;
        sent.insert(index);
    }
    let send_time = started.elapsed();

    // Read every partition back from where this run started and find each order once.
    let mut found = BTreeSet::new();
    let give_up = Instant::now() + Duration::from_secs(10);
    while found.len() < sent.len() && Instant::now() < give_up {
        found.clear();
        for (&partition, &from) in &before {
            read_back(
                client,
                (&stream, &topic),
                partition,
                from,
                run_id,
                &mut found,
            )
            .await?;
        }
        if found.len() < sent.len() {
            // A backup's copy may trail the primary's by a moment.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    println!(
        "sent {MESSAGES} messages with typed headers in {send_time:?}, read back {} of them",
        found.len()
    );
    if found != sent {
        eprintln!(
            "missing after a read back: {:?}",
            sent.difference(&found).collect::<Vec<_>>()
        );
        return Err(IggyError::Error);
    }
    Ok(())
}

/// The offset the next message of `partition` gets.
async fn next_offset(
    client: &dyn Client,
    stream: &Identifier,
    topic: &Identifier,
    partition: u32,
) -> Result<u64, IggyError> {
    let polled = client
        .poll_messages(
            stream,
            topic,
            Some(partition),
            &Consumer::default(),
            &PollingStrategy::last(),
            1,
            false,
        )
        .await?;
    Ok(polled.messages.last().map_or(0, |m| m.header.offset + 1))
}

/// Adds the `order` header of every message of this run found in `partition` from `from`.
async fn read_back(
    client: &dyn Client,
    (stream, topic): (&Identifier, &Identifier),
    partition: u32,
    from: u64,
    run_id: u32,
    found: &mut BTreeSet<u32>,
) -> Result<(), IggyError> {
    let mut offset = from;
    loop {
        let polled = client
            .poll_messages(
                stream,
                topic,
                Some(partition),
                &Consumer::default(),
                &PollingStrategy::offset(offset),
                100,
                false,
            )
            .await?;
        let Some(last) = polled.messages.last() else {
            return Ok(());
        };
        offset = last.header.offset + 1;
        for message in &polled.messages {
            let Some(headers) = message.user_headers_map()? else {
                continue;
            };
            let this_run = run_id.to_string();
            let run = headers.get(&HeaderKey::from_str("run")?);
            if run.map(|value| value.as_str()).transpose()? != Some(this_run.as_str()) {
                continue;
            }
            if let Some(order) = headers.get(&HeaderKey::from_str("order")?) {
                found.insert(order.as_uint32()?);
            }
        }
    }
}

fn connection_string() -> String {
    std::env::args()
        .skip(1)
        .find(|arg| arg != "--sdk")
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

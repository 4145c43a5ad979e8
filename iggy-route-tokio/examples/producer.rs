//! Sends keyed messages to a topic one `send` at a time, creating the stream and topic if
//! needed, and prints which node admitted each partition's sends and the client's counters.
//!
//! Against the test cluster, with every partition's primary on a different node:
//!
//! ```text
//! cargo run --release -p iggy-route-tests --bin iggy-route-test-cluster -- --split --port-base 8090
//! cargo run -p iggy-route-tokio --example tokio-producer
//! ```
//!
//! The connection string is the first argument, else `IGGY_CONNECTION_STRING`, else
//! `iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092` (the test cluster's
//! with `--port-base 8090`).

use std::collections::BTreeMap;
use std::time::Instant;

use iggy_route_tokio::{Client, ClientError, Message, Partitioning};

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const PARTITIONS: u32 = 3;
const MESSAGES: u32 = 300;

#[tokio::main]
async fn main() -> Result<(), ClientError> {
    let client = Client::from_connection_string(&connection_string()).await?;
    if client.get_stream(STREAM).await?.is_none() {
        client.create_stream(STREAM).await?;
    }
    if client.get_topic(STREAM, TOPIC).await?.is_none() {
        client.create_topic(STREAM, TOPIC, PARTITIONS).await?;
    }

    let started = Instant::now();
    // Partition -> (node that admitted its sends, messages).
    let mut admitted = BTreeMap::new();
    for index in 0..MESSAGES {
        // Messages with one key always land in one partition, in order.
        let key = Partitioning::messages_key(format!("customer-{}", index % 10).into_bytes())?;
        let message = Message {
            payload: format!("order {index}").into(),
            ..Message::default()
        };
        let receipt = client.send(STREAM, TOPIC, key, vec![message]).await?;
        let entry = admitted
            .entry(receipt.partition_id)
            .or_insert((receipt.node, 0));
        entry.0 = receipt.node;
        entry.1 += receipt.messages;
    }
    println!("sent {MESSAGES} messages in {:?}", started.elapsed());
    for (partition, (node, messages)) in admitted {
        println!("partition {partition}: {messages} messages, admitted by {node}");
    }
    let stats = client.stats();
    println!(
        "refusals {}, session moves {}, lookups {}",
        stats.refusals, stats.session_moves, stats.lookups
    );
    client.shutdown().await;
    Ok(())
}

/// The first argument, else `IGGY_CONNECTION_STRING`, else the test cluster on 8090.
fn connection_string() -> String {
    std::env::args()
        .nth(1)
        .or_else(|| std::env::var("IGGY_CONNECTION_STRING").ok())
        .unwrap_or_else(|| "iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092".into())
}

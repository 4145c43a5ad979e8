//! Streams messages through a background producer: `send` only buffers and returns a
//! delivery; a task of the producer's own sends the buffer's batches in order, several at
//! once, each straight to its partition's primary. Waits for the last delivery, flushes,
//! and prints the producer's and the client's counters.
//!
//! Against the test cluster, with every partition's primary on a different node:
//!
//! ```text
//! cargo run --release -p iggy-route-tests --bin iggy-route-test-cluster -- --split --port-base 8090
//! cargo run --release -p iggy-route-tokio --example tokio-background-producer
//! ```
//!
//! The connection string is the first argument, else `IGGY_CONNECTION_STRING`, else
//! `iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092` (the test cluster's
//! with `--port-base 8090`).

use std::time::Instant;

use iggy_route_tokio::{BackgroundConfig, Client, ClientError, Message, Partitioning};

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const PARTITIONS: u32 = 3;
const MESSAGES: u32 = 100_000;

#[tokio::main]
async fn main() -> Result<(), ClientError> {
    let client = Client::from_connection_string(&connection_string()).await?;
    if client.get_stream(STREAM).await?.is_none() {
        client.create_stream(STREAM).await?;
    }
    if client.get_topic(STREAM, TOPIC).await?.is_none() {
        client.create_topic(STREAM, TOPIC, PARTITIONS).await?;
    }

    // Balanced: each batch goes to the next partition in turn, so every primary works.
    let producer = client
        .producer(STREAM, TOPIC)?
        .partitioning(Partitioning::Balanced)
        .background(BackgroundConfig::default())
        .build()?;
    let started = Instant::now();
    let mut last = None;
    for index in 0..MESSAGES {
        let message = Message {
            payload: format!("event {index}").into(),
            ..Message::default()
        };
        // A delivery resolves to this call's own receipt; one dropped is still sent.
        last = Some(producer.send(vec![message]).await?);
    }
    if let Some(delivery) = last {
        match delivery.await {
            Ok(receipt) => println!(
                "last event: partition {} offset {:?} on {}",
                receipt.partition_id, receipt.base_offset, receipt.node
            ),
            Err(failure) => println!("last event failed: {}", failure.error),
        }
    }
    if let Err(error) = producer.flush().await {
        println!("flush: {error}");
    }
    let elapsed = started.elapsed();
    println!(
        "streamed {MESSAGES} messages in {elapsed:?} ({:.0} msg/s)",
        f64::from(MESSAGES) / elapsed.as_secs_f64()
    );
    println!("producer: {:?}", producer.stats());
    if let Err(error) = producer.shutdown().await {
        println!("shutdown: {error}");
    }
    let stats = client.stats();
    println!(
        "client: refusals {}, session moves {}, coalesced {}",
        stats.refusals, stats.session_moves, stats.coalesced
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

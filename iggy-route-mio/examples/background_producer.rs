//! Streams messages through a background producer from a plain thread: `send` only
//! buffers and returns a delivery; the producer's own thread sends the buffer's batches in
//! order, several at once, each straight to its partition's primary. Waits for the last
//! delivery, flushes, and prints the producer's and the client's counters.
//!
//! Against the test cluster, with every partition's primary on a different node:
//!
//! ```text
//! cargo run --release -p iggy-route-tests --bin iggy-route-test-cluster -- --split --port-base 8090
//! cargo run --release -p iggy-route-mio --example mio-background-producer
//! ```
//!
//! The connection string is the first argument, else `IGGY_CONNECTION_STRING`, else
//! `iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092` (the test cluster's
//! with `--port-base 8090`).

use std::time::Instant;

use iggy_route_mio::{BackgroundConfig, Client, ClientError, Message, Partitioning};

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const PARTITIONS: u32 = 3;
const MESSAGES: u32 = 100_000;

fn main() -> Result<(), ClientError> {
    let client = Client::from_connection_string(&connection_string())?;
    if client.get_stream(STREAM)?.is_none() {
        client.create_stream(STREAM)?;
    }
    if client.get_topic(STREAM, TOPIC)?.is_none() {
        client.create_topic(STREAM, TOPIC, PARTITIONS)?;
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
        // A delivery gives this call's own receipt; one dropped is still sent.
        last = Some(producer.send(vec![message])?);
    }
    if let Some(delivery) = last {
        match delivery.wait() {
            Ok(receipt) => println!(
                "last event: partition {} offset {:?} on {}",
                receipt.partition_id, receipt.base_offset, receipt.node
            ),
            Err(failure) => println!("last event failed: {}", failure.error),
        }
    }
    if let Err(error) = producer.flush() {
        println!("flush: {error}");
    }
    let elapsed = started.elapsed();
    println!(
        "streamed {MESSAGES} messages in {elapsed:?} ({:.0} msg/s)",
        f64::from(MESSAGES) / elapsed.as_secs_f64()
    );
    println!("producer: {:?}", producer.stats());
    if let Err(error) = producer.shutdown() {
        println!("shutdown: {error}");
    }
    let stats = client.stats();
    println!(
        "client: refusals {}, session moves {}, coalesced {}",
        stats.refusals, stats.session_moves, stats.coalesced
    );
    client.shutdown();
    Ok(())
}

/// The first argument, else `IGGY_CONNECTION_STRING`, else the test cluster on 8090.
fn connection_string() -> String {
    std::env::args()
        .nth(1)
        .or_else(|| std::env::var("IGGY_CONNECTION_STRING").ok())
        .unwrap_or_else(|| "iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092".into())
}

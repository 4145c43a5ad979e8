//! Sends keyed messages to a topic, creating the stream and topic if needed, one `send` at
//! a time; then streams more through a background producer, which batches them; then
//! prints the client's counters.
//!
//! ```text
//! cargo run -p iggy-route-tokio --example tokio-producer -- iggy://iggy:iggy@127.0.0.1:8090
//! ```

use std::time::Instant;

use iggy_route_tokio::{BackgroundConfig, Client, ClientError, Message, Partitioning};

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const PARTITIONS: u32 = 3;
const MESSAGES: u32 = 100;
const STREAMED: u32 = 10_000;

#[tokio::main]
async fn main() -> Result<(), ClientError> {
    let connection_string = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "iggy://iggy:iggy@127.0.0.1:8090".to_owned());
    let client = Client::from_connection_string(&connection_string).await?;

    if client.get_stream(STREAM).await?.is_none() {
        client.create_stream(STREAM).await?;
    }
    if client.get_topic(STREAM, TOPIC).await?.is_none() {
        client.create_topic(STREAM, TOPIC, PARTITIONS).await?;
    }

    let started = Instant::now();
    for index in 0..MESSAGES {
        // Messages with one key always land in one partition, in order.
        let key = Partitioning::messages_key(format!("customer-{}", index % 10).into_bytes())?;
        let message = Message {
            payload: format!("order {index}").into(),
            ..Message::default()
        };
        let receipt = client.send(STREAM, TOPIC, key, vec![message]).await?;
        if index % 25 == 0 {
            println!(
                "message {index}: partition {} offset {:?} on {}",
                receipt.partition_id, receipt.base_offset, receipt.node
            );
        }
    }
    println!("sent {MESSAGES} messages in {:?}", started.elapsed());

    // A background producer: `send` only buffers; batches go out in order, and the sends
    // queued for one partition ride one frame.
    let producer = client
        .producer(STREAM, TOPIC)?
        .partitioning(Partitioning::Balanced)
        .background(BackgroundConfig::default())
        .build()?;
    let started = Instant::now();
    let mut last = None;
    for index in 0..STREAMED {
        let message = Message {
            payload: format!("event {index}").into(),
            ..Message::default()
        };
        last = Some(producer.send(vec![message]).await?);
    }
    if let Some(delivery) = last {
        match delivery.await {
            Ok(receipt) => println!(
                "last event: partition {} offset {:?}",
                receipt.partition_id, receipt.base_offset
            ),
            Err(failure) => println!("last event failed: {}", failure.error),
        }
    }
    if let Err(error) = producer.flush().await {
        println!("flush: {error}");
    }
    println!(
        "streamed {STREAMED} messages in {:?}: {:?}",
        started.elapsed(),
        producer.stats()
    );
    let _ = producer.shutdown().await;
    println!("{:?}", client.stats());
    client.shutdown().await;
    Ok(())
}

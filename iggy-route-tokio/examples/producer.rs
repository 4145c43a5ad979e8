//! Sends keyed messages to a topic, creating the stream and topic if needed, then prints
//! the client's counters.
//!
//! ```text
//! cargo run -p iggy-route-tokio --example tokio-producer -- iggy://iggy:iggy@127.0.0.1:8090
//! ```

use std::time::Instant;

use iggy_route_tokio::{Client, ClientError, Message, Partitioning};

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const PARTITIONS: u32 = 3;
const MESSAGES: u32 = 100;

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
    println!("{:?}", client.stats());
    client.shutdown().await;
    Ok(())
}

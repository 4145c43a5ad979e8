//! Sends keyed messages to a topic from several threads that share one blocking client,
//! creating the stream and topic if needed, then prints the client's counters.
//!
//! ```text
//! cargo run -p iggy-route-mio --example mio-producer -- iggy://iggy:iggy@127.0.0.1:8090
//! ```

use std::time::Instant;

use iggy_route_mio::{Client, ClientError, Message, Partitioning};

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const PARTITIONS: u32 = 3;
const THREADS: u32 = 4;
const MESSAGES_PER_THREAD: u32 = 25;

fn main() -> Result<(), ClientError> {
    let connection_string = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "iggy://iggy:iggy@127.0.0.1:8090".to_owned());
    let client = Client::from_connection_string(&connection_string)?;

    if client.get_stream(STREAM)?.is_none() {
        client.create_stream(STREAM)?;
    }
    if client.get_topic(STREAM, TOPIC)?.is_none() {
        client.create_topic(STREAM, TOPIC, PARTITIONS)?;
    }

    let started = Instant::now();
    // One client, one I/O thread, one session: the producers share it through clones.
    std::thread::scope(|scope| -> Result<(), ClientError> {
        let producers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let client = client.clone();
                scope.spawn(move || produce(&client, thread))
            })
            .collect();
        for producer in producers {
            producer.join().unwrap_or(Err(ClientError::Closed))?;
        }
        Ok(())
    })?;
    println!(
        "sent {} messages in {:?}",
        THREADS * MESSAGES_PER_THREAD,
        started.elapsed()
    );
    println!("{:?}", client.stats());
    client.shutdown();
    Ok(())
}

fn produce(client: &Client, thread: u32) -> Result<(), ClientError> {
    for index in 0..MESSAGES_PER_THREAD {
        // Messages with one key always land in one partition, in order.
        let key = Partitioning::messages_key(format!("customer-{thread}").into_bytes())?;
        let message = Message {
            payload: format!("order {thread}-{index}").into(),
            ..Message::default()
        };
        let receipt = client.send(STREAM, TOPIC, key, vec![message])?;
        if index == 0 {
            println!(
                "thread {thread}: partition {} offset {:?} on {}",
                receipt.partition_id, receipt.base_offset, receipt.node
            );
        }
    }
    Ok(())
}

//! Sends keyed messages to a topic from several threads that share one blocking client,
//! creating the stream and topic if needed; then streams more through a background
//! producer, which batches them; then prints the client's counters.
//!
//! ```text
//! cargo run -p iggy-route-mio --example mio-producer -- iggy://iggy:iggy@127.0.0.1:8090
//! ```

use std::time::Instant;

use iggy_route_mio::{BackgroundConfig, Client, ClientError, Message, Partitioning};

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const PARTITIONS: u32 = 3;
const THREADS: u32 = 4;
const MESSAGES_PER_THREAD: u32 = 25;
const STREAMED: u32 = 10_000;

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
        last = Some(producer.send(vec![message])?);
    }
    if let Some(delivery) = last {
        match delivery.wait() {
            Ok(receipt) => println!(
                "last event: partition {} offset {:?}",
                receipt.partition_id, receipt.base_offset
            ),
            Err(failure) => println!("last event failed: {}", failure.error),
        }
    }
    if let Err(error) = producer.flush() {
        println!("flush: {error}");
    }
    println!(
        "streamed {STREAMED} messages in {:?}: {:?}",
        started.elapsed(),
        producer.stats()
    );
    let _ = producer.shutdown();
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

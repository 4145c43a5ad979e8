//! Sends keyed messages to a topic from several threads that share one blocking client,
//! creating the stream and topic if needed, and prints which node admitted each
//! partition's sends and the client's counters.
//!
//! Against the test cluster, with every partition's primary on a different node:
//!
//! ```text
//! cargo run --release -p iggy-route-tests --bin iggy-route-test-cluster -- --split --port-base 8090
//! cargo run -p iggy-route-mio --example mio-producer
//! ```
//!
//! The connection string is the first argument, else `IGGY_CONNECTION_STRING`, else
//! `iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092` (the test cluster's
//! with `--port-base 8090`).

use std::time::Instant;

use iggy_route_mio::{Client, ClientError, Message, Partitioning};

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const PARTITIONS: u32 = 3;
const THREADS: u32 = 4;
const MESSAGES_PER_THREAD: u32 = 25;

fn main() -> Result<(), ClientError> {
    let client = Client::from_connection_string(&connection_string())?;

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

    let stats = client.stats();
    println!(
        "refusals {}, session moves {}, lookups {}",
        stats.refusals, stats.session_moves, stats.lookups
    );
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
        if index == 0 || index + 1 == MESSAGES_PER_THREAD {
            println!(
                "thread {thread}: partition {} offset {:?}, admitted by {}",
                receipt.partition_id, receipt.base_offset, receipt.node
            );
        }
    }
    Ok(())
}

/// The first argument, else `IGGY_CONNECTION_STRING`, else the test cluster on 8090.
fn connection_string() -> String {
    std::env::args()
        .nth(1)
        .or_else(|| std::env::var("IGGY_CONNECTION_STRING").ok())
        .unwrap_or_else(|| "iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092".into())
}

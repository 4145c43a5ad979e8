//! Reads every partition of the producer example's topic from the start, storing the
//! consumer offset as it goes.
//!
//! After the producer example, against the test cluster started with `--port-base 8090`:
//!
//! ```text
//! cargo run -p iggy-route-mio --example mio-consumer
//! ```
//!
//! The connection string is the first argument, else `IGGY_CONNECTION_STRING`, else
//! `iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092` (the test cluster's
//! with `--port-base 8090`).

use iggy_route_mio::{Client, ClientError, Consumer, ConsumerKind, Identifier, PollingStrategy};

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const BATCH: u32 = 100;

fn main() -> Result<(), ClientError> {
    let client = Client::from_connection_string(&connection_string())?;
    let Some(topic) = client.get_topic(STREAM, TOPIC)? else {
        println!("no topic {STREAM}/{TOPIC}: run the producer example first");
        return Ok(());
    };
    let consumer = Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(1),
    };

    for partition in 0..topic.summary.partitions_count {
        let mut offset = 0;
        loop {
            let strategy = PollingStrategy::Offset(offset);
            let reply = client.poll(
                STREAM,
                TOPIC,
                Some(partition),
                consumer.clone(),
                strategy,
                BATCH,
            )?;
            let Some(last) = reply.messages.last() else {
                break;
            };
            for message in &reply.messages {
                let payload = String::from_utf8_lossy(&message.payload);
                println!("partition {partition} offset {}: {payload}", message.offset);
            }
            offset = last.offset + 1;
            client.store_offset(consumer.clone(), STREAM, TOPIC, partition, last.offset)?;
        }
        println!("partition {partition}: read up to offset {offset}");
    }
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

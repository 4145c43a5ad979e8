//! Reads every partition of the producer example's topic from the start, storing the
//! consumer offset as it goes.
//!
//! ```text
//! cargo run -p iggy-route-mio --example mio-consumer -- iggy://iggy:iggy@127.0.0.1:8090
//! ```

use iggy_route_mio::{Client, ClientError, Consumer, ConsumerKind, Identifier, PollingStrategy};

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const BATCH: u32 = 100;

fn main() -> Result<(), ClientError> {
    let connection_string = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "iggy://iggy:iggy@127.0.0.1:8090".to_owned());
    let client = Client::from_connection_string(&connection_string)?;
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

//! One member of a consumer group: joins `example-group` on the producer example's topic
//! (creating the group if needed), reads the partitions the group gives it, each from its
//! primary, storing offsets as it goes, and leaves once nothing came for a few seconds.
//! Run it in two terminals at once and the partitions are shared between the two; run it
//! again after the producer and it reads only what is new.
//!
//! After the producer example, against the test cluster started with `--port-base 8090`:
//!
//! ```text
//! cargo run -p iggy-route-tokio --example tokio-group-consumer
//! ```
//!
//! The connection string is the first argument, else `IGGY_CONNECTION_STRING`, else
//! `iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092`.

use std::collections::BTreeMap;
use std::time::Duration;

use iggy_route_tokio::{AutoCommit, Client, ClientError};

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const GROUP: &str = "example-group";
/// The member leaves after this long without a message.
const IDLE: Duration = Duration::from_secs(3);

#[tokio::main]
async fn main() -> Result<(), ClientError> {
    // One member per client: the server counts a client as one member.
    let client = Client::from_connection_string(&connection_string()).await?;
    if client.get_topic(STREAM, TOPIC).await?.is_none() {
        println!("no topic {STREAM}/{TOPIC}: run the producer example first");
        client.shutdown().await;
        return Ok(());
    }
    let mut member = client
        .consumer(STREAM, TOPIC)?
        .group(GROUP)?
        .batch_length(100)
        .auto_commit(AutoCommit::AfterPoll)
        .build()?;
    member.join().await?;
    println!("joined {GROUP}: partitions {:?}", member.partitions());

    // Partition -> (messages read, last offset).
    let mut read: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    loop {
        match tokio::time::timeout(IDLE, member.next()).await {
            Ok(Some(Ok(received))) => {
                let entry = read.entry(received.partition_id).or_default();
                entry.0 += 1;
                entry.1 = received.message.offset;
            }
            // A failed poll is reported once; the member goes on.
            Ok(Some(Err(error))) => println!("poll: {error}"),
            Ok(None) => break,
            Err(_idle) => {
                println!("nothing new for {IDLE:?}: leaving");
                break;
            }
        }
    }
    for (partition, (messages, last)) in &read {
        println!("partition {partition}: read {messages} messages, up to offset {last}");
    }
    println!("member: {:?}", member.stats());
    // Stores what was read and not stored yet, then leaves: the others take its partitions.
    if let Err(error) = member.shutdown(true).await {
        println!("leaving: {error}");
    }
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

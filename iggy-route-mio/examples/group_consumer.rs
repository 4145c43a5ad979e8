//! One member of a consumer group: joins `example-group` on the producer example's topic
//! (creating the group if needed), reads the partitions the group gives it, each from its
//! primary, storing offsets as it goes, and leaves once nothing came for a few seconds.
//! Run it in two terminals at once and the partitions are shared between the two; run it
//! again after the producer and it reads only what is new.
//!
//! After the producer example, against the test cluster started with `--port-base 8090`:
//!
//! ```text
//! cargo run -p iggy-route-mio --example mio-group-consumer
//! ```
//!
//! The connection string is the first argument, else `IGGY_CONNECTION_STRING`, else
//! `iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use iggy_route_mio::{AutoCommit, Client, ClientError};

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const GROUP: &str = "example-group";
/// The member leaves after this long without a message.
const IDLE: Duration = Duration::from_secs(3);

fn main() -> Result<(), ClientError> {
    // One member per client: the server counts a client as one member.
    let client = Client::from_connection_string(&connection_string())?;
    if client.get_topic(STREAM, TOPIC)?.is_none() {
        println!("no topic {STREAM}/{TOPIC}: run the producer example first");
        client.shutdown();
        return Ok(());
    }
    let mut member = client
        .consumer(STREAM, TOPIC)?
        .group(GROUP)?
        .batch_length(100)
        .auto_commit(AutoCommit::AfterPoll)
        .build()?;
    member.join()?;
    println!("joined {GROUP}: partitions {:?}", member.partitions());

    // Partition -> (messages read, last offset).
    let mut read: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    // `None`: nothing came before the deadline (or the client is down).
    while let Some(next) = member.next_before(Instant::now() + IDLE) {
        match next {
            Ok(received) => {
                let entry = read.entry(received.partition_id).or_default();
                entry.0 += 1;
                entry.1 = received.message.offset;
            }
            // A failed poll is reported once; the member goes on.
            Err(error) => println!("poll: {error}"),
        }
    }
    println!("nothing new for {IDLE:?}: leaving");
    for (partition, (messages, last)) in &read {
        println!("partition {partition}: read {messages} messages, up to offset {last}");
    }
    println!("member: {:?}", member.stats());
    // Stores what was read and not stored yet, then leaves: the others take its partitions.
    if let Err(error) = member.shutdown(true) {
        println!("leaving: {error}");
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

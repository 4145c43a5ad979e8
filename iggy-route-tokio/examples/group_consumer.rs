//! Three members of one consumer group, each with its own client, read a six-partition
//! topic together: each is assigned two partitions, reads them from wherever they are led
//! (the members' polls name the member, so any node answers them as that member) and
//! commits what it has read on each partition's primary. Fills the topic first (a fresh
//! stream per run), then prints what each member read, whether every message was read
//! exactly once, and the clients' session moves and lost memberships.
//!
//! ```text
//! cargo run -p iggy-route-tokio --example tokio-group-consumer -- iggy://iggy:iggy@127.0.0.1:8090
//! ```
//!
//! Against a cluster, name every node: `iggy://iggy:iggy@127.0.0.1:28090,127.0.0.1:28091,...`.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use iggy_route_tokio::{AutoCommit, Client, ClientError, Message, Partitioning};

const TOPIC: &str = "orders";
const GROUP: &str = "billing";
const PARTITIONS: u32 = 6;
const PER_PARTITION: u32 = 500;
const MEMBERS: usize = 3;

#[tokio::main]
async fn main() -> Result<(), ClientError> {
    let connection_string = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "iggy://iggy:iggy@127.0.0.1:8090".to_owned());
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let stream = format!("group-example-{}", since_epoch.as_millis());

    let producer = Client::from_connection_string(&connection_string).await?;
    producer.create_stream(&stream).await?;
    producer
        .create_topic(stream.as_str(), TOPIC, PARTITIONS)
        .await?;
    for partition in 0..PARTITIONS {
        for chunk in 0..PER_PARTITION / 100 {
            let messages = (0..100)
                .map(|i| Message {
                    payload: format!("p{partition}-{}", chunk * 100 + i).into(),
                    ..Message::default()
                })
                .collect();
            producer
                .send(
                    stream.as_str(),
                    TOPIC,
                    Partitioning::partition_id(partition),
                    messages,
                )
                .await?;
        }
    }
    producer.shutdown().await;
    println!("{stream}/{TOPIC}: {PARTITIONS} partitions of {PER_PARTITION} messages");

    // Every member joins before any reads, so the partitions are shared out once.
    let mut clients = Vec::new();
    let mut members = Vec::new();
    for _ in 0..MEMBERS {
        let client = Client::from_connection_string(&connection_string).await?;
        let mut member = client
            .consumer(stream.as_str(), TOPIC)?
            .group(GROUP)?
            .batch_length(100)
            .poll_interval(Duration::from_millis(50))
            .auto_commit(AutoCommit::AfterPoll)
            .build();
        member.join().await?;
        clients.push(client);
        members.push(member);
    }

    let mut reads = Vec::new();
    for (index, mut member) in members.into_iter().enumerate() {
        reads.push(tokio::spawn(async move {
            let mut read = Vec::new();
            let share = |member: &iggy_route_tokio::TopicConsumer| {
                member.partitions().len() * PER_PARTITION as usize
            };
            while read.len() < share(&member) {
                match tokio::time::timeout(Duration::from_secs(30), member.next()).await {
                    Ok(Some(Ok(received))) => read.push(received),
                    Ok(Some(Err(error))) => eprintln!("member {index}: {error}"),
                    Ok(None) | Err(_) => break,
                }
            }
            let partitions = member.partitions().to_vec();
            let stats = member.stats();
            let left = member.shutdown(true).await;
            (index, partitions, read, stats, left)
        }));
    }
    let mut seen = BTreeSet::new();
    let mut duplicates = 0;
    for handle in reads {
        let Ok((index, partitions, read, stats, left)) = handle.await else {
            continue;
        };
        for received in &read {
            if !seen.insert((received.partition_id, received.message.offset)) {
                duplicates += 1;
            }
        }
        println!(
            "member {index}: partitions {partitions:?}, {} messages, {} polls, {} commits \
             ({} failed), joined {} time(s); left: {left:?}",
            read.len(),
            stats.polls,
            stats.commits,
            stats.commit_failures,
            stats.joins
        );
    }
    let expected = (PARTITIONS * PER_PARTITION) as usize;
    println!(
        "read {} of {expected} messages, {duplicates} twice: {}",
        seen.len(),
        if seen.len() == expected && duplicates == 0 {
            "every message exactly once"
        } else {
            "NOT exactly once"
        }
    );
    for (index, client) in clients.iter().enumerate() {
        let stats = client.stats();
        println!(
            "client {index}: {} session moves, {} memberships lost, {} refusals",
            stats.session_moves, stats.memberships_lost, stats.refusals
        );
        client.shutdown().await;
    }
    Ok(())
}

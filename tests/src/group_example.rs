//! What the group-consumer examples share: where they read (the embedded 3-node cluster
//! with split primaries that move while the members read, or a cluster named on the command
//! line), the topic they fill, and the report of what the group read.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use iggy_route_core::client::consumer::ReceivedMessage;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::Message;

use crate::cluster::TestCluster;

/// The topic the examples read.
pub const TOPIC: &str = "orders";
/// The group the members join.
pub const GROUP: &str = "billing";
/// Partitions of the topic.
pub const PARTITIONS: u32 = 6;
/// Messages per partition.
pub const PER_PARTITION: u32 = 2_000;
/// Members of the group.
pub const MEMBERS: usize = 3;

/// Where the members read.
#[derive(Debug)]
pub struct Place {
    /// The connection string of every client.
    pub connection_string: String,
    /// A fresh stream whose topic the members read.
    pub stream: String,
    /// The embedded cluster, if the examples started one (`None` with `--cluster`).
    pub cluster: Option<Arc<TestCluster>>,
}

/// The embedded cluster, unless the command line says `--cluster <connection string>`;
/// on the embedded one, the six partitions are led by nodes 0, 1, 2, 0, 1, 2 and the
/// metadata leader is node 1.
pub async fn place() -> Place {
    let args: Vec<String> = std::env::args().collect();
    let named = args
        .iter()
        .position(|arg| arg == "--cluster")
        .and_then(|at| args.get(at + 1).cloned());
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let stream = format!("group-example-{}", since_epoch.as_millis());
    if let Some(connection_string) = named {
        return Place {
            connection_string,
            stream,
            cluster: None,
        };
    }
    let cluster = TestCluster::start(3).await;
    cluster.set_routing_commands(false);
    cluster.create_stream_and_topic(&stream, TOPIC, PARTITIONS);
    for partition in 0..PARTITIONS {
        cluster.set_primary(0, 0, partition, partition as usize % 3);
    }
    cluster.set_metadata_leader(1);
    Place {
        connection_string: cluster.connection_string(),
        stream,
        cluster: Some(Arc::new(cluster)),
    }
}

/// Fills the topic (creating stream and topic on a named cluster): each message's payload
/// is `p{partition}-{offset}`.
///
/// # Panics
/// If the cluster refuses.
pub async fn fill(place: &Place) {
    let client = iggy_route_tokio::Client::from_connection_string(&place.connection_string)
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let stream = place.stream.as_str();
    if place.cluster.is_none() {
        client.create_stream(stream).await.expect("create stream");
        client
            .create_topic(stream, TOPIC, PARTITIONS)
            .await
            .expect("create topic");
    }
    for partition in 0..PARTITIONS {
        for chunk in 0..PER_PARTITION / 100 {
            let messages = (0..100)
                .map(|i| Message {
                    payload: format!("p{partition}-{}", chunk * 100 + i).into(),
                    ..Message::default()
                })
                .collect();
            client
                .send(
                    stream,
                    TOPIC,
                    Partitioning::partition_id(partition),
                    messages,
                )
                .await
                .expect("send");
        }
    }
    client.shutdown().await;
}

/// On the embedded cluster, moves one partition's primary to the next node every 50 ms
/// until `stop`; returns how many moves it made.
pub fn move_primaries(place: &Place, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u32> {
    let cluster = place.cluster.clone();
    std::thread::spawn(move || {
        let Some(cluster) = cluster else {
            return 0;
        };
        let mut moves = 0;
        while !stop.load(Ordering::SeqCst) {
            let partition = moves % PARTITIONS;
            let now = cluster.primary(0, 0, partition).unwrap_or(0);
            cluster.set_primary(0, 0, partition, (now + 1) % 3);
            moves += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        moves
    })
}

/// Prints what the group read and whether every message was read exactly once; returns
/// whether it was.
pub fn report(reads: &[Vec<ReceivedMessage>], moves: u32) -> bool {
    let mut seen = BTreeSet::new();
    let mut twice = 0;
    for (member, read) in reads.iter().enumerate() {
        let partitions: BTreeSet<u32> = read.iter().map(|r| r.partition_id).collect();
        println!(
            "member {member}: {} messages from partitions {partitions:?}",
            read.len()
        );
        for received in read {
            let expected = format!("p{}-{}", received.partition_id, received.message.offset);
            assert_eq!(received.message.payload, expected.as_bytes(), "payload");
            if !seen.insert((received.partition_id, received.message.offset)) {
                twice += 1;
            }
        }
    }
    let expected = (PARTITIONS * PER_PARTITION) as usize;
    let once = seen.len() == expected && twice == 0;
    println!(
        "{} of {expected} messages read, {twice} twice, {moves} primary moves while reading: {}",
        seen.len(),
        if once {
            "every message exactly once"
        } else {
            "NOT exactly once"
        }
    );
    once
}

//! Promise 3 on both adapters: background producers whose buffer holds one message.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::Config;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::Message;
use iggy_route_tests::cluster::TestCluster;

use super::{STREAM, TOPIC};

const TASKS: usize = 4;
const SENDS: usize = 40;

pub(crate) fn one(tag: &str) -> Message {
    Message {
        payload: Bytes::from(tag.to_owned()),
        ..Message::default()
    }
}

pub(crate) fn cluster(runtime: &tokio::runtime::Runtime) -> TestCluster {
    iggy_route_tests::error_events::install();
    let cluster = runtime.block_on(TestCluster::start(3));
    assert_eq!(
        cluster.create_stream_and_topic("outsider", "producers", 2),
        (STREAM, TOPIC)
    );
    assert!(cluster.set_primary(STREAM, TOPIC, 0, 1));
    assert!(cluster.set_primary(STREAM, TOPIC, 1, 2));
    cluster
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn roomy(cluster: &TestCluster) -> Config {
    let mut config = config(cluster, Duration::from_secs(10));
    config.max_pending_requests = 64;
    config.max_pending_per_lane = 64;
    config
}

pub(crate) fn config(cluster: &TestCluster, timeout: Duration) -> Config {
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = timeout;
    config.max_pending_requests = 1;
    config.max_pending_per_lane = 1;
    config
}

/// Every acknowledged receipt names the offset where its payload is stored; the log holds
/// each tag once, and `expected` tags in all.
fn check_receipts(cluster: &TestCluster, acked: &[(u32, u64, String)], expected: usize) {
    let mut logs = HashMap::new();
    for partition in 0..2 {
        let log: Vec<(u64, String)> = cluster
            .partition_log(STREAM, TOPIC, partition)
            .into_iter()
            .map(|m| (m.offset, String::from_utf8(m.payload.to_vec()).unwrap()))
            .collect();
        logs.insert(partition, log);
    }
    let all: Vec<&String> = logs.values().flatten().map(|(_, p)| p).collect();
    let unique: std::collections::HashSet<&&String> = all.iter().collect();
    assert_eq!(all.len(), unique.len(), "a message was stored twice");
    assert_eq!(all.len(), expected, "stored count");
    assert_eq!(acked.len(), expected, "acknowledged count");
    for (partition, offset, tag) in acked {
        let at = logs[partition]
            .iter()
            .find(|(o, _)| o == offset)
            .map(|(_, p)| p.clone());
        assert_eq!(
            at.as_deref(),
            Some(tag.as_str()),
            "receipt p{partition}@{offset}"
        );
    }
}

fn per_task_order(cluster: &TestCluster) {
    let log: Vec<String> = cluster
        .partition_log(STREAM, TOPIC, 0)
        .into_iter()
        .map(|m| String::from_utf8(m.payload.to_vec()).unwrap())
        .collect();
    for task in 0..TASKS {
        let prefix = format!("t{task}-");
        let mine: Vec<usize> = log
            .iter()
            .filter_map(|p| p.strip_prefix(&prefix))
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(mine, (0..SENDS).collect::<Vec<_>>(), "task {task}");
    }
}

/// tokio: a one-message buffer, `Block`, four tasks sending one message at a time while
/// a fifth flushes in a loop: every call is acknowledged, stored once at its offset, in
/// each task's order.
#[test]
fn tokio_one_message_buffer_with_racing_flushes() {
    use iggy_route_tokio::{BackgroundConfig, Backpressure, Client};
    let runtime = runtime();
    let cluster = cluster(&runtime);
    cluster.set_reply_delay(1, Duration::from_millis(2));
    let client = runtime.block_on(Client::connect(roomy(&cluster))).unwrap();
    let producer = {
        let _entered = runtime.enter();
        client
            .producer(STREAM, TOPIC)
            .unwrap()
            .partitioning(Partitioning::PartitionId(0))
            .linger_time(Duration::from_millis(1))
            .background(BackgroundConfig {
                max_buffered_messages: 1,
                backpressure: Backpressure::Block,
                ..BackgroundConfig::default()
            })
            .build()
            .unwrap()
    };
    let acked = runtime.block_on(async {
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flusher = {
            let producer = producer.clone();
            let done = Arc::clone(&done);
            tokio::spawn(async move {
                let mut flushes = 0;
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    producer.flush().await.unwrap();
                    flushes += 1;
                    tokio::task::yield_now().await;
                }
                flushes
            })
        };
        let mut tasks = tokio::task::JoinSet::new();
        for task in 0..TASKS {
            let producer = producer.clone();
            tasks.spawn(async move {
                let mut deliveries = Vec::new();
                for seq in 0..SENDS {
                    let tag = format!("t{task}-{seq}");
                    let delivery = producer.send(vec![one(&tag)]).await.unwrap();
                    deliveries.push((tag, delivery));
                }
                let mut acked = Vec::new();
                for (tag, delivery) in deliveries {
                    let receipt = delivery.await.unwrap();
                    acked.push((receipt.partition_id, receipt.base_offset.unwrap(), tag));
                }
                acked
            });
        }
        let mut acked = Vec::new();
        while let Some(done) = tasks.join_next().await {
            acked.extend(done.unwrap());
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(flusher.await.unwrap() > 0);
        producer.flush().await.unwrap();
        acked
    });
    check_receipts(&cluster, &acked, TASKS * SENDS);
    per_task_order(&cluster);
    runtime.block_on(producer.shutdown()).unwrap();
    runtime.block_on(client.shutdown());
    runtime.block_on(cluster.shutdown());
}

/// mio: the same race on threads.
#[test]
fn mio_one_message_buffer_with_racing_flushes() {
    use iggy_route_mio::{BackgroundConfig, Backpressure, Client};
    let runtime = runtime();
    let cluster = cluster(&runtime);
    cluster.set_reply_delay(1, Duration::from_millis(2));
    let client = Client::connect(roomy(&cluster)).unwrap();
    let producer = Arc::new(
        client
            .producer(STREAM, TOPIC)
            .unwrap()
            .partitioning(Partitioning::PartitionId(0))
            .linger_time(Duration::from_millis(1))
            .background(BackgroundConfig {
                max_buffered_messages: 1,
                backpressure: Backpressure::Block,
                ..BackgroundConfig::default()
            })
            .build()
            .unwrap(),
    );
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flusher = {
        let producer = Arc::clone(&producer);
        let done = Arc::clone(&done);
        thread::spawn(move || {
            let mut flushes = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                producer.flush().unwrap();
                flushes += 1;
                thread::yield_now();
            }
            flushes
        })
    };
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let producer = Arc::clone(&producer);
            thread::spawn(move || {
                let mut deliveries = Vec::new();
                for seq in 0..SENDS {
                    let tag = format!("t{task}-{seq}");
                    deliveries.push((tag.clone(), producer.send(vec![one(&tag)]).unwrap()));
                }
                deliveries
                    .into_iter()
                    .map(|(tag, delivery)| {
                        let receipt = delivery.wait().unwrap();
                        (receipt.partition_id, receipt.base_offset.unwrap(), tag)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut acked = Vec::new();
    for task in tasks {
        acked.extend(task.join().unwrap());
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(flusher.join().unwrap() > 0);
    producer.flush().unwrap();
    check_receipts(&cluster, &acked, TASKS * SENDS);
    per_task_order(&cluster);
    producer.shutdown().unwrap();
    client.shutdown();
    runtime.block_on(cluster.shutdown());
}

/// `FailImmediately` with a one-message buffer, four callers racing: a refused call is
/// refused at once with `QueueFull` and never stored; every accepted one is acknowledged
/// and stored once at the offset its receipt names.
#[test]
fn fail_immediately_with_a_one_message_buffer_never_stores_a_refused_call() {
    // tokio
    {
        use iggy_route_tokio::{BackgroundConfig, Backpressure, Client};
        let runtime = runtime();
        let cluster = cluster(&runtime);
        cluster.set_reply_delay(1, Duration::from_millis(2));
        let client = runtime.block_on(Client::connect(roomy(&cluster))).unwrap();
        let producer = {
            let _entered = runtime.enter();
            client
                .producer(STREAM, TOPIC)
                .unwrap()
                .partitioning(Partitioning::PartitionId(0))
                .linger_time(Duration::from_millis(1))
                .background(BackgroundConfig {
                    max_buffered_messages: 1,
                    backpressure: Backpressure::FailImmediately,
                    ..BackgroundConfig::default()
                })
                .build()
                .unwrap()
        };
        let (acked, refused) = runtime.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for task in 0..TASKS {
                let producer = producer.clone();
                tasks.spawn(async move {
                    let (mut deliveries, mut refused) = (Vec::new(), 0);
                    for seq in 0..SENDS {
                        let tag = format!("t{task}-{seq}");
                        let started = Instant::now();
                        match producer.send(vec![one(&tag)]).await {
                            Ok(delivery) => deliveries.push((tag, delivery)),
                            Err(iggy_route_tokio::ClientError::QueueFull { .. }) => refused += 1,
                            Err(other) => panic!("{tag}: {other:?}"),
                        }
                        assert!(started.elapsed() < Duration::from_millis(500));
                        tokio::time::sleep(Duration::from_millis(1 + seq as u64 % 3)).await;
                    }
                    let mut acked = Vec::new();
                    for (tag, delivery) in deliveries {
                        let receipt = delivery.await.unwrap();
                        acked.push((receipt.partition_id, receipt.base_offset.unwrap(), tag));
                    }
                    (acked, refused)
                });
            }
            let (mut acked, mut refused) = (Vec::new(), 0);
            while let Some(done) = tasks.join_next().await {
                let (a, r) = done.unwrap();
                acked.extend(a);
                refused += r;
            }
            producer.flush().await.unwrap();
            (acked, refused)
        });
        let accepted = acked.len();
        check_receipts(&cluster, &acked, accepted);
        eprintln!("tokio: {accepted} accepted, {refused} refused");
        assert!(accepted > TASKS, "tokio: {accepted} accepted");
        assert_eq!(accepted + refused, TASKS * SENDS, "tokio");
        runtime.block_on(producer.shutdown()).unwrap();
        runtime.block_on(client.shutdown());
        runtime.block_on(cluster.shutdown());
    }
    // mio
    {
        use iggy_route_mio::{BackgroundConfig, Backpressure, Client};
        let runtime = runtime();
        let cluster = cluster(&runtime);
        cluster.set_reply_delay(1, Duration::from_millis(2));
        let client = Client::connect(roomy(&cluster)).unwrap();
        let producer = Arc::new(
            client
                .producer(STREAM, TOPIC)
                .unwrap()
                .partitioning(Partitioning::PartitionId(0))
                .linger_time(Duration::from_millis(1))
                .background(BackgroundConfig {
                    max_buffered_messages: 1,
                    backpressure: Backpressure::FailImmediately,
                    ..BackgroundConfig::default()
                })
                .build()
                .unwrap(),
        );
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let producer = Arc::clone(&producer);
                thread::spawn(move || {
                    let (mut deliveries, mut refused) = (Vec::new(), 0);
                    for seq in 0..SENDS {
                        let tag = format!("t{task}-{seq}");
                        let started = Instant::now();
                        match producer.send(vec![one(&tag)]) {
                            Ok(delivery) => deliveries.push((tag, delivery)),
                            Err(iggy_route_mio::ClientError::QueueFull { .. }) => refused += 1,
                            Err(other) => panic!("{tag}: {other:?}"),
                        }
                        assert!(started.elapsed() < Duration::from_millis(500));
                        thread::sleep(Duration::from_millis(1 + seq as u64 % 3));
                    }
                    let acked: Vec<_> = deliveries
                        .into_iter()
                        .map(|(tag, delivery)| {
                            let receipt = delivery.wait().unwrap();
                            (receipt.partition_id, receipt.base_offset.unwrap(), tag)
                        })
                        .collect();
                    (acked, refused)
                })
            })
            .collect();
        let (mut acked, mut refused) = (Vec::new(), 0);
        for task in tasks {
            let (a, r) = task.join().unwrap();
            acked.extend(a);
            refused += r;
        }
        producer.flush().unwrap();
        let accepted = acked.len();
        check_receipts(&cluster, &acked, accepted);
        eprintln!("mio: {accepted} accepted, {refused} refused");
        assert!(accepted > TASKS, "mio: {accepted} accepted");
        assert_eq!(accepted + refused, TASKS * SENDS, "mio");
        producer.shutdown().unwrap();
        client.shutdown();
        runtime.block_on(cluster.shutdown());
    }
}

/// Every acknowledged receipt names the offset of its own payload, stored once (failed
/// calls may or may not be stored).
fn check_acked_once(cluster: &TestCluster, acked: &[(u32, u64, String)]) {
    let log: Vec<(u64, String)> = cluster
        .partition_log(STREAM, TOPIC, 0)
        .into_iter()
        .map(|m| (m.offset, String::from_utf8(m.payload.to_vec()).unwrap()))
        .collect();
    for (partition, offset, tag) in acked {
        assert_eq!(*partition, 0);
        let times = log.iter().filter(|(_, p)| p == tag).count();
        assert_eq!(times, 1, "acknowledged {tag} stored {times} times");
        let at = log
            .iter()
            .find(|(o, _)| o == offset)
            .map(|(_, p)| p.as_str());
        assert_eq!(at, Some(tag.as_str()), "receipt @{offset}");
    }
}

/// A one-message buffer while the primary's connections are cut again and again: what is
/// acknowledged is stored once at its receipt's offset, on both adapters.
#[test]
fn cut_connections_never_duplicate_an_acknowledged_message() {
    const N: usize = 120;
    // tokio
    {
        use iggy_route_tokio::{BackgroundConfig, Backpressure, Client};
        let runtime = runtime();
        let cluster = Arc::new(cluster(&runtime));
        // Replies a little late, so that the cuts find requests in flight.
        cluster.set_reply_delay(1, Duration::from_millis(5));
        let client = runtime.block_on(Client::connect(roomy(&cluster))).unwrap();
        let producer = {
            let _entered = runtime.enter();
            client
                .producer(STREAM, TOPIC)
                .unwrap()
                .partitioning(Partitioning::PartitionId(0))
                .linger_time(Duration::from_millis(1))
                .background(BackgroundConfig {
                    max_buffered_messages: 1,
                    backpressure: Backpressure::Block,
                    ..BackgroundConfig::default()
                })
                .build()
                .unwrap()
        };
        let cutter = {
            let cluster = Arc::clone(&cluster);
            thread::spawn(move || {
                for _ in 0..6 {
                    thread::sleep(Duration::from_millis(40));
                    cluster.drop_connections(1);
                }
            })
        };
        let acked = runtime.block_on(async {
            let mut deliveries = Vec::new();
            for n in 0..N {
                let tag = format!("c{n}");
                deliveries.push((tag.clone(), producer.send(vec![one(&tag)]).await.unwrap()));
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            let reported = super::producer_failures::count_reported(producer.flush().await);
            let mut acked = Vec::new();
            for (tag, delivery) in deliveries {
                if let Ok(receipt) = delivery.await {
                    acked.push((receipt.partition_id, receipt.base_offset.unwrap(), tag));
                }
            }
            assert_eq!(
                reported as usize,
                N - acked.len(),
                "tokio: the flush's count"
            );
            acked
        });
        cutter.join().unwrap();
        eprintln!("tokio: {} of {N} acknowledged", acked.len());
        check_acked_once(&cluster, &acked);
        let _ = runtime.block_on(producer.shutdown());
        runtime.block_on(client.shutdown());
    }
    // mio
    {
        use iggy_route_mio::{BackgroundConfig, Backpressure, Client};
        let runtime = runtime();
        let cluster = Arc::new(cluster(&runtime));
        // Replies a little late, so that the cuts find requests in flight.
        cluster.set_reply_delay(1, Duration::from_millis(5));
        let client = Client::connect(roomy(&cluster)).unwrap();
        let producer = client
            .producer(STREAM, TOPIC)
            .unwrap()
            .partitioning(Partitioning::PartitionId(0))
            .linger_time(Duration::from_millis(1))
            .background(BackgroundConfig {
                max_buffered_messages: 1,
                backpressure: Backpressure::Block,
                ..BackgroundConfig::default()
            })
            .build()
            .unwrap();
        let cutter = {
            let cluster = Arc::clone(&cluster);
            thread::spawn(move || {
                for _ in 0..6 {
                    thread::sleep(Duration::from_millis(40));
                    cluster.drop_connections(1);
                }
            })
        };
        let mut deliveries = Vec::new();
        for n in 0..N {
            let tag = format!("c{n}");
            deliveries.push((tag.clone(), producer.send(vec![one(&tag)]).unwrap()));
            thread::sleep(Duration::from_millis(2));
        }
        let reported = super::producer_failures::count_reported(producer.flush());
        let mut acked = Vec::new();
        for (tag, delivery) in deliveries {
            if let Ok(receipt) = delivery.wait() {
                acked.push((receipt.partition_id, receipt.base_offset.unwrap(), tag));
            }
        }
        assert_eq!(reported as usize, N - acked.len(), "mio: the flush's count");
        cutter.join().unwrap();
        eprintln!("mio: {} of {N} acknowledged", acked.len());
        check_acked_once(&cluster, &acked);
        let _ = producer.shutdown();
        client.shutdown();
    }
}

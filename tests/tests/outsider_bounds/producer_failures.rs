//! Promise 3 on both adapters: failures of background producers whose buffer holds one
//! message are never silent: `Delivery`, then `on_error` or the next flush or shutdown.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use iggy_route_core::Config;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_tests::cluster::TestCluster;

use super::producers::{cluster, config, one, runtime};
use super::{HANG, MARGIN, STREAM, TOPIC};

/// What a failure scenario saw, the same words on both adapters.
#[derive(Debug, PartialEq, Eq)]
struct FailureSaw {
    /// Calls accepted by `send` whose `Delivery` failed.
    failed_deliveries: usize,
    /// Calls `send` refused itself.
    refused: usize,
    /// What the first flush after them reported.
    flush_reported: Option<u64>,
    /// What `on_error` saw, in order (when a callback is set).
    callback: Vec<String>,
    stored: u64,
}

const CALLS: usize = 6;

/// tokio: a one-message buffer towards a primary that never answers. `BlockWithTimeout`
/// bounds each send; every failure reaches its `Delivery` and then `on_error` in call
/// order or, without a callback, the next flush with the count of failed messages.
fn tokio_failures(with_callback: bool) -> FailureSaw {
    use iggy_route_tokio::{BackgroundConfig, Backpressure, Client, ProducerError};
    let runtime = runtime();
    let cluster = cluster(&runtime);
    let client = runtime
        .block_on(Client::connect(config(
            &cluster,
            Duration::from_millis(500),
        )))
        .unwrap();
    cluster.set_reply_delay(1, Duration::from_secs(600));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let on_error: Option<iggy_route_tokio::ErrorCallback> = with_callback.then(|| {
        Arc::new(move |failure: iggy_route_tokio::SendFailure| {
            for m in &failure.messages {
                sink.lock()
                    .unwrap()
                    .push(String::from_utf8(m.payload.to_vec()).unwrap());
            }
        }) as iggy_route_tokio::ErrorCallback
    });
    let wait = Duration::from_millis(100);
    let producer = {
        let _entered = runtime.enter();
        client
            .producer(STREAM, TOPIC)
            .unwrap()
            .partitioning(Partitioning::PartitionId(0))
            .linger_time(Duration::from_millis(1))
            .background(BackgroundConfig {
                max_buffered_messages: 1,
                backpressure: Backpressure::BlockWithTimeout(wait),
                on_error,
                ..BackgroundConfig::default()
            })
            .build()
            .unwrap()
    };
    let (failed_deliveries, refused, flush_reported) = runtime.block_on(async {
        let mut deliveries = Vec::new();
        let mut refused = 0;
        for call in 0..CALLS {
            let started = Instant::now();
            match producer.send(vec![one(&format!("f{call}"))]).await {
                Ok(delivery) => deliveries.push(delivery),
                Err(_) => refused += 1,
            }
            assert!(
                started.elapsed() <= wait + MARGIN,
                "send took {:?}",
                started.elapsed()
            );
        }
        let mut failed = 0;
        for delivery in deliveries {
            let outcome = tokio::time::timeout(HANG, delivery)
                .await
                .expect("a hung delivery");
            if outcome.is_err() {
                failed += 1;
            }
        }
        let started = Instant::now();
        let flushed = tokio::time::timeout(HANG, producer.flush())
            .await
            .expect("flush hung");
        assert!(started.elapsed() <= Duration::from_millis(500) + MARGIN);
        let reported = match flushed {
            Ok(()) => None,
            Err(ProducerError::SendsFailed { messages, .. }) => Some(messages),
            Err(other) => panic!("flush: {other:?}"),
        };
        (failed, refused, reported)
    });
    let _ = runtime.block_on(producer.shutdown());
    runtime.block_on(client.shutdown());
    let stored = cluster.partition_len(STREAM, TOPIC, 0);
    runtime.block_on(cluster.shutdown());
    let callback = seen.lock().unwrap().clone();
    FailureSaw {
        failed_deliveries,
        refused,
        flush_reported,
        callback,
        stored,
    }
}

fn mio_failures(with_callback: bool) -> FailureSaw {
    use iggy_route_mio::{BackgroundConfig, Backpressure, Client, ProducerError};
    let runtime = runtime();
    let cluster = cluster(&runtime);
    let client = Client::connect(config(&cluster, Duration::from_millis(500))).unwrap();
    cluster.set_reply_delay(1, Duration::from_secs(600));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let on_error: Option<iggy_route_mio::ErrorCallback> = with_callback.then(|| {
        Arc::new(move |failure: iggy_route_mio::SendFailure| {
            for m in &failure.messages {
                sink.lock()
                    .unwrap()
                    .push(String::from_utf8(m.payload.to_vec()).unwrap());
            }
        }) as iggy_route_mio::ErrorCallback
    });
    let wait = Duration::from_millis(100);
    let producer = client
        .producer(STREAM, TOPIC)
        .unwrap()
        .partitioning(Partitioning::PartitionId(0))
        .linger_time(Duration::from_millis(1))
        .background(BackgroundConfig {
            max_buffered_messages: 1,
            backpressure: Backpressure::BlockWithTimeout(wait),
            on_error,
            ..BackgroundConfig::default()
        })
        .build()
        .unwrap();
    let mut deliveries = Vec::new();
    let mut refused = 0;
    for call in 0..CALLS {
        let started = Instant::now();
        match producer.send(vec![one(&format!("f{call}"))]) {
            Ok(delivery) => deliveries.push(delivery),
            Err(_) => refused += 1,
        }
        assert!(
            started.elapsed() <= wait + MARGIN,
            "send took {:?}",
            started.elapsed()
        );
    }
    let mut failed_deliveries = 0;
    for mut delivery in deliveries {
        let outcome = delivery.wait_timeout(HANG).expect("a hung delivery");
        if outcome.is_err() {
            failed_deliveries += 1;
        }
    }
    let started = Instant::now();
    let flush_reported = match producer.flush() {
        Ok(()) => None,
        Err(ProducerError::SendsFailed { messages, .. }) => Some(messages),
        Err(other) => panic!("flush: {other:?}"),
    };
    assert!(started.elapsed() <= Duration::from_millis(500) + MARGIN);
    let _ = producer.shutdown();
    client.shutdown();
    let stored = cluster.partition_len(STREAM, TOPIC, 0);
    runtime.block_on(cluster.shutdown());
    let callback = seen.lock().unwrap().clone();
    FailureSaw {
        failed_deliveries,
        refused,
        flush_reported,
        callback,
        stored,
    }
}

fn check_failures(saw: &FailureSaw, with_callback: bool, adapter: &str) {
    assert_eq!(
        saw.failed_deliveries + saw.refused,
        CALLS,
        "{adapter}: {saw:?}"
    );
    assert!(saw.failed_deliveries > 0, "{adapter}: {saw:?}");
    if with_callback {
        assert_eq!(saw.flush_reported, None, "{adapter}: {saw:?}");
        assert_eq!(
            saw.callback.len(),
            saw.failed_deliveries,
            "{adapter}: {saw:?}"
        );
        let mut sorted = saw.callback.clone();
        sorted.sort();
        assert_eq!(saw.callback.len(), sorted.len());
    } else {
        assert_eq!(
            saw.flush_reported,
            Some(saw.failed_deliveries as u64),
            "{adapter}: the flush must count every failed message: {saw:?}"
        );
    }
}

/// The first calls reach the silent node and time out; the later ones find the client's
/// room and line full and fail `QueueFull` at once, so they are told first. `on_error`
/// hears each failed call once, as it fails (not in call order: an outsider read the docs
/// that way, and the docs now say "as each fails"), on both adapters alike.
#[test]
fn on_error_hears_each_failed_call_once_as_it_fails() {
    let tokio = tokio_failures(true);
    let mio = mio_failures(true);
    for (adapter, saw) in [("tokio", &tokio), ("mio", &mio)] {
        let mut told = saw.callback.clone();
        told.sort();
        let before = told.len();
        told.dedup();
        assert_eq!(told.len(), before, "{adapter}: a call told twice: {saw:?}");
        assert!(!told.is_empty(), "{adapter}: nothing failed: {saw:?}");
    }
    let sorted = |saw: &FailureSaw| {
        let mut told = saw.callback.clone();
        told.sort();
        told
    };
    assert_eq!(
        sorted(&tokio),
        sorted(&mio),
        "the adapters tell different calls"
    );
}

#[test]
fn failures_with_a_one_message_buffer_are_never_silent() {
    for with_callback in [false, true] {
        let tokio = tokio_failures(with_callback);
        check_failures(&tokio, with_callback, "tokio");
        let mio = mio_failures(with_callback);
        check_failures(&mio, with_callback, "mio");
        assert_eq!(
            (tokio.failed_deliveries, tokio.refused, tokio.flush_reported),
            (mio.failed_deliveries, mio.refused, mio.flush_reported),
            "the adapters differ: tokio {tokio:?} mio {mio:?}"
        );
    }
}

/// What a silent-primary race saw: messages the flushes reported in all, failed
/// deliveries, the longest flush or shutdown.
#[derive(Debug)]
struct RaceSaw {
    reported: u64,
    failed: usize,
    longest: Duration,
}

const RACE_SENDS: usize = 24;

fn silent_config(cluster: &TestCluster) -> Config {
    let mut config = config(cluster, Duration::from_millis(400));
    config.max_pending_requests = 64;
    config.max_pending_per_lane = 64;
    config
}

pub(crate) fn count_reported<E: std::fmt::Debug>(flushed: Result<(), E>) -> u64 {
    match flushed {
        Ok(()) => 0,
        Err(error) => {
            let text = format!("{error:?}");
            let messages = text
                .split("messages: ")
                .nth(1)
                .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse().ok());
            messages.unwrap_or_else(|| panic!("a flush failed otherwise: {text}"))
        }
    }
}

/// tokio: sends to a primary that never answers while another task flushes in a loop,
/// then `shutdown`: the flushes and the shutdown together report every failed message
/// (a flush and the shutdown that end together share one report), and none outlasts the
/// deadline by more than a margin.
fn tokio_flush_race() -> RaceSaw {
    use iggy_route_tokio::{BackgroundConfig, Backpressure, Client};
    let runtime = runtime();
    let cluster = cluster(&runtime);
    let client = runtime
        .block_on(Client::connect(silent_config(&cluster)))
        .unwrap();
    cluster.set_reply_delay(1, Duration::from_secs(600));
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
    let saw = runtime.block_on(async {
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flusher = {
            let producer = producer.clone();
            let done = Arc::clone(&done);
            tokio::spawn(async move {
                let (mut reported, mut longest) = (0, Duration::ZERO);
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    let started = Instant::now();
                    reported += count_reported(producer.flush().await);
                    longest = longest.max(started.elapsed());
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
                (reported, longest)
            })
        };
        let mut deliveries = Vec::new();
        for n in 0..RACE_SENDS {
            deliveries.push(producer.send(vec![one(&format!("x{n}"))]).await.unwrap());
        }
        // Shutdown flushes: it must tell what the flusher has not.
        let started = Instant::now();
        let shut = count_reported(producer.shutdown().await);
        let shutdown_took = started.elapsed();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let (reported, longest) = flusher.await.unwrap();
        let mut failed = 0;
        for delivery in deliveries {
            if tokio::time::timeout(HANG, delivery).await.unwrap().is_err() {
                failed += 1;
            }
        }
        RaceSaw {
            reported: reported + shut,
            failed,
            longest: longest.max(shutdown_took),
        }
    });
    runtime.block_on(client.shutdown());
    runtime.block_on(cluster.shutdown());
    saw
}

fn mio_flush_race() -> RaceSaw {
    use iggy_route_mio::{BackgroundConfig, Backpressure, Client};
    let runtime = runtime();
    let cluster = cluster(&runtime);
    let client = Client::connect(silent_config(&cluster)).unwrap();
    cluster.set_reply_delay(1, Duration::from_secs(600));
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
            let (mut reported, mut longest) = (0, Duration::ZERO);
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let started = Instant::now();
                reported += count_reported(producer.flush());
                longest = longest.max(started.elapsed());
                thread::sleep(Duration::from_millis(30));
            }
            (reported, longest)
        })
    };
    let mut deliveries = Vec::new();
    for n in 0..RACE_SENDS {
        deliveries.push(producer.send(vec![one(&format!("x{n}"))]).unwrap());
    }
    let started = Instant::now();
    let shut = count_reported(producer.shutdown());
    let shutdown_took = started.elapsed();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let (reported, longest) = flusher.join().unwrap();
    let mut failed = 0;
    for mut delivery in deliveries {
        if delivery.wait_timeout(HANG).unwrap().is_err() {
            failed += 1;
        }
    }
    client.shutdown();
    runtime.block_on(cluster.shutdown());
    RaceSaw {
        reported: reported + shut,
        failed,
        longest: longest.max(shutdown_took),
    }
}

/// Flushes racing sends to a primary that never answers, then a shutdown: every message
/// fails, each failure is reported (none lost), at most by the one flush and the shutdown
/// that end at the same moment (they share one report, so that neither says `Ok` over it),
/// and no flush or shutdown waits much past the deadline of what it waits for.
#[test]
fn flushes_racing_failing_sends_report_every_failure() {
    for (adapter, saw) in [("tokio", tokio_flush_race()), ("mio", mio_flush_race())] {
        assert_eq!(saw.failed, RACE_SENDS, "{adapter}: {saw:?}");
        assert!(
            (RACE_SENDS as u64..=2 * RACE_SENDS as u64).contains(&saw.reported),
            "{adapter}: {saw:?}"
        );
        // One message per batch (the buffer holds one), each with a 400 ms deadline; a
        // flush waits for what is buffered and in flight before it. Generous.
        assert!(saw.longest < Duration::from_secs(15), "{adapter}: {saw:?}");
    }
}

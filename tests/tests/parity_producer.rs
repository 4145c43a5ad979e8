//! Producer parity: one table of scenarios, each run on both adapters against the loopback
//! cluster, each adapter's outcome asserted equal to the table's (and so to the other's).
//! A caller that must wait (for room, for a flush) is a thread on both: the tokio producer
//! is driven with `block_on` from it.

#![allow(clippy::unwrap_used, unreachable_pub)]

#[path = "mio_support/mod.rs"]
mod mio_support;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use iggy_route_core::client::ClientError;
use iggy_route_core::wire::Message;
use iggy_route_core::{ConfigError, RequestError, SendReceipt, SubmitError};
use iggy_route_mio::{BackgroundConfig, Backpressure, ProducerError, SendFailure};
use mio_support::{Harness, STREAM, TOPIC, numbered};

/// Long enough that no batch lingers out while a scenario looks: batches go when flushed
/// or shut down.
const NEVER_LINGERS: Duration = Duration::from_secs(600);

type Outcome = Result<SendReceipt, SendFailure>;

/// A call's delivery, waited for on the calling thread.
type Pending = Box<dyn FnOnce() -> Outcome + Send>;

/// One background producer of either adapter, driven from plain threads.
#[derive(Clone)]
enum Producer {
    Tokio {
        runtime: Arc<tokio::runtime::Runtime>,
        producer: iggy_route_tokio::Producer<iggy_route_tokio::producer::Background>,
    },
    Mio(iggy_route_mio::Producer<iggy_route_mio::producer::Background>),
}

impl Producer {
    fn send(&self, messages: Vec<Message>) -> Result<Pending, ClientError> {
        match self {
            Self::Tokio { runtime, producer } => {
                let delivery = runtime.block_on(producer.send(messages))?;
                let runtime = Arc::clone(runtime);
                Ok(Box::new(move || runtime.block_on(delivery)))
            }
            Self::Mio(producer) => {
                let delivery = producer.send(messages)?;
                Ok(Box::new(move || delivery.wait()))
            }
        }
    }

    /// A call made on a thread of its own, which may wait for room.
    fn send_elsewhere(&self, messages: Vec<Message>) -> JoinHandle<Result<Outcome, ClientError>> {
        let producer = self.clone();
        thread::spawn(move || producer.send(messages).map(|pending| pending()))
    }

    fn flush(&self) -> Result<(), ProducerError> {
        match self {
            Self::Tokio { runtime, producer } => runtime.block_on(producer.flush()),
            Self::Mio(producer) => producer.flush(),
        }
    }

    fn shutdown(&self) -> Result<(), ProducerError> {
        match self {
            Self::Tokio { runtime, producer } => runtime.block_on(producer.shutdown()),
            Self::Mio(producer) => producer.shutdown(),
        }
    }

    /// A send made where nothing may wait (inside `on_error`): the tokio future is polled
    /// once, and one that is not ready says so.
    fn send_here(&self, messages: Vec<Message>) -> String {
        match self {
            Self::Tokio { producer, .. } => poll_once(producer.send(messages))
                .map_or_else(|| "would wait".to_owned(), |sent| said(&sent)),
            Self::Mio(producer) => said(&producer.send(messages)),
        }
    }

    /// A flush made where nothing may wait, as [`send_here`](Self::send_here).
    fn flush_here(&self) -> String {
        match self {
            Self::Tokio { producer, .. } => poll_once(producer.flush())
                .map_or_else(|| "would wait".to_owned(), |r| reported(&r)),
            Self::Mio(producer) => reported(&producer.flush()),
        }
    }

    /// A shutdown made where nothing may wait, as [`send_here`](Self::send_here).
    fn shutdown_here(&self) -> String {
        match self {
            Self::Tokio { producer, .. } => poll_once(producer.shutdown())
                .map_or_else(|| "would wait".to_owned(), |r| reported(&r)),
            Self::Mio(producer) => reported(&producer.shutdown()),
        }
    }

    fn failed_messages(&self) -> u64 {
        match self {
            Self::Tokio { producer, .. } => producer.stats().failed_messages,
            Self::Mio(producer) => producer.stats().failed_messages,
        }
    }
}

/// A future polled once, with a waker that does nothing: its output if it was ready.
fn poll_once<F: Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Adapter {
    Tokio,
    Mio,
}

/// A connected client of one adapter on the harness's cluster.
enum Client {
    Tokio {
        runtime: Arc<tokio::runtime::Runtime>,
        client: iggy_route_tokio::Client,
    },
    Mio(iggy_route_mio::Client),
}

impl Client {
    fn connect(adapter: Adapter, harness: &Harness) -> Self {
        match adapter {
            Adapter::Tokio => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .unwrap();
                let client = runtime
                    .block_on(iggy_route_tokio::Client::connect(harness.config()))
                    .unwrap();
                Self::Tokio {
                    runtime: Arc::new(runtime),
                    client,
                }
            }
            Adapter::Mio => Self::Mio(harness.client(harness.config())),
        }
    }

    /// A background producer of `topic` (by name, so a missing one fails its sends).
    fn producer(
        &self,
        topic: &str,
        linger: Duration,
        config: BackgroundConfig,
    ) -> Result<Producer, ClientError> {
        Ok(match self {
            Self::Tokio { runtime, client } => {
                let _entered = runtime.enter();
                let producer = client
                    .producer(STREAM, topic)?
                    .linger_time(linger)
                    .background(config)
                    .build()?;
                Producer::Tokio {
                    runtime: Arc::clone(runtime),
                    producer,
                }
            }
            Self::Mio(client) => Producer::Mio(
                client
                    .producer(STREAM, topic)?
                    .linger_time(linger)
                    .background(config)
                    .build()?,
            ),
        })
    }

    fn direct_with_zero_batch(&self) -> Result<(), ClientError> {
        match self {
            Self::Tokio { client, .. } => client
                .producer(STREAM, TOPIC)?
                .batch_length(0)
                .build()
                .map(drop),
            Self::Mio(client) => client
                .producer(STREAM, TOPIC)?
                .batch_length(0)
                .build()
                .map(drop),
        }
    }

    fn shutdown(self) {
        self.shut_down();
    }

    /// Shuts the client down under whatever still uses it.
    fn shut_down(&self) {
        match self {
            Self::Tokio { runtime, client } => runtime.block_on(client.shutdown()),
            Self::Mio(client) => client.shutdown(),
        }
    }
}

/// The topic the harness creates, by name.
const THE_TOPIC: &str = "bp-topic";

fn calls(tag: &str, count: usize) -> Vec<Vec<Message>> {
    (0..count)
        .map(|sequence| vec![numbered(tag, sequence)])
        .collect()
}

fn four_messages(backpressure: Backpressure) -> BackgroundConfig {
    BackgroundConfig {
        max_buffered_messages: 4,
        backpressure,
        ..BackgroundConfig::default()
    }
}

/// What a scenario observed, in words both adapters must say alike.
fn said<T>(result: &Result<T, ClientError>) -> String {
    match result {
        Ok(_) => "ok".to_owned(),
        Err(ClientError::QueueFull { limit }) => format!("queue full ({limit})"),
        Err(ClientError::Closed) => "closed".to_owned(),
        Err(ClientError::Invalid(_)) => "invalid".to_owned(),
        Err(ClientError::Submit(SubmitError::EmptyBatch)) => "empty".to_owned(),
        Err(ClientError::Request(RequestError::TopicNotFound { .. })) => "no topic".to_owned(),
        Err(ClientError::Config(ConfigError::Zero { field })) => format!("zero {field}"),
        Err(ClientError::Config(ConfigError::TooLong { field })) => format!("too long {field}"),
        Err(other) => format!("other: {other}"),
    }
}

fn reported(report: &Result<(), ProducerError>) -> String {
    match report {
        Ok(()) => "ok".to_owned(),
        Err(ProducerError::SendsFailed { messages, .. }) => format!("{messages} failed"),
        Err(other) => format!("{other:?}"),
    }
}

fn delivered(outcome: &Outcome) -> String {
    match outcome {
        Ok(receipt) => format!("stored {}", receipt.messages),
        Err(failure) => format!(
            "{} back: {}",
            failure.messages.len(),
            said::<()>(&Err(failure.error.clone()))
        ),
    }
}

/// Fills a four-message buffer with four one-message calls (held: nothing lingers out).
fn fill(producer: &Producer) -> Vec<Pending> {
    calls("held", 4)
        .into_iter()
        .map(|call| producer.send(call).unwrap())
        .collect()
}

type Scenario = fn(&Harness, &Client) -> Vec<String>;

fn fail_immediately_with_a_full_buffer(harness: &Harness, client: &Client) -> Vec<String> {
    let producer = client
        .producer(
            THE_TOPIC,
            NEVER_LINGERS,
            four_messages(Backpressure::FailImmediately),
        )
        .unwrap();
    let held = fill(&producer);
    let refused = producer.send(vec![numbered("late", 0)]);
    let flushed = producer.flush();
    let outcomes: Vec<String> = held
        .into_iter()
        .map(|pending| delivered(&pending()))
        .collect();
    let fits_now = producer.send(vec![numbered("late", 1)]);
    producer.shutdown().unwrap();
    vec![
        said(&refused),
        reported(&flushed),
        outcomes.join(", "),
        said(&fits_now),
        format!("{} stored", harness.payloads(0).len()),
    ]
}

fn block_with_timeout_deadline_passes(harness: &Harness, client: &Client) -> Vec<String> {
    let wait = Backpressure::BlockWithTimeout(Duration::from_millis(100));
    let producer = client
        .producer(THE_TOPIC, NEVER_LINGERS, four_messages(wait))
        .unwrap();
    let _held = fill(&producer);
    let gave_up = producer.send(vec![numbered("late", 0)]);
    let shut = producer.shutdown();
    vec![
        said(&gave_up),
        reported(&shut),
        format!("{} stored", harness.payloads(0).len()),
    ]
}

fn block_waits_until_a_flush_makes_room(harness: &Harness, client: &Client) -> Vec<String> {
    let producer = client
        .producer(THE_TOPIC, NEVER_LINGERS, four_messages(Backpressure::Block))
        .unwrap();
    let _held = fill(&producer);
    let waiting = producer.send_elsewhere(vec![numbered("waited", 0)]);
    // A flush sends the four held and so makes room. The call may reach the producer
    // after the first flush: flush again until it is through (bounded, so a call that
    // never gets in fails the scenario rather than hanging it).
    let flushed = producer.flush();
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    while !waiting.is_finished() && std::time::Instant::now() < give_up {
        thread::sleep(Duration::from_millis(5));
        producer.flush().unwrap();
    }
    assert!(waiting.is_finished(), "the waiting call never got in");
    let outcome = waiting.join().unwrap();
    let shut = producer.shutdown();
    vec![
        reported(&flushed),
        said(&outcome).to_owned() + " / " + &outcome.map_or_else(|_| "-".into(), |o| delivered(&o)),
        reported(&shut),
        format!("{} stored", harness.payloads(0).len()),
    ]
}

fn shutdown_with_a_caller_waiting(harness: &Harness, client: &Client) -> Vec<String> {
    let producer = client
        .producer(THE_TOPIC, NEVER_LINGERS, four_messages(Backpressure::Block))
        .unwrap();
    let held = fill(&producer);
    let waiting = producer.send_elsewhere(vec![numbered("waiting", 0)]);
    // Made before the shutdown or after it: either way it is refused, never sent.
    let shut = producer.shutdown();
    let refused = waiting.join().unwrap();
    let outcomes: Vec<String> = held
        .into_iter()
        .map(|pending| delivered(&pending()))
        .collect();
    let after = producer.send(vec![numbered("after", 0)]);
    vec![
        reported(&shut),
        said(&refused),
        outcomes.join(", "),
        said(&after),
        reported(&producer.flush()),
        format!("{} stored", harness.payloads(0).len()),
    ]
}

fn flush_reports_failures_once(_harness: &Harness, client: &Client) -> Vec<String> {
    let producer = client
        .producer("no-such-topic", NEVER_LINGERS, BackgroundConfig::default())
        .unwrap();
    let first = producer
        .send(vec![numbered("lost", 0), numbered("lost", 1)])
        .unwrap();
    let second = producer.send(vec![numbered("lost", 2)]).unwrap();
    let flushed = producer.flush();
    let outcomes = [delivered(&first()), delivered(&second())];
    let again = producer.flush();
    let failed = producer.failed_messages();
    vec![
        reported(&flushed),
        outcomes.join(", "),
        reported(&again),
        format!("{failed} counted failed"),
        reported(&producer.shutdown()),
    ]
}

fn a_dropped_delivery_still_sends_and_still_reports(
    harness: &Harness,
    client: &Client,
) -> Vec<String> {
    let good = client
        .producer(THE_TOPIC, NEVER_LINGERS, BackgroundConfig::default())
        .unwrap();
    drop(good.send(calls("dropped", 1).remove(0)).unwrap());
    let stored_flush = good.flush();
    let bad = client
        .producer("no-such-topic", NEVER_LINGERS, BackgroundConfig::default())
        .unwrap();
    drop(bad.send(calls("lost", 1).remove(0)).unwrap());
    let failed_flush = bad.flush();
    vec![
        reported(&stored_flush),
        format!("{} stored", harness.payloads(0).len()),
        reported(&failed_flush),
        reported(&good.shutdown()),
        reported(&bad.shutdown()),
    ]
}

fn failures_go_to_on_error_in_call_order(_harness: &Harness, client: &Client) -> Vec<String> {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let on_error = {
        let seen = Arc::clone(&seen);
        Arc::new(move |failure: SendFailure| {
            let first = failure.messages.first().map(|m| m.payload.clone());
            let first = String::from_utf8_lossy(&first.unwrap_or_default()).into_owned();
            seen.lock()
                .unwrap()
                .push(format!("{first} +{}", failure.messages.len() - 1));
        })
    };
    let config = BackgroundConfig {
        on_error: Some(on_error),
        ..BackgroundConfig::default()
    };
    let producer = client
        .producer("no-such-topic", NEVER_LINGERS, config)
        .unwrap();
    let first = producer
        .send(vec![numbered("lost", 0), numbered("lost", 1)])
        .unwrap();
    let _dropped = producer.send(vec![numbered("lost", 2)]);
    let flushed = producer.flush();
    let told = delivered(&first());
    let shut = producer.shutdown();
    let seen = seen.lock().unwrap().join(", ");
    vec![reported(&flushed), told, seen, reported(&shut)]
}

/// Calls from inside `on_error` into its own producer, which waits for the callback: none
/// waits for the producer. Sends go in while there is room and fail at once when there is
/// none, a flush is `OwnThread`, a shutdown is `Ok` at once and later sends are `Closed`.
/// Outside, the flush that was waiting ends, the producer stops once what it holds is
/// settled (the calls made inside fail on to the callback), and nothing is counted twice.
fn calls_from_inside_on_error(_harness: &Harness, client: &Client) -> Vec<String> {
    let slot: Arc<Mutex<Option<Producer>>> = Arc::default();
    let inside = Arc::new(Mutex::new(Vec::new()));
    let on_error = {
        let (slot, inside) = (Arc::clone(&slot), Arc::clone(&inside));
        Arc::new(move |_failure: SendFailure| {
            // Only the first failure calls in; the calls it makes fail on to here too.
            let Some(producer) = slot.lock().unwrap().take() else {
                return;
            };
            let mut seen = inside.lock().unwrap();
            for call in calls("inside", 5) {
                seen.push(producer.send_here(call));
            }
            seen.push(producer.flush_here());
            seen.push(producer.shutdown_here());
            seen.push(producer.send_here(vec![numbered("late", 0)]));
        })
    };
    let config = BackgroundConfig {
        on_error: Some(on_error),
        ..four_messages(Backpressure::Block)
    };
    let producer = client
        .producer("no-such-topic", NEVER_LINGERS, config)
        .unwrap();
    *slot.lock().unwrap() = Some(producer.clone());
    let first = producer.send(vec![numbered("lost", 0)]).unwrap();
    let flushed = producer.flush();
    let told = delivered(&first());
    let shut = producer.shutdown();
    let after = said(&producer.send(vec![numbered("after", 0)]).map(drop));
    let mut observed = inside.lock().unwrap().clone();
    observed.extend([
        reported(&flushed),
        told,
        reported(&shut),
        after,
        format!("{} counted failed", producer.failed_messages()),
    ]);
    observed
}

/// The client shut down under a running producer: the first batch to find it gone fails,
/// and from then on the producer takes no calls, as after its own shutdown (before, it
/// took every call and failed each one).
fn a_client_shut_down_under_the_producer(harness: &Harness, client: &Client) -> Vec<String> {
    // A short linger: the call made after the client's shutdown goes on its own.
    let linger = Duration::from_millis(20);
    let producer = client
        .producer(THE_TOPIC, linger, BackgroundConfig::default())
        .unwrap();
    let before = producer.send(vec![numbered("before", 0)]).unwrap();
    let flushed = producer.flush();
    let stored = delivered(&before());
    client.shut_down();
    // Nothing has found the client gone yet: this call is taken, and fails. Its failure
    // stays for the next flush, also when the producer has ended by then.
    let during = producer.send(vec![numbered("during", 0)]).unwrap();
    let during = delivered(&during());
    let failed = producer.flush();
    let after = said(&producer.send(vec![numbered("after", 0)]).map(drop));
    vec![
        reported(&flushed),
        stored,
        reported(&failed),
        during,
        after,
        reported(&producer.shutdown()),
        format!("{} stored", harness.payloads(0).len()),
    ]
}

fn calls_that_could_never_go(_harness: &Harness, client: &Client) -> Vec<String> {
    let producer = client
        .producer(THE_TOPIC, NEVER_LINGERS, four_messages(Backpressure::Block))
        .unwrap();
    let empty = producer.send(Vec::new());
    let too_large = producer.send(calls("big", 5).concat());
    vec![
        said(&empty),
        said(&too_large),
        reported(&producer.shutdown()),
    ]
}

fn invalid_configs(_harness: &Harness, client: &Client) -> Vec<String> {
    let day = Duration::from_secs(24 * 60 * 60);
    let build = |linger, config| client.producer(THE_TOPIC, linger, config).map(drop);
    vec![
        said(&client.direct_with_zero_batch()),
        said(&build(
            NEVER_LINGERS,
            BackgroundConfig {
                max_in_flight: 0,
                ..BackgroundConfig::default()
            },
        )),
        said(&build(
            NEVER_LINGERS,
            BackgroundConfig {
                max_buffered_bytes: 0,
                ..BackgroundConfig::default()
            },
        )),
        said(&build(2 * day, BackgroundConfig::default())),
        said(&build(
            NEVER_LINGERS,
            four_messages(Backpressure::BlockWithTimeout(Duration::MAX)),
        )),
        // A linger longer than the request timeout (20 s here) but within a day is fine.
        said(&build(day, BackgroundConfig::default())),
    ]
}

/// The table: each scenario, and what both adapters must observe.
const SCENARIOS: &[(&str, Scenario, &[&str])] = &[
    (
        "FailImmediately with a full buffer",
        fail_immediately_with_a_full_buffer,
        &[
            "queue full (4)",
            "ok",
            "stored 1, stored 1, stored 1, stored 1",
            "ok",
            "5 stored",
        ],
    ),
    (
        "BlockWithTimeout: the wait's deadline passes",
        block_with_timeout_deadline_passes,
        &["queue full (4)", "ok", "4 stored"],
    ),
    (
        "Block: waits until a flush makes room",
        block_waits_until_a_flush_makes_room,
        &["ok", "ok / stored 1", "ok", "5 stored"],
    ),
    (
        "shutdown with a caller waiting for room",
        shutdown_with_a_caller_waiting,
        &[
            "ok",
            "closed",
            "stored 1, stored 1, stored 1, stored 1",
            "closed",
            "ok",
            "4 stored",
        ],
    ),
    (
        "flush with failures",
        flush_reports_failures_once,
        &[
            "3 failed",
            "2 back: no topic, 1 back: no topic",
            "ok",
            "3 counted failed",
            "ok",
        ],
    ),
    (
        "failures go to on_error, in call order, and not to the flush",
        failures_go_to_on_error_in_call_order,
        &["ok", "2 back: no topic", "lost/0 +1, lost/2 +0", "ok"],
    ),
    (
        "calls from inside on_error wait for nothing",
        calls_from_inside_on_error,
        &[
            "ok",
            "ok",
            "ok",
            "ok",
            "queue full (4)",
            "OwnThread",
            "ok",
            "closed",
            "ok",
            "1 back: no topic",
            "ok",
            "closed",
            "5 counted failed",
        ],
    ),
    (
        "the client shut down under the producer",
        a_client_shut_down_under_the_producer,
        &[
            "ok",
            "stored 1",
            "1 failed",
            "1 back: closed",
            "closed",
            "ok",
            "1 stored",
        ],
    ),
    (
        "a dropped delivery",
        a_dropped_delivery_still_sends_and_still_reports,
        &["ok", "1 stored", "1 failed", "ok", "ok"],
    ),
    (
        "empty and over-size calls",
        calls_that_could_never_go,
        &["empty", "invalid", "ok"],
    ),
    (
        "invalid configurations",
        invalid_configs,
        &[
            "zero batch_length",
            "zero max_in_flight",
            "zero max_buffered_bytes",
            "too long linger_time",
            "too long backpressure",
            "ok",
        ],
    ),
];

#[test]
fn both_producers_behave_alike_in_every_scenario() {
    let mut differences = Vec::new();
    for (name, scenario, expected) in SCENARIOS {
        for adapter in [Adapter::Tokio, Adapter::Mio] {
            let harness = Harness::start(1, 1);
            let client = Client::connect(adapter, &harness);
            let observed = scenario(&harness, &client);
            client.shutdown();
            if observed != *expected {
                differences.push(format!("{name} on {adapter:?}: {observed:?}"));
            }
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
}

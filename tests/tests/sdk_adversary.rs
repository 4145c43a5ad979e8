//! Adversarial tests of the promise of `iggy-route-tokio`'s `sdk` feature: a program written
//! against the SDK 0.11.0's traits (`&dyn iggy_common::Client`) switches to iggy-route by
//! changing only the line that builds its client, and runs with the same results.
//!
//! Most tests are differential: the same program runs once against the published SDK's
//! `IggyClient` and once against `iggy_route_tokio::Client`, each on a fresh loopback
//! cluster, and every result is recorded (ids, names, counts, offsets, payloads, user
//! headers byte for byte, error codes) and compared line by line. The others break things on
//! purpose (late replies, lost links, stopped nodes, shutdowns, malformed input) and check
//! the outcome iggy-route reports against what it promises.
//!
//! A test marked `#[ignore = "open break: ..."]` shows a difference from the SDK that is not
//! fixed yet (the reason says which): `cargo test --release -p iggy-route-tests --test
//! sdk_adversary -- --ignored` runs them, and each fails until its difference is gone.

#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::expect_used,
    clippy::too_many_arguments,
    clippy::type_complexity
)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy::prelude::*;
use iggy_route_core::Config;
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tokio::iggy_common::PartitioningKind;

// ---------------------------------------------------------------------------------------
// Building the two clients: the only line a program changes.
// ---------------------------------------------------------------------------------------

/// The published SDK, on node 0 (the metadata leader, where new partitions' primaries are).
async fn sdk_on(cluster: &TestCluster) -> Arc<dyn Client> {
    let client = IggyClient::from_connection_string(&cluster.sdk_connection_string(0)).unwrap();
    client.connect().await.unwrap();
    Arc::new(client)
}

fn route_config(cluster: &TestCluster) -> Config {
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(5);
    config
}

/// iggy-route, its session on node 2 (a follower), so that reads and writes go to nodes of
/// their own.
async fn route_on(cluster: &TestCluster) -> Arc<dyn Client> {
    let mut config = route_config(cluster);
    config.seeds.rotate_right(1);
    Arc::new(iggy_route_tokio::Client::connect(config).await.unwrap())
}

fn named(name: &str) -> Identifier {
    Identifier::named(name).unwrap()
}

fn numeric(id: u32) -> Identifier {
    Identifier::numeric(id).unwrap()
}

fn code<T: Debug>(result: &Result<T, IggyError>) -> Option<u32> {
    result.as_ref().err().map(IggyError::as_code)
}

// ---------------------------------------------------------------------------------------
// Traces: what a program saw, in a form two runs can be compared by.
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct Trace {
    lines: Vec<String>,
}

impl Trace {
    fn note(&mut self, label: &str, value: impl Debug) {
        self.lines
            .push(format!("{label}: {}", normalize(&format!("{value:?}"))));
    }

    fn result<T>(
        &mut self,
        label: &str,
        result: &Result<T, IggyError>,
        show: impl FnOnce(&T) -> String,
    ) {
        let shown = match result {
            Ok(value) => format!("ok {}", normalize(&show(value))),
            Err(error) => format!("err {} ({})", error.as_code(), error_name(error)),
        };
        self.lines.push(format!("{label}: {shown}"));
    }

    fn debug<T: Debug>(&mut self, label: &str, result: &Result<T, IggyError>) {
        self.result(label, result, |value| format!("{value:?}"));
    }
}

fn error_name(error: &IggyError) -> String {
    let text = format!("{error:?}");
    text.split(['(', ' ', '{'])
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Removes what differs between two runs by nature (creation times) and what iggy-route
/// documents it does not keep (the `options` maps).
fn normalize(text: &str) -> String {
    let mut out = text.to_owned();
    for field in ["created_at: ", "options: ", "expiry_at: "] {
        while let Some(start) = out.find(field) {
            let rest = &out[start + field.len()..];
            let mut depth = 0i32;
            let mut end = rest.len();
            for (index, ch) in rest.char_indices() {
                match ch {
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' | '}' if depth == 0 => {
                        end = index;
                        break;
                    }
                    ')' | ']' | '}' => depth -= 1,
                    ',' if depth == 0 => {
                        end = index + 1;
                        break;
                    }
                    _ => {}
                }
            }
            let tail = rest[end..].trim_start().to_owned();
            out = format!("{}{}", &out[..start], tail);
        }
    }
    out
}

fn compare(sdk: &Trace, route: &Trace) -> Vec<String> {
    let mut differences = Vec::new();
    let len = sdk.lines.len().max(route.lines.len());
    for index in 0..len {
        let left = sdk.lines.get(index).map_or("<none>", String::as_str);
        let right = route.lines.get(index).map_or("<none>", String::as_str);
        if left != right {
            differences.push(format!("  SDK:        {left}\n  iggy-route: {right}"));
        }
    }
    differences
}

fn assert_same(what: &str, sdk: &Trace, route: &Trace) {
    let differences = compare(sdk, route);
    {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        let file = what.replace(' ', "_");
        let _ = std::fs::write(dir.join(format!("{file}.sdk.txt")), sdk.lines.join("\n"));
        let _ = std::fs::write(
            dir.join(format!("{file}.route.txt")),
            route.lines.join("\n"),
        );
    }
    if !differences.is_empty() {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        let file = what.replace(' ', "_");
        let _ = std::fs::write(dir.join(format!("{file}.sdk.txt")), sdk.lines.join("\n"));
        let _ = std::fs::write(
            dir.join(format!("{file}.route.txt")),
            route.lines.join("\n"),
        );
        panic!(
            "{what}: {} of {} results differ between the SDK and iggy-route:\n{}",
            differences.len(),
            sdk.lines.len(),
            differences.join("\n")
        );
    }
}

type Hook = Arc<dyn Fn(u32, u32, u32) + Send + Sync>;
type Connected = Pin<Box<dyn Future<Output = Result<Arc<dyn Client>, IggyError>> + Send>>;
type Connect = Arc<dyn Fn(Who) -> Connected + Send + Sync>;

/// Whom a further client of the program signs in as.
#[derive(Clone)]
enum Who {
    User(String, String),
    Token(String),
}

/// What a program is given: two clients of the root user, a hook that moves a new topic's
/// primaries where the cluster allows it, and the line that builds a client for someone else.
struct World {
    a: Arc<dyn Client>,
    b: Arc<dyn Client>,
    spread: Hook,
    connect: Connect,
}

type Program =
    for<'a> fn(&'a World, &'a mut Trace) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

fn sdk_connect(cluster: &Arc<TestCluster>) -> Connect {
    let addr = cluster.addr(0);
    Arc::new(move |who: Who| -> Connected {
        Box::pin(async move {
            let url = match who {
                Who::User(user, password) => format!("iggy://{user}:{password}@{addr}"),
                Who::Token(token) => format!("iggy://{token}@{addr}"),
            };
            let client = IggyClient::from_connection_string(&url)?;
            client.connect().await?;
            Ok(Arc::new(client) as Arc<dyn Client>)
        })
    })
}

fn route_connect(cluster: &Arc<TestCluster>) -> Connect {
    let base = route_config(cluster);
    Arc::new(move |who: Who| -> Connected {
        let mut config = base.clone();
        Box::pin(async move {
            config.credentials = match who {
                Who::User(user, password) => iggy_route_core::Credentials::user(user, password)
                    .map_err(|_| IggyError::InvalidCredentials)?,
                Who::Token(token) => iggy_route_core::Credentials::PersonalAccessToken(
                    iggy_route_core::wire::Password::new(token)
                        .map_err(|_| IggyError::InvalidCredentials)?,
                ),
            };
            config.seeds.rotate_right(1);
            let client = iggy_route_tokio::Client::connect(config)
                .await
                .map_err(iggy_route_tokio::sdk::IntoIggyError::into_iggy_error)?;
            Ok(Arc::new(client) as Arc<dyn Client>)
        })
    })
}

/// Runs `program` with SDK clients on one fresh cluster and with iggy-route clients on
/// another, and compares what they saw. With `split`, iggy-route's cluster has the primaries
/// of each topic the program announces away from the metadata leader.
async fn differential(what: &str, program: Program, split: bool) {
    let sdk_cluster = Arc::new(TestCluster::start(3).await);
    let world = World {
        a: sdk_on(&sdk_cluster).await,
        b: sdk_on(&sdk_cluster).await,
        spread: Arc::new(|_, _, _| {}),
        connect: sdk_connect(&sdk_cluster),
    };
    let mut sdk_trace = Trace::default();
    program(&world, &mut sdk_trace).await;
    let _ = world.a.shutdown().await;
    let _ = world.b.shutdown().await;

    let route_cluster = Arc::new(TestCluster::start(3).await);
    let spreader = Arc::clone(&route_cluster);
    let world = World {
        a: route_on(&route_cluster).await,
        b: route_on(&route_cluster).await,
        // Every partition's primary away from the metadata leader and the session.
        spread: Arc::new(move |stream, topic, partitions| {
            if !split {
                return;
            }
            for partition in 0..partitions {
                let node = 1 + usize::try_from(partition).unwrap() % 2;
                spreader.set_primary(stream, topic, partition, node);
            }
        }),
        connect: route_connect(&route_cluster),
    };
    let mut route_trace = Trace::default();
    program(&world, &mut route_trace).await;
    let _ = world.a.shutdown().await;
    let _ = world.b.shutdown().await;
    assert_same(what, &sdk_trace, &route_trace);
}

// ---------------------------------------------------------------------------------------
// Messages.
// ---------------------------------------------------------------------------------------

const ORIGIN: u64 = 1_700_000_000_000_000;

/// One message with a fixed origin timestamp (so two runs compare) and `headers`.
fn message(
    id: u128,
    payload: &[u8],
    headers: Option<BTreeMap<HeaderKey, HeaderValue>>,
) -> IggyMessage {
    let mut message = IggyMessage::builder()
        .id(id)
        .payload(Bytes::copy_from_slice(payload))
        .maybe_user_headers(headers)
        .build()
        .unwrap();
    message.header.origin_timestamp = ORIGIN + u64::try_from(id % 1_000_000).unwrap();
    message
}

/// A header of every `HeaderKind`, keyed by keys of several kinds.
fn every_kind_of_header() -> BTreeMap<HeaderKey, HeaderValue> {
    let mut headers = BTreeMap::new();
    headers.insert(
        HeaderKey::from_str("raw").unwrap(),
        HeaderValue::try_from(&[0u8, 255, 7][..]).unwrap(),
    );
    headers.insert(
        HeaderKey::from_str("string").unwrap(),
        HeaderValue::from_str("zażółć ✓").unwrap(),
    );
    headers.insert(
        HeaderKey::from_str("bool").unwrap(),
        HeaderValue::from(true),
    );
    headers.insert(HeaderKey::from_str("i8").unwrap(), HeaderValue::from(-8i8));
    headers.insert(
        HeaderKey::from_str("i16").unwrap(),
        HeaderValue::from(-16i16),
    );
    headers.insert(
        HeaderKey::from_str("i32").unwrap(),
        HeaderValue::from(-32i32),
    );
    headers.insert(
        HeaderKey::from_str("i64").unwrap(),
        HeaderValue::from(i64::MIN),
    );
    headers.insert(
        HeaderKey::from_str("i128").unwrap(),
        HeaderValue::from(i128::MIN + 1),
    );
    headers.insert(
        HeaderKey::from_str("u8").unwrap(),
        HeaderValue::from(u8::MAX),
    );
    headers.insert(
        HeaderKey::from_str("u16").unwrap(),
        HeaderValue::from(u16::MAX),
    );
    headers.insert(
        HeaderKey::from_str("u32").unwrap(),
        HeaderValue::from(u32::MAX),
    );
    headers.insert(
        HeaderKey::from_str("u64").unwrap(),
        HeaderValue::from(u64::MAX),
    );
    headers.insert(
        HeaderKey::from_str("u128").unwrap(),
        HeaderValue::from(u128::MAX),
    );
    headers.insert(
        HeaderKey::from_str("f32").unwrap(),
        HeaderValue::from(-1.5f32),
    );
    headers.insert(
        HeaderKey::from_str("f64").unwrap(),
        HeaderValue::from(f64::MAX),
    );
    // Keys of kinds other than strings.
    headers.insert(HeaderKey::from(7u32), HeaderValue::from(false));
    headers.insert(
        HeaderKey::from(-1i64),
        HeaderValue::from_str("negative key").unwrap(),
    );
    headers.insert(
        HeaderKey::try_from(&[1u8, 2, 3][..]).unwrap(),
        HeaderValue::from(0.25f64),
    );
    headers
}

fn digest(bytes: &[u8]) -> String {
    format!(
        "{}B#{:08x}",
        bytes.len(),
        twox_hash::XxHash32::oneshot(0, bytes)
    )
}

fn show_id(id: u128) -> String {
    if id < 1_000_000 {
        id.to_string()
    } else {
        "minted".to_owned()
    }
}

fn show_polled(polled: &PolledMessages) -> String {
    let messages: Vec<String> = polled
        .messages
        .iter()
        .map(|m| {
            let map = m
                .user_headers_map()
                .map_err(|e| e.as_code())
                .map(|map| map.map(|map| digest(format!("{map:?}").as_bytes())));
            format!(
                "[off {} id {} origin {} hlen {} plen {} payload {} headers {:?} map {:?}]",
                m.header.offset,
                show_id(m.header.id),
                m.header.origin_timestamp,
                m.header.user_headers_length,
                m.header.payload_length,
                digest(&m.payload),
                m.user_headers.as_deref().map(digest),
                map,
            )
        })
        .collect();
    format!(
        "partition {} current {} count {} {}",
        polled.partition_id,
        polled.current_offset,
        polled.count,
        messages.join(" ")
    )
}

fn show_sent(sent: &SendMessagesResponse) -> String {
    let confirmations: Vec<String> = sent
        .confirmations
        .iter()
        .map(|c| {
            format!(
                "({} {} {} {})",
                c.stream_id, c.topic_id, c.partition_id, c.base_offset
            )
        })
        .collect();
    confirmations.join(" ")
}

async fn poll(
    client: &dyn Client,
    stream: &Identifier,
    topic: &Identifier,
    partition: Option<u32>,
    consumer: &Consumer,
    strategy: PollingStrategy,
    count: u32,
    auto_commit: bool,
) -> Result<PolledMessages, IggyError> {
    client
        .poll_messages(
            stream,
            topic,
            partition,
            consumer,
            &strategy,
            count,
            auto_commit,
        )
        .await
}

/// Polls until `partition` holds at least `count` messages from 0, within 5 s: a backup's
/// copy lags, and a program on the SDK would see them at once from the primary.
async fn settled(
    client: &dyn Client,
    stream: &Identifier,
    topic: &Identifier,
    partition: u32,
    count: usize,
) {
    let by = Instant::now() + Duration::from_secs(5);
    loop {
        let polled = poll(
            client,
            stream,
            topic,
            Some(partition),
            &Consumer::new(numeric(999)),
            PollingStrategy::offset(0),
            1000,
            false,
        )
        .await;
        if polled.as_ref().is_ok_and(|p| p.messages.len() >= count) || Instant::now() > by {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn messaging_day<'a>(
    world: &'a World,
    trace: &'a mut Trace,
) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        let (client, other, spread) = (&*world.a, &*world.b, world.spread.clone());
        let stream_name = "shop";
        let created = client.create_stream(stream_name).await;
        trace.debug("create_stream", &created);
        trace.debug(
            "create_stream again",
            &client.create_stream(stream_name).await.map(|s| s.id),
        );
        let stream = named(stream_name);
        let s = created.as_ref().map(|s| s.id).unwrap_or(0);
        trace.debug("get_stream by name", &client.get_stream(&stream).await);
        trace.debug("get_stream by id", &client.get_stream(&numeric(s)).await);

        let options = TopicCreateOptions {
            partitions_count: Some(3),
            compression_algorithm: Some(CompressionAlgorithm::Gzip),
            message_expiry: Some(IggyExpiry::ExpireDuration(IggyDuration::from(
                3_600_000_000,
            ))),
            max_topic_size: Some(MaxTopicSize::Custom(IggyByteSize::from(2_000_000_000))),
            ..TopicCreateOptions::default()
        };
        let created = client.create_topic(&stream, "orders", &options).await;
        trace.debug("create_topic", &created);
        let t = created.as_ref().map(|t| t.id).unwrap_or(0);
        spread(s, t, 3);
        let topic = named("orders");
        trace.debug("get_topic", &client.get_topic(&stream, &topic).await);
        trace.debug("get_topics", &client.get_topics(&stream).await);

        // Explicit partition, a header of every kind, an id of 0 to be minted.
        let mut batch = vec![
            message(1, b"one", Some(every_kind_of_header())),
            message(0, b"two: id minted", None),
            message(
                3,
                &[0u8; 300],
                Some(BTreeMap::from([(
                    HeaderKey::from_str("k").unwrap(),
                    HeaderValue::from(1u8),
                )])),
            ),
        ];
        let sent = client
            .send_messages(&stream, &topic, &Partitioning::partition_id(1), &mut batch)
            .await;
        trace.result("send partition 1", &sent, show_sent);
        trace.note("minted id is not 0", batch[1].header.id != 0);
        let minted = batch[1].header.id;
        // The same stream and topic by number.
        let mut batch = vec![message(4, b"four", None)];
        let sent = client
            .send_messages(
                &numeric(s),
                &numeric(t),
                &Partitioning::partition_id(1),
                &mut batch,
            )
            .await;
        trace.result("send partition 1 by number", &sent, show_sent);

        // Balanced: the SDK goes round from partition 0.
        for i in 0..5u128 {
            let mut one = vec![message(100 + i, b"balanced", None)];
            let sent = client
                .send_messages(&stream, &topic, &Partitioning::balanced(), &mut one)
                .await;
            trace.result(&format!("send balanced {i}"), &sent, show_sent);
        }
        // Keys of every kind.
        let keys = [
            ("str", Partitioning::messages_key_str("customer-7").unwrap()),
            (
                "bytes",
                Partitioning::messages_key(&[0, 1, 2, 3, 4, 5]).unwrap(),
            ),
            ("u32", Partitioning::messages_key_u32(77)),
            ("u64", Partitioning::messages_key_u64(u64::MAX)),
            (
                "u128",
                Partitioning::messages_key_u128(12_345_678_901_234_567_890),
            ),
        ];
        for (index, (kind, key)) in keys.iter().enumerate() {
            let mut one = vec![message(200 + index as u128, kind.as_bytes(), None)];
            let sent = client.send_messages(&stream, &topic, key, &mut one).await;
            trace.result(&format!("send keyed {kind}"), &sent, show_sent);
        }

        // What may not be sent.
        let mut one = vec![message(300, b"x", None)];
        let sent = client
            .send_messages(&stream, &topic, &Partitioning::partition_id(3), &mut one)
            .await;
        trace.result("send to partition 3 of 3", &sent, show_sent);
        let sent = client
            .send_messages(
                &stream,
                &named("nope"),
                &Partitioning::partition_id(0),
                &mut one,
            )
            .await;
        trace.result("send to a missing topic", &sent, show_sent);
        let sent = client
            .send_messages(&named("nope"), &topic, &Partitioning::balanced(), &mut one)
            .await;
        trace.result("send balanced to a missing stream", &sent, show_sent);
        let sent = client
            .send_messages(&stream, &topic, &Partitioning::partition_id(0), &mut [])
            .await;
        trace.result("send nothing", &sent, show_sent);

        for partition in 0..3 {
            let expected = [0, 4, 0][partition as usize];
            settled(client, &stream, &topic, partition, expected).await;
        }
        let consumer = Consumer::new(numeric(1));
        // Every polling strategy on partition 1.
        let strategies = [
            ("offset 0", PollingStrategy::offset(0)),
            ("offset 2", PollingStrategy::offset(2)),
            ("offset 99", PollingStrategy::offset(99)),
            ("first", PollingStrategy::first()),
            ("last", PollingStrategy::last()),
            (
                "timestamp 0",
                PollingStrategy::timestamp(IggyTimestamp::from(0)),
            ),
            (
                "timestamp max",
                PollingStrategy::timestamp(IggyTimestamp::from(u64::MAX)),
            ),
        ];
        for (name, strategy) in strategies {
            for count in [1, 2, 100] {
                let polled = poll(
                    client,
                    &stream,
                    &topic,
                    Some(1),
                    &consumer,
                    strategy,
                    count,
                    false,
                )
                .await;
                trace.result(&format!("poll {name} count {count}"), &polled, show_polled);
            }
        }
        let all = poll(
            client,
            &stream,
            &topic,
            Some(1),
            &consumer,
            PollingStrategy::offset(0),
            10,
            false,
        )
        .await
        .unwrap();
        trace.note(
            "minted id read back",
            all.messages.get(1).map(|m| m.header.id == minted),
        );
        let third = all.messages.get(2).map_or(0, |m| m.header.timestamp);
        let polled = poll(
            client,
            &stream,
            &topic,
            Some(1),
            &consumer,
            PollingStrategy::timestamp(IggyTimestamp::from(third)),
            10,
            false,
        )
        .await;
        trace.result("poll from the third message's timestamp", &polled, |p| {
            format!(
                "{:?}",
                p.messages
                    .iter()
                    .map(|m| m.header.offset)
                    .collect::<Vec<_>>()
            )
        });
        let polled = poll(
            client,
            &stream,
            &topic,
            Some(1),
            &consumer,
            PollingStrategy::offset(0),
            0,
            false,
        )
        .await;
        trace.result("poll count 0", &polled, show_polled);
        let polled = poll(
            client,
            &stream,
            &topic,
            Some(7),
            &consumer,
            PollingStrategy::offset(0),
            1,
            false,
        )
        .await;
        trace.result("poll partition 7", &polled, show_polled);
        let polled = poll(
            client,
            &stream,
            &named("nope"),
            Some(0),
            &consumer,
            PollingStrategy::offset(0),
            1,
            false,
        )
        .await;
        trace.result("poll a missing topic", &polled, show_polled);

        // Next with auto-commit walks the partition one message at a time.
        let walker = Consumer::new(named("walker"));
        for step in 0..6 {
            let polled = poll(
                client,
                &stream,
                &topic,
                Some(1),
                &walker,
                PollingStrategy::next(),
                1,
                true,
            )
            .await;
            trace.result(
                &format!("poll next auto-commit {step}"),
                &polled,
                show_polled,
            );
        }
        let offset = client
            .get_consumer_offset(&walker, &stream, &topic, Some(1))
            .await;
        trace.debug("walker's offset", &offset);
        // Next without auto-commit does not move.
        let still = Consumer::new(numeric(2));
        for step in 0..2 {
            let polled = poll(
                client,
                &stream,
                &topic,
                Some(1),
                &still,
                PollingStrategy::next(),
                1,
                false,
            )
            .await;
            trace.result(&format!("poll next no commit {step}"), &polled, show_polled);
        }

        // Consumer offsets.
        trace.debug(
            "get offset never stored",
            &client
                .get_consumer_offset(&still, &stream, &topic, Some(1))
                .await,
        );
        trace.debug(
            "store offset 2",
            &client
                .store_consumer_offset(&still, &stream, &topic, Some(1), 2)
                .await,
        );
        trace.debug(
            "get offset 2",
            &client
                .get_consumer_offset(&still, &stream, &topic, Some(1))
                .await,
        );
        let polled = poll(
            client,
            &stream,
            &topic,
            Some(1),
            &still,
            PollingStrategy::next(),
            10,
            false,
        )
        .await;
        trace.result("poll next after store 2", &polled, show_polled);
        trace.debug(
            "store offset past the end",
            &client
                .store_consumer_offset(&still, &stream, &topic, Some(1), 1_000)
                .await,
        );
        trace.debug(
            "store offset on partition 9",
            &client
                .store_consumer_offset(&still, &stream, &topic, Some(9), 0)
                .await,
        );
        trace.debug(
            "get offset on partition 9",
            &client
                .get_consumer_offset(&still, &stream, &topic, Some(9))
                .await,
        );
        trace.debug(
            "get offset, no partition",
            &client
                .get_consumer_offset(&still, &stream, &topic, None)
                .await,
        );
        trace.debug(
            "delete offset",
            &client
                .delete_consumer_offset(&still, &stream, &topic, Some(1))
                .await,
        );
        trace.debug(
            "delete offset again",
            &client
                .delete_consumer_offset(&still, &stream, &topic, Some(1))
                .await,
        );
        trace.debug(
            "get offset deleted",
            &client
                .get_consumer_offset(&still, &stream, &topic, Some(1))
                .await,
        );

        // Consumer groups polled without a partition by two members.
        let group = client
            .create_consumer_group(&stream, &topic, "billing")
            .await;
        trace.debug("create_consumer_group", &group);
        let billing = named("billing");
        let member = Consumer::group(billing.clone());
        trace.debug(
            "join",
            &client.join_consumer_group(&stream, &topic, &billing).await,
        );
        trace.debug(
            "join again",
            &client.join_consumer_group(&stream, &topic, &billing).await,
        );
        for step in 0..4 {
            let polled = poll(
                client,
                &stream,
                &topic,
                None,
                &member,
                PollingStrategy::offset(0),
                10,
                false,
            )
            .await;
            trace.result(&format!("group poll alone {step}"), &polled, show_polled);
        }
        trace.debug(
            "second joins",
            &other.join_consumer_group(&stream, &topic, &billing).await,
        );
        client.refresh_consumer_group_assignments().await;
        let mut group_details = client.get_consumer_group(&stream, &topic, &billing).await;
        if let Ok(Some(details)) = group_details.as_mut() {
            details.members.sort_by_key(|m| m.partitions.clone());
            for member in &mut details.members {
                member.id = 0;
            }
        }
        trace.debug("group of two", &group_details);
        for step in 0..4 {
            let polled = poll(
                client,
                &stream,
                &topic,
                None,
                &member,
                PollingStrategy::next(),
                10,
                true,
            )
            .await;
            trace.result(
                &format!("group poll first member {step}"),
                &polled,
                show_polled,
            );
            let polled = poll(
                other,
                &stream,
                &topic,
                None,
                &member,
                PollingStrategy::next(),
                10,
                true,
            )
            .await;
            trace.result(
                &format!("group poll second member {step}"),
                &polled,
                show_polled,
            );
        }
        for partition in 0..3 {
            let offset = client
                .get_consumer_offset(&member, &stream, &topic, Some(partition))
                .await;
            trace.debug(&format!("group offset on {partition}"), &offset);
        }
        trace.debug(
            "leave",
            &other.leave_consumer_group(&stream, &topic, &billing).await,
        );
        trace.debug(
            "leave again",
            &other.leave_consumer_group(&stream, &topic, &billing).await,
        );
        let polled = poll(
            other,
            &stream,
            &topic,
            None,
            &member,
            PollingStrategy::next(),
            10,
            false,
        )
        .await;
        trace.result("group poll by a member who left", &polled, show_polled);
        trace.debug(
            "get_consumer_groups",
            &client.get_consumer_groups(&stream, &topic).await.map(|g| {
                g.iter()
                    .map(|g| (g.id, g.name.clone(), g.partitions_count))
                    .collect::<Vec<_>>()
            }),
        );

        // Purge, partitions, renames, deletes.
        trace.debug("purge_topic", &client.purge_topic(&stream, &topic).await);
        let by = Instant::now() + Duration::from_secs(5);
        let mut emptied = false;
        while Instant::now() < by {
            let polled = poll(
                client,
                &stream,
                &topic,
                Some(1),
                &consumer,
                PollingStrategy::offset(0),
                10,
                false,
            )
            .await;
            if polled.is_ok_and(|p| p.messages.is_empty()) {
                emptied = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        trace.note("purged within 5 s", emptied);
        let mut again = vec![message(500, b"after purge", None)];
        let sent = client
            .send_messages(&stream, &topic, &Partitioning::partition_id(1), &mut again)
            .await;
        trace.result("send after purge", &sent, show_sent);
        trace.debug(
            "create_partitions 2",
            &client.create_partitions(&stream, &topic, 2).await,
        );
        spread(s, t, 5);
        let topic_now = client.get_topic(&stream, &topic).await;
        trace.result("partitions after create", &topic_now, |t| {
            format!("{:?}", t.as_ref().map(|t| t.partitions_count))
        });
        for i in 0..6u128 {
            let mut one = vec![message(600 + i, b"balanced after growth", None)];
            let sent = client
                .send_messages(&stream, &topic, &Partitioning::balanced(), &mut one)
                .await;
            trace.result(&format!("send balanced after growth {i}"), &sent, show_sent);
        }
        // The same topic named by number: the SDK keeps a cursor (and a partitions count)
        // per way of naming it.
        for i in 0..4u128 {
            let mut one = vec![message(650 + i, b"balanced by number", None)];
            let sent = client
                .send_messages(
                    &numeric(s),
                    &numeric(t),
                    &Partitioning::balanced(),
                    &mut one,
                )
                .await;
            trace.result(&format!("send balanced by number {i}"), &sent, show_sent);
        }
        trace.debug(
            "delete_partitions 4",
            &client.delete_partitions(&stream, &topic, 4).await,
        );
        trace.debug(
            "delete_partitions 9",
            &client.delete_partitions(&stream, &topic, 9).await,
        );
        trace.debug(
            "update_topic",
            &client
                .update_topic(&stream, &topic, "renamed", &TopicUpdateOptions::default())
                .await,
        );
        trace.debug(
            "get old topic name",
            &client.get_topic(&stream, &topic).await.map(|t| t.is_some()),
        );
        let renamed = named("renamed");
        let mut one = vec![message(700, b"renamed", None)];
        let sent = client
            .send_messages(&stream, &renamed, &Partitioning::partition_id(0), &mut one)
            .await;
        trace.result("send to the renamed topic", &sent, show_sent);
        trace.debug(
            "update_stream",
            &client
                .update_stream(&stream, "store", &StreamUpdateOptions::default())
                .await,
        );
        let store = named("store");
        trace.debug("get_streams", &client.get_streams().await);
        trace.debug("delete_topic", &client.delete_topic(&store, &renamed).await);
        trace.debug(
            "delete_topic again",
            &client.delete_topic(&store, &renamed).await,
        );
        trace.debug(
            "purge a missing topic",
            &client.purge_topic(&store, &renamed).await,
        );
        trace.debug("delete_stream", &client.delete_stream(&store).await);
        trace.debug("delete_stream again", &client.delete_stream(&store).await);
        trace.debug("purge_stream missing", &client.purge_stream(&store).await);
        trace.debug("get_streams at the end", &client.get_streams().await);
    })
}

#[ignore = "open break: sums up the messaging differences tested one by one here"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_of_messaging_gives_the_same_results_as_the_sdk() {
    differential("messaging day", messaging_day, false).await;
}

// ---------------------------------------------------------------------------------------
// Users, permissions, tokens, system reads.
// ---------------------------------------------------------------------------------------

fn alice_permissions(stream: u32) -> Permissions {
    Permissions {
        global: GlobalPermissions {
            read_streams: true,
            ..GlobalPermissions::default()
        },
        streams: Some(BTreeMap::from([(
            stream as usize,
            StreamPermissions {
                read_topics: true,
                send_messages: true,
                ..StreamPermissions::default()
            },
        )])),
    }
}

fn show_user(user: &UserInfoDetails) -> String {
    format!(
        "{} {} {:?} {:?}",
        user.id, user.username, user.status, user.permissions
    )
}

/// Connects as `who`, again while a follower may not know the user or token yet.
async fn connect_as(world: &World, who: Who) -> Result<Arc<dyn Client>, IggyError> {
    let by = Instant::now() + Duration::from_secs(5);
    loop {
        match (world.connect)(who.clone()).await {
            Err(error) if Instant::now() < by && error.as_code() != 0 => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if Instant::now() >= by {
                    return Err(error);
                }
            }
            other => return other,
        }
    }
}

fn users_day<'a>(
    world: &'a World,
    trace: &'a mut Trace,
) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        let root = &*world.a;
        let open = root.create_stream("open").await.unwrap().id;
        root.create_topic(
            &numeric(open),
            "events",
            &TopicCreateOptions {
                partitions_count: Some(1),
                ..TopicCreateOptions::default()
            },
        )
        .await
        .unwrap();
        let closed = root.create_stream("closed").await.unwrap().id;
        root.create_topic(&numeric(closed), "events", &TopicCreateOptions::default())
            .await
            .unwrap();

        let created = root
            .create_user(
                "alice",
                "alice-pw",
                UserStatus::Active,
                Some(alice_permissions(open)),
            )
            .await;
        trace.result("create_user alice", &created, show_user);
        let again = root
            .create_user("alice", "alice-pw", UserStatus::Active, None)
            .await;
        trace.result("create_user alice again", &again, show_user);
        for (label, name, password) in [
            ("empty name", "", "password"),
            ("short name", "ab", "password"),
            ("long name", &"n".repeat(256)[..], "password"),
            ("name of 50", &"n".repeat(50)[..], "password"),
            ("short password", "bob", "pw"),
            ("long password", "bob", &"p".repeat(256)[..]),
            ("password of 100", "carol", &"p".repeat(100)[..]),
        ] {
            let result = root
                .create_user(name, password, UserStatus::Inactive, None)
                .await;
            trace.result(&format!("create_user {label}"), &result, show_user);
        }
        trace.result(
            "get_user by name",
            &root.get_user(&named("alice")).await,
            |u| format!("{:?}", u.as_ref().map(show_user)),
        );
        trace.result(
            "get_user missing",
            &root.get_user(&named("nobody")).await,
            |u| format!("{:?}", u.as_ref().map(show_user)),
        );
        trace.result("get_users", &root.get_users().await, |users| {
            format!(
                "{:?}",
                users
                    .iter()
                    .map(|u| (u.id, u.username.clone(), u.status))
                    .collect::<Vec<_>>()
            )
        });

        // Alice, on a client of her own.
        let alice = connect_as(world, Who::User("alice".into(), "alice-pw".into())).await;
        trace.result("alice connects", &alice, |_| String::new());
        // Past the followers' lag: what another client wrote is everywhere by now.
        tokio::time::sleep(Duration::from_millis(700)).await;
        if let Ok(alice) = &alice {
            trace.result("alice get_me", &alice.get_me().await, |me| {
                format!("{:?}", me.user_id)
            });
            trace.result("alice get_streams", &alice.get_streams().await, |s| {
                format!("{}", s.len())
            });
            trace.result(
                "alice create_stream",
                &alice.create_stream("mine").await,
                |s| s.name.clone(),
            );
            let mut one = vec![message(1, b"alice", None)];
            let sent = alice
                .send_messages(
                    &numeric(open),
                    &named("events"),
                    &Partitioning::partition_id(0),
                    &mut one,
                )
                .await;
            trace.result("alice sends where she may", &sent, show_sent);
            let sent = alice
                .send_messages(
                    &numeric(open),
                    &named("events"),
                    &Partitioning::balanced(),
                    &mut one,
                )
                .await;
            trace.result("alice sends balanced where she may", &sent, show_sent);
            let sent = alice
                .send_messages(
                    &numeric(closed),
                    &named("events"),
                    &Partitioning::partition_id(0),
                    &mut one,
                )
                .await;
            trace.result("alice sends where she may not", &sent, show_sent);
            let sent = alice
                .send_messages(
                    &numeric(closed),
                    &named("events"),
                    &Partitioning::balanced(),
                    &mut one,
                )
                .await;
            trace.result("alice sends balanced where she may not", &sent, show_sent);
            let polled = poll(
                &**alice,
                &numeric(open),
                &named("events"),
                Some(0),
                &Consumer::new(numeric(1)),
                PollingStrategy::first(),
                10,
                false,
            )
            .await;
            trace.result("alice polls where she may not", &polled, show_polled);
            trace.result("alice get_users", &alice.get_users().await, |u| {
                format!("{}", u.len())
            });
            trace.debug(
                "alice creates a token",
                &alice
                    .create_personal_access_token("alice-token", IggyExpiry::NeverExpire)
                    .await
                    .map(|t| !t.token.is_empty()),
            );
            trace.debug(
                "alice's tokens",
                &alice
                    .get_personal_access_tokens()
                    .await
                    .map(|tokens| tokens.iter().map(|t| t.name.clone()).collect::<Vec<_>>()),
            );
            trace.debug(
                "alice changes another's password",
                &alice
                    .change_password(&numeric(0), "iggy", "new-password")
                    .await,
            );
            let _ = alice.shutdown().await;
        }

        // Updates.
        trace.debug(
            "update_user rename and deactivate",
            &root
                .update_user(
                    &named("alice"),
                    Some("alicia"),
                    Some(UserStatus::Inactive),
                    &UserUpdateOptions::default(),
                )
                .await,
        );
        trace.debug(
            "update_user to a taken name",
            &root
                .update_user(
                    &named("alicia"),
                    Some("iggy"),
                    None,
                    &UserUpdateOptions::default(),
                )
                .await,
        );
        trace.debug(
            "update_user to an empty name",
            &root
                .update_user(
                    &named("alicia"),
                    Some(""),
                    None,
                    &UserUpdateOptions::default(),
                )
                .await,
        );
        trace.debug(
            "update_user missing",
            &root
                .update_user(
                    &named("nobody"),
                    Some("x-user"),
                    None,
                    &UserUpdateOptions::default(),
                )
                .await,
        );
        trace.debug(
            "update_permissions",
            &root
                .update_permissions(&named("alicia"), Some(Permissions::root()))
                .await,
        );
        trace.result(
            "get_user after updates",
            &root.get_user(&named("alicia")).await,
            |u| format!("{:?}", u.as_ref().map(show_user)),
        );
        trace.debug(
            "update_permissions missing",
            &root.update_permissions(&named("nobody"), None).await,
        );
        trace.debug(
            "change_password wrong current",
            &root
                .change_password(&named("alicia"), "not-it", "alice-pw-2")
                .await,
        );
        trace.debug(
            "change_password",
            &root
                .change_password(&named("alicia"), "alice-pw", "alice-pw-2")
                .await,
        );
        trace.debug(
            "change_password missing",
            &root
                .change_password(&named("nobody"), "alice-pw", "alice-pw-2")
                .await,
        );
        let inactive = (world.connect)(Who::User("alicia".into(), "alice-pw-2".into())).await;
        trace.result("an inactive user connects", &inactive, |_| String::new());

        // Tokens.
        let token = root
            .create_personal_access_token("ci", IggyExpiry::NeverExpire)
            .await;
        trace.result("create token", &token, |t| t.token.len().to_string());
        trace.debug(
            "create token again",
            &root
                .create_personal_access_token("ci", IggyExpiry::NeverExpire)
                .await
                .map(|t| t.token.len()),
        );
        trace.debug(
            "create token expiring",
            &root
                .create_personal_access_token(
                    "short",
                    IggyExpiry::ExpireDuration(IggyDuration::from(3_600_000_000)),
                )
                .await
                .map(|t| t.token.len()),
        );
        trace.debug(
            "create token empty name",
            &root
                .create_personal_access_token("", IggyExpiry::NeverExpire)
                .await
                .map(|t| t.token.len()),
        );
        trace.debug(
            "create token long name",
            &root
                .create_personal_access_token(&"t".repeat(256), IggyExpiry::NeverExpire)
                .await
                .map(|t| t.token.len()),
        );
        trace.debug(
            "tokens",
            &root.get_personal_access_tokens().await.map(|tokens| {
                let mut tokens: Vec<_> = tokens
                    .iter()
                    .map(|t| (t.name.clone(), t.expiry_at.is_some()))
                    .collect();
                tokens.sort();
                tokens
            }),
        );
        if let Ok(token) = &token {
            let by_token = connect_as(world, Who::Token(token.token.clone())).await;
            trace.result("connect with the token", &by_token, |_| String::new());
            if let Ok(by_token) = by_token {
                trace.result("token get_me", &by_token.get_me().await, |me| {
                    format!("{:?}", me.user_id)
                });
                trace.debug(
                    "token login with itself",
                    &by_token
                        .login_with_personal_access_token(&token.token)
                        .await
                        .map(|i| i.user_id),
                );
                let _ = by_token.shutdown().await;
            }
        }
        trace.debug(
            "delete token",
            &root.delete_personal_access_token("ci").await,
        );
        trace.debug(
            "delete token again",
            &root.delete_personal_access_token("ci").await,
        );
        trace.debug(
            "delete token empty name",
            &root.delete_personal_access_token("").await,
        );
        if let Ok(token) = &token {
            let refused = (world.connect)(Who::Token(token.token.clone())).await;
            trace.result("connect with a deleted token", &refused.map(|_| ()), |_| {
                String::new()
            });
        }

        // Own session.
        trace.debug(
            "login_user as myself",
            &root.login_user("iggy", "iggy").await.map(|i| i.user_id),
        );
        trace.debug("logout_user", &root.logout_user().await);
        trace.debug(
            "get_streams signed out",
            &root.get_streams().await.map(|s| s.len()),
        );
        trace.debug("ping signed out", &root.ping().await);
        trace.debug("logout_user twice", &root.logout_user().await);
        trace.debug(
            "login_user as myself again",
            &root.login_user("iggy", "iggy").await.map(|i| i.user_id),
        );
        trace.debug(
            "get_streams signed in",
            &root.get_streams().await.map(|s| s.len()),
        );

        // Deletes.
        trace.debug("delete_user", &root.delete_user(&named("alicia")).await);
        trace.debug(
            "delete_user again",
            &root.delete_user(&named("alicia")).await,
        );
        trace.debug("delete root", &root.delete_user(&numeric(0)).await);
        trace.debug(
            "get_user deleted",
            &root.get_user(&named("alicia")).await.map(|u| u.is_some()),
        );

        // System reads.
        trace.debug("ping", &root.ping().await);
        trace.result("get_me", &root.get_me().await, |me| {
            format!("{:?} {}", me.user_id, me.transport)
        });
        trace.result(
            "get_client missing",
            &root.get_client(u32::MAX).await,
            |c| format!("{:?}", c.is_some()),
        );
        trace.result("get_stats", &root.get_stats().await, |stats| {
            format!(
                "streams {} topics {} partitions {} segments {} messages {} groups {}",
                stats.streams_count,
                stats.topics_count,
                stats.partitions_count,
                stats.segments_count,
                stats.messages_count,
                stats.consumer_groups_count
            )
        });
        trace.result(
            "get_cluster_metadata",
            &root.get_cluster_metadata().await,
            |m| {
                format!(
                    "{} {:?}",
                    m.name,
                    m.nodes
                        .iter()
                        .map(|n| (n.name.clone(), n.role, n.status))
                        .collect::<Vec<_>>()
                )
            },
        );
        trace.debug(
            "heartbeat_interval",
            &Ok::<_, IggyError>(root.heartbeat_interval().await.as_micros()),
        );
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_of_users_tokens_and_system_reads_gives_the_same_results_as_the_sdk() {
    differential("users day", users_day, false).await;
}

// ---------------------------------------------------------------------------------------
// Focused probes.
// ---------------------------------------------------------------------------------------

/// A 3-node cluster with `orders`/`events` of `partitions` partitions holding `per`
/// messages each (ids partition*100 + 1..), sent by a setup client.
async fn cluster_with_messages(partitions: u32, per: u32) -> (Arc<TestCluster>, u32, u32) {
    let cluster = Arc::new(TestCluster::start(3).await);
    let (s, t) = cluster.create_stream_and_topic("orders", "events", partitions);
    let setup = sdk_on(&cluster).await;
    for partition in 0..partitions {
        let mut batch: Vec<IggyMessage> = (1..=per)
            .map(|i| message(u128::from(partition * 100 + i), b"m", None))
            .collect();
        setup
            .send_messages(
                &numeric(s),
                &numeric(t),
                &Partitioning::partition_id(partition),
                &mut batch,
            )
            .await
            .unwrap();
    }
    setup.shutdown().await.unwrap();
    // Past the backups' lag.
    tokio::time::sleep(Duration::from_millis(600)).await;
    (cluster, s, t)
}

/// The group-poll program: one member joins, polls `Next` with auto-commit without a
/// partition six times, and reads the group's stored offsets.
async fn group_auto_commit_program(client: &dyn Client) -> Vec<String> {
    group_auto_commit_program_named(client, "g").await
}

async fn group_auto_commit_program_named(client: &dyn Client, group: &str) -> Vec<String> {
    let (stream, topic) = (named("orders"), named("events"));
    let mut seen = Vec::new();
    client
        .create_consumer_group(&stream, &topic, group)
        .await
        .unwrap();
    client
        .join_consumer_group(&stream, &topic, &named(group))
        .await
        .unwrap();
    let member = Consumer::group(named(group));
    for _ in 0..6 {
        let polled = poll(
            client,
            &stream,
            &topic,
            None,
            &member,
            PollingStrategy::next(),
            10,
            true,
        )
        .await
        .unwrap();
        seen.push(format!(
            "partition {} ids {:?}",
            polled.partition_id,
            polled
                .messages
                .iter()
                .map(|m| m.header.id)
                .collect::<Vec<_>>()
        ));
    }
    for partition in 0..2 {
        let offset = client
            .get_consumer_offset(&member, &stream, &topic, Some(partition))
            .await
            .unwrap()
            .map(|o| o.stored_offset);
        seen.push(format!("partition {partition} stored {offset:?}"));
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_polls_with_auto_commit_without_a_partition_commit_as_the_sdks_do() {
    let (cluster, _, _) = cluster_with_messages(2, 3).await;
    let sdk = sdk_on(&cluster).await;
    let expected = group_auto_commit_program(&*sdk).await;
    sdk.shutdown().await.unwrap();

    let (cluster, _, _) = cluster_with_messages(2, 3).await;
    let route = route_on(&cluster).await;
    let got = group_auto_commit_program(&*route).await;
    route.shutdown().await.unwrap();
    assert_eq!(got, expected, "iggy-route (left) vs the SDK (right)");
}

/// Member `a` polls every partition without committing, `b` joins (the excess partition
/// `a` has in flight is handed over cooperatively), then `a` polls `Next` with auto-commit
/// without a partition, and the group's offsets are read.
async fn group_handover_program(a: &dyn Client, b: &dyn Client) -> Vec<String> {
    let (stream, topic) = (named("orders"), named("events"));
    let g = named("g");
    let member = Consumer::group(g.clone());
    let mut seen = Vec::new();
    a.create_consumer_group(&stream, &topic, "g").await.unwrap();
    a.join_consumer_group(&stream, &topic, &g).await.unwrap();
    // A program that joins twice (the second join is a no-op for the server).
    a.join_consumer_group(&stream, &topic, &g).await.unwrap();
    for _ in 0..4 {
        let polled = poll(
            a,
            &stream,
            &topic,
            None,
            &member,
            PollingStrategy::offset(0),
            10,
            false,
        )
        .await
        .unwrap();
        seen.push(format!(
            "a peeks partition {}: {}",
            polled.partition_id,
            polled.messages.len()
        ));
    }
    b.join_consumer_group(&stream, &topic, &g).await.unwrap();
    a.refresh_consumer_group_assignments().await;
    for _ in 0..4 {
        let polled = poll(
            a,
            &stream,
            &topic,
            None,
            &member,
            PollingStrategy::next(),
            10,
            true,
        )
        .await
        .unwrap();
        seen.push(format!(
            "a reads partition {}: {:?}",
            polled.partition_id,
            polled
                .messages
                .iter()
                .map(|m| m.header.id)
                .collect::<Vec<_>>()
        ));
        let polled = poll(
            b,
            &stream,
            &topic,
            None,
            &member,
            PollingStrategy::next(),
            10,
            true,
        )
        .await
        .unwrap();
        seen.push(format!(
            "b reads partition {}: {:?}",
            polled.partition_id,
            polled
                .messages
                .iter()
                .map(|m| m.header.id)
                .collect::<Vec<_>>()
        ));
    }
    for partition in 0..3 {
        let offset = a
            .get_consumer_offset(&member, &stream, &topic, Some(partition))
            .await
            .unwrap()
            .map(|o| o.stored_offset);
        seen.push(format!("partition {partition} stored {offset:?}"));
    }
    seen
}

#[ignore = "open break: a refresh restarts the partition rotation"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_polls_after_a_refresh_take_the_partitions_in_the_sdks_order() {
    let (cluster, _, _) = cluster_with_messages(3, 2).await;
    let (a, b) = (sdk_on(&cluster).await, sdk_on(&cluster).await);
    let expected = group_handover_program(&*a, &*b).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();

    let (cluster, _, _) = cluster_with_messages(3, 2).await;
    let (a, b) = (route_on(&cluster).await, route_on(&cluster).await);
    let got = group_handover_program(&*a, &*b).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    assert_eq!(got, expected, "iggy-route (left) vs the SDK (right)");
}

async fn store_then_group_program(client: &dyn Client, first: &str) -> Vec<String> {
    let (stream, topic) = (named("orders"), named("events"));
    let c = Consumer::new(numeric(2));
    let mut seen = Vec::new();
    match first {
        "store" => seen.push(format!(
            "{:?}",
            client
                .store_consumer_offset(&c, &stream, &topic, Some(1), 1)
                .await
        )),
        "get" => seen.push(format!(
            "{:?}",
            client
                .get_consumer_offset(&c, &stream, &topic, Some(1))
                .await
        )),
        "autocommit" => seen.push(format!(
            "{:?}",
            poll(
                client,
                &stream,
                &topic,
                Some(1),
                &c,
                PollingStrategy::next(),
                1,
                true
            )
            .await
            .map(|p| p.messages.len())
        )),
        "delete" => seen.push(format!(
            "{:?}",
            client
                .delete_consumer_offset(&c, &stream, &topic, Some(1))
                .await
        )),
        _ => {}
    }
    seen.extend(group_auto_commit_program(client).await);
    seen
}

// ---------------------------------------------------------------------------------------
// Outcomes under faults.
// ---------------------------------------------------------------------------------------

async fn route_with_timeout(cluster: &TestCluster, timeout: Duration) -> Arc<dyn Client> {
    let mut config = route_config(cluster);
    config.request_timeout = timeout;
    config.seeds.rotate_right(1);
    Arc::new(iggy_route_tokio::Client::connect(config).await.unwrap())
}

fn stored_ids(cluster: &TestCluster, s: u32, t: u32, partition: u32) -> Vec<u128> {
    cluster
        .partition_log(s, t, partition)
        .iter()
        .map(|m| m.id)
        .collect()
}

type Call<'a> = (
    &'static str,
    Pin<Box<dyn Future<Output = Option<u32>> + Send + 'a>>,
);

fn every_call<'a>(
    c: &'a dyn Client,
    stream: &'a Identifier,
    topic: &'a Identifier,
) -> Vec<Call<'a>> {
    macro_rules! call {
        ($future:expr) => {
            Box::pin(async move { $future.await.err().map(|e: IggyError| e.as_code()) })
        };
    }
    vec![
        ("ping", call!(c.ping())),
        ("get_me", call!(c.get_me())),
        ("get_stats", call!(c.get_stats())),
        ("get_clients", call!(c.get_clients())),
        ("get_client", call!(c.get_client(1))),
        ("get_cluster_metadata", call!(c.get_cluster_metadata())),
        (
            "snapshot",
            call!(c.snapshot(
                SnapshotCompression::Deflated,
                vec![SystemSnapshotType::Test]
            )),
        ),
        ("get_streams", call!(c.get_streams())),
        ("get_stream", call!(c.get_stream(stream))),
        ("create_stream", call!(c.create_stream("deadline"))),
        (
            "update_stream",
            call!(c.update_stream(stream, "orders", &StreamUpdateOptions::default())),
        ),
        ("purge_stream", call!(c.purge_stream(&named("missing")))),
        ("delete_stream", call!(c.delete_stream(&named("missing")))),
        ("get_topics", call!(c.get_topics(stream))),
        ("get_topic", call!(c.get_topic(stream, topic))),
        (
            "create_topic",
            call!(c.create_topic(stream, "t2", &TopicCreateOptions::default())),
        ),
        (
            "update_topic",
            call!(c.update_topic(stream, topic, "events", &TopicUpdateOptions::default())),
        ),
        (
            "purge_topic",
            call!(c.purge_topic(stream, &named("missing"))),
        ),
        (
            "delete_topic",
            call!(c.delete_topic(stream, &named("missing"))),
        ),
        (
            "create_partitions",
            call!(c.create_partitions(stream, &named("missing"), 1)),
        ),
        (
            "delete_partitions",
            call!(c.delete_partitions(stream, &named("missing"), 1)),
        ),
        (
            "delete_segments",
            call!(c.delete_segments(stream, topic, 0, 1)),
        ),
        (
            "send_messages",
            Box::pin(async move {
                let mut one = vec![message(77, b"deadline", None)];
                c.send_messages(stream, topic, &Partitioning::partition_id(0), &mut one)
                    .await
                    .err()
                    .map(|e| e.as_code())
            }),
        ),
        (
            "send_messages balanced",
            Box::pin(async move {
                let mut one = vec![message(78, b"deadline", None)];
                c.send_messages(stream, topic, &Partitioning::balanced(), &mut one)
                    .await
                    .err()
                    .map(|e| e.as_code())
            }),
        ),
        (
            "poll_messages",
            call!(async {
                c.poll_messages(
                    stream,
                    topic,
                    Some(0),
                    &Consumer::new(numeric(1)),
                    &PollingStrategy::next(),
                    1,
                    true,
                )
                .await
            }),
        ),
        (
            "group poll",
            call!(async {
                c.poll_messages(
                    stream,
                    topic,
                    None,
                    &Consumer::group(named("g")),
                    &PollingStrategy::next(),
                    1,
                    true,
                )
                .await
            }),
        ),
        (
            "flush_unsaved_buffer",
            call!(c.flush_unsaved_buffer(stream, topic, 0, false)),
        ),
        (
            "store_consumer_offset",
            call!(async {
                c.store_consumer_offset(&Consumer::new(numeric(1)), stream, topic, Some(0), 0)
                    .await
            }),
        ),
        (
            "get_consumer_offset",
            call!(async {
                c.get_consumer_offset(&Consumer::new(numeric(1)), stream, topic, Some(0))
                    .await
            }),
        ),
        (
            "delete_consumer_offset",
            call!(async {
                c.delete_consumer_offset(&Consumer::new(numeric(1)), stream, topic, Some(0))
                    .await
            }),
        ),
        (
            "create_consumer_group",
            call!(c.create_consumer_group(stream, topic, "g2")),
        ),
        (
            "get_consumer_group",
            call!(c.get_consumer_group(stream, topic, &named("g"))),
        ),
        (
            "get_consumer_groups",
            call!(c.get_consumer_groups(stream, topic)),
        ),
        (
            "join_consumer_group",
            call!(c.join_consumer_group(stream, topic, &named("g"))),
        ),
        (
            "leave_consumer_group",
            call!(c.leave_consumer_group(stream, topic, &named("g"))),
        ),
        (
            "delete_consumer_group",
            call!(async { c.delete_consumer_group(stream, topic, &named("g3")).await }),
        ),
        ("get_users", call!(c.get_users())),
        ("get_user", call!(c.get_user(&numeric(0)))),
        (
            "create_user",
            call!(c.create_user("deadline", "password", UserStatus::Active, None)),
        ),
        (
            "update_user",
            call!(c.update_user(
                &named("nobody"),
                Some("nobody2"),
                None,
                &UserUpdateOptions::default()
            )),
        ),
        (
            "update_permissions",
            call!(c.update_permissions(&named("nobody"), None)),
        ),
        (
            "change_password",
            call!(c.change_password(&named("nobody"), "password", "password2")),
        ),
        ("delete_user", call!(c.delete_user(&named("nobody")))),
        (
            "get_personal_access_tokens",
            call!(c.get_personal_access_tokens()),
        ),
        (
            "create_personal_access_token",
            call!(c.create_personal_access_token("t", IggyExpiry::NeverExpire)),
        ),
        (
            "delete_personal_access_token",
            call!(c.delete_personal_access_token("t")),
        ),
        ("login_user", call!(c.login_user("iggy", "iggy"))),
        (
            "refresh_consumer_group_assignments",
            Box::pin(async move {
                c.refresh_consumer_group_assignments().await;
                None
            }),
        ),
        ("logout_user", call!(c.logout_user())),
        ("disconnect", call!(c.disconnect())),
        ("connect", call!(c.connect())),
        ("shutdown", call!(c.shutdown())),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_returns_within_its_deadline_when_no_node_answers() {
    let cluster = TestCluster::start(3).await;
    let (s, t) = cluster.create_stream_and_topic("orders", "events", 2);
    assert!(cluster.set_primary(s, t, 1, 1));
    let timeout = Duration::from_secs(1);
    let client = route_with_timeout(&cluster, timeout).await;
    let (stream, topic) = (named("orders"), named("events"));
    client
        .create_consumer_group(&stream, &topic, "g")
        .await
        .unwrap();
    client
        .join_consumer_group(&stream, &topic, &named("g"))
        .await
        .unwrap();
    let mut one = vec![message(1, b"warm", None)];
    client
        .send_messages(&stream, &topic, &Partitioning::partition_id(0), &mut one)
        .await
        .unwrap();
    for node in 0..3 {
        cluster.set_reply_delay(node, Duration::from_secs(60));
    }
    let mut late = Vec::new();
    for (name, call) in every_call(&*client, &stream, &topic) {
        let started = Instant::now();
        let outcome = tokio::time::timeout(Duration::from_secs(20), call).await;
        let took = started.elapsed();
        println!("{name}: {outcome:?} in {took:?}");
        if took > 2 * timeout + Duration::from_millis(500) {
            late.push(format!("{name} took {took:?} ({outcome:?})"));
        }
    }
    assert!(
        late.is_empty(),
        "calls past twice request_timeout ({timeout:?}):\n{}",
        late.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// Secrets.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Default)]
struct Lines(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_passed_through_the_sdk_traits_reaches_debug_output_or_a_log_line() {
    const OWN: &str = "Own-pw-4f1e9c";
    const NEW_USER: &str = "New-user-pw-8d2a71";
    const CHANGED: &str = "Changed-pw-3b9e05";
    const WRONG: &str = "Wrong-login-pw-6c7d12";
    let lines = Lines::default();
    let writer = lines.clone();
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .try_init();
    let cluster = TestCluster::start(3).await;
    cluster.with_state(|state| state.add_user("auditor", OWN));
    let mut config = route_config(&cluster);
    config.credentials = iggy_route_core::Credentials::user("auditor", OWN).unwrap();
    let client: Arc<dyn Client> =
        Arc::new(iggy_route_tokio::Client::connect(config).await.unwrap());
    let mut shown = Vec::new();
    shown.push(format!("{client:?} {client:#?}"));
    let mut errors = Vec::new();
    errors.push(format!("{:?}", client.login_user("auditor", WRONG).await));
    errors.push(format!("{:?}", client.login_user("auditor", OWN).await));
    errors.push(format!("{:?}", client.login_user("someone", WRONG).await));
    errors.push(format!(
        "{:?}",
        client
            .create_user("newbie", NEW_USER, UserStatus::Active, None)
            .await
    ));
    errors.push(format!(
        "{:?}",
        client
            .change_password(&named("newbie"), NEW_USER, CHANGED)
            .await
    ));
    errors.push(format!(
        "{:?}",
        client
            .change_password(&named("newbie"), WRONG, CHANGED)
            .await
    ));
    let token = client
        .create_personal_access_token("audit-token", IggyExpiry::NeverExpire)
        .await;
    errors.push(format!("{:?}", token.as_ref().map(|_| ())));
    let token = token.map(|t| t.token).unwrap_or_default();
    errors.push(format!(
        "{:?}",
        client.login_with_personal_access_token(&token).await
    ));
    errors.push(format!(
        "{:?}",
        client.login_with_personal_access_token(WRONG).await
    ));
    shown.push(format!("{client:?} {client:#?}"));
    let mut by_token = route_config(&cluster);
    by_token.credentials = iggy_route_core::Credentials::PersonalAccessToken(
        iggy_route_core::wire::Password::new(token.clone()).unwrap(),
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    if let Ok(token_client) = iggy_route_tokio::Client::connect(by_token).await {
        let token_client: Arc<dyn Client> = Arc::new(token_client);
        shown.push(format!("{token_client:?} {token_client:#?}"));
        errors.push(format!(
            "{:?}",
            token_client.login_with_personal_access_token(&token).await
        ));
        let _ = token_client.shutdown().await;
    }
    client.shutdown().await.unwrap();
    let logs = String::from_utf8_lossy(&lines.0.lock().unwrap()).into_owned();
    let mut leaks = Vec::new();
    for secret in [OWN, NEW_USER, CHANGED, WRONG, token.as_str()] {
        if shown.iter().any(|s| s.contains(secret)) {
            leaks.push(format!("{secret} in the client's Debug output"));
        }
        if errors.iter().any(|s| s.contains(secret)) {
            leaks.push(format!("{secret} in a returned error"));
        }
        if logs.contains(secret) {
            let line = logs
                .lines()
                .find(|l| l.contains(secret))
                .unwrap_or_default();
            leaks.push(format!("{secret} in a log line: {line}"));
        }
    }
    assert!(!token.is_empty());
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
}

// ---------------------------------------------------------------------------------------
// Session states.
// ---------------------------------------------------------------------------------------

/// Every call in `state` ("logged out", "disconnected", "shut down"), with its error code.
async fn calls_in_state(client: &dyn Client, state: &str) -> Vec<String> {
    let (stream, topic) = (named("orders"), named("events"));
    match state {
        "logged out" => client.logout_user().await.unwrap(),
        "disconnected" => client.disconnect().await.unwrap(),
        "shut down" => client.shutdown().await.unwrap(),
        _ => {}
    }
    let mut seen = Vec::new();
    for (name, call) in every_call(client, &stream, &topic) {
        if [
            "login_user",
            "logout_user",
            "disconnect",
            "connect",
            "shutdown",
        ]
        .contains(&name)
        {
            continue;
        }
        let outcome = tokio::time::timeout(Duration::from_secs(10), call).await;
        seen.push(format!("{state}: {name}: {outcome:?}"));
    }
    seen
}

// ---------------------------------------------------------------------------------------
// Bad input.
// ---------------------------------------------------------------------------------------

fn raw_message(id: u128, payload: Bytes, user_headers: Option<Bytes>) -> IggyMessage {
    let mut message = IggyMessage::default();
    message.header.id = id;
    message.header.origin_timestamp = ORIGIN;
    message.header.payload_length = u32::try_from(payload.len()).unwrap();
    message.header.user_headers_length = user_headers
        .as_ref()
        .map_or(0, |h| u32::try_from(h.len()).unwrap());
    message.payload = payload;
    message.user_headers = user_headers;
    message
}

fn bad_input_day<'a>(
    world: &'a World,
    trace: &'a mut Trace,
) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        let c = &*world.a;
        // Names.
        for (label, name) in [
            ("empty", String::new()),
            ("255 bytes", "s".repeat(255)),
            ("256 bytes", "s".repeat(256)),
            ("unicode", "strumień ✓".to_owned()),
            ("spaces", "a b".to_owned()),
            ("upper", "Orders".to_owned()),
        ] {
            let r = c.create_stream(&name).await;
            trace.result(&format!("create_stream {label}"), &r, |s| {
                format!("{} {}", s.id, s.name.len())
            });
        }
        let s = c.create_stream("orders").await.unwrap().id;
        let stream = named("orders");
        for (label, partitions) in [
            ("0 partitions", Some(0)),
            ("1001 partitions", Some(1001)),
            ("default", None),
        ] {
            let options = TopicCreateOptions {
                partitions_count: partitions,
                ..TopicCreateOptions::default()
            };
            let r = c
                .create_topic(&stream, &format!("t-{label}"), &options)
                .await;
            trace.result(&format!("create_topic {label}"), &r, |t| {
                format!("{} {}", t.id, t.partitions_count)
            });
        }
        let options = TopicCreateOptions {
            partitions_count: Some(2),
            ..TopicCreateOptions::default()
        };
        let r = c.create_topic(&stream, "", &options).await;
        trace.result("create_topic empty name", &r, |t| t.id.to_string());
        let r = c.create_topic(&stream, &"t".repeat(256), &options).await;
        trace.result("create_topic long name", &r, |t| t.id.to_string());
        let t = c
            .create_topic(&stream, "events", &options)
            .await
            .unwrap()
            .id;
        let topic = named("events");
        trace.debug(
            "create_partitions 0",
            &c.create_partitions(&stream, &topic, 0).await,
        );
        trace.debug(
            "create_partitions 1001",
            &c.create_partitions(&stream, &topic, 1001).await,
        );
        trace.debug(
            "delete_partitions 0",
            &c.delete_partitions(&stream, &topic, 0).await,
        );
        trace.debug(
            "create_consumer_group empty",
            &c.create_consumer_group(&stream, &topic, "")
                .await
                .map(|g| g.id),
        );
        trace.debug("get_client 0", &c.get_client(0).await.map(|c| c.is_some()));

        // Identifiers a program can build by hand.
        let bad_ids = [
            (
                "string of 0 bytes",
                Identifier {
                    kind: IdKind::String,
                    length: 0,
                    value: vec![],
                },
            ),
            (
                "string not utf-8",
                Identifier {
                    kind: IdKind::String,
                    length: 2,
                    value: vec![0xff, 0xfe],
                },
            ),
            (
                "string length lies",
                Identifier {
                    kind: IdKind::String,
                    length: 3,
                    value: b"orders".to_vec(),
                },
            ),
        ];
        for (label, id) in &bad_ids {
            trace.debug(
                &format!("get_stream {label}"),
                &c.get_stream(id).await.map(|s| s.map(|s| s.id)),
            );
            let mut one = vec![message(1, b"x", None)];
            let r = c
                .send_messages(id, &topic, &Partitioning::partition_id(0), &mut one)
                .await;
            trace.result(&format!("send to stream {label}"), &r, show_sent);
            let r = c
                .send_messages(&stream, id, &Partitioning::balanced(), &mut one)
                .await;
            trace.result(&format!("send balanced to topic {label}"), &r, show_sent);
            let consumer = Consumer {
                kind: ConsumerKind::Consumer,
                id: id.clone(),
            };
            let r = poll(
                c,
                &stream,
                &topic,
                Some(0),
                &consumer,
                PollingStrategy::first(),
                1,
                false,
            )
            .await;
            trace.result(&format!("poll as consumer {label}"), &r, show_polled);
            trace.debug(&format!("delete_user {label}"), &c.delete_user(id).await);
        }

        // Partitionings a program can build by hand.
        let bad_partitionings = [
            (
                "partition id of 2 bytes",
                Partitioning {
                    kind: PartitioningKind::PartitionId,
                    length: 2,
                    value: vec![1, 0],
                },
            ),
            (
                "partition id of 8 bytes",
                Partitioning {
                    kind: PartitioningKind::PartitionId,
                    length: 8,
                    value: vec![1, 0, 0, 0, 9, 9, 9, 9],
                },
            ),
            (
                "empty key",
                Partitioning {
                    kind: PartitioningKind::MessagesKey,
                    length: 0,
                    value: vec![],
                },
            ),
            (
                "key of 300 bytes",
                Partitioning {
                    kind: PartitioningKind::MessagesKey,
                    length: 44,
                    value: vec![7; 300],
                },
            ),
            (
                "balanced with a value",
                Partitioning {
                    kind: PartitioningKind::Balanced,
                    length: 4,
                    value: vec![1, 0, 0, 0],
                },
            ),
        ];
        for (label, partitioning) in &bad_partitionings {
            let mut one = vec![message(2, label.as_bytes(), None)];
            let r = c
                .send_messages(&stream, &topic, partitioning, &mut one)
                .await;
            trace.result(&format!("send {label}"), &r, show_sent);
        }

        // Messages a program can build by hand.
        let cases: Vec<(&str, Vec<IggyMessage>)> = vec![
            ("empty payload", vec![raw_message(10, Bytes::new(), None)]),
            (
                "empty headers",
                vec![raw_message(
                    11,
                    Bytes::from_static(b"p"),
                    Some(Bytes::new()),
                )],
            ),
            (
                "headers not TLV",
                vec![raw_message(
                    12,
                    Bytes::from_static(b"p"),
                    Some(Bytes::from_static(b"\xff\x00garbage")),
                )],
            ),
            ("lengths that lie", {
                let mut m = raw_message(13, Bytes::from_static(b"p"), None);
                m.header.payload_length = 99;
                m.header.user_headers_length = 7;
                vec![m]
            }),
            (
                "id u128::MAX",
                vec![raw_message(u128::MAX, Bytes::from_static(b"p"), None)],
            ),
            ("origin 0", {
                let mut m = raw_message(14, Bytes::from_static(b"p"), None);
                m.header.origin_timestamp = 0;
                vec![m]
            }),
            ("origins far apart", {
                let mut a = raw_message(15, Bytes::from_static(b"p"), None);
                a.header.origin_timestamp = 1;
                let mut b = raw_message(16, Bytes::from_static(b"p"), None);
                b.header.origin_timestamp = u64::MAX;
                vec![a, b]
            }),
            ("offset and timestamp set", {
                let mut m = raw_message(17, Bytes::from_static(b"p"), None);
                m.header.offset = 12345;
                m.header.timestamp = 777;
                m.header.checksum = 99;
                m.header.reserved = 5;
                vec![m]
            }),
            (
                "same id twice",
                vec![
                    raw_message(18, Bytes::from_static(b"a"), None),
                    raw_message(18, Bytes::from_static(b"b"), None),
                ],
            ),
            (
                "payload of 1 MB",
                vec![raw_message(19, Bytes::from(vec![1u8; 1_000_000]), None)],
            ),
            (
                "headers of 200 kB",
                vec![raw_message(
                    20,
                    Bytes::from_static(b"p"),
                    Some(Bytes::from(vec![0u8; 200_000])),
                )],
            ),
            (
                "10,000 messages",
                (0..10_000u128)
                    .map(|i| raw_message(1_000 + i, Bytes::from_static(b"many"), None))
                    .collect(),
            ),
        ];
        for (label, mut batch) in cases {
            let r = c
                .send_messages(&stream, &topic, &Partitioning::partition_id(1), &mut batch)
                .await;
            trace.result(&format!("send {label}"), &r, show_sent);
        }
        let polled = poll(
            c,
            &stream,
            &topic,
            Some(1),
            &Consumer::new(numeric(1)),
            PollingStrategy::first(),
            30,
            false,
        )
        .await;
        trace.result("poll what was stored", &polled, show_polled);
        let polled = poll(
            c,
            &stream,
            &topic,
            Some(1),
            &Consumer::new(numeric(1)),
            PollingStrategy::first(),
            u32::MAX,
            false,
        )
        .await;
        trace.result("poll u32::MAX", &polled, |p| {
            format!("{}", p.messages.len())
        });
        let r = c
            .store_consumer_offset(
                &Consumer::new(numeric(1)),
                &stream,
                &topic,
                Some(1),
                u64::MAX,
            )
            .await;
        trace.debug("store offset u64::MAX", &r);
        let _ = (s, t);
    })
}

#[ignore = "open break: sums up the input differences tested one by one here"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_the_same_answers_as_the_sdk() {
    differential("bad input", bad_input_day, false).await;
}

/// Sends one batch with these origin timestamps to partition 0 of a fresh cluster, and
/// reads back (with the SDK, as an independent reader) what was stored.
async fn origins_program(
    client_of: fn(&TestCluster) -> Pin<Box<dyn Future<Output = Arc<dyn Client>> + Send + '_>>,
    origins: &[u64],
) -> (Option<u32>, Vec<u64>) {
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("orders", "events", 1);
    let client = client_of(&cluster).await;
    let mut batch: Vec<IggyMessage> = origins
        .iter()
        .enumerate()
        .map(|(i, &origin)| {
            let mut m = raw_message(i as u128 + 1, Bytes::from_static(b"p"), None);
            m.header.origin_timestamp = origin;
            m
        })
        .collect();
    let sent = client
        .send_messages(
            &named("orders"),
            &named("events"),
            &Partitioning::partition_id(0),
            &mut batch,
        )
        .await;
    let reader = sdk_on(&cluster).await;
    let polled = poll(
        &*reader,
        &named("orders"),
        &named("events"),
        Some(0),
        &Consumer::new(numeric(9)),
        PollingStrategy::first(),
        100,
        false,
    )
    .await
    .unwrap();
    let _ = client.shutdown().await;
    let _ = reader.shutdown().await;
    (
        code(&sent),
        polled
            .messages
            .iter()
            .map(|m| m.header.origin_timestamp)
            .collect(),
    )
}

fn sdk_client_of(
    cluster: &TestCluster,
) -> Pin<Box<dyn Future<Output = Arc<dyn Client>> + Send + '_>> {
    Box::pin(sdk_on(cluster))
}

fn route_client_of(
    cluster: &TestCluster,
) -> Pin<Box<dyn Future<Output = Arc<dyn Client>> + Send + '_>> {
    Box::pin(route_on(cluster))
}

/// Member `a` peeks at every partition (no commit), `b` joins; the group's assignment and
/// what `b` then reads.
async fn handover_program(a: &dyn Client, b: &dyn Client) -> Vec<String> {
    let (stream, topic) = (named("orders"), named("events"));
    let g = named("g");
    let member = Consumer::group(g.clone());
    let mut seen = Vec::new();
    a.create_consumer_group(&stream, &topic, "g").await.unwrap();
    a.join_consumer_group(&stream, &topic, &g).await.unwrap();
    for _ in 0..3 {
        let polled = poll(
            a,
            &stream,
            &topic,
            None,
            &member,
            PollingStrategy::next(),
            10,
            false,
        )
        .await
        .unwrap();
        seen.push(format!(
            "a is handed partition {}: {:?}",
            polled.partition_id,
            polled
                .messages
                .iter()
                .map(|m| m.header.id)
                .collect::<Vec<_>>()
        ));
    }
    b.join_consumer_group(&stream, &topic, &g).await.unwrap();
    let details = a
        .get_consumer_group(&stream, &topic, &g)
        .await
        .unwrap()
        .unwrap();
    let mut members: Vec<Vec<u32>> = details
        .members
        .iter()
        .map(|m| m.partitions.clone())
        .collect();
    members.sort();
    seen.push(format!("assignment right after b joined: {members:?}"));
    for _ in 0..2 {
        let polled = poll(
            b,
            &stream,
            &topic,
            None,
            &member,
            PollingStrategy::next(),
            10,
            true,
        )
        .await
        .unwrap();
        seen.push(format!(
            "b reads partition {}: {:?}",
            polled.partition_id,
            polled
                .messages
                .iter()
                .map(|m| m.header.id)
                .collect::<Vec<_>>()
        ));
    }
    seen
}

async fn split_cluster_with_messages() -> Arc<TestCluster> {
    let (cluster, s, t) = cluster_with_messages(3, 2).await;
    for partition in 0..3 {
        assert!(cluster.set_primary(s, t, partition, 1 + partition as usize % 2));
    }
    cluster
}

#[ignore = "open break: with polls on the primaries the leader does not see a member's read in flight"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_a_member_is_still_reading_is_not_handed_to_a_newcomer_with_split_primaries() {
    let cluster = split_cluster_with_messages().await;
    let (a, b) = (sdk_on(&cluster).await, sdk_on(&cluster).await);
    let expected = handover_program(&*a, &*b).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();

    let cluster = split_cluster_with_messages().await;
    let (a, b) = (route_on(&cluster).await, route_on(&cluster).await);
    let got = handover_program(&*a, &*b).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    assert_eq!(
        got, expected,
        "iggy-route (left) vs the SDK (right) on the same cluster layout"
    );
}

/// `writer` creates a stream with a topic and a user; at once, `reader` (a client already
/// connected, as a second process would be) looks for them and sends to the topic.
async fn another_clients_writes_program(writer: &dyn Client, reader: &dyn Client) -> Vec<String> {
    let mut seen = Vec::new();
    writer.create_stream("fresh").await.unwrap();
    writer
        .create_topic(&named("fresh"), "news", &TopicCreateOptions::default())
        .await
        .unwrap();
    writer
        .create_user("fresh-user", "password", UserStatus::Active, None)
        .await
        .unwrap();
    seen.push(format!(
        "stream {:?}",
        reader
            .get_stream(&named("fresh"))
            .await
            .map(|s| s.map(|s| s.name))
    ));
    seen.push(format!(
        "topic {:?}",
        reader
            .get_topic(&named("fresh"), &named("news"))
            .await
            .map(|t| t.map(|t| t.name))
    ));
    seen.push(format!(
        "user {:?}",
        reader
            .get_user(&named("fresh-user"))
            .await
            .map(|u| u.map(|u| u.username))
    ));
    let mut one = vec![message(1, b"hello", None)];
    let sent = reader
        .send_messages(
            &named("fresh"),
            &named("news"),
            &Partitioning::partition_id(0),
            &mut one,
        )
        .await;
    seen.push(format!("send {:?}", sent.map(|r| r.confirmations.len())));
    seen
}

#[ignore = "open break: the session's node may be a follower that has not applied another client's write"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_another_client_just_created_is_found_at_once_as_with_the_sdk() {
    // After a failover the metadata leader is node 1; the connection string lists node 0
    // first, as it did before.
    let cluster = TestCluster::start(3).await;
    cluster.set_metadata_leader(1);
    let (writer, reader) = (sdk_on(&cluster).await, sdk_on(&cluster).await);
    let expected = another_clients_writes_program(&*writer, &*reader).await;
    let _ = writer.shutdown().await;
    let _ = reader.shutdown().await;

    let cluster = TestCluster::start(3).await;
    cluster.set_metadata_leader(1);
    let writer = sdk_on(&cluster).await;
    let reader: Arc<dyn Client> = Arc::new(
        iggy_route_tokio::Client::connect(route_config(&cluster))
            .await
            .unwrap(),
    );
    let got = another_clients_writes_program(&*writer, &*reader).await;
    let _ = writer.shutdown().await;
    let _ = reader.shutdown().await;
    assert_eq!(got, expected, "iggy-route (left) vs the SDK (right)");
}

// ---------------------------------------------------------------------------------------
// Focused breaks and guards.
// ---------------------------------------------------------------------------------------

type Probe = for<'a> fn(&'a dyn Client) -> Pin<Box<dyn Future<Output = Vec<String>> + Send + 'a>>;

/// Runs `program` on the SDK and on iggy-route, each on a fresh 3-node cluster holding
/// `orders`/`events` of `partitions` partitions; returns (SDK, iggy-route).
async fn sdk_vs_route(partitions: u32, program: Probe) -> (Vec<String>, Vec<String>) {
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("orders", "events", partitions);
    let sdk = sdk_on(&cluster).await;
    let expected = program(&*sdk).await;
    let _ = sdk.shutdown().await;
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("orders", "events", partitions);
    let route = route_on(&cluster).await;
    let got = program(&*route).await;
    let _ = route.shutdown().await;
    (expected, got)
}

fn zero_count_poll(c: &dyn Client) -> Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>> {
    Box::pin(async move {
        let mut one = vec![message(1, b"x", None)];
        c.send_messages(
            &named("orders"),
            &named("events"),
            &Partitioning::partition_id(0),
            &mut one,
        )
        .await
        .unwrap();
        let polled = poll(
            c,
            &named("orders"),
            &named("events"),
            Some(0),
            &Consumer::new(numeric(1)),
            PollingStrategy::first(),
            0,
            false,
        )
        .await;
        vec![format!("poll count 0: {:?}", code(&polled))]
    })
}

#[ignore = "open break: a poll of 0 messages answers empty instead of 4009"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_of_zero_messages_is_refused_with_invalid_messages_count() {
    let (sdk, route) = sdk_vs_route(1, zero_count_poll).await;
    assert_eq!(sdk, ["poll count 0: Some(4009)"]);
    assert_eq!(
        route, sdk,
        "iggy-route answers a poll of 0 messages with an empty poll"
    );
}

fn sends_nowhere(c: &dyn Client) -> Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>> {
    Box::pin(async move {
        let mut seen = Vec::new();
        for (label, stream, topic, partition) in [
            ("partition 3 of 3", "orders", "events", 3),
            ("partition 1000", "orders", "events", 1000),
            ("a missing topic", "orders", "nope", 0),
            ("a missing stream", "nope", "events", 0),
        ] {
            let mut one = vec![message(1, b"x", None)];
            let sent = c
                .send_messages(
                    &named(stream),
                    &named(topic),
                    &Partitioning::partition_id(partition),
                    &mut one,
                )
                .await;
            seen.push(format!("send to {label}: {:?}", code(&sent)));
        }
        seen
    })
}

#[ignore = "open break: iggy-route's own checks answer 3007/2010 where the server answers 20"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_to_a_partition_topic_or_stream_that_does_not_exist_gets_the_servers_code() {
    let (sdk, route) = sdk_vs_route(3, sends_nowhere).await;
    assert_eq!(route, sdk, "iggy-route (left) vs the SDK (right)");
}

fn offset_past_the_end(c: &dyn Client) -> Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>> {
    Box::pin(async move {
        let mut batch = vec![message(1, b"a", None), message(2, b"b", None)];
        c.send_messages(
            &named("orders"),
            &named("events"),
            &Partitioning::partition_id(0),
            &mut batch,
        )
        .await
        .unwrap();
        let started = Instant::now();
        let stored = c
            .store_consumer_offset(
                &Consumer::new(numeric(1)),
                &named("orders"),
                &named("events"),
                Some(0),
                10,
            )
            .await;
        vec![format!(
            "store offset 10 of 2: {:?} at once: {}",
            code(&stored),
            started.elapsed() < Duration::from_secs(1)
        )]
    })
}

#[ignore = "open break: the server's refusal comes back as 57 after the request timeout"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_offset_past_the_end_is_refused_with_invalid_offset_at_once() {
    let (sdk, route) = sdk_vs_route(1, offset_past_the_end).await;
    assert_eq!(sdk, ["store offset 10 of 2: Some(4100) at once: true"]);
    // iggy-route keeps asking until its request_timeout (5 s here, 30 s by default) and then
    // reports 57: "may have been stored" for what the server refused.
    assert_eq!(route, sdk, "iggy-route (left) vs the SDK (right)");
}

#[ignore = "open break: a plain consumer's offset call stops the group's auto-commit"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_consumers_offset_call_does_not_stop_a_groups_auto_commit() {
    let mut differences = Vec::new();
    for first in ["get", "store", "autocommit", "delete", "nothing"] {
        let (cluster, _, _) = cluster_with_messages(2, 3).await;
        let sdk = sdk_on(&cluster).await;
        let expected = store_then_group_program(&*sdk, first).await;
        sdk.shutdown().await.unwrap();
        let (cluster, _, _) = cluster_with_messages(2, 3).await;
        let route = route_on(&cluster).await;
        let got = store_then_group_program(&*route, first).await;
        route.shutdown().await.unwrap();
        if got != expected {
            differences.push(format!(
                "after `{first}`:\n  iggy-route {got:?}\n  SDK        {expected:?}"
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

#[ignore = "open break: an origin timestamp of 0 is stamped with the send's time (a wider span than a delta holds is now refused)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_timestamps_are_stored_as_given_or_the_batch_is_refused_as_the_sdk_refuses_it() {
    let t = 1_700_000_000_000_000u64;
    let mut differences = Vec::new();
    for origins in [
        vec![t, t - 1_000_000],
        vec![t, t + 3_600_000_000],
        vec![u64::MAX],
        // Origins of 0: the SDK stores 0.
        vec![0],
        // Two hours apart (a replay of older messages): the SDK refuses the batch (4038).
        vec![t, t + 7_200_000_000],
        vec![t, t + (1 << 32) + 5],
        vec![1, u64::MAX],
    ] {
        let sdk = origins_program(sdk_client_of, &origins).await;
        let route = origins_program(route_client_of, &origins).await;
        if sdk != route {
            differences.push(format!(
                "origins {origins:?}: SDK (error, stored) {sdk:?}, iggy-route {route:?}"
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

fn unusual_sends(c: &dyn Client) -> Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>> {
    Box::pin(async move {
        let mut seen = Vec::new();
        let cases: Vec<(&str, Partitioning, Option<Bytes>)> = vec![
            (
                "an empty key",
                Partitioning {
                    kind: PartitioningKind::MessagesKey,
                    length: 0,
                    value: vec![],
                },
                None,
            ),
            (
                "a key of 300 bytes",
                Partitioning {
                    kind: PartitioningKind::MessagesKey,
                    length: 44,
                    value: vec![7; 300],
                },
                None,
            ),
            // Headers a program encrypted itself, or wrote raw.
            (
                "headers that are not TLV",
                Partitioning::partition_id(0),
                Some(Bytes::from_static(b"\xff\x00opaque")),
            ),
            (
                "headers of 200 kB",
                Partitioning::partition_id(0),
                Some(Bytes::from(vec![0u8; 200_000])),
            ),
        ];
        for (label, partitioning, headers) in cases {
            let mut one = vec![raw_message(5, Bytes::from_static(b"p"), headers)];
            let sent = c
                .send_messages(&named("orders"), &named("events"), &partitioning, &mut one)
                .await;
            seen.push(format!(
                "send with {label}: {:?}",
                sent.map(|r| r
                    .confirmations
                    .iter()
                    .map(|c| c.partition_id)
                    .collect::<Vec<_>>())
                    .map_err(|e| e.as_code())
            ));
        }
        seen
    })
}

#[ignore = "open break: keys and header blocks the SDK sends are refused before sending"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_headers_the_sdk_sends_are_sent_not_refused() {
    let (sdk, route) = sdk_vs_route(3, unusual_sends).await;
    assert_eq!(route, sdk, "iggy-route (left) vs the SDK (right)");
}

fn balanced_by_two_names(c: &dyn Client) -> Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>> {
    Box::pin(async move {
        let mut seen = Vec::new();
        let send = |stream: Identifier, topic: Identifier, id: u128| async move {
            let mut one = vec![message(id, b"b", None)];
            c.send_messages(&stream, &topic, &Partitioning::balanced(), &mut one)
                .await
                .map(|r| r.confirmations.first().map(|c| c.partition_id))
                .map_err(|e| e.as_code())
        };
        for i in 0..3 {
            seen.push(format!(
                "by name: {:?}",
                send(named("orders"), named("events"), i + 1).await
            ));
        }
        c.create_partitions(&named("orders"), &named("events"), 2)
            .await
            .unwrap();
        for i in 0..3 {
            seen.push(format!(
                "by name after growth: {:?}",
                send(named("orders"), named("events"), i + 10).await
            ));
        }
        for i in 0..5 {
            seen.push(format!(
                "by number: {:?}",
                send(numeric(0), numeric(0), i + 20).await
            ));
        }
        seen
    })
}

#[ignore = "open break: one balanced cursor per topic, the SDK keeps one per name"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balanced_sends_pick_the_partitions_the_sdk_picks_when_a_topic_is_named_two_ways() {
    let (sdk, route) = sdk_vs_route(3, balanced_by_two_names).await;
    assert_eq!(route, sdk, "iggy-route (left) vs the SDK (right)");
}

#[ignore = "open break: balanced sends pass over a stalled partition by default"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balanced_sends_take_the_partitions_in_turn_while_one_primary_is_slow() {
    let cluster = Arc::new(TestCluster::start(3).await);
    let (s, t) = cluster.create_stream_and_topic("orders", "events", 3);
    for p in 0..3 {
        assert!(cluster.set_primary(s, t, p, p as usize));
    }
    // A primary that takes 30 ms to answer (a slow disk), as a real cluster has now and then.
    cluster.set_reply_delay(2, Duration::from_millis(30));
    let client = route_on(&cluster).await;
    let mut tasks = Vec::new();
    for task in 0..30u128 {
        let client = Arc::clone(&client);
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for i in 0..20u128 {
                let id = 10_000 + task * 100 + i;
                let mut one = vec![message(id, b"c", None)];
                client
                    .send_messages(
                        &named("orders"),
                        &named("events"),
                        &Partitioning::balanced(),
                        &mut one,
                    )
                    .await
                    .unwrap();
                acked.push(id);
            }
            acked
        }));
    }
    let mut acked = Vec::new();
    for task in tasks {
        acked.extend(task.await.unwrap());
    }
    client.shutdown().await.unwrap();
    let per_partition: Vec<usize> = (0..3)
        .map(|p| stored_ids(&cluster, s, t, p).len())
        .collect();
    let mut stored: Vec<u128> = (0..3).flat_map(|p| stored_ids(&cluster, s, t, p)).collect();
    stored.sort_unstable();
    acked.sort_unstable();
    assert_eq!(stored, acked, "every acknowledged send stored once");
    // The SDK's rule: each balanced send takes the next partition of a cursor, so 600 sends
    // land 200 on each partition whatever their speed.
    assert_eq!(
        per_partition,
        [200, 200, 200],
        "balanced sends per partition"
    );
}

/// Whether a send's outcome keeps the promise: Ok only when stored once; an error other
/// than 57 only when not stored.
fn outcome_problem(label: &str, outcome: Option<u32>, times_stored: usize) -> Option<String> {
    match outcome {
        None if times_stored != 1 => Some(format!(
            "{label}: acknowledged, stored {times_stored} times"
        )),
        Some(code) if code != 57 && times_stored > 0 => Some(format!(
            "{label}: error {code}, but stored {times_stored} times"
        )),
        Some(57) if times_stored > 1 => Some(format!("{label}: stored {times_stored} times")),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_replies_lost_links_stopped_primaries_and_refused_commits_keep_the_outcome_promise() {
    let cluster = TestCluster::start(3).await;
    let (s, t) = cluster.create_stream_and_topic("orders", "events", 3);
    assert!(cluster.set_primary(s, t, 0, 1));
    assert!(cluster.set_primary(s, t, 1, 1));
    assert!(cluster.set_primary(s, t, 2, 2));
    let timeout = Duration::from_secs(1);
    let client = route_with_timeout(&cluster, timeout).await;
    let (stream, topic) = (named("orders"), named("events"));
    for p in 0..3 {
        let mut one = vec![message(1 + u128::from(p), b"warm", None)];
        client
            .send_messages(&stream, &topic, &Partitioning::partition_id(p), &mut one)
            .await
            .unwrap();
    }
    let mut problems = Vec::new();
    let times = |id: u128| {
        (0..3)
            .map(|p| {
                stored_ids(&cluster, s, t, p)
                    .iter()
                    .filter(|&&x| x == id)
                    .count()
            })
            .sum::<usize>()
    };
    let send = |id: u128, partition: u32| {
        let client = Arc::clone(&client);
        async move {
            let started = Instant::now();
            let mut one = vec![message(id, b"x", None)];
            let outcome = client
                .send_messages(
                    &named("orders"),
                    &named("events"),
                    &Partitioning::partition_id(partition),
                    &mut one,
                )
                .await
                .err()
                .map(|e| e.as_code());
            (outcome, started.elapsed())
        }
    };

    // A reply held past the deadline: stored, answered late.
    cluster.set_reply_delay(1, Duration::from_secs(3));
    let (outcome, took) = send(10, 0).await;
    problems.extend(outcome_problem("late reply", outcome, times(10)));
    assert!(
        took < 2 * timeout + Duration::from_millis(500),
        "late reply took {took:?}"
    );
    cluster.set_reply_delay(1, Duration::ZERO);
    tokio::time::sleep(Duration::from_secs(3)).await;

    // The primary's links dropped while a reply is held.
    cluster.set_reply_delay(1, Duration::from_secs(3));
    let in_flight = tokio::spawn(send(11, 1));
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.drop_connections(1);
    let (outcome, _) = in_flight.await.unwrap();
    problems.extend(outcome_problem("lost link", outcome, times(11)));
    cluster.set_reply_delay(1, Duration::ZERO);
    tokio::time::sleep(Duration::from_secs(1)).await;

    // A stopped primary.
    cluster.stop_node(2).await;
    let (outcome, _) = send(12, 2).await;
    problems.extend(outcome_problem("stopped primary", outcome, times(12)));
    cluster.restart_node(2).await;

    // A primary that cannot commit (answers 57, stores nothing).
    use iggy_route_tests::cluster::adversary::Misbehaviour;
    cluster.misbehave(1, Misbehaviour::NotCommitted, Duration::from_secs(3));
    let (outcome, _) = send(13, 0).await;
    problems.extend(outcome_problem("not committed", outcome, times(13)));
    cluster.misbehave(1, Misbehaviour::NotCommitted, Duration::ZERO);

    // Metadata writes answered late by the leader.
    cluster.set_reply_delay(0, Duration::from_secs(3));
    let created = client.create_stream("late-stream").await;
    let user = client
        .create_user("late-user", "password", UserStatus::Active, None)
        .await;
    cluster.set_reply_delay(0, Duration::ZERO);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stream_exists = client
        .get_stream(&named("late-stream"))
        .await
        .unwrap()
        .is_some();
    let user_exists = client
        .get_user(&named("late-user"))
        .await
        .unwrap()
        .is_some();
    problems.extend(outcome_problem(
        "late create_stream",
        code(&created),
        usize::from(stream_exists),
    ));
    problems.extend(outcome_problem(
        "late create_user",
        code(&user),
        usize::from(user_exists),
    ));
    client.shutdown().await.unwrap();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[ignore = "open break: a send on the wire at shutdown ends Shutdown, which says nothing was stored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_in_flight_when_the_client_shuts_down_is_reported_as_57_not_as_a_shutdown() {
    let cluster = TestCluster::start(3).await;
    let (s, t) = cluster.create_stream_and_topic("orders", "events", 1);
    assert!(cluster.set_primary(s, t, 0, 1));
    let client = route_with_timeout(&cluster, Duration::from_secs(5)).await;
    let mut one = vec![message(1, b"warm", None)];
    client
        .send_messages(
            &named("orders"),
            &named("events"),
            &Partitioning::partition_id(0),
            &mut one,
        )
        .await
        .unwrap();
    // The primary stores at once and answers 2 s later.
    cluster.set_reply_delay(1, Duration::from_secs(2));
    let sender = Arc::clone(&client);
    let task = tokio::spawn(async move {
        let mut one = vec![message(2, b"in flight at shutdown", None)];
        sender
            .send_messages(
                &named("orders"),
                &named("events"),
                &Partitioning::partition_id(0),
                &mut one,
            )
            .await
            .err()
            .map(|e| e.as_code())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    client.shutdown().await.unwrap();
    let outcome = task.await.unwrap();
    let stored = stored_ids(&cluster, s, t, 0);
    assert!(
        stored.contains(&2),
        "the send reached its primary: {stored:?}"
    );
    assert_eq!(
        outcome,
        Some(57),
        "a send stored by its primary, in flight at shutdown, was reported as {outcome:?} \
         (63 is ClientShutdown, read as 'not sent')"
    );
}

async fn calls_compared_in(state: &str) -> Vec<String> {
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("orders", "events", 2);
    let sdk = sdk_on(&cluster).await;
    let expected = calls_in_state(&*sdk, state).await;
    let _ = sdk.shutdown().await;
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("orders", "events", 2);
    let route = route_on(&cluster).await;
    let got = calls_in_state(&*route, state).await;
    let _ = route.shutdown().await;
    expected
        .iter()
        .zip(&got)
        .filter(|(sdk, route)| sdk != route)
        .map(|(sdk, route)| format!("  SDK:        {sdk}\n  iggy-route: {route}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_after_shutdown_fails_with_client_shutdown() {
    // The SDK's own answers after its shutdown race with its reconnect logic (a `ping` now
    // and then succeeds), so this holds iggy-route to its documented answer: 63.
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("orders", "events", 2);
    let route = route_on(&cluster).await;
    let got = calls_in_state(&*route, "shut down").await;
    let wrong: Vec<&String> = got
        .iter()
        .filter(|line| {
            !line.ends_with("Ok(Some(63))") && !line.contains("refresh_consumer_group_assignments")
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[ignore = "open break: after disconnect the SDK's next call reconnects by itself"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_after_disconnect_reconnect_and_succeed_as_the_sdks_do() {
    // The SDK's next call after `disconnect` reconnects, signs in with the connection
    // string's credentials and runs; iggy-route fails every call with 8 or 61 until
    // `connect`, and says the SDK does the same.
    let differences = calls_compared_in("disconnected").await;
    assert!(
        differences.is_empty(),
        "{} calls differ:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

#[ignore = "open break: after logout the SDK signs in again at the first refusal"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_after_logout_sign_in_again_at_the_first_refusal_as_the_sdks_do() {
    // After `logout_user`, the SDK's `get_stats` reaches the server, is refused 40, and the
    // SDK signs in again with the connection string's credentials and replays it: from there
    // on every call works. iggy-route answers 40 until `login_user`.
    let differences = calls_compared_in("logged out").await;
    assert!(
        differences.is_empty(),
        "{} calls differ:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iggy_route_polls_what_the_sdk_polls_from_the_same_partition_byte_for_byte() {
    let cluster = TestCluster::start(3).await;
    let (s, t) = cluster.create_stream_and_topic("orders", "events", 2);
    assert!(cluster.set_primary(s, t, 1, 2));
    let route = route_on(&cluster).await;
    let sdk = sdk_on(&cluster).await;
    let mut batch = vec![
        message(1, b"one", Some(every_kind_of_header())),
        message(0, b"two", None),
        raw_message(3, Bytes::from_static(b"three"), Some(Bytes::new())),
    ];
    route
        .send_messages(
            &named("orders"),
            &named("events"),
            &Partitioning::partition_id(1),
            &mut batch,
        )
        .await
        .unwrap();
    let mut batch = vec![message(4, b"four", None)];
    sdk.send_messages(
        &named("orders"),
        &named("events"),
        &Partitioning::partition_id(1),
        &mut batch,
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let show = |p: &PolledMessages| {
        let messages: Vec<String> = p
            .messages
            .iter()
            .map(|m| {
                // The documented difference: iggy-route's polled checksum is 0.
                let header = format!("{:?}", m.header).replacen(
                    &format!("checksum: {}", m.header.checksum),
                    "checksum: _",
                    1,
                );
                format!("{header} {:?} {:?}", m.payload, m.user_headers)
            })
            .collect();
        format!(
            "{} {} {} {messages:?}",
            p.partition_id, p.current_offset, p.count
        )
    };
    for strategy in [
        PollingStrategy::first(),
        PollingStrategy::last(),
        PollingStrategy::offset(1),
    ] {
        let consumer = Consumer::new(numeric(3));
        let a = poll(
            &*sdk,
            &named("orders"),
            &named("events"),
            Some(1),
            &consumer,
            strategy,
            10,
            false,
        )
        .await
        .unwrap();
        let b = poll(
            &*route,
            &named("orders"),
            &named("events"),
            Some(1),
            &consumer,
            strategy,
            10,
            false,
        )
        .await
        .unwrap();
        assert_eq!(a.messages.len(), 4.min(a.messages.len()).max(1));
        assert_eq!(show(&b), show(&a), "{strategy:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_and_connect_cycles_leave_no_links_behind() {
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("orders", "events", 1);
    let client = route_on(&cluster).await;
    client.get_streams().await.unwrap();
    let before: Vec<u64> = (0..3)
        .map(|n| cluster.stats(n).open_connections as u64)
        .collect();
    for _ in 0..20 {
        client.disconnect().await.unwrap();
        client.connect().await.unwrap();
        assert_eq!(client.get_streams().await.unwrap().len(), 1);
    }
    let after: Vec<u64> = (0..3)
        .map(|n| cluster.stats(n).open_connections as u64)
        .collect();
    assert_eq!(after, before);
    client.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_through_a_slow_then_stopped_primary_are_stored_once_when_acknowledged() {
    let cluster = Arc::new(TestCluster::start(3).await);
    let (s, t) = cluster.create_stream_and_topic("orders", "events", 3);
    for p in 0..3 {
        assert!(cluster.set_primary(s, t, p, p as usize));
    }
    let client = route_with_timeout(&cluster, Duration::from_secs(2)).await;
    let mut tasks = Vec::new();
    for task in 0..12u128 {
        let client = Arc::clone(&client);
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for i in 0..60u128 {
                let id = 10_000 + task * 1000 + i;
                let partition = u32::try_from(task % 3).unwrap();
                let mut one = vec![message(id, b"c", None)];
                let r = client
                    .send_messages(
                        &named("orders"),
                        &named("events"),
                        &Partitioning::partition_id(partition),
                        &mut one,
                    )
                    .await;
                outcomes.push((id, r.err().map(|e| e.as_code())));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            outcomes
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    cluster.set_reply_delay(1, Duration::from_millis(400));
    tokio::time::sleep(Duration::from_millis(150)).await;
    cluster.stop_node(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.set_reply_delay(1, Duration::ZERO);
    cluster.restart_node(1).await;
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.extend(task.await.unwrap());
    }
    let stored: Vec<u128> = (0..3).flat_map(|p| stored_ids(&cluster, s, t, p)).collect();
    let problems: Vec<String> = outcomes
        .iter()
        .filter_map(|(id, outcome)| {
            let times = stored.iter().filter(|&&x| x == *id).count();
            outcome_problem(&id.to_string(), *outcome, times)
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    client.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_identifiers_are_refused_without_a_panic() {
    let cluster = TestCluster::start(3).await;
    cluster.create_stream_and_topic("orders", "events", 1);
    let c = route_on(&cluster).await;
    let topic = named("events");
    for id in [
        Identifier {
            kind: IdKind::Numeric,
            length: 2,
            value: vec![1, 0],
        },
        // The SDK itself panics on these two (its `Display` and `get_u32_value` unwrap).
        Identifier {
            kind: IdKind::Numeric,
            length: 4,
            value: vec![1, 0, 0],
        },
        Identifier {
            kind: IdKind::Numeric,
            length: 4,
            value: vec![],
        },
        Identifier {
            kind: IdKind::String,
            length: 200,
            value: vec![b'a'; 300],
        },
    ] {
        let group = Consumer {
            kind: ConsumerKind::ConsumerGroup,
            id: id.clone(),
        };
        let mut one = vec![message(1, b"x", None)];
        let outcomes = [
            code(
                &c.send_messages(&id, &topic, &Partitioning::balanced(), &mut one)
                    .await,
            ),
            code(
                &c.send_messages(
                    &named("orders"),
                    &id,
                    &Partitioning::partition_id(0),
                    &mut one,
                )
                .await,
            ),
            code(&c.get_stream(&id).await),
            code(
                &c.get_consumer_offset(&group, &named("orders"), &topic, None)
                    .await,
            ),
            code(
                &poll(
                    &*c,
                    &named("orders"),
                    &topic,
                    None,
                    &group,
                    PollingStrategy::next(),
                    1,
                    true,
                )
                .await,
            ),
            code(&c.join_consumer_group(&named("orders"), &topic, &id).await),
            code(
                &c.update_user(&id, Some("x-user"), None, &UserUpdateOptions::default())
                    .await,
            ),
        ];
        assert!(
            outcomes
                .iter()
                .all(|o| *o == Some(IggyError::InvalidIdentifier.as_code())),
            "{id:?}: {outcomes:?}"
        );
    }
    c.ping().await.unwrap();
    c.shutdown().await.unwrap();
}

/// A client signed in as `owner` renames its own user (or changes its own password), the
/// cluster drops every connection, and the client goes on.
async fn own_account_change_program(
    cluster: &TestCluster,
    client: &dyn Client,
    change: &str,
) -> Vec<String> {
    let mut seen = Vec::new();
    let result = match change {
        "rename" => {
            client
                .update_user(
                    &named("owner"),
                    Some("renamed-owner"),
                    None,
                    &UserUpdateOptions::default(),
                )
                .await
        }
        _ => {
            client
                .change_password(&named("owner"), "owner-pw", "owner-pw-2")
                .await
        }
    };
    seen.push(format!("{change}: {:?}", code(&result)));
    tokio::time::sleep(Duration::from_millis(700)).await;
    for node in 0..3 {
        cluster.drop_connections(node);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for attempt in 0..3 {
        let streams = client.get_streams().await;
        seen.push(format!(
            "get_streams {attempt}: {:?}",
            streams.map(|s| s.len()).map_err(|e| e.as_code())
        ));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    seen
}

async fn owner_cluster() -> TestCluster {
    let cluster = TestCluster::start(3).await;
    let root = sdk_on(&cluster).await;
    root.create_user(
        "owner",
        "owner-pw",
        UserStatus::Active,
        Some(Permissions::root()),
    )
    .await
    .unwrap();
    root.shutdown().await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    cluster
}

#[ignore = "open break: the router keeps signing in with the credentials it was built with"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_renames_its_own_user_or_changes_its_password_keeps_working_after_a_reconnect()
 {
    let mut differences = Vec::new();
    for change in ["rename", "password"] {
        let cluster = owner_cluster().await;
        let sdk = IggyClient::from_connection_string(&format!(
            "iggy://owner:owner-pw@{}",
            cluster.addr(0)
        ))
        .unwrap();
        sdk.connect().await.unwrap();
        let expected = own_account_change_program(&cluster, &sdk, change).await;
        let _ = Client::shutdown(&sdk).await;

        let cluster = owner_cluster().await;
        let mut config = route_config(&cluster);
        config.credentials = iggy_route_core::Credentials::user("owner", "owner-pw").unwrap();
        let route = iggy_route_tokio::Client::connect(config).await.unwrap();
        let got = own_account_change_program(&cluster, &route, change).await;
        let _ = Client::shutdown(&route).await;
        if got != expected {
            differences.push(format!(
                "{change}:\n  iggy-route {got:?}\n  SDK        {expected:?}"
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

async fn strategy_for_program(c: &dyn Client) -> Vec<String> {
    let (stream, topic) = (named("orders"), named("events"));
    c.create_consumer_group(&stream, &topic, "g").await.unwrap();
    c.join_consumer_group(&stream, &topic, &named("g"))
        .await
        .unwrap();
    let member = Consumer::group(named("g"));
    let mut seen = Vec::new();
    for _ in 0..3 {
        let polled = c
            .poll_messages_with_strategy_for(
                &stream,
                &topic,
                None,
                &member,
                &|partition| PollingStrategy::offset(u64::from(partition)),
                10,
                false,
            )
            .await;
        seen.push(format!(
            "{:?}",
            polled
                .map(|p| (
                    p.partition_id,
                    p.messages
                        .iter()
                        .map(|m| m.header.offset)
                        .collect::<Vec<_>>()
                ))
                .map_err(|e| e.as_code())
        ));
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_polls_with_a_strategy_per_partition_read_what_the_sdks_read() {
    let (cluster, _, _) = cluster_with_messages(3, 3).await;
    let sdk = sdk_on(&cluster).await;
    let expected = strategy_for_program(&*sdk).await;
    sdk.shutdown().await.unwrap();
    let (cluster, _, _) = cluster_with_messages(3, 3).await;
    let route = route_on(&cluster).await;
    let got = strategy_for_program(&*route).await;
    route.shutdown().await.unwrap();
    assert_eq!(got, expected, "iggy-route (left) vs the SDK (right)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_stays_put_through_a_day_on_split_primaries() {
    let cluster = Arc::new(TestCluster::start(3).await);
    let spreader = Arc::clone(&cluster);
    let world = World {
        a: route_on(&cluster).await,
        b: route_on(&cluster).await,
        spread: Arc::new(move |stream, topic, partitions| {
            for partition in 0..partitions {
                let node = 1 + usize::try_from(partition).unwrap() % 2;
                spreader.set_primary(stream, topic, partition, node);
            }
        }),
        connect: route_connect(&cluster),
    };
    let before = (
        world.a.get_me().await.unwrap().client_id,
        world.b.get_me().await.unwrap().client_id,
    );
    let mut trace = Trace::default();
    messaging_day(&world, &mut trace).await;
    // The day deletes its stream at the end; the sessions are still the ones it began with.
    let after = (
        world.a.get_me().await.unwrap().client_id,
        world.b.get_me().await.unwrap().client_id,
    );
    assert_eq!(after, before, "the sessions (client ids on node 2) changed");
    let _ = world.a.shutdown().await;
    let _ = world.b.shutdown().await;
}

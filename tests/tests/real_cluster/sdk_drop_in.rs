//! A program written against the SDK 0.11.0's traits (`&dyn Client`) runs on the real server
//! twice: once on the SDK's own `IggyClient`, once on iggy-route with only the line that
//! builds the client changed. Every result it sees (names, counts, offsets, payloads, typed
//! headers, error codes) is recorded, and the two records must be the same line for line.
//!
//! The SDK's `create_topic` always sends the two durability keys, which this server does not
//! know (`UnsupportedOptionKey`); iggy-route sends the SDK's options block as it is and is
//! refused with the same code. The program records that refusal, and its topic is then made
//! with an empty options block by the native client, as a user of this server has to.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::str::FromStr;
use std::sync::Arc;

use bytes::Bytes;
use iggy::prelude::*;
use iggy_route_tests::real_cluster::{RealCluster, admin, create_topic, unique_name};
use iggy_route_tests::scripted::clients::Adapter;

use super::{DAY_RUNTIME, serial};

/// What the program saw, a line a result. Names that differ between the two runs (the
/// stream's, the user's) never appear in it.
#[derive(Debug, Default)]
struct Trace(Vec<String>);

impl Trace {
    fn note(&mut self, label: &str, value: impl Debug) {
        self.0.push(format!("{label}: {value:?}"));
    }

    fn result<T>(
        &mut self,
        label: &str,
        result: &Result<T, IggyError>,
        show: impl Fn(&T) -> String,
    ) {
        let line = match result {
            Ok(value) => format!("{label}: ok {}", show(value)),
            Err(error) => format!("{label}: error {}", error.as_code()),
        };
        self.0.push(line);
    }
}

/// The names one run uses: its own stream and user, so the runs never meet.
struct Names {
    stream: String,
    user: String,
    token: String,
}

impl Names {
    fn new(run: &str) -> Self {
        let stream = unique_name(&format!("drop-in-{run}"));
        let tag = stream.rsplit('-').next().unwrap_or("0").to_owned();
        Self {
            user: format!("drop-{run}-{tag}"),
            token: format!("tok-{run}-{tag}"),
            stream,
        }
    }
}

fn named(name: &str) -> Identifier {
    Identifier::named(name).unwrap()
}

fn message(
    id: u128,
    payload: &str,
    headers: Option<BTreeMap<HeaderKey, HeaderValue>>,
) -> IggyMessage {
    let builder = IggyMessage::builder()
        .id(id)
        .payload(Bytes::from(payload.to_owned()));
    match headers {
        Some(headers) => builder.user_headers(headers).build().unwrap(),
        None => builder.build().unwrap(),
    }
}

fn typed_headers() -> BTreeMap<HeaderKey, HeaderValue> {
    BTreeMap::from([
        (
            HeaderKey::from_str("text").unwrap(),
            HeaderValue::from_str("déjà vu").unwrap(),
        ),
        (
            HeaderKey::from_str("count").unwrap(),
            HeaderValue::from(7u64),
        ),
        (
            HeaderKey::from_str("signed").unwrap(),
            HeaderValue::from(-3i32),
        ),
        (
            HeaderKey::from_str("flag").unwrap(),
            HeaderValue::from(true),
        ),
        (
            HeaderKey::from_str("ratio").unwrap(),
            HeaderValue::from(0.5f64),
        ),
    ])
}

/// A polled batch as the trace shows it: each message's offset, id, payload and headers.
fn show_polled(polled: &PolledMessages) -> String {
    let messages: Vec<String> = polled
        .messages
        .iter()
        .map(|message| {
            let headers = match message.user_headers_map() {
                Ok(Some(headers)) => headers
                    .iter()
                    .map(|(key, value)| format!("{key}={value}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                Ok(None) => "-".to_owned(),
                Err(error) => format!("undecodable ({})", error.as_code()),
            };
            format!(
                "{}#{} {} [{headers}]",
                message.header.offset,
                message.header.id,
                String::from_utf8_lossy(&message.payload),
            )
        })
        .collect();
    format!("partition {}: {}", polled.partition_id, messages.join("; "))
}

/// The first half of the day: the stream, and the topic the SDK's options block asks for.
async fn create(client: &dyn Client, names: &Names, trace: &mut Trace) -> bool {
    let created = client.create_stream(&names.stream).await;
    trace.result("create_stream", &created, |s| {
        format!("{} topics", s.topics_count)
    });
    let options = TopicCreateOptions {
        partitions_count: Some(2),
        ..TopicCreateOptions::default()
    };
    let topic = client
        .create_topic(&named(&names.stream), "orders", &options)
        .await;
    trace.result("create_topic", &topic, |t| {
        format!("{} partitions", t.partitions_count)
    });
    topic.is_ok()
}

/// The rest of the day, once the topic exists.
async fn day(client: &dyn Client, names: &Names, trace: &mut Trace) {
    let (stream, topic) = (named(&names.stream), named("orders"));
    let got = client.get_topic(&stream, &topic).await;
    trace.result("get_topic", &got, |t| {
        t.as_ref()
            .map(|t| format!("{} {} partitions", t.name, t.partitions_count))
            .unwrap_or_default()
    });
    let topics = client.get_topics(&stream).await;
    trace.result("get_topics", &topics, |t| {
        format!("{:?}", t.iter().map(|t| &t.name).collect::<Vec<_>>())
    });

    let mut first = vec![
        message(1, "one", Some(typed_headers())),
        message(2, "two", None),
        message(3, "three", Some(typed_headers())),
    ];
    let sent = client
        .send_messages(&stream, &topic, &Partitioning::partition_id(0), &mut first)
        .await;
    trace.result("send partition 0", &sent, |r| format!("{r:?}"));
    let mut second = vec![
        message(4, "four", None),
        message(5, "five", Some(typed_headers())),
    ];
    let sent = client
        .send_messages(&stream, &topic, &Partitioning::partition_id(1), &mut second)
        .await;
    trace.result("send partition 1", &sent, |r| format!("{r:?}"));
    let mut keyed = vec![message(6, "six", None)];
    let key = Partitioning::messages_key_str("customer-7").unwrap();
    let sent = client
        .send_messages(&stream, &topic, &key, &mut keyed)
        .await;
    trace.result("send keyed", &sent, |r| format!("{r:?}"));
    let mut missing = vec![message(7, "seven", None)];
    let sent = client
        .send_messages(
            &stream,
            &topic,
            &Partitioning::partition_id(2),
            &mut missing,
        )
        .await;
    trace.result("send to partition 2 of 2", &sent, |r| format!("{r:?}"));

    let reader = Consumer::new(Identifier::numeric(1).unwrap());
    for partition in 0..2 {
        let polled = client
            .poll_messages(
                &stream,
                &topic,
                Some(partition),
                &reader,
                &PollingStrategy::offset(0),
                10,
                false,
            )
            .await;
        trace.result(&format!("poll {partition} from 0"), &polled, show_polled);
    }
    let last = client
        .poll_messages(
            &stream,
            &topic,
            Some(0),
            &reader,
            &PollingStrategy::last(),
            1,
            false,
        )
        .await;
    trace.result("poll last", &last, show_polled);
    let next = client
        .poll_messages(
            &stream,
            &topic,
            Some(0),
            &reader,
            &PollingStrategy::next(),
            2,
            true,
        )
        .await;
    trace.result("poll next, committing", &next, show_polled);
    let offset = client
        .get_consumer_offset(&reader, &stream, &topic, Some(0))
        .await;
    trace.result("offset after next", &offset, |o| {
        format!("{:?}", o.as_ref().map(|o| o.stored_offset))
    });
    let stored = client
        .store_consumer_offset(&reader, &stream, &topic, Some(1), 1)
        .await;
    trace.result("store offset 1", &stored, |()| String::new());
    let offset = client
        .get_consumer_offset(&reader, &stream, &topic, Some(1))
        .await;
    trace.result("offset stored", &offset, |o| {
        format!("{:?}", o.as_ref().map(|o| o.stored_offset))
    });

    users_and_tokens(client, names, trace).await;

    let me = client.get_me().await;
    trace.result("get_me", &me, |me| format!("user {}", me.user_id.is_some()));
    trace.result("ping", &client.ping().await, |()| String::new());
    trace.result(
        "delete_topic",
        &client.delete_topic(&stream, &topic).await,
        |()| String::new(),
    );
    let gone = client.get_topic(&stream, &topic).await;
    trace.result("get_topic deleted", &gone, |t| {
        format!("{:?}", t.as_ref().map(|t| &t.name))
    });
    trace.result(
        "delete_stream",
        &client.delete_stream(&stream).await,
        |()| String::new(),
    );
    let gone = client.get_stream(&stream).await;
    trace.result("get_stream deleted", &gone, |s| {
        format!("{:?}", s.as_ref().map(|s| &s.name))
    });
}

async fn users_and_tokens(client: &dyn Client, names: &Names, trace: &mut Trace) {
    let user = named(&names.user);
    let created = client
        .create_user(&names.user, "secret-one", UserStatus::Active, None)
        .await;
    trace.result("create_user", &created, |u| format!("{:?}", u.status));
    let again = client
        .create_user(&names.user, "secret-one", UserStatus::Active, None)
        .await;
    trace.result("create_user again", &again, |u| format!("{:?}", u.status));
    let updated = client
        .update_user(
            &user,
            None,
            Some(UserStatus::Inactive),
            &UserUpdateOptions::default(),
        )
        .await;
    trace.result("update_user inactive", &updated, |()| String::new());
    let got = client.get_user(&user).await;
    trace.result("get_user", &got, |u| {
        format!("{:?}", u.as_ref().map(|u| u.status))
    });
    let changed = client
        .change_password(&user, "secret-one", "secret-two")
        .await;
    trace.result("change_password", &changed, |()| String::new());
    let wrong = client
        .change_password(&user, "secret-one", "secret-three")
        .await;
    trace.result("change_password with the old one", &wrong, |()| {
        String::new()
    });
    trace.result("delete_user", &client.delete_user(&user).await, |()| {
        String::new()
    });
    let gone = client.get_user(&user).await;
    trace.result("get_user deleted", &gone, |u| {
        format!("{:?}", u.as_ref().map(|u| u.status))
    });

    let token = client
        .create_personal_access_token(&names.token, IggyExpiry::NeverExpire)
        .await;
    trace.result("create token", &token, |t| {
        format!("{} characters", t.token.len())
    });
    let listed = client.get_personal_access_tokens().await;
    trace.result("tokens list it", &listed, |tokens| {
        format!("{}", tokens.iter().any(|t| t.name == names.token))
    });
    let deleted = client.delete_personal_access_token(&names.token).await;
    trace.result("delete token", &deleted, |()| String::new());
    let listed = client.get_personal_access_tokens().await;
    trace.result("tokens list it after", &listed, |tokens| {
        format!("{}", tokens.iter().any(|t| t.name == names.token))
    });
}

/// The metadata leader's index in `cluster.nodes`, as the cluster's metadata names it.
async fn leader(client: &dyn Client, cluster: &RealCluster) -> usize {
    let Ok(metadata) = client.get_cluster_metadata().await else {
        return 0;
    };
    metadata
        .nodes
        .iter()
        .filter(|node| node.role == ClusterNodeRole::Leader)
        .find_map(|node| {
            let port = format!(":{}", node.endpoints.tcp);
            cluster.nodes.iter().position(|addr| addr.ends_with(&port))
        })
        .unwrap_or(0)
}

/// Runs the day on `client`, making the topic natively when the trait's create is refused.
fn run(cluster: &RealCluster, client: &dyn Client, names: &Names) -> Trace {
    let mut trace = Trace::default();
    let made = DAY_RUNTIME.block_on(create(client, names, &mut trace));
    if !made {
        let native = cluster.client(Adapter::Tokio, 0);
        admin(&native, create_topic(&names.stream, "orders", 2));
        native.shutdown();
        trace.note("topic made with an empty options block", true);
    }
    DAY_RUNTIME.block_on(day(client, names, &mut trace));
    trace
}

#[test]
fn a_program_written_for_the_sdk_runs_the_same_on_both_clients() {
    let Some(cluster) = RealCluster::from_env("sdk_drop_in") else {
        return;
    };
    let _serial = serial();
    let Some(first) = cluster.sdk_connection_string(0) else {
        println!("sdk_drop_in: skipped (a TLS cluster)");
        return;
    };
    let sdk: Arc<dyn Client> = DAY_RUNTIME.block_on(async {
        let probe = IggyClient::from_connection_string(&first).unwrap();
        probe.connect().await.unwrap();
        // The SDK writes metadata through the node it is on: the leader, as a user of it
        // would choose.
        let leader = leader(&probe, &cluster).await;
        let _ = probe.shutdown().await;
        let url = cluster.sdk_connection_string(leader).unwrap();
        let client = IggyClient::from_connection_string(&url).unwrap();
        client.connect().await.unwrap();
        Arc::new(client) as Arc<dyn Client>
    });
    let sdk_trace = run(&cluster, &*sdk, &Names::new("sdk"));
    let _ = DAY_RUNTIME.block_on(sdk.shutdown());

    // The only line that differs: the client is iggy-route's, its session on the last node.
    let route: Arc<dyn Client> = Arc::new(
        DAY_RUNTIME
            .block_on(iggy_route_tokio::Client::connect(
                cluster.config(cluster.nodes.len() - 1),
            ))
            .unwrap(),
    );
    let route_trace = run(&cluster, &*route, &Names::new("route"));
    let _ = DAY_RUNTIME.block_on(route.shutdown());

    let mut known = Vec::new();
    let differences: Vec<String> = sdk_trace
        .0
        .iter()
        .zip(&route_trace.0)
        .filter(|(sdk, route)| sdk != route)
        .filter(|(sdk, route)| {
            let expected = SDK_CANNOT_HERE.contains(&(sdk.as_str(), route.as_str()));
            if expected {
                known.push(format!("  sdk:   {sdk}\n  route: {route}"));
            }
            !expected
        })
        .map(|(sdk, route)| format!("  sdk:   {sdk}\n  route: {route}"))
        .collect();
    assert!(
        differences.is_empty() && sdk_trace.0.len() == route_trace.0.len(),
        "the SDK and iggy-route saw different results ({} and {} lines):\n{}\nsdk:\n{}",
        sdk_trace.0.len(),
        route_trace.0.len(),
        differences.join("\n"),
        sdk_trace.0.join("\n")
    );
    println!(
        "sdk_drop_in: {} of {} results the same on both clients; where the SDK cannot work \
         with this server:\n{}\nthe SDK's record:\n{}",
        sdk_trace.0.len() - known.len(),
        sdk_trace.0.len(),
        known.join("\n"),
        sdk_trace.0.join("\n")
    );
}

/// Where the SDK 0.11.0 cannot work with this server and iggy-route can: the SDK writes a
/// consumer offset (an auto-commit poll's, a stored one) through the routing commands, which
/// this server does not have (`InvalidCommand`, 3), so nothing is stored; iggy-route writes
/// it on the partition's primary. Any other difference, or one of these in another way,
/// fails the test.
const SDK_CANNOT_HERE: [(&str, &str); 4] = [
    (
        "poll next, committing: error 3",
        "poll next, committing: ok partition 0: 0#1 one [string: count=uint64: 7, string: \
         flag=bool: true, string: ratio=float64: 0.5, string: signed=int32: -3, string: \
         text=string: déjà vu]; 1#2 two [-]",
    ),
    (
        "offset after next: ok None",
        "offset after next: ok Some(1)",
    ),
    ("store offset 1: error 3", "store offset 1: ok "),
    ("offset stored: ok None", "offset stored: ok Some(1)"),
];

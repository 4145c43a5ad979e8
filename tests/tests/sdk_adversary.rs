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

#[path = "sdk_adversary/bad_input.rs"]
mod bad_input;
#[path = "sdk_adversary/breaks.rs"]
mod breaks;
#[path = "sdk_adversary/faults.rs"]
mod faults;
#[path = "sdk_adversary/guards.rs"]
mod guards;
#[path = "sdk_adversary/logins.rs"]
mod logins;
#[path = "sdk_adversary/messages.rs"]
mod messages;
#[path = "sdk_adversary/probes.rs"]
mod probes;
#[path = "sdk_adversary/secrets.rs"]
mod secrets;
#[path = "sdk_adversary/session_states.rs"]
mod session_states;
#[path = "sdk_adversary/users.rs"]
mod users;

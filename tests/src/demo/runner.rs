//! One run: a client, a scenario, the load, and the counters read around it.
//!
//! The cluster and the async clients run on separate tokio runtimes, so a client's tasks
//! never queue behind the cluster's (and the embedded cluster plays a server, not a
//! co-tenant of the client's executor).

use std::time::Duration;

use iggy_route_core::wire::Identifier;
use iggy_route_core::{Config, Credentials};
use tokio::runtime::Runtime;

use super::load::ProgressLine;
use super::report::{RefusalSource, Row};
use super::topology::EmbeddedCluster;
use super::{ClientKind, Load, PARTITIONS, Scenario, TOPIC_NAME};
use super::{background_mio, background_tokio, route_mio, route_tokio, sdk};

/// The two runtimes of the demo.
#[derive(Debug)]
pub struct Runtimes {
    /// Runs the embedded cluster's nodes.
    pub cluster: Runtime,
    /// Runs the tokio clients (iggy-route-tokio and the SDK).
    pub clients: Runtime,
}

impl Runtimes {
    /// Two multi-threaded runtimes of `workers` threads each.
    pub fn new(workers: usize) -> std::io::Result<Self> {
        let build = |name: &str| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .thread_name(name)
                .enable_all()
                .build()
        };
        Ok(Self {
            cluster: build("cluster")?,
            clients: build("clients")?,
        })
    }
}

/// Runs `client` in `scenario` on a fresh embedded cluster whose partition commits take
/// `commit` each.
pub fn run_embedded(
    runtimes: &Runtimes,
    client: ClientKind,
    scenario: Scenario,
    load: &Load,
    commit: Duration,
) -> Result<Row, String> {
    let cluster = runtimes
        .cluster
        .block_on(EmbeddedCluster::start(scenario, commit));
    let (stream, topic) = (cluster.stream, cluster.topic);
    let label = format!("{} {client} {scenario}", load.kind);
    let result = match client {
        ClientKind::Sdk => runtimes.clients.block_on(async {
            let clients = sdk::connect(
                &cluster.sdk_connection_string(load.sdk_nodelay),
                load.producers,
            )
            .await
            .map_err(|error| format!("SDK connect: {error}"))?;
            // Every client signed in once; any login after this is a session move.
            let before = cluster.counters();
            let line = ProgressLine::start(label, load);
            let measured = sdk::produce(clients, stream, topic, load, line.progress()).await;
            line.finish();
            let measurement = measured.map_err(|error| format!("SDK: {error}"))?;
            let after = cluster.counters();
            Ok(Row {
                load: load.kind,
                client,
                scenario,
                measurement,
                session_moves: after.logins - before.logins,
                refusals: after.refusals - before.refusals,
                refusals_source: RefusalSource::Cluster,
                stored_messages: None,
            })
        }),
        ClientKind::RouteTokio
        | ClientKind::RouteMio
        | ClientKind::RouteTokioProducer
        | ClientKind::RouteMioProducer => {
            let config = Config::from_connection_string(&cluster.connection_string())
                .map_err(|error| format!("connection string: {error}"))?;
            let before = cluster.counters();
            let mut row = run_route(runtimes, client, config, (stream, topic), load, label)?;
            let after = cluster.counters();
            // Data links sign in too, so logins are not moves here: the client counts
            // its own session moves. Refusals are the cluster's, as for the SDK.
            row.scenario = scenario;
            row.refusals = after.refusals - before.refusals;
            row.refusals_source = RefusalSource::Cluster;
            Ok(row)
        }
    };
    let stored = cluster.stored_messages();
    runtimes.cluster.block_on(cluster.shutdown());
    result.map(|row| Row {
        stored_messages: Some(stored),
        ..row
    })
}

/// Runs `client` against a real cluster at `config.seeds`, on topic [`TOPIC_NAME`] of
/// stream `stream_name` (created with [`PARTITIONS`] partitions when absent). The SDK
/// connects to the first seed, as an SDK user names one node.
pub fn run_external(
    runtimes: &Runtimes,
    client: ClientKind,
    config: Config,
    stream_name: &str,
    load: &Load,
) -> Result<Row, String> {
    // A tokio client does the admin calls and the stored counts for every client.
    let admin = runtimes.clients.block_on(async {
        let admin = iggy_route_tokio::Client::connect(config.clone())
            .await
            .map_err(|error| format!("connect: {error}"))?;
        let ids = route_tokio::ensure_topic(&admin, stream_name, TOPIC_NAME, PARTITIONS)
            .await
            .map_err(|error| format!("create {stream_name}/{TOPIC_NAME}: {error}"))?;
        Ok::<_, String>((admin, ids))
    });
    let (admin, (stream, topic)) = admin?;
    let stored_count = || {
        runtimes
            .clients
            .block_on(route_tokio::stored_messages(&config, stream, topic))
    };
    let stored_before = stored_count();
    let label = format!("{} {client} external", load.kind);
    let row = match client {
        ClientKind::Sdk => run_sdk_external(runtimes, &config, (stream, topic), load, label),
        ClientKind::RouteTokio
        | ClientKind::RouteMio
        | ClientKind::RouteTokioProducer
        | ClientKind::RouteMioProducer => run_route(
            runtimes,
            client,
            config.clone(),
            (stream, topic),
            load,
            label,
        ),
    };
    let stored_after = stored_count();
    runtimes.clients.block_on(admin.shutdown());
    let mut row = row?;
    row.stored_messages = stored_before
        .zip(stored_after)
        .map(|(before, after)| after.saturating_sub(before));
    Ok(row)
}

/// The SDK's producers against a real cluster: one `IggyClient` per producer on the first
/// seed. A real cluster exposes no counters, so session moves and refusals are not known.
fn run_sdk_external(
    runtimes: &Runtimes,
    config: &Config,
    (stream, topic): (u32, u32),
    load: &Load,
    label: String,
) -> Result<Row, String> {
    let Credentials::UserPassword { username, password } = &config.credentials else {
        return Err("the SDK run needs a username and password".to_owned());
    };
    let seed = config.seeds.first().ok_or("no seed")?;
    let nodelay = if load.sdk_nodelay {
        "?nodelay=true"
    } else {
        ""
    };
    let connection = format!("iggy://{username}:{}@{seed}{nodelay}", password.expose());
    runtimes.clients.block_on(async {
        let clients = sdk::connect(&connection, load.producers)
            .await
            .map_err(|error| format!("SDK connect: {error}"))?;
        let line = ProgressLine::start(label, load);
        let measured = sdk::produce(clients, stream, topic, load, line.progress()).await;
        line.finish();
        Ok(Row {
            load: load.kind,
            client: ClientKind::Sdk,
            scenario: Scenario::External,
            measurement: measured.map_err(|error| format!("SDK: {error}"))?,
            session_moves: 0,
            refusals: 0,
            refusals_source: RefusalSource::Unknown,
            stored_messages: None,
        })
    })
}

/// Connects an iggy-route client, runs the load, and reads its counters around it.
/// `scenario`, `stored_messages` and, for embedded clusters, `refusals` are filled in by
/// the caller.
fn run_route(
    runtimes: &Runtimes,
    client: ClientKind,
    config: Config,
    (stream, topic): (u32, u32),
    load: &Load,
    label: String,
) -> Result<Row, String> {
    let (stream, topic) = (Identifier::Numeric(stream), Identifier::Numeric(topic));
    let (measurement, before, after) = match client {
        ClientKind::RouteTokio | ClientKind::RouteTokioProducer => {
            runtimes.clients.block_on(async {
                let routed = iggy_route_tokio::Client::connect(config)
                    .await
                    .map_err(|error| format!("connect: {error}"))?;
                let before = routed.stats();
                let line = ProgressLine::start(label, load);
                let measurement = if client == ClientKind::RouteTokio {
                    Ok(route_tokio::produce(&routed, &stream, &topic, load, line.progress()).await)
                } else {
                    background_tokio::produce(&routed, &stream, &topic, load, line.progress()).await
                };
                line.finish();
                let after = routed.stats();
                routed.shutdown().await;
                Ok::<_, String>((measurement?, before, after))
            })?
        }
        ClientKind::RouteMio | ClientKind::RouteMioProducer => {
            let routed = iggy_route_mio::Client::connect(config)
                .map_err(|error| format!("connect: {error}"))?;
            let before = routed.stats();
            let line = ProgressLine::start(label, load);
            let measurement = if client == ClientKind::RouteMio {
                Ok(route_mio::produce(
                    &routed,
                    &stream,
                    &topic,
                    load,
                    &line.progress(),
                ))
            } else {
                background_mio::produce(&routed, &stream, &topic, load, &line.progress())
            };
            line.finish();
            let after = routed.stats();
            routed.shutdown();
            (measurement?, before, after)
        }
        ClientKind::Sdk => return Err("the SDK is not an iggy-route client".to_owned()),
    };
    Ok(Row {
        load: load.kind,
        client,
        scenario: Scenario::External,
        measurement,
        session_moves: after.session_moves - before.session_moves,
        refusals: after.refusals - before.refusals,
        refusals_source: RefusalSource::Client,
        stored_messages: None,
    })
}

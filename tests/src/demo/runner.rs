//! One run: a client, a scenario, the load, and the counters read around it.
//!
//! The cluster and the async clients run on separate tokio runtimes, so a client's tasks
//! never queue behind the cluster's (and the embedded cluster plays a server, not a
//! co-tenant of the client's executor).

use std::time::{Duration, Instant};

use iggy_route_core::wire::Identifier;
use iggy_route_core::{Config, Credentials};
use tokio::runtime::Runtime;

use super::failover::{FaultPlan, Recovery, Timed, play, split_layout};
use super::hiccup::{MachineLog, MachineMeter};
use super::load::ProgressLine;
use super::report::{RefusalSource, Row};
use super::topology::EmbeddedCluster;
use super::{ClientKind, Load, Scenario, TOPIC_NAME};
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

/// How the `moving` and `crash` scenarios move primaries.
#[derive(Debug, Clone, Copy)]
pub struct FaultSettings {
    /// `moving`: one partition's primary moves this often.
    pub move_every: Duration,
    /// `crash`: the node that stops.
    pub crash_node: usize,
    /// `crash` on the embedded cluster: how long after the stop its partitions move (the
    /// server's view change).
    pub view_change: Duration,
}

/// How long before a faulted run's clock starts its clients get to connect: the faults
/// and the producers then count from the same instant.
const FAULTED_RUN_LEAD: Duration = Duration::from_millis(500);

/// The plan of a faulted scenario on the embedded cluster (split layout at the start).
fn embedded_plan(scenario: Scenario, load: &Load, faults: &FaultSettings) -> Option<FaultPlan> {
    let mut primaries = split_layout();
    match scenario {
        Scenario::Moving => Some(FaultPlan::moving(
            load.duration,
            faults.move_every,
            &mut primaries,
        )),
        Scenario::Crash => Some(FaultPlan::crash(
            load.duration,
            faults.crash_node,
            Some(faults.view_change),
            &primaries,
        )),
        Scenario::Single | Scenario::Split | Scenario::External => None,
    }
}

/// Runs `client` in `scenario` on a fresh embedded cluster whose partition commits take
/// `commit` each; the `moving` and `crash` scenarios play their faults during the load.
pub fn run_embedded(
    runtimes: &Runtimes,
    client: ClientKind,
    scenario: Scenario,
    load: &Load,
    commit: Duration,
    faults: &FaultSettings,
) -> Result<Row, String> {
    let cluster = runtimes
        .cluster
        .block_on(EmbeddedCluster::start(scenario, commit, load.tls));
    let plan = embedded_plan(scenario, load, faults);
    let mut load = *load;
    if let Some(plan) = &plan {
        load.epoch = Some(Instant::now() + FAULTED_RUN_LEAD);
        load.outage = plan.outage();
    }
    let meter = MachineMeter::start();
    let (result, happened) = std::thread::scope(|scope| {
        let player = plan.as_ref().zip(load.epoch).map(|(plan, epoch)| {
            let (cluster, handle) = (&cluster, runtimes.cluster.handle());
            scope.spawn(move || play(epoch, plan, |fault| cluster.apply(handle, fault)))
        });
        let result = run_embedded_load(runtimes, client, scenario, &load, &cluster);
        // The player only panics on a bug in the demo.
        let happened = player.map(|player| {
            player
                .join()
                .unwrap_or_else(|_| panic!("fault player panicked"))
        });
        (result, happened)
    });
    let refusals = load
        .epoch
        .map(|epoch| cluster.refused_sends_since(epoch))
        .unwrap_or_default();
    let machine = meter.and_then(MachineMeter::stop);
    let stored = cluster.stored_messages();
    runtimes.cluster.block_on(cluster.shutdown());
    result.map(|row| {
        let row = with_recovery(row, happened, &refusals, Some(stored));
        with_machine(row, machine.as_ref())
    })
}

/// The row with what the machine did during its load (from the run's start to its
/// deadline), when the meter ran.
fn with_machine(row: Row, machine: Option<&MachineLog>) -> Row {
    let (from, to) = (row.measurement.started, row.measurement.deadline);
    Row {
        cpu_stolen: machine.and_then(|log| log.stolen(from, to)),
        hiccups: machine.and_then(|log| log.hiccups(from, to)),
        ..row
    }
}

/// The row with its stored count and, for a faulted run, the recovery of every partition
/// the faults hit.
fn with_recovery(
    row: Row,
    happened: Option<Vec<Timed>>,
    refusals: &[(Duration, u32)],
    stored: Option<u64>,
) -> Row {
    let recovery =
        happened.map(|faults| Recovery::measure(faults, refusals, &row.measurement.timeline));
    Row {
        stored_messages: stored,
        recovery,
        ..row
    }
}

fn run_embedded_load(
    runtimes: &Runtimes,
    client: ClientKind,
    scenario: Scenario,
    load: &Load,
    cluster: &EmbeddedCluster,
) -> Result<Row, String> {
    let (stream, topic) = (cluster.stream, cluster.topic);
    let label = format!("{} {client} {scenario}", load.kind);
    match client {
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
                recovery: None,
                planned: load.duration,
                on_real_cluster: false,
                cpu_stolen: None,
                hiccups: None,
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
    }
}

/// Which node leads each partition of the demo topic on a real cluster (created when
/// absent): one message is sent to each partition by id, and the node that admits it is
/// its primary (node `N` being the `N`th seed). The six messages are stored before the
/// run's stored count is read.
pub fn probe_primaries(
    runtimes: &Runtimes,
    config: &Config,
    stream_name: &str,
    partitions: u32,
) -> Result<Vec<usize>, String> {
    runtimes.clients.block_on(async {
        let client = iggy_route_tokio::Client::connect(config.clone())
            .await
            .map_err(|error| format!("connect: {error}"))?;
        let probed = async {
            let (stream, topic) =
                route_tokio::ensure_topic(&client, stream_name, TOPIC_NAME, partitions)
                    .await
                    .map_err(|error| format!("create {stream_name}/{TOPIC_NAME}: {error}"))?;
            let mut primaries = Vec::new();
            for partition in 0..partitions {
                let receipt = client
                    .send(
                        Identifier::Numeric(stream),
                        Identifier::Numeric(topic),
                        iggy_route_tokio::Partitioning::PartitionId(partition),
                        vec![iggy_route_tokio::Message {
                            payload: bytes::Bytes::from_static(b"probe"),
                            ..iggy_route_tokio::Message::default()
                        }],
                    )
                    .await
                    .map_err(|error| format!("probe partition {partition}: {error}"))?;
                primaries.push(receipt.node.0 as usize);
            }
            Ok(primaries)
        }
        .await;
        client.shutdown().await;
        probed
    })
}

/// [`run_external`] while `plan` is played with `apply` (a `crash` against a real
/// cluster, through its control command).
pub fn run_external_faulted(
    runtimes: &Runtimes,
    client: ClientKind,
    config: Config,
    stream_name: &str,
    load: &Load,
    plan: &FaultPlan,
    apply: &(dyn Fn(&super::failover::Fault) + Sync),
) -> Result<Row, String> {
    let mut load = *load;
    // A real cluster's clients connect in well under this, and so start with the faults.
    let epoch = Instant::now() + FAULTED_RUN_LEAD * 4;
    load.epoch = Some(epoch);
    load.outage = plan.outage();
    let (result, happened) = std::thread::scope(|scope| {
        let player = scope.spawn(move || play(epoch, plan, apply));
        let result = run_external(runtimes, client, config, stream_name, &load);
        // The player only panics on a bug in the demo (or a failing control command).
        let happened = player
            .join()
            .unwrap_or_else(|_| panic!("fault player panicked"));
        (result, happened)
    });
    result.map(|row| {
        let stored = row.stored_messages;
        let mut row = with_recovery(row, Some(happened), &[], stored);
        row.scenario = Scenario::Crash;
        row
    })
}

/// Runs `client` against a real cluster at `config.seeds`, on topic [`TOPIC_NAME`] of
/// stream `stream_name` (created with `load.partitions` partitions when absent). The SDK
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
        let ids = route_tokio::ensure_topic(&admin, stream_name, TOPIC_NAME, load.partitions)
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
    let meter = MachineMeter::start();
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
    row.on_real_cluster = true;
    let machine = meter.and_then(MachineMeter::stop);
    let mut row = with_machine(row, machine.as_ref());
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
            recovery: None,
            planned: load.duration,
            on_real_cluster: true,
            cpu_stolen: None,
            hiccups: None,
        })
    })
}

/// Connects an iggy-route client, runs the load, and reads its counters around it.
/// `scenario`, `stored_messages` and, for embedded clusters, `refusals` are filled in by
/// the caller.
fn run_route(
    runtimes: &Runtimes,
    client: ClientKind,
    mut config: Config,
    (stream, topic): (u32, u32),
    load: &Load,
    label: String,
) -> Result<Row, String> {
    config.follow_refusal_view = load.follow_refusal_view;
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
        recovery: None,
        planned: load.duration,
        on_real_cluster: false,
        cpu_stolen: None,
        hiccups: None,
    })
}

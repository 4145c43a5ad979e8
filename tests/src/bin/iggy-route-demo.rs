//! `iggy-route-demo`: the same producer loads through iggy-route (tokio and mio) and the
//! published SDK 0.11.0, with partition primaries on one node and split over three, side
//! by side. See `iggy_route_tests::demo`.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use iggy_route_core::{Config, Credentials};
use iggy_route_tests::demo::chart;
use iggy_route_tests::demo::failover::{self, Fault, FaultPlan};
use iggy_route_tests::demo::report::{self, RefusalSource, Row};
use iggy_route_tests::demo::runner::{self, FaultSettings, Runtimes};
use iggy_route_tests::demo::{
    ClientKind, Load, LoadKind, NODES, PARTITIONS, STREAM_NAME, Scenario, TOPIC_NAME,
};
use iggy_route_tests::real_cluster::{RealCluster, unique_name};
use iggy_route_tests::scripted::clients::Adapter;

/// Producer throughput and send latency of iggy-route versus the Iggy SDK 0.11.0 when
/// partition primaries are on one node and when they are split over nodes.
#[derive(Debug, Parser)]
#[command(name = "iggy-route-demo", version)]
struct Args {
    /// Duration of each run, in seconds (sends in flight at the end are waited for). 5 s
    /// by default (it was 10 s with one load): the default matrix is 12 runs (2 loads x 2
    /// scenarios x 3 clients), plus the SDK's stalled sends drained after its split runs.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Print one JSON object with every result as the last line of stdout.
    #[arg(long)]
    json: bool,
    /// Run the clients against this real cluster (`host:port,...`, node `N` being the `N`th)
    /// instead of the embedded one. The SDK connects to the first address.
    #[arg(long, value_name = "HOST:PORT,...")]
    cluster: Option<String>,
    /// Username for `--cluster`.
    #[arg(long, default_value = "iggy")]
    username: String,
    /// Password for `--cluster`.
    #[arg(long, default_value = "iggy")]
    password: String,
    /// With `--cluster`: the stream to run on (its topic `load` is created when absent).
    #[arg(long, default_value = STREAM_NAME)]
    stream: String,
    /// With `--cluster`: a command taking `kill N`, `start N` and `refusals` (such as
    /// `tests/real-cluster/cluster.sh`), node `N` being the `N`th address of
    /// `--cluster`. Refusals are then counted from the servers' logs, for every client.
    #[arg(long, value_name = "COMMAND")]
    ctl: Option<String>,
    /// With `--cluster` and `--ctl`: run on a new stream whose six partitions have their
    /// primaries on this many nodes (1 to 3), spread by killing and restarting nodes as
    /// ordinary failovers do (2 nodes: about 35 s; 3 nodes: about 2 minutes). With
    /// `--scenarios crash`, every client gets a stream spread afresh (a crash moves the
    /// stopped node's partitions for good), so each crash meets the same layout.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=3))]
    primary_nodes: Option<u8>,
    /// With `--cluster` and `--primary-nodes 1`: the new topic's partition count (six by
    /// default), such as one for a control run whose every send goes to one primary.
    #[arg(long, value_name = "N", default_value_t = PARTITIONS,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    partitions: u32,
    /// Clients to run, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [ClientKind::RouteTokio, ClientKind::RouteMio, ClientKind::RouteTokioProducer, ClientKind::RouteMioProducer, ClientKind::Sdk])]
    clients: Vec<ClientKind>,
    /// Loads to run, comma-separated: `batch100` sends 100 messages per call,
    /// `single-message` one. Each load runs every scenario with every client.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [LoadKind::Batch100, LoadKind::SingleMessage])]
    loads: Vec<LoadKind>,
    /// Scenarios to run, comma-separated. On the embedded cluster: all four by default.
    /// With `--cluster`: the cluster as it is (`external`) by default, or `crash` (needs
    /// `--ctl`; give `--seconds` of a minute or more: a real view change takes about 20 s).
    #[arg(long, value_enum, value_delimiter = ',')]
    scenarios: Vec<Scenario>,
    /// Duration of each `moving` and `crash` run on the embedded cluster, in seconds
    /// (longer than `--seconds`: each run should see several moves).
    #[arg(long, default_value_t = 10.0)]
    failover_seconds: f64,
    /// `moving`: one partition's primary moves to the next node this often.
    #[arg(long, value_name = "MS", default_value_t = 1_000)]
    move_every_ms: u64,
    /// `crash`: the node that stops a quarter into the run and comes back three quarters
    /// in (node 0 holds the clients' sessions). On a real cluster, when an earlier run's
    /// crash moved its partitions away, the node other than the first seed that leads the
    /// most is stopped instead.
    #[arg(long, value_name = "N", default_value_t = 1)]
    crash_node: usize,
    /// `crash` on the embedded cluster: how long after the stop the node's partitions move
    /// to the next node (the server's view change).
    #[arg(long, value_name = "MS", default_value_t = 1_000)]
    view_change_ms: u64,
    /// Make iggy-route ignore the view a refusal carries (`Config::follow_refusal_view`
    /// off): after a move it then looks the route up (or tries the next node) before
    /// writing again, one round trip more. For measuring what following the view saves.
    #[arg(long)]
    ignore_refusal_view: bool,
    /// Where `results.json` (the JSON of `--json`) and the failover charts are written.
    #[arg(long, value_name = "DIR", default_value = "target/iggy-route-demo")]
    out: std::path::PathBuf,
    /// Keep the SDK's default `nodelay=false` (Nagle on: ~40 ms per send on loopback).
    #[arg(long)]
    sdk_nagle: bool,
    /// The embedded cluster serves TLS only (a certificate for `localhost` made at start)
    /// and every client, the SDK's included, connects with TLS trusting its CA
    /// (`tls=true&tls_domain=localhost&tls_ca_file=...`). Run once with and once without to
    /// see what TLS costs per send.
    #[arg(long)]
    tls: bool,
    /// On the embedded cluster: every commit of a partition write takes N ms before its
    /// reply (0: at once), as a slow disk or a distant replica would make it. Only the
    /// connection that sent it waits; the node goes on answering the others.
    #[arg(long, value_name = "N", default_value_t = 0)]
    slow_commit_ms: u64,
    /// Concurrent producers per client.
    #[arg(long, default_value_t = 12)]
    producers: usize,
    /// For the `*-producer` clients: messages each producer keeps sent and not yet
    /// acknowledged before it waits for its oldest call (an application bounds what it
    /// holds). Latency grows with it; with a slow commit, throughput does too. Default: 1,000
    /// for `batch100`, 500 for `single-message`.
    #[arg(long, value_name = "MESSAGES")]
    producer_window: Option<usize>,
    /// Offer this many messages per second, all producers together, evenly paced, instead
    /// of sending as fast as answers come: shows whether a client keeps a rate through
    /// moves and crashes (its lowest second against its median), where an unpaced run
    /// shows what this machine can carry, noise included. A send's latency counts from its
    /// place in the schedule, so a stall also counts in the sends queued behind it.
    #[arg(long, value_name = "MSG_PER_S", value_parser = clap::value_parser!(u64).range(1..))]
    rate: Option<u64>,
}

/// How long a real cluster's restarted node takes to rejoin (see
/// `docs/real-cluster.md`).
const REJOIN_WAIT: Duration = Duration::from_secs(15);

fn main() -> ExitCode {
    let args = Args::parse();
    let positive = |seconds: f64| seconds > 0.0 && seconds.is_finite();
    if !positive(args.seconds) || !positive(args.failover_seconds) || args.producers == 0 {
        eprintln!("--seconds and --failover-seconds must be positive, --producers at least 1");
        return ExitCode::FAILURE;
    }
    if args.cluster.is_some() && args.tls {
        // The real cluster's TLS settings (its certificate's name and CA) are its own.
        eprintln!("--tls applies to the embedded cluster, not to --cluster");
        return ExitCode::FAILURE;
    }
    if args.partitions != PARTITIONS && (args.cluster.is_none() || args.primary_nodes != Some(1)) {
        // Only a new stream on one node can have another count: spreading makes six, and
        // the embedded cluster's scenarios are laid out for six.
        eprintln!("--partitions needs --cluster and --primary-nodes 1");
        return ExitCode::FAILURE;
    }
    if args.cluster.is_some() && args.slow_commit_ms > 0 {
        // A real cluster commits at its own pace: the figure would be a false label.
        eprintln!("--slow-commit-ms applies to the embedded cluster, not to --cluster");
        return ExitCode::FAILURE;
    }
    // The settings every load shares; each run takes one with its own kind.
    let load = Load {
        kind: LoadKind::Batch100,
        producers: args.producers,
        partitions: args.partitions,
        payload_bytes: 100,
        duration: Duration::from_secs_f64(args.seconds),
        drain_grace: Duration::from_secs(30),
        sdk_nodelay: !args.sdk_nagle,
        producer_window: args.producer_window,
        epoch: None,
        outage: None,
        follow_refusal_view: !args.ignore_refusal_view,
        tls: args.tls,
        rate: args.rate,
    };
    if args
        .loads
        .iter()
        .any(|&kind| !Load { kind, ..load }.pace_is_measurable())
    {
        eprintln!("--rate is too high to pace: under 1 µs between two sends of one producer");
        return ExitCode::FAILURE;
    }
    if args.crash_node >= NODES && args.cluster.is_none() {
        eprintln!("--crash-node must be a node of the {NODES}-node embedded cluster");
        return ExitCode::FAILURE;
    }
    let runtimes = match Runtimes::new(2) {
        Ok(runtimes) => runtimes,
        Err(error) => {
            eprintln!("cannot start the tokio runtimes: {error}");
            return ExitCode::FAILURE;
        }
    };
    let rows = match &args.cluster {
        Some(cluster) => run_external(&runtimes, &args, cluster, &load),
        None => run_embedded(&runtimes, &args, &load),
    };
    println!();
    print!("{}", report::table(&rows));
    let failover = report::failover_table(&rows);
    if !failover.is_empty() {
        println!();
        print!("{failover}");
    }
    if rows
        .iter()
        .any(|row| row.refusals_source == RefusalSource::Client)
    {
        println!("* refusals counted by the client (a real cluster exposes no refusal counter)");
    }
    if rows.iter().any(|row| row.scenario == Scenario::External) {
        println!(
            "n/a: not observable on a real cluster (the SDK counts no session moves; refusals \
             need --ctl to read the servers' logs)"
        );
    }
    for warning in report::warnings(&rows) {
        println!("{warning}");
    }
    let slow_commit_ms = args.cluster.is_none().then_some(args.slow_commit_ms);
    let json = report::json(&rows, slow_commit_ms, args.tls, args.rate);
    write_results(&args.out, &json, &rows);
    if args.json {
        println!("{json}");
    }
    if rows.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Writes `results.json` and a chart per load and faulted scenario into `out`, and says
/// where; a failure to write is reported, not fatal (the table is already printed).
fn write_results(out: &Path, json: &str, rows: &[Row]) {
    if let Err(error) = std::fs::create_dir_all(out) {
        eprintln!("cannot create {}: {error}", out.display());
        return;
    }
    let results = out.join("results.json");
    match std::fs::write(&results, format!("{json}\n")) {
        Ok(()) => println!("results: {}", results.display()),
        Err(error) => eprintln!("cannot write {}: {error}", results.display()),
    }
    let mut groups: Vec<(LoadKind, Scenario, bool)> = rows
        .iter()
        .filter(|row| row.recovery.is_some() || row.on_real_cluster)
        .map(|row| (row.load, row.scenario, row.recovery.is_some()))
        .collect();
    groups.dedup();
    for (load, scenario, faulted) in groups {
        let group: Vec<&Row> = rows
            .iter()
            .filter(|row| {
                row.load == load && row.scenario == scenario && row.recovery.is_some() == faulted
            })
            .collect();
        let title = format!("{scenario}: {load}, throughput per 100 ms");
        let (path, drawn) = if faulted {
            let path = out.join(format!("failover-{load}-{scenario}.svg"));
            let drawn = chart::write(&path, &title, &group);
            (path, drawn)
        } else {
            // A real cluster's layout as it is: the throughput alone.
            let path = out.join(format!("throughput-{load}-{scenario}.svg"));
            let drawn = chart::write_throughput(&path, &title, &group);
            (path, drawn)
        };
        match drawn {
            Ok(()) => println!("chart: {}", path.display()),
            Err(error) => eprintln!("cannot draw the chart: {error}"),
        }
    }
}

/// A control command that failed is said on stderr; the run goes on (its row shows what
/// the clients made of it).
fn report_ctl(result: Result<(), String>) {
    if let Err(error) = result {
        eprintln!("control command failed: {error}");
    }
}

/// `300000 msg/s offered, paced` or `unpaced (each producer as fast as it is answered)`.
fn describe_rate(rate: Option<u64>) -> String {
    rate.map_or_else(
        || "unpaced (each producer as fast as it is answered)".to_owned(),
        |rate| format!("{rate} msg/s offered, paced"),
    )
}

/// `batch100 (100 messages per send), single-message (1 message per send)`.
fn describe_loads(loads: &[LoadKind]) -> String {
    let described: Vec<String> = loads
        .iter()
        .map(|kind| {
            let count = kind.messages_per_send();
            let plural = if count == 1 { "" } else { "s" };
            format!("{kind} ({count} message{plural} per send)")
        })
        .collect();
    described.join(", ")
}

fn run_embedded(runtimes: &Runtimes, args: &Args, load: &Load) -> Vec<Row> {
    println!(
        "iggy-route demo: {NODES}-node loopback cluster, topic of {PARTITIONS} partitions, \
         loads {}, {} producers, messages of {} B, {:.1} s per run ({:.1} s with faults: a \
         move every {} ms; node {} crashing, its partitions moving {} ms later), fresh cluster \
         per run, slow commit {} ms; producer window {} messages; {}; SDK with nodelay={}; {}",
        describe_loads(&args.loads),
        load.producers,
        load.payload_bytes,
        load.duration.as_secs_f64(),
        args.failover_seconds,
        args.move_every_ms,
        args.crash_node,
        args.view_change_ms,
        args.slow_commit_ms,
        load.producer_window.map_or_else(
            || "1,000 (batch100) / 500 (single-message)".to_owned(),
            |w| w.to_string()
        ),
        describe_rate(load.rate),
        load.sdk_nodelay,
        if load.tls {
            "every client over TLS (rustls, ring)"
        } else {
            "plaintext"
        }
    );
    let commit = Duration::from_millis(args.slow_commit_ms);
    let faults = FaultSettings {
        move_every: Duration::from_millis(args.move_every_ms),
        crash_node: args.crash_node,
        view_change: Duration::from_millis(args.view_change_ms),
    };
    let scenarios = if args.scenarios.is_empty() {
        vec![
            Scenario::Single,
            Scenario::Split,
            Scenario::Moving,
            Scenario::Crash,
        ]
    } else {
        args.scenarios.clone()
    };
    let mut rows = Vec::new();
    for &kind in &args.loads {
        let load = Load { kind, ..*load };
        for &scenario in &scenarios {
            if scenario == Scenario::External {
                eprintln!("scenario external needs --cluster; skipped");
                continue;
            }
            let load = if scenario.has_faults() {
                Load {
                    duration: Duration::from_secs_f64(args.failover_seconds),
                    ..load
                }
            } else {
                load
            };
            for &client in &args.clients {
                match runner::run_embedded(runtimes, client, scenario, &load, commit, &faults) {
                    Ok(row) => rows.push(row),
                    Err(error) => eprintln!("{kind} {client} {scenario}: run failed: {error}"),
                }
            }
        }
    }
    rows
}

fn run_external(runtimes: &Runtimes, args: &Args, cluster: &str, load: &Load) -> Vec<Row> {
    let seeds: Vec<String> = cluster
        .split(',')
        .map(str::trim)
        .filter(|seed| !seed.is_empty())
        .map(str::to_owned)
        .collect();
    let credentials = match Credentials::user(args.username.as_str(), args.password.as_str()) {
        Ok(credentials) => credentials,
        Err(error) => {
            eprintln!("invalid credentials: {error}");
            return Vec::new();
        }
    };
    let real = RealCluster::new(
        seeds.clone(),
        args.username.clone(),
        args.password.clone(),
        args.ctl.clone(),
    );
    let crash = args.scenarios.contains(&Scenario::Crash);
    if crash && !real.has_ctl() {
        eprintln!("--scenarios crash with --cluster needs --ctl");
        return Vec::new();
    }
    if args.primary_nodes.is_some() && !real.has_ctl() {
        eprintln!("--primary-nodes needs --ctl");
        return Vec::new();
    }
    // A new stream with its primaries spread over `nodes` nodes. Its coordinator is the
    // last node, which the spreading never restarts.
    let spread = |nodes: u8| {
        let stream = unique_name(&format!("{}-{nodes}n", args.stream));
        println!("spreading the primaries of {stream}/{TOPIC_NAME} over {nodes} node(s)...");
        let admin = real.client(Adapter::Tokio, seeds.len().saturating_sub(1));
        real.spread_partitions(
            &admin,
            &stream,
            TOPIC_NAME,
            usize::from(nodes),
            args.partitions,
        );
        admin.shutdown();
        stream
    };
    // A crash moves the stopped node's partitions for good, so with `--primary-nodes` every
    // client's crash starts from a stream spread afresh: each meets the same layout.
    let respread = crash && args.primary_nodes.is_some();
    let mut stream = match args.primary_nodes {
        Some(nodes) if !respread => spread(nodes),
        Some(_) | None => args.stream.clone(),
    };
    let layout = if respread {
        "each client's run on a stream of its own, spread afresh".to_owned()
    } else {
        format!("stream {stream}, on the cluster's current primaries")
    };
    println!(
        "iggy-route demo against {cluster}, {layout}: loads {}, {} producers, {}, \
         messages of {} B, {:.1} s per run",
        describe_loads(&args.loads),
        load.producers,
        describe_rate(load.rate),
        load.payload_bytes,
        load.duration.as_secs_f64()
    );
    let mut rows = Vec::new();
    for &kind in &args.loads {
        let load = Load { kind, ..*load };
        for &client in &args.clients {
            if let (true, Some(nodes)) = (respread, args.primary_nodes) {
                stream = spread(nodes);
            }
            let config = Config::new(seeds.clone(), credentials.clone());
            let refusals_before = real.refusals();
            let run = if crash {
                let primaries =
                    match runner::probe_primaries(runtimes, &config, &stream, load.partitions) {
                        Ok(primaries) => primaries,
                        Err(error) => {
                            eprintln!("{kind} {client} crash: cannot find the primaries: {error}");
                            continue;
                        }
                    };
                let node = failover::crash_target(args.crash_node, 0, &primaries);
                println!("primaries before the crash of node {node}: {primaries:?}");
                let plan = FaultPlan::crash(load.duration, node, None, &primaries);
                let apply = |fault: &Fault| match fault {
                    Fault::Crash { node, .. } => report_ctl(real.try_ctl("kill", *node)),
                    Fault::Restart { node } => report_ctl(real.try_ctl("start", *node)),
                    Fault::Move { .. } | Fault::ViewChange { .. } => {}
                };
                runner::run_external_faulted(
                    runtimes, client, config, &stream, &load, &plan, &apply,
                )
            } else {
                runner::run_external(runtimes, client, config, &stream, &load)
            };
            match run {
                Ok(mut row) => {
                    if let (Some(before), Some(after)) = (refusals_before, real.refusals()) {
                        row.refusals = after.saturating_sub(before);
                        row.refusals_source = RefusalSource::Cluster;
                    }
                    rows.push(row);
                }
                Err(error) => eprintln!("{kind} {client} external: run failed: {error}"),
            }
            if crash {
                // The restarted node rejoins before the next client's run starts.
                println!(
                    "waiting {} s for the restarted node to rejoin...",
                    REJOIN_WAIT.as_secs()
                );
                std::thread::sleep(REJOIN_WAIT);
            }
        }
    }
    rows
}

//! A nemesis on a real Iggy cluster (`tests/real_nemesis.rs`): both adapters carry a mixed
//! load (`load.rs`) while faults drawn from a seed kill, pause and restart the nodes
//! (`faults.rs`, `injector.rs`); then the cluster is made whole, every partition is read back from its
//! primary (`readback.rs`) and a checker holds the run to the clients' promises
//! (`checker.rs`, `check_consumers.rs`). The report is printed and written as JSON, with a
//! throughput chart whose lines mark the faults, under `target/nemesis/` (`report.rs`).
//!
//! Environment, besides the real cluster's (`crate::real_cluster`; the control command must
//! also take `pause N` and `resume N`, as `tests/real-cluster/cluster.sh` does):
//! - `IGGY_ROUTE_NEMESIS_SECS`: the length of the load, in seconds (600 by default);
//! - `IGGY_ROUTE_NEMESIS_SEED`: the seed of every random choice (drawn when unset, and
//!   always printed first). Which node holds a role when a fault is drawn, and how long a
//!   node takes to start, come from the cluster: a replay makes the same draws, and hits
//!   the same nodes as far as the cluster puts its roles where it did before.

pub mod check_consumers;
pub mod checker;
pub mod faults;
pub mod injector;
pub mod ledger;
pub mod ledger_consumers;
pub mod load;
pub mod load_mio;
pub mod load_tokio;
pub mod readback;
pub mod recovery;
pub mod report;
pub mod report_json;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use iggy_route_core::Config;
use iggy_route_core::client::{Call, ClientError};

use self::checker::Findings;
use self::injector::Nemesis;
use self::ledger::Ledger;
use self::load::{Load, REQUEST_TIMEOUT};
use crate::real_cluster::{RealCluster, create_stream, create_topic, unique_name};
use crate::scripted::clients::{Adapter, TestClient};
use crate::sim::rng::SimRng;

/// Partitions of the run's topic.
const PARTITIONS: u32 = 6;
/// How long the load's tasks have to end once told to: a producer's shutdown settles every
/// call it holds (calls buffered behind a partition that takes no sends wait their turn:
/// `load::background_bound`), a member commits and leaves.
const FINISH_LIMIT: Duration = Duration::from_secs(600);
/// The same, once the server did not recover a partition after a fault.
const UNRECOVERED_FINISH_LIMIT: Duration = Duration::from_secs(90);

/// The run's length and seed.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Length of the load, in seconds.
    pub seconds: u64,
    /// The seed.
    pub seed: u64,
    /// Whether the seed was drawn (not given).
    pub drawn: bool,
    /// Where the test writes the clients' log (INFO and up), if it does: an ERROR line
    /// there is a violation (this project logs `error!` only for its own bugs).
    pub client_log: Option<std::path::PathBuf>,
}

impl Settings {
    /// From `IGGY_ROUTE_NEMESIS_SECS` and `IGGY_ROUTE_NEMESIS_SEED`.
    pub fn from_env() -> Result<Settings, String> {
        let read = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|value| !value.trim().is_empty())
                .map(|value| {
                    value
                        .trim()
                        .parse::<u64>()
                        .map_err(|error| format!("{name}={value}: {error}"))
                })
                .transpose()
        };
        let seconds = read("IGGY_ROUTE_NEMESIS_SECS")?.unwrap_or(600);
        let (seed, drawn) = match read("IGGY_ROUTE_NEMESIS_SEED")? {
            Some(seed) => (seed, false),
            None => (drawn_seed(), true),
        };
        Ok(Settings {
            seconds,
            seed,
            drawn,
            client_log: None,
        })
    }
}

/// A seed from the clock and the process id.
fn drawn_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    let mixed = (nanos as u64) ^ (u64::from(std::process::id()) << 32);
    SimRng::new(mixed, 0).next_u64() % 1_000_000_000
}

/// Runs the nemesis on `cluster`; the findings, or why the run could not be made.
pub fn run(cluster: &RealCluster, settings: &Settings) -> Result<Findings, String> {
    let nodes = cluster.nodes.len();
    if nodes < 3 {
        return Err(format!("a nemesis needs 3 nodes, not {nodes}"));
    }
    let coordinator = SimRng::new(settings.seed, 3).index(nodes);
    let config = |node: usize| -> Config {
        let mut config = cluster.config(node);
        config.request_timeout = REQUEST_TIMEOUT;
        config
    };
    let stream = unique_name("nemesis");
    let (topic, group) = ("events".to_owned(), "nemesis-group".to_owned());
    setup(&config(coordinator), &stream, &topic, &group)?;
    let refusals_before = cluster.refusals();
    let ledger = Arc::new(Ledger::new(settings.seed));
    let load = Load {
        stream,
        topic,
        group,
        partitions: PARTITIONS,
        ledger: Arc::clone(&ledger),
        stop: Arc::new(AtomicBool::new(false)),
        seed: settings.seed,
    };
    let run = Duration::from_secs(settings.seconds);
    println!(
        "real_nemesis: stream {}, {} partitions, {} s of load; the main clients' sessions on \
         node {coordinator}",
        load.stream, PARTITIONS, settings.seconds
    );
    let tokio_members = [(coordinator + 1) % nodes, (coordinator + 2) % nodes];
    let tokio = load_tokio::start(&load, &config, coordinator, &tokio_members)?;
    let mio_members = [coordinator, (coordinator + 1) % nodes];
    let mio = load_mio::start(&load, &config, coordinator, &mio_members)?;
    let observer = {
        let mut observer = config((coordinator + 2) % nodes);
        // Only to read where the metadata leader is: a slow answer is no answer.
        observer.request_timeout = Duration::from_secs(5);
        TestClient::connect(Adapter::Tokio, observer).ok()
    };
    let shape = (run, PARTITIONS);
    let nemesis = Nemesis::new(
        cluster,
        &ledger,
        settings.seed,
        shape,
        coordinator,
        observer,
    );
    let faults = nemesis.run(&|| tokio.main_session_moves());
    load.stop.store(true, Ordering::Relaxed);
    let load_end = ledger.now();
    println!(
        "real_nemesis: load stopped at {:.1} s; waiting for it to end",
        load_end.as_secs_f64()
    );
    // A cluster the server did not recover holds the producers' batches for as long as
    // they have calls: waiting would prove nothing. Their clients are then shut down
    // after a short wait, and what that cuts short is counted apart.
    let unrecovered = faults.iter().any(|fault| !fault.unrecovered.is_empty());
    let limit = if unrecovered {
        UNRECOVERED_FINISH_LIMIT
    } else {
        FINISH_LIMIT
    };
    let (mut problems, mut stats) = tokio.finish(limit);
    let (mio_problems, mio_stats) = mio.finish(limit);
    problems.extend(mio_problems);
    stats.extend(mio_stats);
    if unrecovered {
        for problem in &mut problems {
            *problem = format!("server: {problem} (the server did not recover the cluster)");
        }
    }
    problems.extend(readback::make_whole(cluster));
    let readback = readback::settle_and_read(&load, &config, nodes);
    let refusals_after = cluster.refusals();
    let records = ledger.take();
    let mut findings = checker::check(&records, &readback, &faults, &stats, load_end);
    findings.violations.extend(problems);
    if let Some(log) = &settings.client_log {
        findings.violations.extend(error_lines(log));
    }
    report::Report {
        settings,
        coordinator,
        stream: &load.stream,
        load_end,
        faults: &faults,
        findings: &findings,
        records: &records,
        readback: &readback,
        stats: &stats,
        refusals: (refusals_before, refusals_after),
        start_wall: ledger.start_wall(),
    }
    .publish();
    Ok(findings)
}

/// Creates the run's stream, its topic and its consumer group.
fn setup(config: &Config, stream: &str, topic: &str, group: &str) -> Result<(), String> {
    let client = TestClient::connect(Adapter::Tokio, config.clone())
        .map_err(|error| format!("setup client: {error}"))?;
    let made = (|| -> Result<(), ClientError> {
        client.request(create_stream(stream))?;
        client.request(create_topic(stream, topic, PARTITIONS))?;
        let Call { request, reply } = Call::create_consumer_group(stream, topic, group)?;
        reply.extract(client.request(request)?)?;
        Ok(())
    })();
    client.shutdown();
    made.map_err(|error| format!("setup of {stream}: {error}"))
}

/// The ERROR lines of the clients' log, as violations (the first few in full).
fn error_lines(log: &std::path::Path) -> Vec<String> {
    let text = match std::fs::read_to_string(log) {
        Ok(text) => text,
        Err(error) => return vec![format!("client log {}: {error}", log.display())],
    };
    let errors: Vec<&str> = text
        .lines()
        .filter(|line| line.contains(" ERROR "))
        .collect();
    let mut violations: Vec<String> = errors
        .iter()
        .take(5)
        .map(|line| format!("client log: {line}"))
        .collect();
    if errors.len() > 5 {
        violations.push(format!("client log: {} ERROR lines in all", errors.len()));
    }
    violations
}

//! A nemesis on the real 3-node cluster: see `iggy_route_tests::nemesis` for what it does
//! and the environment it reads. Without `IGGY_ROUTE_REAL_CLUSTER` and
//! `IGGY_ROUTE_REAL_CLUSTER_CTL` it prints that it was skipped and passes.

use std::path::Path;
use std::sync::Mutex;

use iggy_route_tests::nemesis::{self, Settings};
use iggy_route_tests::real_cluster::RealCluster;

#[test]
fn a_nemesis_on_the_real_cluster_breaks_no_promise() {
    let Some(cluster) = RealCluster::with_ctl_from_env("real_nemesis") else {
        return;
    };
    let mut settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(error) => panic!("real_nemesis: {error}"),
    };
    // First, so that a run that goes wrong can be replayed.
    println!(
        "real_nemesis: seed {} (IGGY_ROUTE_NEMESIS_SEED={} replays it), {} s",
        settings.seed, settings.seed, settings.seconds
    );
    // The clients' own account of the run, by the wall clock (as the servers' logs are),
    // next to the report.
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/nemesis");
    let log = directory.join(format!(
        "nemesis-{}-{}s-client.log",
        settings.seed, settings.seconds
    ));
    match std::fs::create_dir_all(&directory).and_then(|()| std::fs::File::create(&log)) {
        Ok(file) => {
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::INFO)
                .with_ansi(false)
                .with_thread_names(true)
                .with_writer(Mutex::new(file))
                .init();
            println!("real_nemesis: the clients log to {}", log.display());
            settings.client_log = Some(log);
        }
        Err(error) => println!("real_nemesis: no client log at {}: {error}", log.display()),
    }
    let findings = match nemesis::run(&cluster, &settings) {
        Ok(findings) => findings,
        Err(error) => panic!("real_nemesis (seed {}): {error}", settings.seed),
    };
    assert!(
        findings.violations.is_empty(),
        "real_nemesis (seed {}): {} violations, the first: {:?}",
        settings.seed,
        findings.violations.len(),
        findings.violations.first()
    );
}

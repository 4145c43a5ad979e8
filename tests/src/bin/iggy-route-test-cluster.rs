//! `iggy-route-test-cluster`: the loopback test cluster on 127.0.0.1, to run the examples,
//! your own program or the SDK 0.11.0 against. See `iggy_route_tests::try_cluster`.
//!
//! ```text
//! cargo run --release -p iggy-route-tests --bin iggy-route-test-cluster -- --nodes 3 --split
//! ```

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use iggy_route_tests::try_cluster::{Args, TryCluster};

/// What a bad argument exits with, as clap's own errors do.
const USAGE_ERROR: u8 = 2;

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(error) = args.validate() {
        eprintln!("iggy-route-test-cluster: {error}");
        return ExitCode::from(USAGE_ERROR);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("iggy-route-test-cluster: cannot start the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(&args))
}

async fn run(args: &Args) -> ExitCode {
    let cluster = match TryCluster::start(args).await {
        Ok(cluster) => cluster,
        Err(error) => {
            eprintln!("iggy-route-test-cluster: {error}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", cluster.describe());
    match args.seconds {
        Some(seconds) => println!("running for {seconds} s (or until Ctrl-C)"),
        None => println!("running until Ctrl-C"),
    }
    // Whoever reads the connection string through a pipe sees it now, not at exit.
    let _ = std::io::stdout().flush();
    let time_up = async {
        match args.seconds {
            Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
            // Running until Ctrl-C is what a user asks for without `--seconds`.
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        signal = tokio::signal::ctrl_c() => {
            if let Err(error) = signal {
                eprintln!("iggy-route-test-cluster: cannot wait for Ctrl-C ({error}); stopping");
            }
        }
        () = time_up => {}
    }
    cluster.shutdown().await;
    println!("stopped");
    ExitCode::SUCCESS
}

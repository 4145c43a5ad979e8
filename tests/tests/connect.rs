//! `Client::connect` of both adapters: it returns once the session signed in (without any
//! probe request), fails at once with the server's reason when the credentials are refused,
//! and fails with `ConnectTimedOut` when no node answers.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use iggy_route_core::client::ClientError;
use iggy_route_core::wire::ErrorCode;
use iggy_route_core::{Config, RequestError};
use iggy_route_tests::cluster::TestCluster;

fn config(cluster: &TestCluster, password: &str) -> Config {
    let seeds = cluster
        .addrs()
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>();
    let mut config =
        Config::from_connection_string(&format!("iggy://iggy:{password}@{}", seeds.join(",")))
            .unwrap();
    config.connect_timeout = Duration::from_millis(300);
    config
}

fn requests_seen(cluster: &TestCluster) -> u64 {
    (0..cluster.node_count())
        .map(|node| cluster.stats(node).requests_by_code.values().sum::<u64>())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_returns_once_signed_in_without_a_probe_request() {
    iggy_route_tests::error_events::install();
    let cluster = TestCluster::start(3).await;
    let client = iggy_route_tokio::Client::connect(config(&cluster, "iggy"))
        .await
        .unwrap();
    // Only the session's own exchanges: its login and its roster read.
    assert!(
        requests_seen(&cluster) <= 2,
        "{:?}",
        cluster.stats(0).requests_by_code
    );
    assert_eq!(
        cluster
            .stats(0)
            .requests(iggy_route_core::wire::code::GET_STREAM),
        0
    );
    client.shutdown().await;

    let config = config(&cluster, "iggy");
    let blocking = tokio::task::spawn_blocking(move || iggy_route_mio::Client::connect(config))
        .await
        .unwrap()
        .unwrap();
    blocking.shutdown();
    cluster.shutdown().await;
    iggy_route_tests::error_events::assert_none();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_fail_connect_at_once_with_the_servers_reason() {
    iggy_route_tests::error_events::install();
    let cluster = TestCluster::start(2).await;
    let started = Instant::now();
    let error = iggy_route_tokio::Client::connect(config(&cluster, "wrong-password"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ClientError::Request(RequestError::SignIn {
                code: ErrorCode::InvalidCredentials
            })
        ),
        "{error:?}"
    );
    let config = config(&cluster, "wrong-password");
    let error = tokio::task::spawn_blocking(move || iggy_route_mio::Client::connect(config))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(
            error,
            ClientError::Request(RequestError::SignIn {
                code: ErrorCode::InvalidCredentials
            })
        ),
        "{error:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(!format!("{error:?} {error}").contains("wrong-password"));
    cluster.shutdown().await;
    iggy_route_tests::error_events::assert_none();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_times_out_when_no_node_answers() {
    iggy_route_tests::error_events::install();
    let cluster = TestCluster::start(1).await;
    let config = config(&cluster, "iggy");
    cluster.stop_node(0).await;
    let error = iggy_route_tokio::Client::connect(config).await.unwrap_err();
    assert!(
        matches!(error, ClientError::ConnectTimedOut { .. }),
        "{error:?}"
    );
    cluster.shutdown().await;
    iggy_route_tests::error_events::assert_none();
}

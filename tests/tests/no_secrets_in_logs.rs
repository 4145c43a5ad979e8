//! No credential ever reaches a log line, at any level: both adapters run a whole session
//! (sign-in on every link, sends, a refused sign-in, a connection string with an error)
//! under a TRACE subscriber that keeps every line, spans and fields included, and the
//! password and token appear in none of them.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use iggy_route_core::wire::Message;
use iggy_route_core::{Config, Credentials};
use iggy_route_tests::cluster::TestCluster;

const PASSWORD: &str = "Pw-s3cret-77e1";
const WRONG_PASSWORD: &str = "Pw-wr0ng-91c4";
const TOKEN: &str = "pat-t0ken-5b2f";

#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn config(cluster: &TestCluster, password: &str) -> Config {
    let seeds: Vec<String> = cluster.addrs().iter().map(ToString::to_string).collect();
    let mut config = Config::new(seeds, Credentials::user("auditor", password).unwrap());
    config.connect_timeout = Duration::from_millis(300);
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_reaches_a_trace_line() {
    let lines = Lines::default();
    let writer = lines.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    let cluster = TestCluster::start(3).await;
    cluster.with_state(|state| state.add_user("auditor", PASSWORD));

    let client = iggy_route_tokio::Client::connect(config(&cluster, PASSWORD))
        .await
        .unwrap();
    let stream = client.create_stream("logs").await.unwrap();
    let topic = client.create_topic("logs", "t", 2).await.unwrap();
    // Split primaries: data links to two nodes, each with its own sign-in.
    assert!(cluster.set_primary(stream.id, topic.summary.id, 1, 1));
    for partition in 0..2 {
        let message = Message {
            payload: "hello".into(),
            ..Message::default()
        };
        let key = iggy_route_core::partitioning::Partitioning::PartitionId(partition);
        client.send("logs", "t", key, vec![message]).await.unwrap();
    }
    client.shutdown().await;

    let refused = iggy_route_tokio::Client::connect(config(&cluster, WRONG_PASSWORD)).await;
    assert!(refused.is_err());

    let blocking_config = config(&cluster, PASSWORD);
    let blocking = tokio::task::spawn_blocking(move || {
        let client = iggy_route_mio::Client::connect(blocking_config).unwrap();
        let message = Message {
            payload: "hello".into(),
            ..Message::default()
        };
        let key = iggy_route_core::partitioning::Partitioning::PartitionId(1);
        client.send("logs", "t", key, vec![message]).unwrap();
        client.shutdown();
    });
    blocking.await.unwrap();

    let mut token_config = config(&cluster, PASSWORD);
    token_config.credentials =
        Credentials::PersonalAccessToken(iggy_route_core::wire::Password::new(TOKEN).unwrap());
    let _ = iggy_route_tokio::Client::connect(token_config).await;
    let _ = Config::from_connection_string(&format!("iggy://iggy:{PASSWORD}@nowhere"));
    cluster.shutdown().await;

    let logged = String::from_utf8_lossy(&lines.0.lock().unwrap()).into_owned();
    assert!(
        logged.lines().count() > 20,
        "the subscriber saw too little to prove anything:\n{logged}"
    );
    for secret in [PASSWORD, WRONG_PASSWORD, TOKEN] {
        let leaked: Vec<&str> = logged.lines().filter(|l| l.contains(secret)).collect();
        assert!(leaked.is_empty(), "{secret} was logged: {leaked:#?}");
    }
}

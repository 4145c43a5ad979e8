//! The tokio adapter over TLS, against the loopback cluster serving TLS: the SDK's
//! connection string (`?tls=true&tls_domain=localhost&tls_ca_file=...`) reaches a cluster
//! with split primaries and keeps its session where it is; every way TLS can fail reaches
//! `Client::connect` as its own typed error, soon; and no credential reaches a log line.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Message, PollingStrategy};
use iggy_route_core::{Config, Credentials, NodeId, TlsError};
use iggy_route_tests::cluster::{ClusterConfig, ServerCertificate, TLS_DOMAIN, TestCluster};
use iggy_route_tokio::Client;

/// Generous on a loaded machine; a plaintext loopback send takes well under a millisecond.
const SEND_LATENCY_MAX: Duration = Duration::from_millis(100);
/// What "at once" means for a failure `connect` reports without waiting out its budget
/// (three connect timeouts: 9 s by default).
const FAIL_FAST: Duration = Duration::from_secs(2);

async fn tls_cluster(nodes: usize, certificate: ServerCertificate) -> TestCluster {
    let mut config = ClusterConfig::new(nodes);
    config.tls = Some(certificate);
    TestCluster::start_with(config).await
}

fn message(payload: String) -> Message {
    Message {
        payload: Bytes::from(payload),
        ..Message::default()
    }
}

/// Connects and returns the TLS error with how long `connect` took.
async fn tls_failure(connection_string: &str) -> (TlsError, Duration) {
    let started = Instant::now();
    match Client::from_connection_string(connection_string).await {
        Err(ClientError::Tls(error)) => (error, started.elapsed()),
        Err(other) => panic!("expected a TLS error, got {other:?}"),
        Ok(_) => panic!("expected a TLS error, connected"),
    }
}

async fn split_primaries_over_tls(routing_commands: bool) {
    iggy_route_tests::error_events::install();
    let cluster = tls_cluster(3, ServerCertificate::Valid).await;
    cluster.set_routing_commands(routing_commands);
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 1);
    cluster.split_primaries(stream, topic, 0, 2, 2).await;
    let primaries = [0, 1].map(|partition| cluster.primary(stream, topic, partition).unwrap());
    assert_eq!(primaries, [0, 2], "the fixture must split the primaries");
    let connection_string = cluster.connection_string();
    assert!(
        connection_string.contains(&format!("?tls=true&tls_domain={TLS_DOMAIN}&tls_ca_file=")),
        "{connection_string}"
    );

    let client = Client::from_connection_string(&connection_string)
        .await
        .unwrap();
    for partition in 0..2 {
        let warm_up = message(format!("warm-up {partition}"));
        let key = Partitioning::PartitionId(partition);
        client
            .send(stream, topic, key, vec![warm_up])
            .await
            .unwrap();
    }
    let logins: Vec<u64> = (0..3).map(|node| cluster.stats(node).logins).collect();
    let refusals = cluster.total_refusals();
    let before = client.stats();

    let mut latencies = Vec::new();
    for index in 0..20_u32 {
        let partition = index % 2;
        let started = Instant::now();
        let key = Partitioning::PartitionId(partition);
        let sent = message(format!("alternating {index}"));
        let receipt = client.send(stream, topic, key, vec![sent]).await.unwrap();
        latencies.push(started.elapsed());
        assert_eq!(receipt.partition_id, partition);
        let primary = u32::try_from(primaries[partition as usize]).unwrap();
        assert_eq!(receipt.node, NodeId(primary), "admitted by the primary");
    }
    eprintln!("per-send latency over TLS after warm-up: {latencies:?}");
    let after: Vec<u64> = (0..3).map(|node| cluster.stats(node).logins).collect();
    assert_eq!(after, logins, "no send moved the session or opened a link");
    assert_eq!(client.stats().session_moves, 0);
    assert_eq!(cluster.total_refusals(), refusals, "no send was refused");
    assert_eq!(client.stats().sends, before.sends + 20);
    assert!(
        latencies.iter().all(|latency| *latency < SEND_LATENCY_MAX),
        "sends slower than {SEND_LATENCY_MAX:?}: {latencies:?}"
    );

    // Polls read back, over TLS, what the sends stored.
    for partition in 0..2_u32 {
        let consumer = Consumer {
            kind: ConsumerKind::Consumer,
            id: Identifier::Numeric(1),
        };
        let strategy = PollingStrategy::Offset(0);
        let reply = client
            .poll(stream, topic, Some(partition), consumer, strategy, 100)
            .await
            .unwrap();
        let polled: Vec<&[u8]> = reply.messages.iter().map(|m| &m.payload[..]).collect();
        let stored = cluster.partition_log(stream, topic, partition);
        assert_eq!(polled.len(), 11, "the warm-up and ten alternating sends");
        let expected: Vec<&[u8]> = stored.iter().map(|m| &m.payload[..]).collect();
        assert_eq!(polled, expected);
    }
    assert_eq!(cluster.tls_handshakes_failed(), 0);
    client.shutdown().await;
    cluster.shutdown().await;
    iggy_route_tests::error_events::assert_none();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_primaries_over_tls_with_routing_commands_keep_the_session() {
    split_primaries_over_tls(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_primaries_over_tls_discovered_by_refusal_keep_the_session() {
    split_primaries_over_tls(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_garbage_ca_file_fails_connect_before_any_connection() {
    let cluster = tls_cluster(3, ServerCertificate::Valid).await;
    let addrs: Vec<String> = cluster.addrs().iter().map(ToString::to_string).collect();
    let base = format!(
        "iggy://iggy:iggy@{}?tls=true&tls_domain=localhost",
        addrs.join(",")
    );

    let missing = std::env::temp_dir().join("iggy-route-tls-tokio-no-such-ca.pem");
    let (error, took) = tls_failure(&format!("{base}&tls_ca_file={}", missing.display())).await;
    assert!(
        matches!(&error, TlsError::CaFile { path, .. } if *path == missing),
        "{error:?}"
    );
    assert!(took < FAIL_FAST, "took {took:?}");

    let garbage = std::env::temp_dir().join(format!(
        "iggy-route-tls-tokio-garbage-{}.pem",
        std::process::id()
    ));
    std::fs::write(&garbage, b"not a certificate at all\n").unwrap();
    let (error, took) = tls_failure(&format!("{base}&tls_ca_file={}", garbage.display())).await;
    let _ = std::fs::remove_file(&garbage);
    assert!(
        matches!(&error, TlsError::CaFile { path, problem } if *path == garbage && problem.contains("no PEM certificate")),
        "{error:?}"
    );
    assert!(took < FAIL_FAST, "took {took:?}");
    assert_eq!(cluster.total_logins(), 0);
    assert_eq!(cluster.tls_handshakes_failed(), 0, "nothing was dialled");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_server_name_fails_connect_before_any_connection() {
    let cluster = tls_cluster(1, ServerCertificate::Valid).await;
    let ca = cluster.tls_ca_file().unwrap();
    let connection_string = format!(
        "iggy://iggy:iggy@{}?tls=true&tls_domain=bad!name&tls_ca_file={}",
        cluster.addr(0),
        ca.display()
    );
    let (error, took) = tls_failure(&connection_string).await;
    assert_eq!(
        error,
        TlsError::InvalidServerName {
            name: "bad!name".to_owned()
        }
    );
    assert!(took < FAIL_FAST, "took {took:?}");
    assert_eq!(cluster.tls_handshakes_failed(), 0, "nothing was dialled");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_name_fails_connect_at_once_as_a_name_mismatch() {
    let cluster = tls_cluster(3, ServerCertificate::OtherName("wrong.example".to_owned())).await;
    let (error, took) = tls_failure(&cluster.connection_string()).await;
    assert_eq!(
        error,
        TlsError::NameMismatch {
            name: TLS_DOMAIN.to_owned()
        }
    );
    assert!(took < FAIL_FAST, "took {took:?}");
    assert_eq!(cluster.total_logins(), 0, "no credentials were sent");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_the_ca_did_not_sign_fails_connect_at_once_as_rejected() {
    let cluster = tls_cluster(3, ServerCertificate::UntrustedCa).await;
    let (error, took) = tls_failure(&cluster.connection_string()).await;
    assert!(
        matches!(&error, TlsError::CertificateRejected { reason } if reason.contains("UnknownIssuer")),
        "{error:?}"
    );
    assert!(took < FAIL_FAST, "took {took:?}");
    assert_eq!(cluster.total_logins(), 0, "no credentials were sent");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_cluster_fails_connect_as_not_tls_long_before_the_budget() {
    let cluster = TestCluster::start(3).await;
    let connection_string = format!(
        "{}?tls=true&tls_domain=localhost",
        cluster.connection_string()
    );
    let config = Config::from_connection_string(&connection_string).unwrap();
    let budget = config.connect_timeout * 3;
    let (error, took) = tls_failure(&connection_string).await;
    assert_eq!(error, TlsError::NotTls);
    // Each of the three seeds is probed after a quarter of its connect timeout.
    assert!(took < budget / 2, "took {took:?} of a {budget:?} budget");
    assert_eq!(cluster.total_logins(), 0, "no credentials were sent");
    cluster.shutdown().await;
}

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

/// A whole TLS session (sign-in on every link, sends to split primaries) and the TLS
/// failures (a name mismatch, a plaintext cluster) under a TRACE subscriber that keeps
/// every line: the password appears in none. The subscriber is this thread's, and the
/// runtime runs every task on this thread, so it sees all of them.
#[test]
fn no_credential_reaches_a_trace_line_over_tls() {
    const PASSWORD: &str = "Pw-tls-s3cret-4d1a";
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let cluster = tls_cluster(3, ServerCertificate::Valid).await;
        cluster.with_state(|state| state.add_user("auditor", PASSWORD));
        let (stream, topic) = cluster.create_stream_and_topic("logs", "t", 2);
        assert!(cluster.set_primary(stream, topic, 1, 1));
        // Each cluster trusts its own CA; a plaintext one has none and keeps the first's.
        let first_ca = cluster.tls_ca_file().unwrap();
        let config = |nodes: &TestCluster| {
            let seeds: Vec<String> = nodes.addrs().iter().map(ToString::to_string).collect();
            let mut config = Config::new(seeds, Credentials::user("auditor", PASSWORD).unwrap());
            config.tls = Some(iggy_route_core::TlsConfig {
                domain: Some(TLS_DOMAIN.to_owned()),
                ca_file: Some(nodes.tls_ca_file().unwrap_or_else(|| first_ca.clone())),
            });
            config
        };
        let client = Client::connect(config(&cluster)).await.unwrap();
        for partition in 0..2 {
            let key = Partitioning::PartitionId(partition);
            let sent = message("hello".to_owned());
            client.send(stream, topic, key, vec![sent]).await.unwrap();
        }
        client.shutdown().await;

        let mismatch = tls_cluster(1, ServerCertificate::OtherName("wrong.example".into())).await;
        let failed = Client::connect(config(&mismatch)).await;
        assert!(
            matches!(failed, Err(ClientError::Tls(TlsError::NameMismatch { .. }))),
            "{failed:?}"
        );
        mismatch.shutdown().await;

        let plaintext = TestCluster::start(1).await;
        let failed = Client::connect(config(&plaintext)).await;
        assert!(
            matches!(failed, Err(ClientError::Tls(TlsError::NotTls))),
            "{failed:?}"
        );
        plaintext.shutdown().await;
        cluster.shutdown().await;
    });

    let logged = String::from_utf8_lossy(&lines.0.lock().unwrap()).into_owned();
    assert!(
        logged.lines().count() > 20,
        "the subscriber saw too little to prove anything:\n{logged}"
    );
    assert!(
        logged.contains("TLS failed"),
        "the TLS failures were logged"
    );
    let leaked: Vec<&str> = logged.lines().filter(|l| l.contains(PASSWORD)).collect();
    assert!(leaked.is_empty(), "the password was logged: {leaked:#?}");
}

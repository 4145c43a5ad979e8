//! The mio adapter over TLS, against the loopback cluster serving TLS: the SDK's
//! connection string (`?tls=true&tls_domain=localhost&tls_ca_file=...`) reaches a cluster
//! with split primaries over TLS on every link and keeps its session where it is; and every
//! way TLS can fail reaches `Client::connect` as its own typed error, soon.
//!
//! The cluster runs on a tokio runtime of its own, whose workers serve it while the test
//! thread makes the mio client's blocking calls.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Message, PollingStrategy};
use iggy_route_core::{Config, NodeId, TlsError};
use iggy_route_mio::Client;
use iggy_route_tests::cluster::{ClusterConfig, ServerCertificate, TLS_DOMAIN, TestCluster};

/// Generous on a loaded machine; a loopback send over TLS takes well under a millisecond.
const SEND_LATENCY_MAX: Duration = Duration::from_millis(100);
/// What "at once" means for a failure `connect` reports without waiting out its budget
/// (three connect timeouts: 9 s by default).
const FAIL_FAST: Duration = Duration::from_secs(2);

/// A cluster on its own runtime.
struct Harness {
    cluster: TestCluster,
    runtime: tokio::runtime::Runtime,
}

impl Harness {
    /// `nodes` nodes serving TLS with `certificate`, or plaintext with `None`.
    fn start(nodes: usize, certificate: Option<ServerCertificate>) -> Self {
        iggy_route_tests::error_events::install();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mut config = ClusterConfig::new(nodes);
        config.tls = certificate;
        let cluster = runtime.block_on(TestCluster::start_with(config));
        Self { cluster, runtime }
    }

    fn shutdown(self) {
        self.runtime.block_on(self.cluster.shutdown());
    }
}

fn message(payload: String) -> Message {
    Message {
        payload: Bytes::from(payload),
        ..Message::default()
    }
}

/// Connects and returns the TLS error with how long `connect` took.
fn tls_failure(connection_string: &str) -> (TlsError, Duration) {
    let started = Instant::now();
    match Client::from_connection_string(connection_string) {
        Err(ClientError::Tls(error)) => (error, started.elapsed()),
        Err(other) => panic!("expected a TLS error, got {other:?}"),
        Ok(_) => panic!("expected a TLS error, connected"),
    }
}

fn split_primaries_over_tls(routing_commands: bool) {
    let harness = Harness::start(3, Some(ServerCertificate::Valid));
    let cluster = &harness.cluster;
    cluster.set_routing_commands(routing_commands);
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 1);
    harness
        .runtime
        .block_on(cluster.split_primaries(stream, topic, 0, 2, 2));
    let primaries = [0, 1].map(|partition| cluster.primary(stream, topic, partition).unwrap());
    assert_eq!(primaries, [0, 2], "the fixture must split the primaries");
    let connection_string = cluster.connection_string();
    assert!(
        connection_string.contains(&format!("?tls=true&tls_domain={TLS_DOMAIN}&tls_ca_file=")),
        "{connection_string}"
    );

    let client = Client::from_connection_string(&connection_string).unwrap();
    // The first send to each partition opens the data link to its primary (a handshake of
    // its own) and, by refusal, may learn the route.
    for partition in 0..2 {
        let key = Partitioning::PartitionId(partition);
        let warm_up = message(format!("warm-up {partition}"));
        client.send(stream, topic, key, vec![warm_up]).unwrap();
    }
    let logins: Vec<u64> = (0..3).map(|node| cluster.stats(node).logins).collect();
    let refusals = cluster.total_refusals();
    let before = client.stats();

    let mut latencies = Vec::new();
    for index in 0..20_u32 {
        let partition = index % 2;
        let key = Partitioning::PartitionId(partition);
        let started = Instant::now();
        let sent = message(format!("alternating {index}"));
        let receipt = client.send(stream, topic, key, vec![sent]).unwrap();
        latencies.push(started.elapsed());
        assert_eq!(receipt.partition_id, partition);
        let primary = u32::try_from(primaries[partition as usize]).unwrap();
        assert_eq!(receipt.node, NodeId(primary), "admitted by the primary");
    }
    eprintln!("mio: per-send latency over TLS after warm-up: {latencies:?}");
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
            .unwrap();
        let polled: Vec<&[u8]> = reply.messages.iter().map(|m| &m.payload[..]).collect();
        let stored = cluster.partition_log(stream, topic, partition);
        assert_eq!(polled.len(), 11, "the warm-up and ten alternating sends");
        let expected: Vec<&[u8]> = stored.iter().map(|m| &m.payload[..]).collect();
        assert_eq!(polled, expected);
    }
    assert_eq!(cluster.tls_handshakes_failed(), 0);
    client.shutdown();
    harness.shutdown();
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn split_primaries_over_tls_with_routing_commands_keep_the_session() {
    split_primaries_over_tls(true);
}

#[test]
fn split_primaries_over_tls_discovered_by_refusal_keep_the_session() {
    split_primaries_over_tls(false);
}

#[test]
fn a_large_send_and_poll_pass_through_tls_in_pieces() {
    // Far above TLS's 16 KiB records and rustls's 64 KiB of buffered records, both ways.
    let harness = Harness::start(1, Some(ServerCertificate::Valid));
    let cluster = &harness.cluster;
    let (stream, topic) = cluster.create_stream_and_topic("bulk", "t", 1);
    let client = Client::from_connection_string(&cluster.connection_string()).unwrap();
    let payloads: Vec<String> = (0..40).map(|n| format!("{n:04}").repeat(5_000)).collect();
    let messages = payloads.iter().cloned().map(message).collect();
    let key = Partitioning::PartitionId(0);
    client.send(stream, topic, key, messages).unwrap();
    let consumer = Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(1),
    };
    let reply = client
        .poll(
            stream,
            topic,
            Some(0),
            consumer,
            PollingStrategy::Offset(0),
            100,
        )
        .unwrap();
    let polled: Vec<&[u8]> = reply.messages.iter().map(|m| &m.payload[..]).collect();
    let sent: Vec<&[u8]> = payloads.iter().map(String::as_bytes).collect();
    assert_eq!(polled, sent);
    client.shutdown();
    harness.shutdown();
}

#[test]
fn a_missing_or_garbage_ca_file_fails_connect_before_any_connection() {
    let harness = Harness::start(3, Some(ServerCertificate::Valid));
    let cluster = &harness.cluster;
    let addrs: Vec<String> = cluster.addrs().iter().map(ToString::to_string).collect();
    let base = format!(
        "iggy://iggy:iggy@{}?tls=true&tls_domain=localhost",
        addrs.join(",")
    );

    let missing = std::env::temp_dir().join("iggy-route-tls-mio-no-such-ca.pem");
    let (error, took) = tls_failure(&format!("{base}&tls_ca_file={}", missing.display()));
    assert!(
        matches!(&error, TlsError::CaFile { path, .. } if *path == missing),
        "{error:?}"
    );
    assert!(took < FAIL_FAST, "took {took:?}");

    let garbage = std::env::temp_dir().join(format!(
        "iggy-route-tls-mio-garbage-{}.pem",
        std::process::id()
    ));
    std::fs::write(&garbage, b"not a certificate at all\n").unwrap();
    let (error, took) = tls_failure(&format!("{base}&tls_ca_file={}", garbage.display()));
    let _ = std::fs::remove_file(&garbage);
    assert!(
        matches!(&error, TlsError::CaFile { path, problem } if *path == garbage && problem.contains("no PEM certificate")),
        "{error:?}"
    );
    assert!(took < FAIL_FAST, "took {took:?}");
    assert_eq!(cluster.total_logins(), 0);
    assert_eq!(cluster.tls_handshakes_failed(), 0, "nothing was dialled");
    harness.shutdown();
}

#[test]
fn an_invalid_server_name_fails_connect_before_any_connection() {
    let harness = Harness::start(1, Some(ServerCertificate::Valid));
    let cluster = &harness.cluster;
    let connection_string = format!(
        "iggy://iggy:iggy@{}?tls=true&tls_domain=bad!name&tls_ca_file={}",
        cluster.addr(0),
        cluster.tls_ca_file().unwrap().display()
    );
    let (error, took) = tls_failure(&connection_string);
    assert_eq!(
        error,
        TlsError::InvalidServerName {
            name: "bad!name".to_owned()
        }
    );
    assert!(took < FAIL_FAST, "took {took:?}");
    assert_eq!(cluster.tls_handshakes_failed(), 0, "nothing was dialled");
    harness.shutdown();
}

#[test]
fn a_certificate_for_another_name_fails_connect_at_once_as_a_name_mismatch() {
    let certificate = ServerCertificate::OtherName("wrong.example".to_owned());
    let harness = Harness::start(3, Some(certificate));
    let (error, took) = tls_failure(&harness.cluster.connection_string());
    assert_eq!(
        error,
        TlsError::NameMismatch {
            name: TLS_DOMAIN.to_owned()
        }
    );
    assert!(took < FAIL_FAST, "took {took:?}");
    assert_eq!(
        harness.cluster.total_logins(),
        0,
        "no credentials were sent"
    );
    harness.shutdown();
}

#[test]
fn a_certificate_the_ca_did_not_sign_fails_connect_at_once_as_rejected() {
    let harness = Harness::start(3, Some(ServerCertificate::UntrustedCa));
    let (error, took) = tls_failure(&harness.cluster.connection_string());
    assert!(
        matches!(&error, TlsError::CertificateRejected { reason } if reason.contains("UnknownIssuer")),
        "{error:?}"
    );
    assert!(took < FAIL_FAST, "took {took:?}");
    assert_eq!(
        harness.cluster.total_logins(),
        0,
        "no credentials were sent"
    );
    harness.shutdown();
}

#[test]
fn a_plaintext_cluster_fails_connect_as_not_tls_long_before_the_budget() {
    let harness = Harness::start(3, None);
    let connection_string = format!(
        "{}?tls=true&tls_domain=localhost",
        harness.cluster.connection_string()
    );
    let config = Config::from_connection_string(&connection_string).unwrap();
    let budget = config.connect_timeout * 3;
    let (error, took) = tls_failure(&connection_string);
    assert_eq!(error, TlsError::NotTls);
    // Each of the three seeds is probed after a quarter of its connect timeout.
    assert!(took < budget / 2, "took {took:?} of a {budget:?} budget");
    assert_eq!(
        harness.cluster.total_logins(),
        0,
        "no credentials were sent"
    );
    harness.shutdown();
}

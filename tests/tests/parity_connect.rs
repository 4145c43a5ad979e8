//! One table of connect and consumer scenarios, run on both adapters: each must end the
//! same way on tokio and on mio (the same typed error, with the same fields), and as the
//! table says. What decides the outcome is the core's (`ConnectWait`, the TLS error
//! classes, the probe's verdict, the consumer builder and state); an adapter that drifts
//! from the other shows up here first.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::Message;
use iggy_route_core::{Config, TlsError};
use iggy_route_tests::cluster::{ClusterConfig, ServerCertificate, TLS_DOMAIN, TestCluster};
use tokio::io::AsyncReadExt;

/// The connect timeout of every scenario: the budget is three of them. Long enough that
/// a failure found at once (three plaintext seeds, each probed after a quarter of it) is
/// far from the budget even on a loaded machine.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const BUDGET: Duration = Duration::from_secs(3);

/// How a `connect` ended, as both adapters can be compared.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Connected,
    Tls(TlsError),
    TimedOut { after: Duration },
    Other(String),
}

/// When it must have ended.
#[derive(Debug, Clone, Copy)]
enum Ends {
    /// Before the budget ran out: the failure cannot pass by waiting.
    AtOnce,
    /// Only once the budget ran out: something may still have come up until then.
    AtTheBudget,
}

/// Where the seeds point.
#[derive(Debug, Clone, Copy)]
enum Peer {
    /// A TLS test cluster of three nodes with this certificate.
    Tls(Certificate),
    /// A plaintext test cluster of three nodes.
    Plaintext,
    /// A node that accepts TCP, reads, and never says a word.
    Silent,
    /// Two ports nobody listens on.
    Nobody,
    /// A plaintext node first, then a port nobody listens on.
    PlaintextThenNobody,
}

#[derive(Debug, Clone, Copy)]
enum Certificate {
    Valid,
    OtherName,
    UntrustedCa,
}

/// What the client is told to trust.
#[derive(Debug, Clone, Copy)]
enum Trust {
    /// The cluster's CA file (or the web roots when the cluster has none).
    ClusterCa,
    /// A CA file that does not exist.
    MissingFile,
    /// A file that is no PEM at all.
    GarbageFile,
    /// A PEM certificate section whose contents are no certificate.
    OnlyBrokenCertificate,
    /// The cluster's CA, and a broken certificate after it.
    ClusterCaAndBrokenCertificate,
    /// A name to verify that is no DNS name.
    InvalidName,
    /// A name that is no DNS name, and a CA file that does not exist: the file is read
    /// first, on both adapters.
    InvalidNameAndMissingFile,
    /// No TLS at all.
    Plaintext,
}

struct Case {
    name: &'static str,
    peer: Peer,
    trust: Trust,
    expect: fn(&Outcome) -> bool,
    ends: Ends,
}

const BROKEN_CERTIFICATE: &str =
    "-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----\n";

const CASES: &[Case] = &[
    Case {
        name: "a trusted cluster connects",
        peer: Peer::Tls(Certificate::Valid),
        trust: Trust::ClusterCa,
        expect: |outcome| *outcome == Outcome::Connected,
        ends: Ends::AtOnce,
    },
    Case {
        name: "a missing CA file",
        peer: Peer::Tls(Certificate::Valid),
        trust: Trust::MissingFile,
        expect: |outcome| matches!(outcome, Outcome::Tls(TlsError::CaFile { .. })),
        ends: Ends::AtOnce,
    },
    Case {
        name: "a CA file that is no PEM",
        peer: Peer::Tls(Certificate::Valid),
        trust: Trust::GarbageFile,
        expect: |outcome| matches!(outcome, Outcome::Tls(TlsError::CaFile { problem, .. }) if problem == "no PEM certificate in it"),
        ends: Ends::AtOnce,
    },
    Case {
        name: "a CA file whose only certificate is broken",
        peer: Peer::Tls(Certificate::Valid),
        trust: Trust::OnlyBrokenCertificate,
        expect: |outcome| matches!(outcome, Outcome::Tls(TlsError::CaFile { problem, .. }) if problem.starts_with("none of its 1 certificates is usable")),
        ends: Ends::AtOnce,
    },
    Case {
        name: "a CA file with a broken certificate beside the cluster's CA",
        peer: Peer::Tls(Certificate::Valid),
        trust: Trust::ClusterCaAndBrokenCertificate,
        expect: |outcome| *outcome == Outcome::Connected,
        ends: Ends::AtOnce,
    },
    Case {
        name: "a server name that is no name",
        peer: Peer::Tls(Certificate::Valid),
        trust: Trust::InvalidName,
        expect: |outcome| {
            *outcome
                == Outcome::Tls(TlsError::InvalidServerName {
                    name: "bad!name".to_owned(),
                })
        },
        ends: Ends::AtOnce,
    },
    Case {
        name: "a server name that is no name, and a missing CA file",
        peer: Peer::Tls(Certificate::Valid),
        trust: Trust::InvalidNameAndMissingFile,
        expect: |outcome| matches!(outcome, Outcome::Tls(TlsError::CaFile { .. })),
        ends: Ends::AtOnce,
    },
    Case {
        name: "a certificate for another name",
        peer: Peer::Tls(Certificate::OtherName),
        trust: Trust::ClusterCa,
        expect: |outcome| {
            *outcome
                == Outcome::Tls(TlsError::NameMismatch {
                    name: TLS_DOMAIN.to_owned(),
                })
        },
        ends: Ends::AtOnce,
    },
    Case {
        name: "a certificate the CA did not sign",
        peer: Peer::Tls(Certificate::UntrustedCa),
        trust: Trust::ClusterCa,
        expect: |outcome| matches!(outcome, Outcome::Tls(TlsError::CertificateRejected { reason }) if reason.contains("UnknownIssuer")),
        ends: Ends::AtOnce,
    },
    Case {
        name: "a plaintext cluster",
        peer: Peer::Plaintext,
        trust: Trust::ClusterCa,
        expect: |outcome| *outcome == Outcome::Tls(TlsError::NotTls),
        ends: Ends::AtOnce,
    },
    Case {
        name: "a node that never answers the handshake",
        peer: Peer::Silent,
        trust: Trust::ClusterCa,
        expect: |outcome| *outcome == Outcome::Tls(TlsError::HandshakeTimedOut),
        ends: Ends::AtTheBudget,
    },
    Case {
        name: "unreachable seeds over TLS",
        peer: Peer::Nobody,
        trust: Trust::ClusterCa,
        expect: |outcome| *outcome == Outcome::TimedOut { after: BUDGET },
        ends: Ends::AtTheBudget,
    },
    Case {
        name: "unreachable seeds in plaintext",
        peer: Peer::Nobody,
        trust: Trust::Plaintext,
        expect: |outcome| *outcome == Outcome::TimedOut { after: BUDGET },
        ends: Ends::AtTheBudget,
    },
    Case {
        name: "one plaintext seed and one unreachable: not every seed said so",
        peer: Peer::PlaintextThenNobody,
        trust: Trust::ClusterCa,
        expect: |outcome| *outcome == Outcome::Tls(TlsError::NotTls),
        ends: Ends::AtTheBudget,
    },
];

/// What a scenario runs against; kept alive while both adapters connect.
struct Place {
    seeds: Vec<String>,
    cluster: Option<TestCluster>,
    silent: Option<tokio::task::JoinHandle<()>>,
    files: Vec<PathBuf>,
}

impl Place {
    async fn new(peer: Peer) -> Self {
        let (seeds, cluster, silent) = match peer {
            Peer::Tls(certificate) => {
                let mut config = ClusterConfig::new(3);
                config.tls = Some(match certificate {
                    Certificate::Valid => ServerCertificate::Valid,
                    Certificate::OtherName => {
                        ServerCertificate::OtherName("wrong.example".to_owned())
                    }
                    Certificate::UntrustedCa => ServerCertificate::UntrustedCa,
                });
                let cluster = TestCluster::start_with(config).await;
                (addrs(&cluster), Some(cluster), None)
            }
            Peer::Plaintext => {
                let cluster = TestCluster::start(3).await;
                (addrs(&cluster), Some(cluster), None)
            }
            Peer::Silent => {
                let (addr, task) = silent_node().await;
                (vec![addr.to_string()], None, Some(task))
            }
            Peer::Nobody => (vec![nobody(), nobody()], None, None),
            Peer::PlaintextThenNobody => {
                let cluster = TestCluster::start(1).await;
                let mut seeds = addrs(&cluster);
                seeds.push(nobody());
                (seeds, Some(cluster), None)
            }
        };
        Self {
            seeds,
            cluster,
            silent,
            files: Vec::new(),
        }
    }

    /// A file for this scenario with `contents`, removed at the end.
    fn file(&mut self, name: &str, contents: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "iggy-route-parity-{}-{name}.pem",
            std::process::id()
        ));
        std::fs::write(&path, contents).unwrap();
        self.files.push(path.clone());
        path
    }

    fn config(&mut self, trust: Trust) -> Config {
        let ca = self.cluster.as_ref().and_then(TestCluster::tls_ca_file);
        let tls = match trust {
            Trust::Plaintext => None,
            Trust::ClusterCa => Some(tls_options(TLS_DOMAIN, ca)),
            Trust::MissingFile => Some(tls_options(
                TLS_DOMAIN,
                Some(std::env::temp_dir().join("iggy-route-parity-no-such-ca.pem")),
            )),
            Trust::GarbageFile => {
                let garbage = self.file("garbage", b"not a certificate at all\n");
                Some(tls_options(TLS_DOMAIN, Some(garbage)))
            }
            Trust::OnlyBrokenCertificate => {
                let broken = self.file("broken", BROKEN_CERTIFICATE.as_bytes());
                Some(tls_options(TLS_DOMAIN, Some(broken)))
            }
            Trust::ClusterCaAndBrokenCertificate => {
                let mut pem = std::fs::read(ca.unwrap()).unwrap();
                pem.extend_from_slice(BROKEN_CERTIFICATE.as_bytes());
                let mixed = self.file("mixed", &pem);
                Some(tls_options(TLS_DOMAIN, Some(mixed)))
            }
            Trust::InvalidName => Some(tls_options("bad!name", ca)),
            Trust::InvalidNameAndMissingFile => Some(tls_options(
                "bad!name",
                Some(std::env::temp_dir().join("iggy-route-parity-no-such-ca.pem")),
            )),
        };
        let options = tls.map_or(String::new(), |tls| format!("?{tls}"));
        let mut config = Config::from_connection_string(&format!(
            "iggy://iggy:iggy@{}{options}",
            self.seeds.join(",")
        ))
        .unwrap();
        config.connect_timeout = CONNECT_TIMEOUT;
        config
    }

    async fn end(self) {
        if let Some(cluster) = self.cluster {
            cluster.shutdown().await;
        }
        if let Some(silent) = self.silent {
            silent.abort();
        }
        for file in self.files {
            let _ = std::fs::remove_file(file);
        }
    }
}

fn tls_options(domain: &str, ca: Option<PathBuf>) -> String {
    let ca = ca.map_or(String::new(), |ca| format!("&tls_ca_file={}", ca.display()));
    format!("tls=true&tls_domain={domain}{ca}")
}

fn addrs(cluster: &TestCluster) -> Vec<String> {
    cluster.addrs().iter().map(ToString::to_string).collect()
}

/// A loopback port nobody listens on (bound, then let go).
fn nobody() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// A node that accepts every connection and reads it, answering nothing, until aborted:
/// neither the handshake nor the probe ever hears back.
async fn silent_node() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut held = tokio::task::JoinSet::new();
        while let Ok((mut stream, _)) = listener.accept().await {
            held.spawn(async move {
                let mut sink = [0u8; 1024];
                while matches!(stream.read(&mut sink).await, Ok(read) if read > 0) {}
            });
        }
    });
    (addr, task)
}

fn outcome(result: Result<(), ClientError>) -> Outcome {
    match result {
        Ok(()) => Outcome::Connected,
        Err(ClientError::Tls(error)) => Outcome::Tls(error),
        Err(ClientError::ConnectTimedOut { after }) => Outcome::TimedOut { after },
        Err(other) => Outcome::Other(other.to_string()),
    }
}

async fn connect_tokio(config: Config) -> (Outcome, Duration) {
    let started = Instant::now();
    let result = match iggy_route_tokio::Client::connect(config).await {
        Ok(client) => {
            client.shutdown().await;
            Ok(())
        }
        Err(error) => Err(error),
    };
    (outcome(result), started.elapsed())
}

async fn connect_mio(config: Config) -> (Outcome, Duration) {
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let result = iggy_route_mio::Client::connect(config).map(|client| client.shutdown());
        (outcome(result), started.elapsed())
    })
    .await
    .unwrap()
}

fn check_timing(case: &Case, adapter: &str, took: Duration) {
    match case.ends {
        Ends::AtOnce => assert!(
            took < BUDGET,
            "{}: {adapter} took {took:?} of a {BUDGET:?} budget",
            case.name
        ),
        Ends::AtTheBudget => assert!(
            took >= BUDGET,
            "{}: {adapter} gave up after {took:?}, before its {BUDGET:?} budget",
            case.name
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connect_scenario_ends_the_same_on_both_adapters() {
    let mut drifts = Vec::new();
    for case in CASES {
        let mut place = Place::new(case.peer).await;
        let config = place.config(case.trust);
        let (on_tokio, tokio_took) = connect_tokio(config.clone()).await;
        let (on_mio, mio_took) = connect_mio(config).await;
        place.end().await;
        if on_tokio != on_mio {
            drifts.push(format!("{}: tokio {on_tokio:?}, mio {on_mio:?}", case.name));
            continue;
        }
        assert!((case.expect)(&on_tokio), "{}: {on_tokio:?}", case.name);
        check_timing(case, "tokio", tokio_took);
        check_timing(case, "mio", mio_took);
    }
    assert!(
        drifts.is_empty(),
        "the adapters drift:\n{}",
        drifts.join("\n")
    );
}

/// The consumer scenario's messages, one partition, offsets `0..count` from `first`.
fn messages(first: u64, count: u64) -> Vec<Message> {
    (first..first + count)
        .map(|i| Message {
            id: u128::from(i) + 1,
            payload: Bytes::from(format!("m{i}")),
            ..Message::default()
        })
        .collect()
}

const FIRST_BATCH: u64 = 30;
const SECOND_BATCH: u64 = 20;
/// How long a call cut short may run on mio: it gives up a moment after it submitted.
/// (tokio's is polled once and dropped.) Every other call runs to its message, so that
/// the consumer moves on.
const MIO_CUT: Duration = Duration::from_micros(20);
/// The bound on reading everything back.
const READ_DEADLINE: Duration = Duration::from_secs(20);

/// A consumer whose calls are cut short again and again (tokio: the `next` future dropped
/// at a timeout; mio: `next_before` at a deadline), then resumed, hands out every offset
/// once, in order: none lost to a cancelled poll, none twice. Then it waits past the end
/// (cancelled while nothing is there), and resumes with what is sent later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_cancelled_and_resumed_hands_out_every_offset_once_on_both_adapters() {
    let cluster = TestCluster::start(3).await;
    let (stream, topic) = cluster.create_stream_and_topic("parity", "cancel", 1);
    let config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    let client = iggy_route_tokio::Client::connect(config.clone())
        .await
        .unwrap();
    let send = |first, count| {
        let client = client.clone();
        async move {
            client
                .send(
                    stream,
                    topic,
                    Partitioning::partition_id(0),
                    messages(first, count),
                )
                .await
                .unwrap();
        }
    };
    send(0, FIRST_BATCH).await;

    // tokio: consumer id 1.
    let mut consumer = client
        .consumer(stream, topic)
        .unwrap()
        .consumer_id(1)
        .unwrap()
        .partition(0)
        .batch_length(7)
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap();
    let mut on_tokio = Vec::new();
    let deadline = Instant::now() + READ_DEADLINE;
    let mut cancelled = 0u32;
    let mut calls = 0u32;
    while on_tokio.len() < usize::try_from(FIRST_BATCH).unwrap() && Instant::now() < deadline {
        calls += 1;
        let next = if calls.is_multiple_of(2) {
            // Polled once: a message at hand comes out, a request in flight is dropped.
            tokio::select! {
                biased;
                next = consumer.next() => Some(next),
                () = std::future::ready(()) => None,
            }
        } else {
            tokio::time::timeout(READ_DEADLINE, consumer.next())
                .await
                .ok()
        };
        match next {
            Some(Some(received)) => on_tokio.push(received.unwrap().message.offset),
            Some(None) => panic!("the client closed"),
            None => cancelled += 1,
        }
    }
    // Nothing more there: a wait cut short, then the second batch after it.
    assert!(
        tokio::time::timeout(Duration::from_millis(50), consumer.next())
            .await
            .is_err()
    );

    // mio: consumer id 2, on a client of its own, the same steps.
    let mio_config = config.clone();
    let mio = tokio::task::spawn_blocking(move || {
        let client = iggy_route_mio::Client::connect(mio_config).unwrap();
        let mut consumer = client
            .consumer(stream, topic)
            .unwrap()
            .consumer_id(2)
            .unwrap()
            .partition(0)
            .batch_length(7)
            .poll_interval(Duration::from_millis(5))
            .build()
            .unwrap();
        let mut read = Vec::new();
        let deadline = Instant::now() + READ_DEADLINE;
        let mut cancelled = 0u32;
        let mut calls = 0u32;
        while read.len() < usize::try_from(FIRST_BATCH).unwrap() && Instant::now() < deadline {
            calls += 1;
            let cut = if calls.is_multiple_of(2) {
                MIO_CUT
            } else {
                READ_DEADLINE
            };
            match consumer.next_before(Instant::now() + cut) {
                Some(received) => read.push(received.unwrap().message.offset),
                None => cancelled += 1,
            }
        }
        assert!(
            consumer
                .next_before(Instant::now() + Duration::from_millis(50))
                .is_none()
        );
        (client, consumer, read, cancelled)
    });
    let (mio_client, mut mio_consumer, mut on_mio, mio_cancelled) = mio.await.unwrap();

    send(FIRST_BATCH, SECOND_BATCH).await;
    let total = usize::try_from(FIRST_BATCH + SECOND_BATCH).unwrap();
    while on_tokio.len() < total {
        let received = tokio::time::timeout(READ_DEADLINE, consumer.next())
            .await
            .expect("the second batch in time");
        on_tokio.push(received.unwrap().unwrap().message.offset);
    }
    let (mio_client, mio_consumer, on_mio) = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + READ_DEADLINE;
        while on_mio.len() < total {
            let received = mio_consumer
                .next_before(deadline)
                .expect("the second batch in time");
            on_mio.push(received.unwrap().message.offset);
        }
        (mio_client, mio_consumer, on_mio)
    })
    .await
    .unwrap();

    let every_offset_once: Vec<u64> = (0..FIRST_BATCH + SECOND_BATCH).collect();
    assert_eq!(
        on_tokio, every_offset_once,
        "tokio ({cancelled} calls cut short)"
    );
    assert_eq!(
        on_mio, every_offset_once,
        "mio ({mio_cancelled} calls cut short)"
    );
    assert!(
        cancelled > 0 && mio_cancelled > 0,
        "no call was cut short: tokio {cancelled}, mio {mio_cancelled}"
    );

    consumer.shutdown(true).await.unwrap();
    tokio::task::spawn_blocking(move || {
        mio_consumer.shutdown(true).unwrap();
        mio_client.shutdown();
    })
    .await
    .unwrap();
    client.shutdown().await;
    cluster.shutdown().await;
}

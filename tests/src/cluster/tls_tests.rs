//! Tests of TLS serving: a client trusting the cluster's CA signs in over TLS 1.3 and 1.2,
//! a plaintext client is closed without an answer, and a client that cannot verify the
//! certificate (another CA, another name) fails its handshake, all without a panic or an
//! ERROR event on the server side.

#![allow(clippy::unwrap_used)]

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use iggy::prelude::{Client as _, IggyClient, SystemClient as _};
use iggy_route_core::wire::{
    Frame, LoginRegisterReply, Operation, RequestHeader, code, split_result,
};
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, ProtocolVersion, RootCertStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tracing::Level;
use tracing_subscriber::fmt::MakeWriter;

use super::driver::TestCluster;
use super::raw_client::{exchange, login, ping};
use super::state::ClusterConfig;
use super::testkit::{poll_body, send_body};
use super::tls::{ServerCertificate, TLS_DOMAIN, client_config};

async fn tls_cluster(nodes: usize, certificate: ServerCertificate) -> TestCluster {
    TestCluster::start_with(ClusterConfig {
        tls: Some(certificate),
        ..ClusterConfig::new(nodes)
    })
    .await
}

async fn connect_with(
    config: ClientConfig,
    addr: SocketAddr,
    name: &str,
) -> io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(name.to_owned()).unwrap();
    TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
}

/// A client config trusting `ca_file` that offers TLS 1.2 only.
fn tls12_only(ca_file: &Path) -> ClientConfig {
    let mut roots = RootCertStore::empty();
    for certificate in rustls::pki_types::CertificateDer::pem_file_iter(ca_file).unwrap() {
        roots.add(certificate.unwrap()).unwrap();
    }
    ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// Everything logged on this thread (the test's, and its runtime's tasks': a
/// `#[tokio::test]` runs them on the test's own thread) from DEBUG up, as text.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn start(&self) -> tracing::subscriber::DefaultGuard {
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(Level::DEBUG)
            .with_ansi(false)
            .with_writer(self.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Waits (up to a second) until the cluster has given up on `count` handshakes.
async fn failed_handshakes(cluster: &TestCluster, count: u64) {
    for _ in 0..200 {
        if cluster.tls_handshakes_failed() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(cluster.tls_handshakes_failed(), count);
}

#[tokio::test]
async fn a_client_trusting_the_ca_signs_in_over_tls_13_and_12() {
    let cluster = tls_cluster(2, ServerCertificate::Valid).await;
    let ca_file = cluster.tls_ca_file().unwrap();
    for node in 0..2 {
        let config = client_config(&ca_file).unwrap();
        let mut stream = connect_with(config, cluster.addr(node), TLS_DOMAIN)
            .await
            .unwrap();
        assert_eq!(
            stream.get_ref().1.protocol_version(),
            Some(ProtocolVersion::TLSv1_3)
        );
        if node == 0 {
            // Sessions are signed in on the metadata leader.
            let reply = login(&mut stream, 10).await;
            assert!(matches!(reply, Frame::Reply { header, .. } if header.status == 0));
        }
        assert!(
            matches!(ping(&mut stream).await.unwrap(), Frame::Reply { header, .. } if header.status == 0)
        );
    }
    // The address is in the certificate too, for clients that check the IP they dialled.
    let mut old = connect_with(tls12_only(&ca_file), cluster.addr(0), "127.0.0.1")
        .await
        .unwrap();
    assert_eq!(
        old.get_ref().1.protocol_version(),
        Some(ProtocolVersion::TLSv1_2)
    );
    assert!(matches!(login(&mut old, 20).await, Frame::Reply { header, .. } if header.status == 0));

    assert_eq!(cluster.total_logins(), 2);
    assert_eq!(cluster.stats(0).connections_total, 2);
    assert_eq!(cluster.tls_handshakes_failed(), 0);
}

#[tokio::test]
async fn frames_larger_than_a_tls_record_cross_whole_both_ways() {
    // A TLS record holds 16 KiB: a send and a poll reply of 120 KiB each span many.
    let cluster = tls_cluster(1, ServerCertificate::Valid).await;
    let (stream_id, topic) = cluster.create_stream_and_topic("s", "t", 1);
    let config = client_config(&cluster.tls_ca_file().unwrap()).unwrap();
    let mut stream = connect_with(config, cluster.addr(0), TLS_DOMAIN)
        .await
        .unwrap();
    let Frame::Reply { body, .. } = login(&mut stream, 5).await else {
        panic!("login answered with something other than a reply");
    };
    let session = LoginRegisterReply::decode(split_result(&body).unwrap().unwrap())
        .unwrap()
        .session;
    let payload = "x".repeat(40 * 1024);
    let body = send_body(stream_id, topic, 0, &[&payload, &payload, &payload]);
    let header = RequestHeader::new(Operation::SendMessages, 0, 5, session, 1, body.len());
    let sent = exchange(&mut stream, header, &body).await.unwrap();
    assert!(matches!(sent, Frame::Reply { header, .. } if header.status == 0));
    assert_eq!(cluster.partition_len(stream_id, topic, 0), 3);

    let body = poll_body(stream_id, topic, 0, false);
    let header = RequestHeader::new(
        Operation::NonReplicated,
        code::POLL_MESSAGES,
        5,
        session,
        2,
        body.len(),
    );
    let Frame::Reply { header, body } = exchange(&mut stream, header, &body).await.unwrap() else {
        panic!("the poll answered with something other than a reply");
    };
    assert_eq!(header.status, 0);
    assert!(body.len() > 3 * payload.len(), "{} bytes", body.len());
}

#[tokio::test]
async fn a_plaintext_client_is_closed_without_an_answer() {
    let captured = Captured::default();
    let _logging = captured.start();
    let cluster = tls_cluster(1, ServerCertificate::Valid).await;
    let mut plain = TcpStream::connect(cluster.addr(0)).await.unwrap();
    let mut request = bytes::BytesMut::new();
    RequestHeader::new(Operation::NonReplicated, code::PING, 1, 0, 1, 0).encode(&mut request);
    plain.write_all(&request).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut answer))
        .await
        .expect("the node closes the connection");
    // At most a TLS alert record comes back (or a reset), never a reply header.
    assert!(read.is_err() || answer.len() < 256, "{answer:?}");
    assert!(
        answer.first().is_none_or(|&kind| kind == 0x15),
        "{answer:?}"
    );

    failed_handshakes(&cluster, 1).await;
    assert_eq!(
        cluster.stats(0).connections_total,
        0,
        "it never became a connection"
    );
    let log = captured.text();
    assert!(log.contains("TLS handshake failed"), "{log}");
    assert!(!log.contains("ERROR"), "{log}");
}

#[tokio::test]
async fn a_client_that_cannot_verify_the_certificate_fails_its_handshake() {
    let captured = Captured::default();
    let _logging = captured.start();
    let cluster = tls_cluster(1, ServerCertificate::Valid).await;
    let other = tls_cluster(1, ServerCertificate::Valid).await;
    let untrusted = tls_cluster(1, ServerCertificate::UntrustedCa).await;
    let misnamed = tls_cluster(1, ServerCertificate::OtherName("wrong.example".into())).await;

    // Trusting another cluster's CA.
    let config = client_config(&other.tls_ca_file().unwrap()).unwrap();
    let error = connect_with(config, cluster.addr(0), TLS_DOMAIN)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("UnknownIssuer"), "{error}");
    // Trusting the right `ca.pem`, but the leaf was signed by a CA written nowhere.
    let config = client_config(&untrusted.tls_ca_file().unwrap()).unwrap();
    let error = connect_with(config, untrusted.addr(0), TLS_DOMAIN)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("UnknownIssuer"), "{error}");
    // The right CA, but a certificate for another name.
    let config = client_config(&misnamed.tls_ca_file().unwrap()).unwrap();
    let error = connect_with(config, misnamed.addr(0), TLS_DOMAIN)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("not valid for name"), "{error}");
    // ...which is the certificate's only name.
    let config = client_config(&misnamed.tls_ca_file().unwrap()).unwrap();
    let mut named = connect_with(config, misnamed.addr(0), "wrong.example")
        .await
        .unwrap();
    assert!(ping(&mut named).await.is_ok());

    failed_handshakes(&cluster, 1).await;
    failed_handshakes(&untrusted, 1).await;
    failed_handshakes(&misnamed, 1).await;
    assert_eq!(cluster.stats(0).connections_total, 0);
    let log = captured.text();
    assert!(!log.contains("ERROR"), "{log}");
}

#[tokio::test]
async fn connection_strings_carry_the_tls_options_and_ca_pem_lives_with_the_cluster() {
    let plain = TestCluster::start(1).await;
    assert_eq!(plain.tls_ca_file(), None);
    assert_eq!(plain.tls_options(), None);
    assert!(!plain.connection_string().contains('?'));

    let cluster = tls_cluster(2, ServerCertificate::Valid).await;
    let ca_file = cluster.tls_ca_file().unwrap();
    assert_eq!(ca_file.file_name().unwrap(), "ca.pem");
    let pem = std::fs::read_to_string(&ca_file).unwrap();
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
    assert!(!pem.contains("PRIVATE KEY"), "no key is written");
    let options = format!(
        "?tls=true&tls_domain=localhost&tls_ca_file={}",
        ca_file.display()
    );
    let seeds = format!("{},{}", cluster.addr(0), cluster.addr(1));
    assert_eq!(
        cluster.connection_string(),
        format!("iggy://iggy:iggy@{seeds}{options}")
    );
    assert_eq!(
        cluster.sdk_connection_string(1),
        format!("iggy://iggy:iggy@{}{options}", cluster.addr(1))
    );

    cluster.shutdown().await;
    assert!(!ca_file.exists(), "removed with the cluster");
}

#[tokio::test]
async fn the_sdk_signs_in_over_tls_with_the_sdk_connection_string() {
    let cluster = tls_cluster(1, ServerCertificate::Valid).await;
    let client = IggyClient::from_connection_string(&cluster.sdk_connection_string(0)).unwrap();
    client.connect().await.unwrap();
    client.ping().await.unwrap();
    assert_eq!(cluster.total_logins(), 1);
    assert_eq!(cluster.tls_handshakes_failed(), 0);
    client.shutdown().await.unwrap();
}

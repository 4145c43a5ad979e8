//! `Client::connect` with TLS against peers that fail it, each in its own way: the typed
//! error, and how soon it comes.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use iggy_route_core::client::ClientError;
use iggy_route_core::{Config, TlsConfig, TlsError};

use crate::Client;
use crate::tls_peers::{Authority, Plain, echo_server, plain_iggy_server, plain_server};

fn config(seeds: &[SocketAddr], domain: Option<&str>, ca_file: Option<&Path>) -> Config {
    let seeds: Vec<String> = seeds.iter().map(SocketAddr::to_string).collect();
    let mut config = Config::from_connection_string(&format!(
        "iggy://iggy:secret-pass@{}?tls=true",
        seeds.join(",")
    ))
    .unwrap();
    config.tls = Some(TlsConfig {
        domain: domain.map(str::to_owned),
        ca_file: ca_file.map(Path::to_path_buf),
    });
    config
}

/// Connects, and returns the TLS error with how long `connect` took.
async fn tls_failure(config: Config) -> (TlsError, Duration) {
    let started = Instant::now();
    match Client::connect(config).await {
        Err(ClientError::Tls(error)) => (error, started.elapsed()),
        Err(other) => panic!("expected a TLS error, got {other:?}"),
        Ok(_) => panic!("expected a TLS error, connected"),
    }
}

#[tokio::test]
async fn a_missing_ca_file_fails_connect_before_any_io() {
    let started = Instant::now();
    let result = Client::from_connection_string(
        "iggy://iggy:iggy@127.0.0.1:1?tls=true&tls_ca_file=/no/such/dir/ca.pem",
    )
    .await;
    assert!(
        matches!(&result, Err(ClientError::Tls(TlsError::CaFile { path, .. })) if path == Path::new("/no/such/dir/ca.pem")),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(500));
}

#[tokio::test]
async fn an_invalid_server_name_fails_connect_before_any_io() {
    let (addr, _) = plain_server(Plain::Close).await;
    let (error, took) = tls_failure(config(&[addr], Some("bad!name"), None)).await;
    assert_eq!(
        error,
        TlsError::InvalidServerName {
            name: "bad!name".to_owned()
        }
    );
    assert!(took < Duration::from_millis(500));
}

#[tokio::test]
async fn a_name_mismatch_fails_connect_at_once() {
    let authority = Authority::new("test CA");
    let ca = authority.file();
    let (addr, failed) = echo_server(authority.acceptor(&["wrong.example"])).await;
    let mut config = config(&[addr], Some("localhost"), Some(ca.path()));
    config.connect_timeout = Duration::from_secs(5);
    let (error, took) = tls_failure(config).await;
    assert_eq!(
        error,
        TlsError::NameMismatch {
            name: "localhost".to_owned()
        }
    );
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert!(failed.load(std::sync::atomic::Ordering::Relaxed) >= 1);
}

#[tokio::test]
async fn a_certificate_from_an_unknown_authority_fails_connect_at_once() {
    let trusted = Authority::new("trusted CA");
    let rogue = Authority::new("rogue CA");
    let ca = trusted.file();
    let (addr, _) = echo_server(rogue.acceptor(&["localhost", "127.0.0.1"])).await;
    let mut config = config(&[addr], None, Some(ca.path()));
    config.connect_timeout = Duration::from_secs(5);
    let (error, took) = tls_failure(config).await;
    assert!(
        matches!(&error, TlsError::CertificateRejected { reason } if reason.contains("UnknownIssuer")),
        "{error:?}"
    );
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn plaintext_iggy_seeds_fail_connect_as_not_tls_once_each_was_tried() {
    let seeds = [plain_iggy_server().await, plain_iggy_server().await];
    let mut config = config(&seeds, Some("localhost"), None);
    // Probe after 250 ms per seed; the budget would be 3 s.
    config.connect_timeout = Duration::from_secs(1);
    let (error, took) = tls_failure(config).await;
    assert_eq!(error, TlsError::NotTls);
    assert!(took < Duration::from_millis(1500), "took {took:?}");
}

#[tokio::test]
async fn seeds_that_close_on_the_hello_fail_connect_as_not_tls() {
    let seeds = [
        plain_server(Plain::Close).await.0,
        plain_server(Plain::Garbage).await.0,
    ];
    let mut config = config(&seeds, Some("localhost"), None);
    config.connect_timeout = Duration::from_secs(5);
    let (error, took) = tls_failure(config).await;
    assert_eq!(error, TlsError::NotTls);
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn a_handshake_that_never_finishes_is_reported_when_the_budget_runs_out() {
    let (addr, _) = plain_server(Plain::Silent).await;
    let mut config = config(&[addr], Some("localhost"), None);
    config.connect_timeout = Duration::from_millis(300);
    let (error, took) = tls_failure(config).await;
    assert_eq!(error, TlsError::HandshakeTimedOut);
    // Three connect timeouts: the budget.
    assert!(took >= Duration::from_millis(900), "took {took:?}");
}

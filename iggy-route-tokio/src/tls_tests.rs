#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use iggy_route_core::Credentials;
use rustls::CertificateError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::tls_peers::{Authority, Plain, TempFile, echo_server, plain_server};

fn config(seeds: &[&str], domain: Option<&str>, ca_file: Option<&Path>) -> Config {
    let seeds = seeds.iter().map(|&seed| seed.to_owned()).collect();
    let mut config = Config::new(seeds, Credentials::user("iggy", "iggy").unwrap());
    config.tls = Some(TlsConfig {
        domain: domain.map(str::to_owned),
        ca_file: ca_file.map(Path::to_path_buf),
    });
    config
}

fn tls(config: &Config) -> Result<Tls, TlsError> {
    Tls::new(config, config.tls.as_ref().unwrap())
}

/// TCP connect to `addr`, then the handshake as a connection task runs it.
async fn handshake(tls: &Tls, addr: SocketAddr) -> Result<TlsStream<TcpStream>, TlsError> {
    let name = tls.server_name(&addr.to_string())?;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let deadline = tokio::time::Instant::now() + tls.connect_timeout();
    tls.handshake(name, tcp, deadline).await
}

fn ca_problem(result: Result<Tls, TlsError>) -> (PathBuf, String) {
    match result {
        Err(TlsError::CaFile { path, problem }) => (path, problem),
        other => panic!("expected a CA file error, got {other:?}"),
    }
}

#[test]
fn names_default_to_each_address_host_and_domain_overrides_them() {
    let own = tls(&config(&["127.0.0.1:1"], None, None)).unwrap();
    assert_eq!(
        own.server_name("127.0.0.1:8090").unwrap().to_str(),
        "127.0.0.1"
    );
    assert_eq!(own.server_name("[::1]:8090").unwrap().to_str(), "::1");
    assert_eq!(
        own.server_name("node-2.example:8090").unwrap().to_str(),
        "node-2.example"
    );
    let shared = tls(&config(&["127.0.0.1:1"], Some("localhost"), None)).unwrap();
    assert_eq!(
        shared.server_name("10.0.0.7:8090").unwrap().to_str(),
        "localhost"
    );
}

#[test]
fn a_domain_that_is_no_server_name_is_refused_before_any_io() {
    for bad in ["bad..name", "bad!name", "-lead.example", "tail-.example"] {
        assert_eq!(
            tls(&config(&["127.0.0.1:1"], Some(bad), None)).unwrap_err(),
            TlsError::InvalidServerName {
                name: bad.to_owned()
            },
        );
    }
}

#[test]
fn without_a_domain_every_seed_host_must_be_a_server_name() {
    let result = tls(&config(&["127.0.0.1:1", "bad!host:2"], None, None));
    assert_eq!(
        result.unwrap_err(),
        TlsError::InvalidServerName {
            name: "bad!host".to_owned()
        }
    );
    // The same seeds are fine with one name for every node.
    assert!(
        tls(&config(
            &["127.0.0.1:1", "bad!host:2"],
            Some("localhost"),
            None
        ))
        .is_ok()
    );
}

#[test]
fn the_bundled_web_roots_are_used_without_a_ca_file() {
    assert!(tls(&config(&["127.0.0.1:1"], None, None)).is_ok());
}

#[test]
fn a_missing_ca_file_is_a_typed_error_naming_the_path() {
    let path = std::env::temp_dir().join("iggy-route-tokio-no-such-ca.pem");
    let (reported, problem) = ca_problem(tls(&config(&["127.0.0.1:1"], None, Some(&path))));
    assert_eq!(reported, path);
    assert!(problem.contains("No such file"), "{problem}");
}

#[test]
fn a_ca_file_without_certificates_is_a_typed_error() {
    let garbage = TempFile::with(b"this is not a certificate\n\x00\x01\x02");
    let (_, problem) = ca_problem(tls(&config(&["h:1"], None, Some(garbage.path()))));
    assert_eq!(problem, "no PEM certificate in it");
    let key_only =
        TempFile::with(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    let (_, problem) = ca_problem(tls(&config(&["h:1"], None, Some(key_only.path()))));
    assert_eq!(problem, "no PEM certificate in it");
}

#[test]
fn a_ca_file_with_broken_certificates_is_a_typed_error() {
    let bad_base64 =
        TempFile::with(b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n");
    let (_, problem) = ca_problem(tls(&config(&["h:1"], None, Some(bad_base64.path()))));
    assert!(problem.starts_with("bad PEM"), "{problem}");
    let not_der =
        TempFile::with(b"-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----\n");
    let (_, problem) = ca_problem(tls(&config(&["h:1"], None, Some(not_der.path()))));
    assert!(
        problem.starts_with("none of its 1 certificates"),
        "{problem}"
    );
}

#[test]
fn usable_certificates_beside_broken_ones_are_kept() {
    let authority = Authority::new("kept CA");
    let mixed = format!(
        "{}-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----\n",
        authority.pem
    );
    let file = TempFile::with(mixed.as_bytes());
    assert!(tls(&config(&["h:1"], None, Some(file.path()))).is_ok());
}

#[tokio::test]
async fn a_trusted_certificate_for_the_name_brings_the_session_up_and_bytes_flow() {
    let authority = Authority::new("test CA");
    let ca = authority.file();
    let (addr, failed) = echo_server(authority.acceptor(&["localhost", "127.0.0.1"])).await;
    for domain in [Some("localhost"), None] {
        let tls = tls(&config(&["127.0.0.1:1"], domain, Some(ca.path()))).unwrap();
        let mut stream = handshake(&tls, addr).await.unwrap();
        stream.write_all(b"ping over tls").await.unwrap();
        stream.flush().await.unwrap();
        let mut echoed = [0u8; 13];
        stream.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"ping over tls");
        let (_, session) = stream.get_ref();
        assert!(matches!(
            session.protocol_version(),
            Some(rustls::ProtocolVersion::TLSv1_3)
        ));
    }
    assert_eq!(failed.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn a_certificate_for_another_name_is_a_name_mismatch_naming_the_name_checked() {
    let authority = Authority::new("test CA");
    let ca = authority.file();
    let (addr, _) = echo_server(authority.acceptor(&["wrong.example"])).await;
    let by_domain = tls(&config(
        &["127.0.0.1:1"],
        Some("localhost"),
        Some(ca.path()),
    ))
    .unwrap();
    assert_eq!(
        handshake(&by_domain, addr).await.unwrap_err(),
        TlsError::NameMismatch {
            name: "localhost".to_owned()
        }
    );
    let by_address = tls(&config(&["127.0.0.1:1"], None, Some(ca.path()))).unwrap();
    assert_eq!(
        handshake(&by_address, addr).await.unwrap_err(),
        TlsError::NameMismatch {
            name: "127.0.0.1".to_owned()
        }
    );
}

#[tokio::test]
async fn a_certificate_from_an_untrusted_authority_is_rejected() {
    let trusted = Authority::new("trusted CA");
    let rogue = Authority::new("rogue CA");
    let ca = trusted.file();
    let (addr, _) = echo_server(rogue.acceptor(&["localhost"])).await;
    let tls = tls(&config(
        &["127.0.0.1:1"],
        Some("localhost"),
        Some(ca.path()),
    ))
    .unwrap();
    let error = handshake(&tls, addr).await.unwrap_err();
    assert!(
        matches!(&error, TlsError::CertificateRejected { reason } if reason.contains("UnknownIssuer")),
        "{error:?}"
    );
    // The web roots do not know a private CA either.
    let web = tls_with_web_roots();
    let error = handshake(&web, addr).await.unwrap_err();
    assert!(
        matches!(error, TlsError::CertificateRejected { .. }),
        "{error:?}"
    );
}

fn tls_with_web_roots() -> Tls {
    tls(&config(&["127.0.0.1:1"], Some("localhost"), None)).unwrap()
}

#[tokio::test]
async fn a_plaintext_peer_that_closes_or_answers_garbage_does_not_speak_tls() {
    let tls = tls_with_web_roots();
    for behaviour in [Plain::Close, Plain::Garbage] {
        let (addr, _) = plain_server(behaviour).await;
        assert_eq!(
            handshake(&tls, addr).await.unwrap_err(),
            TlsError::NotTls,
            "{behaviour:?}"
        );
    }
}

#[tokio::test]
async fn a_silent_peer_times_the_handshake_out() {
    let mut config = config(&["127.0.0.1:1"], Some("localhost"), None);
    config.connect_timeout = Duration::from_millis(200);
    let tls = tls(&config).unwrap();
    let (addr, received) = plain_server(Plain::Silent).await;
    let started = std::time::Instant::now();
    assert_eq!(
        handshake(&tls, addr).await.unwrap_err(),
        TlsError::HandshakeTimedOut
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
    // What a plaintext Iggy node would have read as the start of a 256-byte header.
    let hello = received.load(Ordering::Relaxed);
    assert!(hello > 0, "the ClientHello was sent");
}

#[test]
fn socket_errors_during_the_handshake_are_classified() {
    let name = ServerName::try_from("localhost").unwrap();
    for kind in [
        io::ErrorKind::UnexpectedEof,
        io::ErrorKind::ConnectionReset,
        io::ErrorKind::ConnectionAborted,
        io::ErrorKind::BrokenPipe,
    ] {
        assert_eq!(
            classify(&io::Error::from(kind), &name),
            TlsError::NotTls,
            "{kind:?}"
        );
    }
    assert!(matches!(
        classify(&io::Error::other("disk on fire"), &name),
        TlsError::Other(reason) if reason == "disk on fire"
    ));
}

#[test]
fn rustls_errors_map_to_typed_tls_errors() {
    let name = ServerName::try_from("localhost").unwrap();
    let wrapped =
        |error: rustls::Error| classify(&io::Error::new(io::ErrorKind::InvalidData, error), &name);
    let mismatch = TlsError::NameMismatch {
        name: "localhost".to_owned(),
    };
    assert_eq!(
        wrapped(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName
        )),
        mismatch
    );
    let context = CertificateError::NotValidForNameContext {
        expected: name.clone(),
        presented: vec!["DnsName(\"wrong.example\")".to_owned()],
    };
    assert_eq!(
        wrapped(rustls::Error::InvalidCertificate(context)),
        mismatch
    );
    for problem in [
        CertificateError::UnknownIssuer,
        CertificateError::Expired,
        CertificateError::BadSignature,
        CertificateError::Revoked,
    ] {
        assert!(matches!(
            wrapped(rustls::Error::InvalidCertificate(problem)),
            TlsError::CertificateRejected { .. }
        ));
    }
    assert!(matches!(
        wrapped(rustls::Error::NoCertificatesPresented),
        TlsError::CertificateRejected { .. }
    ));
    assert_eq!(
        wrapped(rustls::Error::InvalidMessage(
            rustls::InvalidMessage::InvalidContentType
        )),
        TlsError::NotTls
    );
    assert_eq!(
        wrapped(rustls::Error::PeerSentOversizedRecord),
        TlsError::NotTls
    );
    assert!(matches!(
        wrapped(rustls::Error::AlertReceived(
            rustls::AlertDescription::HandshakeFailure
        )),
        TlsError::Other(_)
    ));
}

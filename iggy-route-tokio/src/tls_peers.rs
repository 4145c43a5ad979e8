//! Test peers for the TLS unit tests, on `127.0.0.1`: TLS servers presenting certificates
//! made at test time (right, for another name, from an unknown CA), and raw TCP peers that
//! behave as a plaintext node might (close, answer garbage, say nothing).
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

static NEXT_FILE: AtomicU64 = AtomicU64::new(1);

/// A file under the temp directory, removed on drop.
#[derive(Debug)]
pub(crate) struct TempFile(PathBuf);

impl TempFile {
    pub(crate) fn with(contents: &[u8]) -> Self {
        let path = std::env::temp_dir().join(format!(
            "iggy-route-tokio-tls-{}-{}.pem",
            std::process::id(),
            NEXT_FILE.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, contents).unwrap();
        Self(path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A certificate authority made for one test.
pub(crate) struct Authority {
    issuer: Issuer<'static, KeyPair>,
    pub(crate) pem: String,
}

impl Authority {
    pub(crate) fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = common_name(name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Self {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// Its certificate in a PEM file, for `tls_ca_file`.
    pub(crate) fn file(&self) -> TempFile {
        TempFile::with(self.pem.as_bytes())
    }

    /// A server acceptor presenting a certificate for `names`, signed by this authority.
    pub(crate) fn acceptor(&self, names: &[&str]) -> TlsAcceptor {
        let names: Vec<String> = names.iter().map(|&name| name.to_owned()).collect();
        let mut params = CertificateParams::new(names.clone()).unwrap();
        params.distinguished_name = common_name(&names[0]);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().unwrap();
        let certificate = params.signed_by(&key, &self.issuer).unwrap();
        let chain: Vec<CertificateDer<'static>> = vec![certificate.der().clone()];
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .unwrap();
        TlsAcceptor::from(Arc::new(config))
    }
}

fn common_name(name: &str) -> DistinguishedName {
    let mut distinguished = DistinguishedName::new();
    distinguished.push(DnType::CommonName, name);
    distinguished
}

/// A TLS server that echoes what it reads; handshakes it gives up on are counted.
pub(crate) async fn echo_server(acceptor: TlsAcceptor) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let failed = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&failed);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let counter = Arc::clone(&counter);
            tokio::spawn(async move {
                let Ok(mut stream) = acceptor.accept(tcp).await else {
                    counter.fetch_add(1, Ordering::Relaxed);
                    return;
                };
                let mut buffer = vec![0u8; 4096];
                while let Ok(len @ 1..) = stream.read(&mut buffer).await {
                    if stream.write_all(&buffer[..len]).await.is_err()
                        || stream.flush().await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (addr, failed)
}

/// What a plaintext peer does with a client's first bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Plain {
    /// Reads what arrives, then closes the connection.
    Close,
    /// Answers with bytes that are no TLS record.
    Garbage,
    /// Reads and says nothing, keeping the connection open.
    Silent,
}

/// A plaintext TCP peer; the second value counts the bytes the last client sent first
/// (its ClientHello), once it has stopped sending.
pub(crate) async fn plain_server(behaviour: Plain) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&received);
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let counter = Arc::clone(&counter);
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 4096];
                let len = tcp.read(&mut buffer).await.unwrap_or(0);
                counter.store(len, Ordering::Relaxed);
                match behaviour {
                    Plain::Close => {}
                    Plain::Garbage => {
                        let _ = tcp.write_all(&[0xA5; 300]).await;
                        let _ = tcp.read(&mut buffer).await;
                    }
                    Plain::Silent => while let Ok(1..) = tcp.read(&mut buffer).await {},
                }
            });
        }
    });
    (addr, received)
}

/// A plaintext node that answers each 256-byte request header with a header-only reply
/// (command 8, status 0), as an Iggy 0.11.0 node answers a `PING`; bytes that never make a
/// full header (a ClientHello) get no answer, as on the real server.
pub(crate) async fn plain_iggy_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 256];
                while tcp.read_exact(&mut request).await.is_ok() {
                    let mut reply = [0u8; 256];
                    reply[48..52].copy_from_slice(&256u32.to_le_bytes()); // size
                    reply[60] = 8; // command: Reply
                    reply[208] = request[176]; // the request's operation
                    if tcp.write_all(&reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

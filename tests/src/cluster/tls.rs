//! TLS serving for the test cluster: certificates made at start, one acceptor shared by
//! every node, and the client-side settings a test needs to reach it.
//!
//! A real cluster on a shared network serves TCP with TLS, and the routers must verify the
//! nodes as the SDK does (a private CA in `tls_ca_file`, one name for every node in
//! `tls_domain`). So a TLS test cluster makes a fresh CA and a leaf for it at start (no
//! certificate is checked in, none expires, none is shared between tests), writes the CA
//! to `ca.pem` in a directory of its own for clients to trust, and keeps the private keys
//! in memory only. Each client-side failure is provoked by the certificate the cluster
//! presents ([`ServerCertificate`]) while `ca.pem` and the connection string stay as a
//! correct client would have them.
//!
//! The crypto provider is always named (`ring`): the SDK 0.11.0 in the same binary turns on
//! rustls's `aws-lc-rs` too, and with two providers compiled in rustls cannot pick a
//! default by itself.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig, SupportedProtocolVersion};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tracing::debug;

use super::driver::TestCluster;
use super::state::NodeId;

/// The name every node's certificate is for (with `127.0.0.1`), and the `tls_domain` of
/// the cluster's connection strings.
pub const TLS_DOMAIN: &str = "localhost";

/// How long a node waits for a client to finish its handshake: a client that connects and
/// says nothing (or speaks plaintext and waits for an answer) must not hold a task for
/// ever, and a loopback handshake takes milliseconds.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

/// TLS 1.2 and 1.3 only, as the 0.11.0 server accepts (rustls has nothing older anyway;
/// naming them keeps that true if its defaults change).
static PROTOCOL_VERSIONS: &[&SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

/// Gives each cluster's CAs and certificate directory names of their own in this process.
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

/// The certificate the nodes of a TLS cluster present. The CA written to `ca.pem` is the
/// same kind of fresh CA in every case; only what the nodes present differs, so that a
/// client configured correctly meets each failure it must report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerCertificate {
    /// For `localhost` and `127.0.0.1`, signed by the CA in `ca.pem`: what a client
    /// trusting that CA accepts.
    Valid,
    /// Signed by the CA in `ca.pem` but for this name only (such as `wrong.example`): a
    /// client checking `localhost` or `127.0.0.1` meets a name mismatch.
    OtherName(String),
    /// For `localhost` and `127.0.0.1`, but signed by another CA that is written nowhere:
    /// a client trusting `ca.pem` meets a certificate it cannot verify.
    UntrustedCa,
}

/// A TLS cluster's acceptor and the directory holding its `ca.pem` (removed when the
/// cluster's last task ends).
pub(crate) struct ServerTls {
    acceptor: TlsAcceptor,
    dir: PathBuf,
    ca_file: PathBuf,
    failed_handshakes: AtomicU64,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The acceptor holds the private key: only where the CA is, and what happened.
        f.debug_struct("ServerTls")
            .field("ca_file", &self.ca_file)
            .field("failed_handshakes", &self.failed_handshakes)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Makes the CA and the leaf that `certificate` asks for, writes the CA to `ca.pem` in
    /// a new directory under the system temp directory, and builds the acceptor.
    pub(crate) fn new(certificate: &ServerCertificate) -> io::Result<Self> {
        // Each cluster's CAs get names of their own, as unrelated CAs have: a client
        // trusting another cluster's CA then meets an unknown issuer, not a CA of the same
        // name whose signature does not match.
        let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let (trusted, trusted_pem) =
            authority(&format!("iggy-route test CA {pid}-{serial}")).map_err(io::Error::other)?;
        let loopback = || vec![TLS_DOMAIN.to_owned(), "127.0.0.1".to_owned()];
        let (chain, key) = match certificate {
            ServerCertificate::Valid => leaf(loopback(), &trusted),
            ServerCertificate::OtherName(name) => leaf(vec![name.clone()], &trusted),
            ServerCertificate::UntrustedCa => {
                let (rogue, _) = authority(&format!("iggy-route untrusted CA {pid}-{serial}"))
                    .map_err(io::Error::other)?;
                leaf(loopback(), &rogue)
            }
        }
        .map_err(io::Error::other)?;
        let config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(PROTOCOL_VERSIONS)
                .and_then(|builder| builder.with_no_client_auth().with_single_cert(chain, key))
                .map_err(io::Error::other)?;

        let dir = std::env::temp_dir().join(format!("iggy-route-tls-{pid}-{serial}"));
        fs::create_dir_all(&dir)?;
        let ca_file = dir.join("ca.pem");
        fs::write(&ca_file, trusted_pem)?;
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            dir,
            ca_file,
            failed_handshakes: AtomicU64::new(0),
        })
    }

    /// Runs the server side of the handshake. A failure (a plaintext client, one that
    /// rejects the certificate, one that never finishes) is the client's business and
    /// expected in tests: it is counted and logged at debug, and the socket is dropped.
    pub(crate) async fn accept(
        &self,
        node: NodeId,
        connection: u64,
        stream: TcpStream,
    ) -> Option<TlsStream<TcpStream>> {
        let failure =
            match tokio::time::timeout(HANDSHAKE_LIMIT, self.acceptor.accept(stream)).await {
                Ok(Ok(stream)) => return Some(stream),
                Ok(Err(error)) => error.to_string(),
                Err(_elapsed) => format!("no handshake within {HANDSHAKE_LIMIT:?}"),
            };
        self.failed_handshakes.fetch_add(1, Ordering::Relaxed);
        debug!(node, connection, %failure, "TLS handshake failed, closing");
        None
    }
}

impl Drop for ServerTls {
    fn drop(&mut self) {
        // Best effort: a leftover directory holds only a public CA certificate.
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A fresh self-signed CA named `name`, as an issuer and as PEM.
fn authority(name: &str) -> Result<(Issuer<'static, KeyPair>, String), rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = common_name(name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate()?;
    let pem = params.self_signed(&key)?.pem();
    Ok((Issuer::new(params, key), pem))
}

/// A server certificate for `names` (DNS names or IP addresses) signed by `issuer`, with
/// its private key.
fn leaf(
    names: Vec<String>,
    issuer: &Issuer<'_, KeyPair>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), rcgen::Error> {
    let subject = names.first().cloned().unwrap_or_default();
    let mut params = CertificateParams::new(names)?;
    params.distinguished_name = common_name(&subject);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate()?;
    let certificate = params.signed_by(&key, issuer)?;
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    Ok((vec![certificate.der().clone()], private))
}

fn common_name(name: &str) -> DistinguishedName {
    let mut distinguished = DistinguishedName::new();
    distinguished.push(DnType::CommonName, name);
    distinguished
}

/// A rustls client configuration that trusts only the CAs in the PEM file `ca_file`
/// (`ring` provider, TLS 1.2 and 1.3), for raw clients in tests that speak to a TLS
/// cluster without a router in between.
///
/// # Errors
/// If the file cannot be read or holds no usable certificate.
pub fn client_config(ca_file: &Path) -> io::Result<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_file_iter(ca_file).map_err(io::Error::other)? {
        roots
            .add(certificate.map_err(io::Error::other)?)
            .map_err(io::Error::other)?;
    }
    if roots.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("no certificate in {}", ca_file.display()),
        ));
    }
    Ok(
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(PROTOCOL_VERSIONS)
            .map_err(io::Error::other)?
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

impl TestCluster {
    /// The PEM file of the CA a client must trust to reach this cluster (`tls_ca_file`), or
    /// `None` for a plaintext cluster. It exists while the cluster runs.
    pub fn tls_ca_file(&self) -> Option<PathBuf> {
        self.shared.tls().map(|tls| tls.ca_file.clone())
    }

    /// `tls=true&tls_domain=localhost&tls_ca_file=<path>`: the connection-string options
    /// that reach this cluster over TLS as the SDK spells them, or `None` for a plaintext
    /// cluster.
    pub fn tls_options(&self) -> Option<String> {
        self.shared.tls().map(|tls| {
            format!(
                "tls=true&tls_domain={TLS_DOMAIN}&tls_ca_file={}",
                tls.ca_file.display()
            )
        })
    }

    /// Handshakes the nodes gave up on (plaintext clients, clients that rejected the
    /// certificate, handshakes that took too long), summed over all nodes; 0 for a
    /// plaintext cluster.
    pub fn tls_handshakes_failed(&self) -> u64 {
        self.shared
            .tls()
            .map_or(0, |tls| tls.failed_handshakes.load(Ordering::Relaxed))
    }
}

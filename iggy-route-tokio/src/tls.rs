//! TLS on every link when `Config::tls` is set.
//!
//! [`Client::connect`](crate::Client::connect) builds one rustls client configuration
//! ([`Tls`]) before any I/O, so that a CA file or a name that cannot work fails `connect` at
//! once. Each connection task then runs the handshake between its TCP connect and telling
//! the driver the link is connected: the router only ever sees links whose TLS session is
//! up, and afterwards the same bytes as over plain TCP. What goes wrong is a typed
//! [`TlsError`] (classified by the core), reported to the router as `ConnectError::Tls`;
//! the core's `ConnectWait` decides which of those end a `connect` that is still waiting for
//! its session (see `crate::session_wait`).
//!
//! The crypto provider is named (`ring`) rather than left to rustls's process default: a
//! program that also links something built with `aws-lc-rs` has two providers compiled in,
//! and rustls then cannot pick a default by itself.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use iggy_route_core::{Config, TlsConfig, TlsError};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore, SupportedProtocolVersion};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// TLS 1.3 and 1.2 (rustls has nothing older); named so that a change of rustls's defaults
/// cannot change them unnoticed.
static PROTOCOL_VERSIONS: &[&SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

/// One client's TLS settings, ready to use: shared by every connection task.
#[derive(Clone)]
pub(crate) struct Tls {
    connector: TlsConnector,
    /// `TlsConfig::domain`, checked. `None`: each node is checked against its own host.
    domain: Option<ServerName<'static>>,
    /// The settings, for the name each node is checked against.
    settings: TlsConfig,
    /// `Config::connect_timeout`: TCP connect and handshake together must fit in it.
    connect_timeout: Duration,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The connector holds only public material (trusted roots), but thousands of roots
        // would drown a log line: the name is what a reader needs.
        f.debug_struct("Tls")
            .field("domain", &self.domain)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// Builds the client configuration `config.tls` asks for: the CA file's certificates,
    /// or the bundled web PKI roots; and checks every name the seeds will be verified
    /// against. Reads the CA file, once, synchronously: it is small, and a `connect` that
    /// cannot trust anything must fail before it dials.
    pub(crate) fn new(config: &Config, tls: &TlsConfig) -> Result<Self, TlsError> {
        let domain = tls.domain.as_deref().map(server_name).transpose()?;
        let roots = match &tls.ca_file {
            Some(path) => roots_from_file(path)?,
            None => RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            },
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(PROTOCOL_VERSIONS)
            .map_err(|error| TlsError::Other(error.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let this = Self {
            connector: TlsConnector::from(Arc::new(client)),
            domain,
            settings: tls.clone(),
            connect_timeout: config.connect_timeout,
        };
        for seed in &config.seeds {
            this.server_name(seed)?;
        }
        Ok(this)
    }

    /// `Config::connect_timeout`, the bound on TCP connect and handshake together.
    pub(crate) fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The name the node at `addr` (`host:port`) must prove: `TlsConfig::domain`, or the
    /// address's own host (a DNS name or an IP address).
    pub(crate) fn server_name(&self, addr: &str) -> Result<ServerName<'static>, TlsError> {
        match &self.domain {
            Some(name) => Ok(name.clone()),
            None => server_name(self.settings.server_name_for(addr)),
        }
    }

    /// Runs the client side of the handshake on `tcp`, until `deadline`.
    pub(crate) async fn handshake(
        &self,
        name: ServerName<'static>,
        tcp: TcpStream,
        deadline: tokio::time::Instant,
    ) -> Result<TlsStream<TcpStream>, TlsError> {
        // Kept for the error: a mismatch names what was checked.
        let checked = name.clone();
        match tokio::time::timeout_at(deadline, self.connector.connect(name, tcp)).await {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(error)) => Err(classify(&error, &checked)),
            Err(_elapsed) => Err(TlsError::HandshakeTimedOut),
        }
    }
}

fn server_name(name: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(name.to_owned()).map_err(|_| TlsError::InvalidServerName {
        name: name.to_owned(),
    })
}

/// The certificates of the CA file at `path`, read once; the core judges them.
fn roots_from_file(path: &Path) -> Result<RootCertStore, TlsError> {
    let pem = std::fs::read(path).map_err(|error| TlsError::CaFile {
        path: path.to_owned(),
        problem: error.to_string(),
    })?;
    TlsConfig::ca_roots(path, &pem)
}

/// What a failed handshake means. tokio-rustls hands rustls's own error over inside an
/// `io::Error`; anything else is the socket's. The core classifies both.
fn classify(error: &io::Error, name: &ServerName<'_>) -> TlsError {
    match error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(tls) => TlsError::from_rustls(tls, &name.to_str()),
        None => TlsError::from_handshake_io(error),
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;

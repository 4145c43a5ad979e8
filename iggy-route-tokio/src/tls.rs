//! TLS on every link when `Config::tls` is set.
//!
//! [`Client::connect`](crate::Client::connect) builds one rustls client configuration
//! ([`Tls`]) before any I/O, so that a CA file or a name that cannot work fails `connect` at
//! once. Each connection task then runs the handshake between its TCP connect and telling
//! the driver the link is connected: the router only ever sees links whose TLS session is
//! up, and afterwards the same bytes as over plain TCP. What goes wrong is a typed
//! [`TlsError`], reported to the router as `ConnectError::Tls`; [`EarlyFailures`] decides
//! which of those end a `connect` that is still waiting for its session.
//!
//! The crypto provider is named (`ring`) rather than left to rustls's process default: a
//! program that also links something built with `aws-lc-rs` has two providers compiled in,
//! and rustls then cannot pick a default by itself.

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use iggy_route_core::client::ClientError;
use iggy_route_core::{Config, LinkId, NodeId, TlsConfig, TlsError};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{CertificateError, ClientConfig, RootCertStore, SupportedProtocolVersion};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tracing::warn;

/// Where `Client::connect` waits for the session: signed in, or why not.
pub(crate) type SessionReady = oneshot::Sender<Result<(), ClientError>>;

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
            None => server_name(host(addr)),
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

/// `host` of `host:port`, without the brackets of an IPv6 literal (`[::1]:8090`).
fn host(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _port)| host);
    host.strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host)
}

fn server_name(name: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(name.to_owned()).map_err(|_| TlsError::InvalidServerName {
        name: name.to_owned(),
    })
}

/// The certificates of the PEM file at `path`. A file that cannot be read, is not PEM, or
/// holds no certificate the verifier can use is an error; certificates it cannot use
/// beside usable ones are skipped with a warning, as a system bundle may hold a few.
fn roots_from_file(path: &Path) -> Result<RootCertStore, TlsError> {
    let problem = |problem: String| TlsError::CaFile {
        path: path.to_owned(),
        problem,
    };
    let pem = std::fs::read(path).map_err(|error| problem(error.to_string()))?;
    let mut roots = RootCertStore::empty();
    let mut found = 0usize;
    let mut unusable = None;
    for certificate in CertificateDer::pem_slice_iter(&pem) {
        let certificate = certificate.map_err(|error| problem(format!("bad PEM: {error}")))?;
        found += 1;
        if let Err(error) = roots.add(certificate) {
            unusable.get_or_insert(error);
        }
    }
    match (roots.is_empty(), unusable) {
        (true, None) => Err(problem("no PEM certificate in it".to_owned())),
        (true, Some(error)) => Err(problem(format!(
            "none of its {found} certificates is usable: {error}"
        ))),
        (false, Some(error)) => {
            let skipped = found - roots.len();
            warn!(path = %path.display(), skipped, %error, "CA file: unusable certificates skipped");
            Ok(roots)
        }
        (false, None) => Ok(roots),
    }
}

/// What a failed handshake means. tokio-rustls hands rustls's own error over inside an
/// `io::Error`; anything else is the socket's.
fn classify(error: &io::Error, name: &ServerName<'_>) -> TlsError {
    if let Some(tls) = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        return from_rustls(tls, name);
    }
    // The node closed the connection during the handshake. A plaintext Iggy node does so
    // when it takes the ClientHello for a frame header whose size it refuses; a TLS node
    // that refuses a client sends an alert first, which rustls reports as such.
    let closed = matches!(
        error.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    );
    if closed {
        TlsError::NotTls
    } else {
        TlsError::Other(error.to_string())
    }
}

fn from_rustls(error: &rustls::Error, name: &ServerName<'_>) -> TlsError {
    use rustls::Error as E;
    match error {
        E::InvalidCertificate(problem) => certificate(problem, name),
        E::NoCertificatesPresented | E::InvalidCertRevocationList(_) => {
            TlsError::CertificateRejected {
                reason: error.to_string(),
            }
        }
        // What bytes that are not TLS produce: a record header whose type, version or
        // length makes no sense.
        E::InvalidMessage(_) | E::PeerSentOversizedRecord => TlsError::NotTls,
        E::InappropriateMessage { .. }
        | E::InappropriateHandshakeMessage { .. }
        | E::InvalidEncryptedClientHello(_)
        | E::UnsupportedNameType
        | E::DecryptError
        | E::EncryptError
        | E::PeerIncompatible(_)
        | E::PeerMisbehaved(_)
        | E::AlertReceived(_)
        | E::General(_)
        | E::FailedToGetCurrentTime
        | E::FailedToGetRandomBytes
        | E::HandshakeNotComplete
        | E::NoApplicationProtocol
        | E::BadMaxFragmentSize
        | E::InconsistentKeys(_)
        | E::Other(_) => TlsError::Other(error.to_string()),
        // `rustls::Error` is non-exhaustive: a kind added later is some other failure.
        other => TlsError::Other(other.to_string()),
    }
}

/// A certificate the verifier refused: for another name, or not acceptable at all (an
/// unknown issuer, expired, revoked, badly signed: every other kind rustls has or adds).
fn certificate(problem: &CertificateError, name: &ServerName<'_>) -> TlsError {
    let mismatch = matches!(
        problem,
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
    );
    if mismatch {
        TlsError::NameMismatch {
            name: name.to_str().into_owned(),
        }
    } else {
        TlsError::CertificateRejected {
            reason: problem.to_string(),
        }
    }
}

/// TLS failures seen while `Client::connect` waits for the session, and what they mean for
/// it. A certificate or configuration problem ends it at once (`TlsError::is_fatal`): no
/// node will pass the same check by being dialled again. A plaintext node ends it once
/// every seed has answered so, since no seed could then carry the session; before that the
/// router goes on to the next seed. Anything else (a handshake that timed out) is kept, so
/// that a `connect` that runs out of time reports it rather than a bare timeout.
#[derive(Debug)]
pub(crate) struct EarlyFailures {
    /// How many seed nodes the router dials: ids `0..seeds`.
    seeds: usize,
    /// Seed nodes that answered in plaintext.
    not_tls: BTreeSet<NodeId>,
    latest: Option<TlsError>,
}

impl EarlyFailures {
    pub(crate) fn new(config: &Config) -> Self {
        Self {
            seeds: config.seeds.len().min(config.max_nodes.max(1)),
            not_tls: BTreeSet::new(),
            latest: None,
        }
    }

    /// A link to `node` failed with `error` before the session signed in: `Some` when
    /// `connect` must fail now, with that error.
    pub(crate) fn verdict(&mut self, node: NodeId, error: TlsError) -> Option<TlsError> {
        if error.is_fatal() {
            return Some(error);
        }
        if error == TlsError::NotTls && usize::try_from(node.0).is_ok_and(|id| id < self.seeds) {
            self.not_tls.insert(node);
            if self.not_tls.len() >= self.seeds {
                return Some(error);
            }
        }
        self.latest = Some(error);
        None
    }

    /// A link's TLS session failed to come up. It is logged whenever it happens (the router
    /// handles the link as any failed connect); while `Client::connect` still waits on
    /// `ready`, the failure may also end that wait (see [`EarlyFailures::verdict`]).
    pub(crate) fn failed(
        &mut self,
        ready: &mut Option<SessionReady>,
        link: LinkId,
        node: NodeId,
        error: TlsError,
    ) {
        warn!(%link, %node, %error, "TLS failed; handled as a failed connect");
        if ready.is_some()
            && let Some(error) = self.verdict(node, error)
            && let Some(ready) = ready.take()
        {
            // `connect` may have given up waiting; then nobody listens.
            let _ = ready.send(Err(ClientError::Tls(error)));
        }
    }

    /// The driver stops while `connect` may still wait: a `connect` that ran out of time
    /// stops it and then reads `ready`, and the TLS failure met says more than the bare
    /// timeout.
    pub(crate) fn stopped(&mut self, ready: &mut Option<SessionReady>) {
        if let Some(error) = self.take_latest()
            && let Some(ready) = ready.take()
        {
            let _ = ready.send(Err(ClientError::Tls(error)));
        }
    }

    /// The latest failure that did not end `connect`, to report when it runs out of time.
    pub(crate) fn take_latest(&mut self) -> Option<TlsError> {
        self.latest.take()
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;

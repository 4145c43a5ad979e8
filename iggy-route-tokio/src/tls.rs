//! TLS on every link when `Config::tls` is set.
//!
//! [`Client::connect`](crate::Client::connect) builds one rustls client configuration
//! ([`Tls`]) before any I/O, so that a CA file or a name that cannot work fails `connect` at
//! once. Each connection task then runs the handshake between its TCP connect and telling
//! the driver the link is connected: the router only ever sees links whose TLS session is
//! up, and afterwards the same bytes as over plain TCP. What goes wrong is a typed
//! [`TlsError`] (classified by the core), reported to the router as `ConnectError::Tls`;
//! the core's `SessionWatch` decides which of those end a `connect` that is still waiting
//! for its session.
//!
//! The configuration itself (versions, the `ring` provider, trusted roots, names) is the
//! core's `TlsClient`, the same for both adapters.

use std::fmt;
use std::io;
use std::time::Duration;

use iggy_route_core::{Config, TlsClient, TlsConfig, TlsError};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// One client's TLS settings, ready to use: shared by every connection task.
#[derive(Clone)]
pub(crate) struct Tls {
    /// The core's configuration: versions, provider, trusted roots, names.
    client: TlsClient,
    connector: TlsConnector,
    /// `Config::connect_timeout`: TCP connect and handshake together must fit in it.
    connect_timeout: Duration,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// Builds the client configuration `config.tls` asks for (the core's `TlsClient`) and
    /// checks every name the seeds will be verified against. Reads the CA file, once,
    /// synchronously: it is small, and a `connect` that cannot trust anything must fail
    /// before it dials.
    pub(crate) fn new(config: &Config, tls: &TlsConfig) -> Result<Self, TlsError> {
        let client = TlsClient::new(tls, &config.seeds, |path| std::fs::read(path))?;
        Ok(Self {
            connector: TlsConnector::from(client.config().clone()),
            client,
            connect_timeout: config.connect_timeout,
        })
    }

    /// `Config::connect_timeout`, the bound on TCP connect and handshake together.
    pub(crate) fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The name the node at `addr` (`host:port`) must prove: `TlsConfig::domain`, or the
    /// address's own host (a DNS name or an IP address).
    pub(crate) fn server_name(&self, addr: &str) -> Result<ServerName<'static>, TlsError> {
        self.client.server_name(addr)
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

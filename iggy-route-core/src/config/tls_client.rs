//! The rustls client configuration both adapters make every link's TLS session from (only
//! with the `rustls` feature): one rule for the protocol versions offered, the crypto
//! provider, the certificate authorities trusted and the name each node must prove. The
//! adapter hands in how to read a file; nothing here does I/O of its own.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore, SupportedProtocolVersion};

use super::tls::{TlsConfig, TlsError};

/// TLS 1.3 and 1.2, as the server accepts (rustls has nothing older); named so that a
/// change of rustls's defaults cannot change what is offered unnoticed.
static PROTOCOL_VERSIONS: &[&SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

/// One client's TLS settings, ready to make sessions from: built once, before any link is
/// dialled, and shared by every link (which also shares rustls's session cache: a data link
/// resumes an earlier link's session to its node instead of a full handshake).
#[derive(Clone)]
pub struct TlsClient {
    config: Arc<ClientConfig>,
    /// `TlsConfig::domain`, checked: the name every node must present. `None`: each
    /// address's own host.
    domain: Option<ServerName<'static>>,
    settings: TlsConfig,
}

impl fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The configuration holds only public material (trusted roots), but thousands of
        // roots would drown a log line: the name is what a reader needs.
        f.debug_struct("TlsClient")
            .field("domain", &self.domain)
            .finish_non_exhaustive()
    }
}

impl TlsClient {
    /// The configuration `tls` asks for: the certificates of its CA file (read with
    /// `read_file`, once), or else the bundled web PKI roots; and every name the nodes at
    /// `seeds` will be checked against, checked now, so that a configuration to fix fails
    /// `connect` before it dials.
    ///
    /// The crypto provider is named (`ring`) rather than left to rustls's process default:
    /// a program that also links something built with `aws-lc-rs` (the Iggy SDK, say) has
    /// two providers compiled in, and rustls then cannot pick one by itself.
    pub fn new(
        tls: &TlsConfig,
        seeds: &[String],
        read_file: impl FnOnce(&Path) -> io::Result<Vec<u8>>,
    ) -> Result<Self, TlsError> {
        let roots = match &tls.ca_file {
            Some(path) => {
                let pem = read_file(path).map_err(|error| TlsError::CaFile {
                    path: path.to_owned(),
                    problem: error.to_string(),
                })?;
                TlsConfig::ca_roots(path, &pem)?
            }
            None => RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            },
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(PROTOCOL_VERSIONS)
            .map_err(|error| TlsError::Other(error.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let client = Self {
            config: Arc::new(config),
            domain: tls.domain.as_deref().map(server_name).transpose()?,
            settings: tls.clone(),
        };
        for seed in seeds {
            client.server_name(seed)?;
        }
        Ok(client)
    }

    /// The rustls configuration every link's session is made from.
    pub fn config(&self) -> &Arc<ClientConfig> {
        &self.config
    }

    /// The name the node at `addr` (`host:port`) must prove, and that is sent as SNI:
    /// `TlsConfig::domain`, or the address's own host (a DNS name or an IP address).
    pub fn server_name(&self, addr: &str) -> Result<ServerName<'static>, TlsError> {
        match &self.domain {
            Some(name) => Ok(name.clone()),
            None => server_name(self.settings.server_name_for(addr)),
        }
    }
}

fn server_name(name: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(name.to_owned()).map_err(|_| TlsError::InvalidServerName {
        name: name.to_owned(),
    })
}

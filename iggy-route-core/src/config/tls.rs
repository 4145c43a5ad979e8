//! TLS settings, as data: the core never touches TLS (it sees the same bytes either way);
//! the adapters wrap every link's socket (coordinator and data links alike) in a TLS session
//! made from these settings, and report what goes wrong as a [`TlsError`].

use std::io;
use std::path::PathBuf;

/// How every link is secured, when it is (`Config::tls`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsConfig {
    /// The name the nodes' certificates must carry, sent as SNI. `None`: each address's
    /// own host (for `127.0.0.1:8090`, the IP address `127.0.0.1`). The SDK's
    /// `tls_domain`: one name for every node, as a cluster certificate usually has.
    pub domain: Option<String>,
    /// A PEM file of the certificate authorities to trust instead of the bundled web PKI
    /// roots (`webpki-roots`). The SDK's `tls_ca_file`.
    pub ca_file: Option<PathBuf>,
}

impl TlsConfig {
    /// The name the node at `addr` (`host:port`) must prove, and that is sent as SNI:
    /// [`TlsConfig::domain`], or the address's own host, without the brackets of an IPv6
    /// literal (`[::1]:8090` gives `::1`). Whether it is a valid name is the TLS library's
    /// to judge.
    pub fn server_name_for<'a>(&'a self, addr: &'a str) -> &'a str {
        if let Some(domain) = &self.domain {
            return domain;
        }
        let host = addr.rsplit_once(':').map_or(addr, |(host, _port)| host);
        host.strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .unwrap_or(host)
    }
}

/// Why a TLS session could not be set up or was not accepted. Typed so that a caller can
/// tell a configuration to fix (a CA file, a name) from a node to look at (its
/// certificate) from a node that does not speak TLS at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The CA file could not be read, or holds no usable certificate.
    #[error("CA file {path:?}: {problem}")]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        problem: String,
    },
    /// The name to verify the nodes against is not a DNS name or an IP address.
    #[error("{name:?} is not a valid TLS server name")]
    InvalidServerName {
        /// The name.
        name: String,
    },
    /// The node's certificate is valid but not for the name it was checked against.
    #[error("the node's certificate is not valid for {name:?}")]
    NameMismatch {
        /// The name checked (`domain`, or the address's host).
        name: String,
    },
    /// The node's certificate was not accepted: an unknown issuer, expired, revoked, or
    /// badly signed.
    #[error("the node's certificate was not accepted: {reason}")]
    CertificateRejected {
        /// Why, as the TLS library put it.
        reason: String,
    },
    /// The node answered with something other than TLS (a plaintext Iggy server, say).
    #[error("the node does not speak TLS")]
    NotTls,
    /// The handshake did not finish within `connect_timeout`.
    #[error("the TLS handshake did not finish in time")]
    HandshakeTimedOut,
    /// Any other TLS failure (no common protocol version or cipher suite, an alert).
    #[error("TLS failure: {0}")]
    Other(String),
}

impl TlsError {
    /// Whether the failure is the configuration's or the certificate's, and so will not
    /// pass by dialling again: a client's `connect` reports it at once instead of waiting
    /// out its budget. A timeout, or a node that does not speak TLS, may be one node's
    /// problem and leaves the router trying the others.
    pub fn is_fatal(&self) -> bool {
        match self {
            Self::CaFile { .. }
            | Self::InvalidServerName { .. }
            | Self::NameMismatch { .. }
            | Self::CertificateRejected { .. } => true,
            Self::NotTls | Self::HandshakeTimedOut | Self::Other(_) => false,
        }
    }

    /// What a socket error during the handshake means. The node hanging up on the
    /// ClientHello is what a server that does not speak TLS does when it cannot make sense
    /// of it (a plaintext Iggy node refuses the frame size it reads from it), while a TLS
    /// server that refuses a client sends an alert first; anything else is some other
    /// failure, with its message.
    #[doc(hidden)]
    pub fn from_handshake_io(error: &io::Error) -> Self {
        let hung_up = matches!(
            error.kind(),
            io::ErrorKind::UnexpectedEof
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe
        );
        if hung_up {
            Self::NotTls
        } else {
            Self::Other(error.to_string())
        }
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;

//! What the router tells its driver: the outputs to carry out, and the transport's
//! reasons it is told in turn.

use bytes::Bytes;

use crate::event::Event;
use crate::ids::{LinkId, NodeId, RequestId};
use crate::request::Outcome;

/// Why the transport could not open a connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The address did not resolve.
    #[error("address did not resolve")]
    Resolve,
    /// The node refused or did not answer.
    #[error("connection refused or unreachable")]
    Unreachable,
    /// The TLS session could not be set up or was not accepted.
    #[error("tls: {0}")]
    Tls(crate::config::TlsError),
    /// Any other transport error.
    #[error("{0}")]
    Other(String),
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CloseReason {
    /// The peer closed it.
    #[error("closed by peer")]
    Peer,
    /// A read or write failed.
    #[error("i/o error: {0}")]
    Io(String),
    /// The router asked for it (`Output::Close`).
    #[error("closed by the router")]
    Local,
}

/// What the router wants done. Drained with [`Router::poll_output`](super::Router::poll_output).
///
/// Its `Debug` form shows a `Transmit` by length only: a login frame carries the password.
///
/// Deliberately not `#[non_exhaustive]`: a new kind of output must break every adapter's
/// `match` at compile time, so that none can quietly ignore it.
#[must_use = "an output left undone strands a link or a caller"]
pub enum Output {
    /// Open a TCP connection to `addr` (`host:port`) for `link`; report the result with
    /// `handle_connected` or `handle_connect_failed`.
    Connect {
        /// The new link.
        link: LinkId,
        /// The node it leads to.
        node: NodeId,
        /// Where to connect.
        addr: String,
    },
    /// Write these bytes on the link, after everything written before.
    Transmit {
        /// The link.
        link: LinkId,
        /// The bytes.
        bytes: Bytes,
    },
    /// Close the link. The router has already forgotten it: no `handle_closed` is needed.
    Close {
        /// The link.
        link: LinkId,
    },
    /// A request is over.
    Completed {
        /// The request.
        id: RequestId,
        /// How it ended.
        outcome: Outcome,
    },
    /// Something for logs and counters.
    Event(Event),
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect { link, node, addr } => f
                .debug_struct("Connect")
                .field("link", link)
                .field("node", node)
                .field("addr", addr)
                .finish(),
            Self::Transmit { link, bytes } => f
                .debug_struct("Transmit")
                .field("link", link)
                .field("len", &bytes.len())
                .finish(),
            Self::Close { link } => f.debug_struct("Close").field("link", link).finish(),
            Self::Completed { id, outcome } => f
                .debug_struct("Completed")
                .field("id", id)
                .field("outcome", outcome)
                .finish(),
            Self::Event(event) => f.debug_tuple("Event").field(event).finish(),
        }
    }
}

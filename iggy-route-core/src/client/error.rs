//! The one error type of the adapters' clients: every way an operation can fail, typed.

use std::convert::Infallible;
use std::io;
use std::time::Duration;

use crate::wire::WireError;
use crate::{ConfigError, ConnectionStringError, RequestError, SubmitError};

/// Why a client operation failed. Credentials never appear in it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The request was accepted and ended without success (server error, timeout, outcome
    /// unknown, sign-in refused, shut down, ...).
    #[error(transparent)]
    Request(RequestError),
    /// The router refused the request before sending anything (frame too large, empty
    /// batch, ...).
    #[error(transparent)]
    Submit(SubmitError),
    /// Too many requests were waiting (in all, or for the request's partition): nothing
    /// was sent. One variant whether the router said so at once or after the request
    /// waited for its topic's partition count.
    #[error("queue full: {limit} requests pending")]
    QueueFull {
        /// The limit that was hit.
        limit: usize,
    },
    /// The configuration was not accepted.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The client's own machinery failed (spawning its task or thread, or for the blocking
    /// client its poller or waker).
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// The connection string was not accepted.
    #[error(transparent)]
    ConnectionString(#[from] ConnectionStringError),
    /// A stream, topic or consumer name the wire cannot carry.
    #[error("invalid argument: {0}")]
    Invalid(#[from] WireError),
    /// TLS could not be set up (a CA file, a server name) or a node's certificate was not
    /// accepted: reported by `connect` at once, as dialling again would not help.
    #[error("tls: {0}")]
    Tls(#[from] crate::config::TlsError),
    /// The session did not sign in within the connect budget.
    #[error("no session signed in within {after:?}")]
    ConnectTimedOut {
        /// The budget (a few connect timeouts).
        after: Duration,
    },
    /// The reply was of another kind than the request asked for (a router bug).
    #[error("unexpected reply to {operation}")]
    UnexpectedReply {
        /// The operation that got it.
        operation: &'static str,
    },
    /// The client was shut down.
    #[error("client shut down")]
    Closed,
    /// A consumer of this group already lives on this client: the server counts a client
    /// as one member of a group, so a second consumer would share its membership and read
    /// the same partitions. Each member of a group needs a client of its own.
    #[error("a consumer of group {group} already lives on this client")]
    GroupConsumerExists {
        /// The group, as the consumer named it.
        group: crate::wire::Identifier,
    },
}

impl ClientError {
    /// Whether the operation may have taken effect on the server although it failed, so
    /// that doing it again may duplicate it (see [`RequestError::in_doubt`]; also a reply of
    /// another kind, which a node sent after it read the request, and `Closed`, which a
    /// background producer's deliveries in flight get when it ends). Every other error
    /// means that it did not take effect.
    pub fn in_doubt(&self) -> bool {
        match self {
            Self::Request(error) => error.in_doubt(),
            // A background producer's deliveries in flight when it ended, and a call whose
            // client stopped under it, end `Closed`: they may be stored.
            Self::UnexpectedReply { .. } | Self::Closed => true,
            Self::Submit(_)
            | Self::QueueFull { .. }
            | Self::Config(_)
            | Self::Io(_)
            | Self::ConnectionString(_)
            | Self::Invalid(_)
            | Self::Tls(_)
            | Self::ConnectTimedOut { .. }
            | Self::GroupConsumerExists { .. } => false,
        }
    }
}

impl ClientError {
    /// Whether this says the client itself is gone (shut down, or its task or thread
    /// stopped), so that nothing sent through it can go any more.
    pub(crate) fn client_gone(&self) -> bool {
        matches!(
            self,
            Self::Closed
                | Self::Request(RequestError::Shutdown)
                | Self::Submit(SubmitError::Closed)
        )
    }
}

impl From<RequestError> for ClientError {
    fn from(error: RequestError) -> Self {
        match error {
            RequestError::QueueFull { limit } => Self::QueueFull { limit },
            RequestError::Closed => Self::Closed,
            other @ (RequestError::TimedOut { .. }
            | RequestError::OutcomeUnknown { .. }
            | RequestError::Server { .. }
            | RequestError::TopicNotFound { .. }
            | RequestError::PartitionOutOfRange { .. }
            | RequestError::NoRoute { .. }
            | RequestError::SignIn { .. }
            | RequestError::Malformed(_)
            | RequestError::Evicted { .. }
            | RequestError::ConnectionLost { .. }
            | RequestError::Withdrawn
            | RequestError::Shutdown) => Self::Request(other),
        }
    }
}

impl From<SubmitError> for ClientError {
    fn from(error: SubmitError) -> Self {
        match error {
            SubmitError::QueueFull { limit } => Self::QueueFull { limit },
            other @ (SubmitError::FrameTooLarge { .. }
            | SubmitError::EmptyBatch
            | SubmitError::EmptyPoll
            | SubmitError::Invalid(_)
            | SubmitError::SessionCommand { .. }
            | SubmitError::Closed) => Self::Submit(other),
        }
    }
}

/// One failure may end several callers' work (the sends of a producer's batch), and each
/// gets its own copy. An I/O error keeps its kind and message (`io::Error` is not `Clone`).
impl Clone for ClientError {
    fn clone(&self) -> Self {
        match self {
            Self::Request(error) => Self::Request(error.clone()),
            Self::Submit(error) => Self::Submit(error.clone()),
            Self::QueueFull { limit } => Self::QueueFull { limit: *limit },
            Self::Config(error) => Self::Config(error.clone()),
            Self::Io(error) => Self::Io(io::Error::new(error.kind(), error.to_string())),
            Self::ConnectionString(error) => Self::ConnectionString(error.clone()),
            Self::Invalid(error) => Self::Invalid(error.clone()),
            Self::Tls(error) => Self::Tls(error.clone()),
            Self::ConnectTimedOut { after } => Self::ConnectTimedOut { after: *after },
            Self::UnexpectedReply { operation } => Self::UnexpectedReply { operation },
            Self::Closed => Self::Closed,
            Self::GroupConsumerExists { group } => Self::GroupConsumerExists {
                group: group.clone(),
            },
        }
    }
}

/// Numeric identifiers convert without failing; this lets `u32` and `Identifier` arguments
/// share the signature that names (`&str`) need.
impl From<Infallible> for ClientError {
    fn from(never: Infallible) -> Self {
        match never {}
    }
}

//! iggy-route's errors as the SDK's `IggyError`, by the table in the `sdk` module docs.

use iggy_common::IggyError;
use iggy_route_core::client::ClientError;
use iggy_route_core::wire::Identifier;
use iggy_route_core::{RequestError, SubmitError, TlsError};

use super::convert_messages::sdk_identifier;

/// Turns an iggy-route error into the [`IggyError`] the SDK 0.11.0 gives for the same
/// outcome (the table is in the crate documentation, under "SDK traits").
///
/// A trait and not `impl From<ClientError> for IggyError`: both types are foreign to this
/// crate (`ClientError` is iggy-route-core's, `IggyError` iggy_common's), so the orphan rule
/// forbids that `From` here. Every SDK trait method of [`Client`](crate::Client) uses it;
/// call it yourself for the errors of the native methods, `Client::connect` included:
///
/// ```no_run
/// # async fn example() -> Result<(), iggy_route_tokio::iggy_common::IggyError> {
/// use iggy_route_tokio::{Client, IntoIggyError};
///
/// let client = Client::from_connection_string("iggy://iggy:iggy@127.0.0.1:8090")
///     .await
///     .map_err(IntoIggyError::into_iggy_error)?;
/// # Ok(())
/// # }
/// ```
pub trait IntoIggyError {
    /// The SDK's error for this outcome.
    fn into_iggy_error(self) -> IggyError;
}

impl IntoIggyError for ClientError {
    fn into_iggy_error(self) -> IggyError {
        match self {
            ClientError::Request(error) => error.into_iggy_error(),
            ClientError::Submit(error) => error.into_iggy_error(),
            ClientError::QueueFull { .. } => IggyError::BackgroundSendBufferFull,
            ClientError::Config(_) => IggyError::InvalidConfiguration,
            ClientError::Io(error) => IggyError::IoError(error.to_string()),
            ClientError::ConnectionString(_) => IggyError::InvalidConnectionString,
            ClientError::Invalid(_) => IggyError::InvalidFormat,
            ClientError::Tls(error) => tls_error(&error),
            ClientError::ConnectTimedOut { .. } => IggyError::CannotEstablishConnection,
            // A reply of another kind than the request asked for: the SDK's word for an
            // answer it cannot read.
            ClientError::UnexpectedReply { .. } => IggyError::InvalidFormat,
            ClientError::Closed => IggyError::ClientShutdown,
            // Only `Client::consumer` reports it, and no SDK trait method can; a variant
            // added later has no SDK counterpart known here.
            ClientError::GroupConsumerExists { .. } | _ => IggyError::Error,
        }
    }
}

impl IntoIggyError for RequestError {
    fn into_iggy_error(self) -> IggyError {
        match self {
            // A code that leaves the outcome open (59, 11001): "may have been stored".
            RequestError::Server { code } if code.says_outcome_unknown() => {
                IggyError::TransientNotCommitted
            }
            // The server's own code, turned into `IggyError` as the SDK turns a reply's
            // status (`IggyError::from_code`). A sign-in refusal and an eviction carry the
            // code the SDK reports for them too.
            RequestError::Server { code }
            | RequestError::SignIn { code }
            | RequestError::Evicted { code, .. } => IggyError::from_code(code.as_u32()),
            // May or may not have been stored: 57 is the protocol's code for a request
            // whose commit is not confirmed, which the SDK also returns when its replays
            // of one run out. Never a plain failure: see the table.
            RequestError::OutcomeUnknown { .. } | RequestError::TimedOut { in_doubt: true, .. } => {
                IggyError::TransientNotCommitted
            }
            // Its deadline passed before any node admitted it (or it only read): nothing
            // was stored, and it may be sent again, as after `NoRoute`.
            RequestError::TimedOut {
                in_doubt: false, ..
            } => IggyError::TransientNotAccepted,
            RequestError::TopicNotFound { stream, topic } => {
                IggyError::TopicIdNotFound(sdk_identifier(&topic), sdk_identifier(&stream))
            }
            // The SDK's `from_code(3007)` has no stream or topic to name either.
            RequestError::PartitionOutOfRange { partition, .. } => IggyError::PartitionNotFound(
                usize::try_from(partition).unwrap_or(usize::MAX),
                iggy_common::Identifier::default(),
                iggy_common::Identifier::default(),
            ),
            // No node admitted it: nothing was stored, and it may be sent again.
            RequestError::NoRoute { .. } => IggyError::TransientNotAccepted,
            RequestError::Malformed(_) => IggyError::InvalidFormat,
            RequestError::QueueFull { .. } => IggyError::BackgroundSendBufferFull,
            // A read whose link closed under it twice: what the SDK reports for a lost
            // connection.
            RequestError::ConnectionLost { .. } => IggyError::Disconnected,
            RequestError::Shutdown | RequestError::Closed => IggyError::ClientShutdown,
            // `Withdrawn` reaches nobody: only a caller that stopped waiting withdraws.
            RequestError::Withdrawn | _ => IggyError::Error,
        }
    }
}

impl IntoIggyError for SubmitError {
    fn into_iggy_error(self) -> IggyError {
        match self {
            SubmitError::QueueFull { .. } => IggyError::BackgroundSendBufferFull,
            SubmitError::FrameTooLarge { size, max } => IggyError::CommandLengthError(format!(
                "a request of {size} bytes exceeds the {max}-byte frame limit"
            )),
            SubmitError::EmptyBatch | SubmitError::EmptyPoll => IggyError::InvalidMessagesCount,
            SubmitError::Invalid(iggy_route_core::wire::WireError::InvalidValue {
                field: iggy_route_core::ORIGIN_TIMESTAMP_SPAN,
                value,
            }) => IggyError::InvalidMessageTimestampDelta(value),
            SubmitError::Invalid(_) => IggyError::InvalidFormat,
            // The SDK refuses a login code sent as a raw command the same way.
            SubmitError::SessionCommand { .. } => IggyError::InvalidCommand,
            SubmitError::Closed => IggyError::ClientShutdown,
            _ => IggyError::Error,
        }
    }
}
/// A send's error: iggy-route finds a stream, topic or partition missing before it sends
/// (it reads the topic to choose the partition). A send to a named partition the SDK sends
/// as it is, and the server answers `ResourceNotFound` (20) for any of the three; a
/// balanced or keyed send the SDK partitions itself, from the topic it reads first, and a
/// missing stream or topic, or a topic with no partition to choose, is its own
/// `TopicIdNotFound` (2010). The rest as [`IntoIggyError`].
pub(super) fn send_error(
    error: ClientError,
    (stream, topic): (&Identifier, &Identifier),
    to_named_partition: bool,
) -> IggyError {
    let ClientError::Request(missing) = &error else {
        return error.into_iggy_error();
    };
    if let RequestError::PartitionOutOfRange { count, .. } = missing {
        if *count == 0 && !to_named_partition {
            return IggyError::TopicIdNotFound(sdk_identifier(topic), sdk_identifier(stream));
        }
        return IggyError::ResourceNotFound(missing.to_string());
    }
    if to_named_partition && matches!(missing, RequestError::TopicNotFound { .. }) {
        return IggyError::ResourceNotFound(missing.to_string());
    }
    error.into_iggy_error()
}

fn tls_error(error: &TlsError) -> IggyError {
    match error {
        TlsError::CaFile { .. } => IggyError::InvalidTlsCertificatePath,
        TlsError::InvalidServerName { .. } => IggyError::InvalidTlsDomain,
        TlsError::NameMismatch { .. } | TlsError::CertificateRejected { .. } => {
            IggyError::InvalidTlsCertificate
        }
        // A failure added later cannot establish the connection either.
        TlsError::NotTls | TlsError::HandshakeTimedOut | TlsError::Other(_) | _ => {
            IggyError::CannotEstablishConnection
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use iggy_route_core::NodeId;
    use iggy_route_core::wire::{ErrorCode, Identifier};

    use super::*;

    fn code(error: impl IntoIggyError) -> u32 {
        error.into_iggy_error().as_code()
    }

    #[test]
    fn server_codes_pass_through_as_the_sdk_reads_them() {
        for server in [1009, 2010, 3021, 5006, 46, 42] {
            let error = RequestError::Server {
                code: ErrorCode::from_u32(server),
            };
            assert_eq!(code(ClientError::Request(error)), server);
        }
        let sign_in = RequestError::SignIn {
            code: ErrorCode::from_u32(42),
        };
        assert_eq!(
            ClientError::Request(sign_in).into_iggy_error(),
            IggyError::InvalidCredentials
        );
    }

    #[test]
    fn an_unknown_outcome_is_57_and_never_a_plain_failure() {
        let unknown = RequestError::OutcomeUnknown {
            node: Some(NodeId(1)),
        };
        assert_eq!(code(unknown), 57);
        let timed_out = RequestError::TimedOut {
            after: Duration::from_secs(1),
            in_doubt: true,
        };
        assert_eq!(code(timed_out), 57);
        let never_admitted = RequestError::TimedOut {
            after: Duration::from_secs(1),
            in_doubt: false,
        };
        assert_eq!(code(never_admitted), 58);
        let lost = RequestError::ConnectionLost { node: None };
        assert_eq!(code(lost), IggyError::Disconnected.as_code());
    }

    #[test]
    fn iggy_routes_own_outcomes_map_to_the_closest_sdk_errors() {
        assert_eq!(
            code(ClientError::QueueFull { limit: 1 }),
            IggyError::BackgroundSendBufferFull.as_code()
        );
        assert_eq!(
            code(ClientError::Closed),
            IggyError::ClientShutdown.as_code()
        );
        assert_eq!(
            code(ClientError::ConnectTimedOut {
                after: Duration::from_secs(3)
            }),
            IggyError::CannotEstablishConnection.as_code()
        );
        assert_eq!(
            code(ClientError::Tls(TlsError::NotTls)),
            IggyError::CannotEstablishConnection.as_code()
        );
        assert_eq!(
            code(ClientError::Tls(TlsError::InvalidServerName {
                name: "x".into()
            })),
            IggyError::InvalidTlsDomain.as_code()
        );
        assert_eq!(
            code(SubmitError::EmptyBatch),
            IggyError::InvalidMessagesCount.as_code()
        );
        let missing = RequestError::TopicNotFound {
            stream: Identifier::try_from("orders").unwrap(),
            topic: Identifier::Numeric(3),
        };
        let IggyError::TopicIdNotFound(topic, stream) = missing.into_iggy_error() else {
            panic!("not TopicIdNotFound");
        };
        assert_eq!(
            (topic.to_string(), stream.to_string()),
            ("3".into(), "orders".into())
        );
    }
}

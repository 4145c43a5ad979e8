//! What a reply says, as values: pure functions from a reply's header and body (and the
//! facts it is read against) to what the router makes of it. The router applies their
//! verdicts (see `frames` and `replies`); nothing here touches a link, a request or the
//! routing layer, so each rule is tested here on its own.

use bytes::Bytes;

use super::link::Sealed;
use crate::event::ProtocolViolation;
use crate::ids::{NodeId, RequestId};
use crate::request::{AdminRequest, Reply, ReplyPayload, Request, RequestError, SendReceipt};
use crate::routing::{RouteAnswer, TopicAnswer};
use crate::wire::{
    ErrorCode, Operation, PollMessagesReply, ReplyError, ReplyHeader, SendConfirmation,
    SendMessagesReply, StreamDetails, TopicDetails, WireError, reply_payload, split_result,
};

/// What an error status makes of a caller's request in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StatusClass {
    /// Never admitted (58): safe to write again anywhere; the reply header may name the
    /// replica that would admit it.
    Refused,
    /// Not processed under a live session (40 / 30).
    SessionLost,
    /// The server's answer to the request: it fails with it.
    Failed,
}

/// The class of an error status (see [`StatusClass`]).
pub(super) fn status_class(code: ErrorCode) -> StatusClass {
    if code.is_refusal() {
        StatusClass::Refused
    } else if code.is_session_lost() {
        StatusClass::SessionLost
    } else {
        StatusClass::Failed
    }
}

/// What a route lookup answered with an error status says; `None` when the coordinator's
/// own session is in doubt (40 / 30), so that the lookup is asked again once signed in.
pub(super) fn route_refusal(code: ErrorCode) -> Option<RouteAnswer> {
    if code.is_unsupported() {
        Some(RouteAnswer::Unsupported)
    } else if code.is_session_lost() {
        None
    } else if code.is_not_found() {
        Some(RouteAnswer::Failed(RequestError::Server { code }))
    } else {
        // 58 (no primary yet, metadata floor), or anything else: ask again later.
        Some(RouteAnswer::Unavailable)
    }
}

/// "Not committed yet" (57): on the status channel, or, for a result-framed operation (a
/// metadata write in flight or not caught up on the leader), in the result section. Either
/// way the outcome is unknown and only a replay of the same bytes is safe.
pub(super) fn not_committed(header: &ReplyHeader, body: &[u8]) -> bool {
    let code = ErrorCode::TransientNotCommitted;
    if header.status != 0 {
        return header.status == code.as_u32();
    }
    header.operation.is_result_framed()
        && matches!(split_result(body), Ok(Err(found)) if found == code)
}

/// A reply whose status says the session is gone (see [`ErrorCode::is_session_lost`]).
pub(super) fn session_lost(header: &ReplyHeader) -> bool {
    header.status != 0 && ErrorCode::from_u32(header.status).is_session_lost()
}

/// What a topic lookup's reply says.
pub(super) fn topic_answer(header: &ReplyHeader, body: Bytes) -> TopicAnswer {
    match reply_payload(header, body) {
        Ok(payload) if payload.is_empty() => TopicAnswer::NotFound,
        Ok(payload) => match TopicDetails::decode(&payload) {
            Ok(details) => TopicAnswer::Found {
                partitions_count: details.summary.partitions_count,
            },
            Err(_) => TopicAnswer::Unavailable,
        },
        Err(ReplyError::Status(code) | ReplyError::Rejected(code)) if code.is_not_found() => {
            TopicAnswer::NotFound
        }
        Err(ReplyError::Status(code)) if code == ErrorCode::Unauthorized => {
            TopicAnswer::Denied { code }
        }
        Err(_) => TopicAnswer::Unavailable,
    }
}

/// One send's receipt: the partition the confirmation names, else the one routing chose
/// for it (0 when none was chosen), admitted by `node` (`replica` in the roster).
pub(super) fn send_receipt(
    confirmation: Option<SendConfirmation>,
    routed_partition: Option<u32>,
    base_offset: Option<u64>,
    messages: u32,
    (node, replica): (NodeId, Option<u32>),
) -> SendReceipt {
    SendReceipt {
        partition_id: confirmation.map_or(routed_partition.unwrap_or(0), |c| c.partition_id),
        base_offset,
        messages,
        node,
        replica,
    }
}

/// Each send of a merged frame with its message count and base offset: the first one's is
/// the reply's, each next one's follows the messages of those before it (none when the
/// reply reported none).
pub(super) fn merged_offsets(
    batch: &[(RequestId, u32)],
    base: Option<u64>,
) -> impl Iterator<Item = (RequestId, u32, Option<u64>)> + '_ {
    batch.iter().scan(base, |offset, &(id, messages)| {
        let this = *offset;
        *offset = offset.map(|base| base.saturating_add(u64::from(messages)));
        Some((id, messages, this))
    })
}

/// The successful payload of a request, as the caller's typed reply.
pub(super) fn decode_reply(
    request: &Request,
    partition: Option<u32>,
    admitted_by: (NodeId, Option<u32>),
    payload: Bytes,
) -> Result<Reply, WireError> {
    let reply = match request {
        Request::Send(send) => {
            // An empty body is a send the server admitted without confirmations (the SDK
            // reports it as a success, protocol §4.2); a body that does not decode is no
            // confirmation of anything.
            let confirmation = if payload.is_empty() {
                None
            } else {
                SendMessagesReply::decode(&payload)?
                    .confirmations
                    .first()
                    .copied()
            };
            let messages = u32::try_from(send.messages.len()).unwrap_or(u32::MAX);
            let base_offset = confirmation.map(|c| c.base_offset);
            Reply::Sent(send_receipt(
                confirmation,
                partition,
                base_offset,
                messages,
                admitted_by,
            ))
        }
        Request::Poll(_) => Reply::Polled(PollMessagesReply::decode(&payload)?),
        Request::StoreOffset(_) => Reply::OffsetStored,
        Request::Admin(admin) => match admin {
            AdminRequest::CreateStream { .. } | AdminRequest::GetStream { .. } => {
                if payload.is_empty() {
                    Reply::Stream(None)
                } else {
                    Reply::Stream(Some(StreamDetails::decode(&payload)?))
                }
            }
            AdminRequest::CreateTopic { .. } | AdminRequest::GetTopic { .. } => {
                if payload.is_empty() {
                    Reply::Topic(None)
                } else {
                    Reply::Topic(Some(TopicDetails::decode(&payload)?))
                }
            }
            AdminRequest::CreatePartitions { .. } => Reply::PartitionsCreated,
        },
        // Decoded by the caller, who knows the command's reply type.
        Request::Command(_) => Reply::Payload(ReplyPayload(payload)),
    };
    Ok(reply)
}

/// Why a reply does not answer the exchange in flight, if it does not. The request number
/// is always echoed. The operation is not, to the letter: the real server answers a
/// `CreateTopic` with the `CreateTopicWithAssignments` it turned it into, and a
/// `DeleteSegments` with the `TruncatePartition` it commits (which has a result section
/// where the request's operation has none). What a success's operation decides is how its
/// body is read, so that is what must agree, but for the one rewrite that changes it.
pub(super) fn mismatch(sent: Sealed, header: &ReplyHeader) -> Option<ProtocolViolation> {
    let rewritten = sent.operation == Operation::DeleteSegments
        && header.operation == Operation::TruncatePartition;
    let operation_differs = header.status == 0
        && !rewritten
        && header.operation.is_result_framed() != sent.operation.is_result_framed();
    (header.request != sent.request || operation_differs).then_some(
        ProtocolViolation::MismatchedReply {
            expected_request: sent.request,
            expected_operation: sent.operation,
            got_request: header.request,
            got_operation: header.operation,
        },
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use bytes::BytesMut;

    use super::*;
    use crate::wire::{put_result_ok, put_result_rejection};

    fn header(operation: Operation, status: u32) -> ReplyHeader {
        ReplyHeader {
            operation,
            status,
            request: 7,
            ..ReplyHeader::default()
        }
    }

    fn result_rejection(code: ErrorCode) -> Bytes {
        let mut out = BytesMut::new();
        put_result_rejection(code.as_u32(), &mut out);
        out.freeze()
    }

    #[test]
    fn every_status_has_exactly_one_class() {
        assert_eq!(
            status_class(ErrorCode::TransientNotAccepted),
            StatusClass::Refused
        );
        for code in [ErrorCode::Unauthenticated, ErrorCode::StaleClient] {
            assert_eq!(status_class(code), StatusClass::SessionLost);
        }
        // 57 is not a refusal: it may commit, so it is never written elsewhere.
        for code in [
            ErrorCode::TransientNotCommitted,
            ErrorCode::Unauthorized,
            ErrorCode::Other(0),
            ErrorCode::Other(u32::MAX),
        ] {
            assert_eq!(status_class(code), StatusClass::Failed);
        }
    }

    #[test]
    fn a_route_refusal_is_unsupported_lost_failed_or_later() {
        for code in [
            ErrorCode::InvalidCommand,
            ErrorCode::FeatureUnavailable,
            ErrorCode::Unauthorized,
        ] {
            assert!(matches!(
                route_refusal(code),
                Some(RouteAnswer::Unsupported)
            ));
        }
        assert!(route_refusal(ErrorCode::StaleClient).is_none());
        assert!(route_refusal(ErrorCode::Unauthenticated).is_none());
        assert!(matches!(
            route_refusal(ErrorCode::TopicIdNotFound),
            Some(RouteAnswer::Failed(RequestError::Server {
                code: ErrorCode::TopicIdNotFound
            }))
        ));
        for code in [ErrorCode::TransientNotAccepted, ErrorCode::Other(9999)] {
            assert!(matches!(
                route_refusal(code),
                Some(RouteAnswer::Unavailable)
            ));
        }
    }

    #[test]
    fn not_committed_is_read_from_the_status_or_a_result_section_only() {
        let code = ErrorCode::TransientNotCommitted;
        assert!(not_committed(
            &header(Operation::SendMessages, code.as_u32()),
            &[]
        ));
        assert!(!not_committed(
            &header(
                Operation::SendMessages,
                ErrorCode::TransientNotAccepted.as_u32()
            ),
            &[]
        ));
        // In a result section, for an operation that has one.
        assert!(not_committed(
            &header(Operation::CreateStream, 0),
            &result_rejection(code)
        ));
        // The same bytes for an operation without a result section are a payload.
        assert!(!not_committed(
            &header(Operation::SendMessages, 0),
            &result_rejection(code)
        ));
        // A truncated or empty result section is no verdict.
        assert!(!not_committed(&header(Operation::CreateStream, 0), &[1, 0]));
        assert!(!not_committed(&header(Operation::CreateStream, 0), &[]));
    }

    #[test]
    fn only_a_session_status_says_the_session_is_lost() {
        assert!(session_lost(&header(Operation::SendMessages, 40)));
        assert!(session_lost(&header(Operation::Register, 30)));
        assert!(!session_lost(&header(Operation::SendMessages, 0)));
        assert!(!session_lost(&header(Operation::SendMessages, 41)));
    }

    #[test]
    fn topic_answers_tell_missing_from_denied_from_unreadable() {
        let ok = header(Operation::NonReplicated, 0);
        assert_eq!(topic_answer(&ok, Bytes::new()), TopicAnswer::NotFound);
        assert_eq!(
            topic_answer(&ok, Bytes::from_static(&[1, 2, 3])),
            TopicAnswer::Unavailable
        );
        assert_eq!(
            topic_answer(&header(Operation::NonReplicated, 2010), Bytes::new()),
            TopicAnswer::NotFound
        );
        assert_eq!(
            topic_answer(&header(Operation::NonReplicated, 41), Bytes::new()),
            TopicAnswer::Denied {
                code: ErrorCode::Unauthorized
            }
        );
        assert_eq!(
            topic_answer(&header(Operation::NonReplicated, 58), Bytes::new()),
            TopicAnswer::Unavailable
        );
    }

    #[test]
    fn merged_offsets_follow_the_counts_before_them_and_never_wrap() {
        let (a, b, c) = (RequestId(1), RequestId(2), RequestId(3));
        let batch = [(a, 3), (b, 0), (c, 5)];
        let offsets: Vec<_> = merged_offsets(&batch, Some(10)).collect();
        assert_eq!(
            offsets,
            [(a, 3, Some(10)), (b, 0, Some(13)), (c, 5, Some(13))]
        );
        let unknown: Vec<_> = merged_offsets(&batch, None).collect();
        assert!(unknown.iter().all(|(_, _, offset)| offset.is_none()));
        let top: Vec<_> = merged_offsets(&batch, Some(u64::MAX - 1)).collect();
        assert_eq!(top[2].2, Some(u64::MAX));
        assert_eq!(merged_offsets(&[], Some(1)).count(), 0);
    }

    #[test]
    fn a_receipt_takes_the_confirmed_partition_over_the_routed_one() {
        let confirmation = SendConfirmation {
            partition_id: 4,
            base_offset: 9,
            ..SendConfirmation::default()
        };
        let by = (NodeId(2), Some(1));
        let confirmed = send_receipt(Some(confirmation), Some(7), Some(9), 2, by);
        assert_eq!(
            (confirmed.partition_id, confirmed.base_offset),
            (4, Some(9))
        );
        assert_eq!(send_receipt(None, Some(7), None, 2, by).partition_id, 7);
        assert_eq!(send_receipt(None, None, None, 2, by).partition_id, 0);
    }

    #[test]
    fn a_reply_to_another_request_or_of_another_shape_is_a_mismatch() {
        let sent = Sealed {
            request: 7,
            operation: Operation::SendMessages,
        };
        assert_eq!(mismatch(sent, &header(Operation::SendMessages, 0)), None);
        let stray = ReplyHeader {
            request: 8,
            ..header(Operation::SendMessages, 0)
        };
        assert!(mismatch(sent, &stray).is_some());
        // A success whose body would be read another way is not ours...
        assert!(mismatch(sent, &header(Operation::CreateStream, 0)).is_some());
        // ...but a refusal's body is never read, so only its number counts.
        assert_eq!(mismatch(sent, &header(Operation::CreateStream, 58)), None);
        // The server's one rewrite that changes how the body is read.
        let segments = Sealed {
            request: 7,
            operation: Operation::DeleteSegments,
        };
        assert_eq!(
            mismatch(segments, &header(Operation::TruncatePartition, 0)),
            None
        );
        let mut ok = BytesMut::new();
        put_result_ok(&mut ok);
        assert!(!not_committed(&header(Operation::CreateStream, 0), &ok));
    }
}

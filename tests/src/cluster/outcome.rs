//! What a handler decided, and how it becomes the one frame the connection writes back.
//!
//! Handlers return an [`Outcome`]; only [`Outcome::into_frame`] knows the header layout, so
//! the reply rules of protocol §1.4/§1.8 (echo the operation, empty body with a nonzero
//! status, result section for result-framed operations) live in one place.

use bytes::{BufMut, Bytes, BytesMut};
use iggy_route_core::wire::{
    ErrorCode, EvictionHeader, EvictionReason, HEADER_SIZE, PROTOCOL_VERSION, ReplyHeader,
    RequestHeader, put_result_ok, put_result_rejection,
};

/// The answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A reply frame. A nonzero `status` always goes out with an empty body.
    Reply {
        /// 0 or an `IggyError` code, on the status channel.
        status: u32,
        /// The body (a result section first for result-framed operations).
        body: Bytes,
        /// The reply header's `commit`.
        commit: u64,
        /// The reply header's `op`.
        op: u64,
        /// The reply header's `view` and `replica`: a partition replica's refusal carries
        /// its group's view (whose primary is `view % replica count`) and its own index,
        /// as the real server's do; 0 elsewhere (the client reads them nowhere else).
        stamp: (u32, u8),
    },
    /// An eviction frame instead of a reply.
    Evict(EvictionReason),
    /// No reply: the real server drops an invalid header silently (§1.3).
    Drop,
}

impl Outcome {
    /// Status 0 with `body` as is.
    pub fn ok(body: impl Into<Bytes>, commit: u64) -> Self {
        Self::Reply {
            status: 0,
            body: body.into(),
            commit,
            op: 0,
            stamp: (0, 0),
        }
    }

    /// Status 0, empty body.
    pub fn empty(commit: u64) -> Self {
        Self::ok(Bytes::new(), commit)
    }

    /// A denial on the status channel, with an empty body.
    pub fn status(code: ErrorCode, commit: u64) -> Self {
        Self::Reply {
            status: code.as_u32(),
            body: Bytes::new(),
            commit,
            op: 0,
            stamp: (0, 0),
        }
    }

    /// A result-framed success: `[count = 0]` then `payload`.
    pub fn result_ok(payload: &[u8], commit: u64) -> Self {
        let mut body = BytesMut::with_capacity(4 + payload.len());
        put_result_ok(&mut body);
        body.put_slice(payload);
        Self::ok(body.freeze(), commit)
    }

    /// A result-framed rejection `[1][0][code]` with status 0.
    pub fn result_rejected(code: ErrorCode, commit: u64) -> Self {
        let mut body = BytesMut::with_capacity(12);
        put_result_rejection(code.as_u32(), &mut body);
        Self::ok(body.freeze(), commit)
    }

    /// Set the reply header's `op`.
    pub fn with_op(self, new_op: u64) -> Self {
        match self {
            Self::Reply {
                status,
                body,
                commit,
                stamp,
                ..
            } => Self::Reply {
                status,
                body,
                commit,
                op: new_op,
                stamp,
            },
            other @ (Self::Evict(_) | Self::Drop) => other,
        }
    }

    /// Set the reply header's `view` and `replica` (see [`Outcome::Reply`]).
    pub fn with_stamp(self, view: u32, replica: u8) -> Self {
        match self {
            Self::Reply {
                status,
                body,
                commit,
                op,
                ..
            } => Self::Reply {
                status,
                body,
                commit,
                op,
                stamp: (view, replica),
            },
            other @ (Self::Evict(_) | Self::Drop) => other,
        }
    }

    /// Whether this refuses the request with `TransientNotAccepted`, on either channel.
    pub fn is_refusal(&self) -> bool {
        let refused = ErrorCode::TransientNotAccepted.as_u32();
        match self {
            Self::Reply { status, body, .. } => {
                *status == refused
                    || (body.len() == 12
                        && body[..4] == 1u32.to_le_bytes()
                        && body[8..12] == refused.to_le_bytes())
            }
            Self::Evict(_) | Self::Drop => false,
        }
    }

    /// The frame to write, or `None` for [`Outcome::Drop`].
    pub fn into_frame(self, request: &RequestHeader) -> Option<Bytes> {
        match self {
            Self::Reply {
                status,
                body,
                commit,
                op,
                stamp: (view, replica),
            } => {
                // §1.4: a nonzero status always has an empty body.
                let body = if status == 0 { body } else { Bytes::new() };
                let mut header = ReplyHeader::for_request(request, status, commit, body.len());
                header.op = op;
                header.view = view;
                header.replica = replica;
                let mut out = BytesMut::with_capacity(HEADER_SIZE + body.len());
                header.encode(&mut out);
                out.put_slice(&body);
                Some(out.freeze())
            }
            Self::Evict(reason) => {
                let window = if reason == EvictionReason::IncompatibleProtocol {
                    PROTOCOL_VERSION
                } else {
                    0
                };
                let eviction = EvictionHeader {
                    cluster: request.cluster,
                    client: request.client,
                    server_protocol_version: window,
                    server_protocol_version_min: window,
                    reason,
                };
                let mut out = BytesMut::with_capacity(HEADER_SIZE);
                eviction.encode(&mut out);
                Some(out.freeze())
            }
            Self::Drop => None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use iggy_route_core::wire::{Frame, Operation, decode_one};

    fn send_request() -> RequestHeader {
        RequestHeader::new(Operation::SendMessages, 0, 0xAB, 5, 3, 0)
    }

    #[test]
    fn a_status_reply_drops_its_body_and_echoes_the_request() {
        let outcome = Outcome::Reply {
            status: 58,
            body: Bytes::from_static(b"ignored"),
            commit: 42,
            op: 0,
            stamp: (0, 0),
        };
        assert!(outcome.is_refusal());
        let frame = outcome.into_frame(&send_request()).unwrap();
        assert_eq!(frame.len(), HEADER_SIZE);
        let Frame::Reply { header, body } = decode_one(&frame).unwrap() else {
            panic!("not a reply");
        };
        assert_eq!((header.status, header.commit), (58, 42));
        assert_eq!((header.client, header.request), (0xAB, 3));
        assert_eq!(header.operation, Operation::SendMessages);
        assert!(body.is_empty());
    }

    #[test]
    fn a_result_rejection_with_58_counts_as_a_refusal() {
        assert!(Outcome::result_rejected(ErrorCode::TransientNotAccepted, 0).is_refusal());
        assert!(!Outcome::result_rejected(ErrorCode::StreamNameAlreadyExists, 0).is_refusal());
        assert!(!Outcome::result_ok(&[], 0).is_refusal());
    }

    #[test]
    fn an_eviction_is_a_bare_header_with_the_reason() {
        let frame = Outcome::Evict(EvictionReason::InvalidCredentials)
            .into_frame(&send_request())
            .unwrap();
        let Frame::Eviction(eviction) = decode_one(&frame).unwrap() else {
            panic!("not an eviction");
        };
        assert_eq!(eviction.reason, EvictionReason::InvalidCredentials);
        assert_eq!(eviction.client, 0xAB);
    }
}

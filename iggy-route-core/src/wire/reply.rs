//! Result-section framing and reply classification (§1.8).

use bytes::Bytes;
#[cfg(feature = "server")]
use bytes::{BufMut, BytesMut};

use super::codes::Operation;
use super::error_code::ErrorCode;
use super::header::ReplyHeader;
use super::{Reader, WireError};

/// Why a reply does not carry a usable payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplyError {
    /// Denied before commit: nonzero `status`, empty body.
    #[error("request denied with status {0}")]
    Status(ErrorCode),
    /// Status 0, but the result section's first entry holds an error code.
    #[error("request rejected with {0}")]
    Rejected(ErrorCode),
    /// The body does not decode.
    #[error("malformed reply: {0}")]
    Malformed(#[from] WireError),
}

/// Append a success result section: `[count = 0]`.
#[cfg(feature = "server")]
pub fn put_result_ok(out: &mut BytesMut) {
    out.put_u32_le(0);
}

/// Append a one-entry rejection: `[count = 1][index = 0][code]`.
#[cfg(feature = "server")]
pub fn put_result_rejection(code: u32, out: &mut BytesMut) {
    out.put_u32_le(1);
    out.put_u32_le(0);
    out.put_u32_le(code);
}

/// Split a result-framed body: `Ok(Ok(payload))` on success, `Ok(Err(code))` for
/// a rejection (entry 0's code), `Err` when the section is truncated.
pub fn split_result(body: &[u8]) -> Result<Result<&[u8], ErrorCode>, WireError> {
    let mut r = Reader::new(body);
    let count = r.u32()?;
    if count == 0 {
        return Ok(Ok(r.rest()));
    }
    // Every entry must be present, as in the crate's `result_section_len`.
    let entries = (count as usize)
        .checked_mul(8)
        .ok_or(WireError::InvalidLength {
            field: "result section",
            len: count as usize,
        })?;
    if r.remaining() < entries {
        return Err(WireError::Truncated {
            offset: 4,
            need: entries,
            have: r.remaining(),
        });
    }
    let _index = r.u32()?;
    let code = r.u32()?;
    Ok(Err(ErrorCode::from_u32(code)))
}

/// The payload of a reply, as the SDK derives it (§1.8): a nonzero status is
/// [`ReplyError::Status`]; a result-framed operation (or `Register` with a
/// non-empty body) has its result section parsed and stripped; otherwise the whole
/// body is the payload.
pub fn reply_payload(header: &ReplyHeader, body: Bytes) -> Result<Bytes, ReplyError> {
    if header.status != 0 {
        return Err(ReplyError::Status(ErrorCode::from_u32(header.status)));
    }
    let framed = header.operation.is_result_framed()
        || (header.operation == Operation::Register && !body.is_empty());
    if !framed {
        return Ok(body);
    }
    match split_result(&body)? {
        Ok(payload) => Ok(body.slice(body.len() - payload.len()..)),
        Err(code) => Err(ReplyError::Rejected(code)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn reply(operation: Operation, status: u32) -> ReplyHeader {
        ReplyHeader {
            operation,
            status,
            ..ReplyHeader::default()
        }
    }

    #[test]
    fn success_section_strips_the_count() {
        let mut body = BytesMut::new();
        put_result_ok(&mut body);
        body.put_slice(b"payload");
        assert_eq!(split_result(&body).unwrap(), Ok(&b"payload"[..]));
        let payload = reply_payload(&reply(Operation::CreateStream, 0), body.freeze()).unwrap();
        assert_eq!(&payload[..], b"payload");
    }

    #[test]
    fn rejection_section_yields_entry_zero_code() {
        let mut body = BytesMut::new();
        put_result_rejection(58, &mut body);
        assert_eq!(&body[..], &[1, 0, 0, 0, 0, 0, 0, 0, 58, 0, 0, 0]);
        let got = reply_payload(&reply(Operation::StoreConsumerOffset, 0), body.freeze());
        assert_eq!(
            got,
            Err(ReplyError::Rejected(ErrorCode::TransientNotAccepted))
        );
    }

    #[test]
    fn status_wins_and_send_messages_is_not_framed() {
        let got = reply_payload(&reply(Operation::SendMessages, 58), Bytes::new());
        assert_eq!(
            got,
            Err(ReplyError::Status(ErrorCode::TransientNotAccepted))
        );
        let body = Bytes::from_static(&[1, 0, 0, 0]);
        assert_eq!(
            reply_payload(&reply(Operation::SendMessages, 0), body.clone()).unwrap(),
            body
        );
    }

    #[test]
    fn register_is_framed_only_when_the_body_is_not_empty() {
        let empty = reply_payload(&reply(Operation::Register, 0), Bytes::new()).unwrap();
        assert!(empty.is_empty());
        let got = reply_payload(
            &reply(Operation::Register, 0),
            Bytes::from_static(&[1, 0, 0, 0]),
        );
        assert!(matches!(
            got,
            Err(ReplyError::Malformed(WireError::Truncated { .. }))
        ));
    }

    #[test]
    fn truncated_sections_are_malformed() {
        assert!(split_result(&[]).is_err());
        assert!(split_result(&[1, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(split_result(&[2, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0]).is_err());
        assert!(split_result(&[0xff, 0xff, 0xff, 0xff]).is_err());
    }
}

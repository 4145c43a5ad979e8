//! Calls about the session itself, beyond those of the system family.

use bytes::Bytes;

use super::Call;
use crate::Plane;
use crate::wire::{WireError, code};

/// An empty reply body, as `LOGOUT_USER` has; anything else is not its reply.
fn empty(payload: &[u8]) -> Result<(), WireError> {
    if payload.is_empty() {
        Ok(())
    } else {
        Err(WireError::TrailingBytes {
            field: "logout reply",
            count: payload.len(),
        })
    }
}

impl Call<()> {
    /// Ends the session on the coordinator (`LOGOUT_USER`, 39). The client keeps its
    /// credentials: its next request signs in again, as a new client, on the same node.
    pub fn logout_user() -> Self {
        Call::command(
            "logout user",
            code::LOGOUT_USER,
            Bytes::new(),
            Plane::Session,
            empty,
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{CommandRequest, Reply, ReplyPayload, Request};

    #[test]
    fn logout_goes_to_the_session_with_an_empty_body_and_reads_an_empty_reply() {
        let call = Call::logout_user();
        let Request::Command(CommandRequest { code, body, plane }) = &call.request else {
            panic!("not a command: {:?}", call.request);
        };
        assert_eq!(
            (*code, body.len(), plane),
            (code::LOGOUT_USER, 0, &Plane::Session)
        );
        call.reply
            .extract(Reply::Payload(ReplyPayload(Bytes::new())))
            .unwrap();
        let extra = Reply::Payload(ReplyPayload(Bytes::from_static(b"x")));
        assert!(Call::logout_user().reply.extract(extra).is_err());
    }
}

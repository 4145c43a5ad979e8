//! Calls about the session itself, beyond those of the system family.

use bytes::Bytes;

use super::Call;
use crate::Plane;
use crate::wire::{ClusterMetadata, WireError, code};

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

impl Call<ClusterMetadata> {
    /// The cluster's name and its nodes with their roles and states
    /// (`GET_CLUSTER_METADATA`, 12), as the node holding the session sees them: the same
    /// read the router makes for its roster.
    pub fn get_cluster_metadata() -> Self {
        Call::command(
            "get cluster metadata",
            code::GET_CLUSTER_METADATA,
            Bytes::new(),
            Plane::Session,
            ClusterMetadata::decode,
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

    #[test]
    fn cluster_metadata_is_asked_of_the_session_and_a_short_reply_is_malformed() {
        let call = Call::get_cluster_metadata();
        let Request::Command(CommandRequest { code, body, plane }) = &call.request else {
            panic!("not a command: {:?}", call.request);
        };
        assert_eq!(
            (*code, body.len(), plane),
            (code::GET_CLUSTER_METADATA, 0, &Plane::Session)
        );
        let short = Reply::Payload(ReplyPayload(Bytes::from_static(&[9, 0])));
        assert!(matches!(
            call.reply.extract(short),
            Err(crate::client::ClientError::Request(
                crate::RequestError::Malformed(_)
            ))
        ));
    }
}

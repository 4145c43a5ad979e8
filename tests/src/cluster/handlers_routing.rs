//! The routing commands: `GET_POLL_ROUTING` (103), `GET_CONSUMER_OFFSET_ROUTING` (123) and
//! `ATTACH_CONSUMER_SESSION` (14), server side as protocol §13.1 and §13.2 describe.
//!
//! (`POLL_MESSAGES_ON_PRIMARY`, 104, shares the poll code in `handlers_messages`.)

use bytes::BytesMut;
use iggy_route_core::wire::{
    ConsumerOffsetKey, ConsumerSession, ErrorCode, NodeRole, PollMessagesRequest, PollRouting, code,
};

use super::handlers_metadata::roster_node;
use super::node::{Attachment, NodeConnection};
use super::outcome::Outcome;
use super::state::ClusterState;
use super::target::resolve;

/// 103 or 123: name the partition's primary and hand back the caller's own session as the
/// consumer session.
pub(super) fn routing(
    connection: &NodeConnection,
    state: &ClusterState,
    command: u32,
    body: &[u8],
) -> Outcome {
    let commit = state.commit();
    // §13.1 steps 1-2: 103 carries a whole auto-commit poll, 123 the offset key.
    let key = if command == code::GET_POLL_ROUTING {
        match PollMessagesRequest::decode(body) {
            Ok(poll) if poll.auto_commit => {
                (poll.consumer, poll.stream, poll.topic, poll.partition_id)
            }
            Ok(_) | Err(_) => return Outcome::status(ErrorCode::InvalidCommand, commit),
        }
    } else {
        match ConsumerOffsetKey::decode(body) {
            Ok(key) => (key.consumer, key.stream, key.topic, key.partition_id),
            Err(_) => return Outcome::status(ErrorCode::InvalidCommand, commit),
        }
    };
    let Some(binding) = connection.binding() else {
        return Outcome::status(ErrorCode::Unauthenticated, commit);
    };
    let (consumer, stream, topic, partition_id) = key;
    let target = match resolve(state, &consumer, &stream, &topic, partition_id) {
        Ok(target) => target,
        Err(code) => return Outcome::status(code, commit),
    };
    let Some(partition) = target.partition(state) else {
        return Outcome::status(ErrorCode::PartitionNotFound, commit);
    };
    let reply = PollRouting {
        consumer_session: ConsumerSession {
            client_id: binding.client_id,
            session: binding.session,
            // §13.1: the larger of the connection's watermark and the applied commit.
            metadata_watermark: connection.watermark.max(commit),
        },
        // §13.1 step 9: the primary's roster entry, marked Leader and Healthy.
        primary: roster_node(state, partition.primary, NodeRole::Leader),
    };
    let mut out = BytesMut::with_capacity(reply.encoded_len());
    reply.encode(&mut out);
    Outcome::ok(out.freeze(), commit)
}

/// 14: bind this data connection to a parent session of the same user, registered on any
/// node, with exactly the presented epoch.
pub(super) fn attach(
    connection: &mut NodeConnection,
    state: &ClusterState,
    body: &[u8],
) -> Outcome {
    let commit = state.commit();
    let Some(binding) = connection.binding() else {
        return Outcome::status(ErrorCode::Unauthenticated, commit);
    };
    let Ok(parent) = ConsumerSession::decode(body) else {
        return Outcome::status(ErrorCode::InvalidCommand, commit);
    };
    let registered = state.session(parent.client_id);
    let valid = parent.session != 0
        && registered.is_some_and(|record| {
            record.session == parent.session && record.user_id == binding.user_id
        });
    if !valid {
        return Outcome::status(ErrorCode::StaleClient, commit);
    }
    connection.attachment = Some(Attachment {
        client_id: parent.client_id,
        session: parent.session,
    });
    connection.watermark = connection
        .watermark
        .max(parent.metadata_watermark)
        .max(parent.session);
    Outcome::empty(commit)
}

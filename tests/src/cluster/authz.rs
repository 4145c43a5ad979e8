//! Which permission each request needs, checked where and when a 0.11.0 server checks it
//! (`core/metadata/src/stm/authz.rs` for replicated metadata ops,
//! `core/server/src/dispatch/authz.rs` for partition ops and reads).
//!
//! - A replicated metadata op is gated when the metadata leader applies it: a follower
//!   refuses it first (58, in its handler); the root user (id 0) passes without a check;
//!   a denial is a result-section `Unauthorized (41)` with status 0. User commands need
//!   `manage_users`, except a user changing its own password; token commands need only
//!   the session.
//! - A partition op (send, offset store or delete) is gated on whichever node receives it,
//!   after its stream and topic resolve and before the primary check: a denial is status
//!   41 with an empty body.
//! - A read is gated after its body decodes and before it is served: status 41. Stats and
//!   clients need `read_servers`, stream and topic reads their read rules, polls, offset
//!   reads and the routing reads (103, 104, 123) the poll rule.
//!
//! Whatever does not decode, or names a stream or topic that does not resolve, passes the
//! gate, so the handler answers with its own error or not-found, as the server does
//! (not-found before permission). Stream and topic identifiers are read from the body's
//! prefix: every gated body starts with them.

use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{
    ChangePasswordRequest, ConsumerOffsetKey, CreateUserRequest, DeleteUserRequest, ErrorCode,
    GetStreamRequest, GetTopicRequest, Identifier, Operation, PollMessagesRequest, Reader,
    UpdatePermissionsRequest, UpdateUserRequest, code,
};

use super::handlers_metadata::lookup;
use super::node::NodeConnection;
use super::outcome::Outcome;
use super::state::{ClusterState, NodeId};
use super::users::ROOT_USER_ID;

type Rule = Result<(), ErrorCode>;

/// The verdict on a replicated op `user` sent to `node`: `Some` is the denial to send.
pub(super) fn replicated(
    state: &ClusterState,
    node: NodeId,
    user: u32,
    operation: Operation,
    body: &[u8],
) -> Option<Outcome> {
    if operation.is_partition() {
        return partition_op(state, user, operation, body)
            .err()
            .map(|code| Outcome::status(code, state.commit()));
    }
    // The gate runs at apply time on the metadata leader; anywhere else the handler
    // refuses the op before it is admitted.
    if node != state.metadata_leader() || user == ROOT_USER_ID {
        return None;
    }
    metadata_op(state, user, operation, body)
        .err()
        .map(|code| Outcome::result_rejected(code, state.commit()))
}

fn metadata_op(state: &ClusterState, user: u32, operation: Operation, body: &[u8]) -> Rule {
    let rules = state.users().permissioner(user);
    match operation {
        Operation::CreateStream => rules.create_stream(),
        Operation::UpdateStream | Operation::DeleteStream | Operation::PurgeStream => {
            stream_scoped(state, body, |stream| rules.manage_stream(stream))
        }
        Operation::CreateTopic | Operation::CreateTopicWithAssignments => {
            stream_scoped(state, body, |stream| rules.create_topic(stream))
        }
        Operation::UpdateTopic
        | Operation::DeleteTopic
        | Operation::PurgeTopic
        | Operation::CreatePartitions
        | Operation::CreatePartitionsWithAssignments
        | Operation::DeletePartitions
        | Operation::DeleteSegments
        | Operation::TruncatePartition => topic_scoped(state, body, |stream, topic| {
            rules.manage_topic(stream, topic)
        }),
        Operation::CreateConsumerGroup
        | Operation::DeleteConsumerGroup
        | Operation::JoinConsumerGroup
        | Operation::LeaveConsumerGroup => {
            topic_scoped(state, body, |stream, topic| rules.get_topic(stream, topic))
        }
        // A body that does not decode is refused before consensus (the handler's
        // `InvalidCommand`), so it never reaches this gate on the server.
        Operation::CreateUser => decodes(CreateUserRequest::decode(body), || rules.manage_users()),
        Operation::UpdateUser => decodes(UpdateUserRequest::decode(body), || rules.manage_users()),
        Operation::DeleteUser => decodes(DeleteUserRequest::decode(body), || rules.manage_users()),
        Operation::UpdatePermissions => decodes(UpdatePermissionsRequest::decode(body), || {
            rules.manage_users()
        }),
        Operation::ChangePassword => match ChangePasswordRequest::decode(body) {
            // Changing one's own password needs no permission; an unknown target goes on
            // to the handler's not-found.
            Ok(request) => match state.users().resolve(&request.user) {
                Some(target) if target != user => rules.manage_users(),
                Some(_) | None => Ok(()),
            },
            Err(_) => Ok(()),
        },
        // Scoped to the session's own user: no permission rule, on the server neither.
        Operation::CreatePersonalAccessToken | Operation::DeletePersonalAccessToken => Ok(()),
        Operation::Reserved
        | Operation::Register
        | Operation::NonReplicated
        | Operation::Logout
        | Operation::RemoveConsumerGroupMember
        | Operation::CompleteConsumerGroupRevocation
        | Operation::SendMessages
        | Operation::StoreConsumerOffset
        | Operation::DeleteConsumerOffset => Ok(()),
    }
}

fn partition_op(state: &ClusterState, user: u32, operation: Operation, body: &[u8]) -> Rule {
    let rules = state.users().permissioner(user);
    let mut r = Reader::new(body);
    match operation {
        Operation::SendMessages => {
            let Some((stream, topic, partitioning)) = send_prefix(&mut r) else {
                return Ok(());
            };
            let Some((stream_id, topic_id)) = resolve_topic(state, &stream, &topic, None) else {
                return Ok(());
            };
            // An explicit partition that does not exist is the handler's not-found first.
            if let Partitioning::PartitionId(partition) = partitioning
                && state
                    .catalog
                    .partition(lookup(&stream), lookup(&topic), partition)
                    .is_err()
            {
                return Ok(());
            }
            rules.send_messages(stream_id, topic_id)
        }
        Operation::StoreConsumerOffset | Operation::DeleteConsumerOffset => {
            let Ok(key) = ConsumerOffsetKey::read(&mut r) else {
                return Ok(());
            };
            match resolve_topic(state, &key.stream, &key.topic, None) {
                Some((stream, topic)) => rules.poll_messages(stream, topic),
                None => Ok(()),
            }
        }
        Operation::Reserved
        | Operation::Register
        | Operation::NonReplicated
        | Operation::Logout
        | Operation::CreateTopicWithAssignments
        | Operation::CreatePartitionsWithAssignments
        | Operation::RemoveConsumerGroupMember
        | Operation::CompleteConsumerGroupRevocation
        | Operation::TruncatePartition
        | Operation::CreateStream
        | Operation::UpdateStream
        | Operation::DeleteStream
        | Operation::PurgeStream
        | Operation::CreateTopic
        | Operation::UpdateTopic
        | Operation::DeleteTopic
        | Operation::PurgeTopic
        | Operation::CreatePartitions
        | Operation::DeletePartitions
        | Operation::DeleteSegments
        | Operation::CreateConsumerGroup
        | Operation::DeleteConsumerGroup
        | Operation::CreateUser
        | Operation::UpdateUser
        | Operation::DeleteUser
        | Operation::ChangePassword
        | Operation::UpdatePermissions
        | Operation::CreatePersonalAccessToken
        | Operation::DeletePersonalAccessToken
        | Operation::JoinConsumerGroup
        | Operation::LeaveConsumerGroup => Ok(()),
    }
}

/// A send body's `[metadata_len:u32][stream][topic][partitioning]` prefix.
fn send_prefix(r: &mut Reader<'_>) -> Option<(Identifier, Identifier, Partitioning)> {
    r.u32().ok()?;
    let stream = Identifier::decode(r).ok()?;
    let topic = Identifier::decode(r).ok()?;
    Some((stream, topic, Partitioning::decode(r).ok()?))
}

/// The verdict on a read (`NonReplicated` command `command`) received by `connection`:
/// `Some` is the denial to send. User and token reads are gated by their own handlers.
pub(super) fn read(
    connection: &NodeConnection,
    state: &ClusterState,
    command: u32,
    body: &[u8],
) -> Option<Outcome> {
    let node = connection.node();
    let user = acting_user(connection, state, command)?;
    let rules = state.users().permissioner(user);
    let horizon = state.metadata_horizon(node);
    let verdict = match command {
        code::GET_STREAM => match GetStreamRequest::decode(body) {
            Ok(request) => match resolve_stream(state, &request.stream, horizon) {
                Some(stream) => rules.get_stream(stream),
                None => Ok(()),
            },
            Err(_) => Ok(()),
        },
        code::GET_TOPIC => match GetTopicRequest::decode(body) {
            Ok(request) => match resolve_topic(state, &request.stream, &request.topic, horizon) {
                Some((stream, topic)) => rules.get_topic(stream, topic),
                None => Ok(()),
            },
            Err(_) => Ok(()),
        },
        code::POLL_MESSAGES | code::POLL_MESSAGES_ON_PRIMARY | code::GET_POLL_ROUTING => {
            match PollMessagesRequest::decode(body) {
                // 103 and 104 without auto-commit are the handler's `InvalidCommand`.
                Ok(request) if request.auto_commit || command == code::POLL_MESSAGES => {
                    match resolve_topic(state, &request.stream, &request.topic, None) {
                        Some((stream, topic)) => rules.poll_messages(stream, topic),
                        None => Ok(()),
                    }
                }
                Ok(_) | Err(_) => Ok(()),
            }
        }
        code::GET_STATS | code::GET_CLIENTS | code::GET_CLIENT => rules.read_servers(),
        code::GET_STREAMS => rules.get_streams(),
        code::GET_TOPICS => {
            let mut r = Reader::new(body);
            match Identifier::decode(&mut r) {
                Ok(stream) if r.remaining() == 0 => match resolve_stream(state, &stream, horizon) {
                    Some(stream) => rules.get_topics(stream),
                    None => Ok(()),
                },
                Ok(_) | Err(_) => Ok(()),
            }
        }
        // The SDK's trait: reading groups needs the permission to read the topic.
        code::GET_CONSUMER_GROUP | code::GET_CONSUMER_GROUPS | code::SYNC_CONSUMER_GROUP => {
            let mut r = Reader::new(body);
            match (Identifier::decode(&mut r), Identifier::decode(&mut r)) {
                (Ok(stream), Ok(topic)) => match resolve_topic(state, &stream, &topic, horizon) {
                    Some((stream, topic)) => rules.get_topic(stream, topic),
                    None => Ok(()),
                },
                _ => Ok(()),
            }
        }
        code::GET_CONSUMER_OFFSET | code::GET_CONSUMER_OFFSET_ROUTING => {
            match ConsumerOffsetKey::decode(body) {
                Ok(key) => match resolve_topic(state, &key.stream, &key.topic, None) {
                    Some((stream, topic)) => rules.poll_messages(stream, topic),
                    None => Ok(()),
                },
                Err(_) => Ok(()),
            }
        }
        _ => Ok(()),
    };
    verdict
        .err()
        .map(|code| Outcome::status(code, state.commit_seen_by(node)))
}

/// Who a read acts for: the connection's own user, or for a 104 the attached parent's
/// (`None` when the handler's own session checks must answer first).
fn acting_user(connection: &NodeConnection, state: &ClusterState, command: u32) -> Option<u32> {
    if let Some(binding) = connection.binding() {
        return Some(binding.user_id);
    }
    if command != code::POLL_MESSAGES_ON_PRIMARY {
        return None;
    }
    let attachment = connection.attachment()?;
    state
        .session(attachment.client_id)
        .filter(|parent| parent.session == attachment.session)
        .map(|parent| parent.user_id)
}

fn decodes<T, E>(decoded: Result<T, E>, rule: impl FnOnce() -> Rule) -> Rule {
    match decoded {
        Ok(_) => rule(),
        Err(_) => Ok(()),
    }
}

fn stream_scoped(state: &ClusterState, body: &[u8], rule: impl FnOnce(u32) -> Rule) -> Rule {
    let mut r = Reader::new(body);
    let Ok(stream) = Identifier::decode(&mut r) else {
        return Ok(());
    };
    match resolve_stream(state, &stream, None) {
        Some(stream) => rule(stream),
        None => Ok(()),
    }
}

fn topic_scoped(state: &ClusterState, body: &[u8], rule: impl FnOnce(u32, u32) -> Rule) -> Rule {
    let mut r = Reader::new(body);
    let (Ok(stream), Ok(topic)) = (Identifier::decode(&mut r), Identifier::decode(&mut r)) else {
        return Ok(());
    };
    match resolve_topic(state, &stream, &topic, None) {
        Some((stream, topic)) => rule(stream, topic),
        None => Ok(()),
    }
}

/// A stream's id, if a copy complete up to `horizon` (µs; `None`: complete) knows it.
fn resolve_stream(state: &ClusterState, stream: &Identifier, horizon: Option<u64>) -> Option<u32> {
    state
        .catalog
        .stream(lookup(stream))
        .filter(|found| horizon.is_none_or(|horizon| found.created_at <= horizon))
        .map(|found| found.id)
}

/// A topic's stream and topic ids, if a copy complete up to `horizon` knows both.
fn resolve_topic(
    state: &ClusterState,
    stream: &Identifier,
    topic: &Identifier,
    horizon: Option<u64>,
) -> Option<(u32, u32)> {
    let stream_id = resolve_stream(state, stream, horizon)?;
    let topic = state.catalog.topic(lookup(stream), lookup(topic)).ok()?;
    horizon
        .is_none_or(|horizon| topic.created_at <= horizon)
        .then_some((stream_id, topic.id))
}

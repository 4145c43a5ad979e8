//! The consumer-group family: `GET_CONSUMER_GROUP` (600), `GET_CONSUMER_GROUPS` (601) and
//! `SYNC_CONSUMER_GROUP` (606), read on any node; `CREATE_CONSUMER_GROUP` (602),
//! `DELETE_CONSUMER_GROUP` (603), `JOIN_CONSUMER_GROUP` (604) and `LEAVE_CONSUMER_GROUP`
//! (605), metadata writes admitted by the metadata leader only.
//!
//! As the server answers them (its source, `core/server/src/responses.rs`, `dispatch.rs`,
//! `core/metadata/src/stm/result.rs`):
//! - 600 and 601 answer a missing stream or topic on the status channel (1009, 2010) and a
//!   missing group with an empty payload; 606 answers an empty payload for anything it
//!   cannot resolve, and for a client that is not a member;
//! - the writes answer in their result section: 1009, 2010, 5000 (no such group), 5004
//!   (name taken), 5006 (not a member); a follower answers `[1][0][58]`;
//! - a join binds the membership to the client id the joining connection signed in with;
//!   a sync finds the member by the client id its request header carries;
//! - a sync answers the partitions the member may poll, without those pending revocation
//!   (`consumer_group_member_assignment`, `core/metadata/src/stm/stream.rs`), while 600
//!   lists every partition it owns, those included (`consumer_group_details`).

use bytes::BytesMut;
use iggy_route_core::wire::{
    ConsumerGroupAssignment, ConsumerGroupDetails, ConsumerGroupInfo, ConsumerGroupMember,
    ConsumerGroupRef, CreateConsumerGroupRequest, ErrorCode, GetConsumerGroupsRequest, Identifier,
    code,
};

use super::catalog::{CatalogError, Topic, partitions_count};
use super::groups::{Group, GroupError};
use super::handlers_metadata::{error_code, known_by, lookup, name_of};
use super::node::NodeConnection;
use super::outcome::Outcome;
use super::revocations;
use super::state::ClusterState;

/// A read of the group family received by `connection`'s node; `client` is the client id
/// of the request's header.
pub(super) fn read(
    connection: &NodeConnection,
    state: &ClusterState,
    command: u32,
    client: u128,
    body: &[u8],
) -> Outcome {
    let node = connection.node();
    let commit = state.commit_seen_by(node);
    let horizon = state.metadata_horizon(node);
    match command {
        code::GET_CONSUMER_GROUP => {
            let Ok(request) = ConsumerGroupRef::decode(body) else {
                return Outcome::status(ErrorCode::InvalidCommand, commit);
            };
            match topic_known(state, horizon, &request.stream, &request.topic) {
                Ok(topic) => match topic.groups.find(lookup(&request.group)) {
                    Some(group) => Outcome::ok(details(topic, group), commit),
                    None => Outcome::empty(commit),
                },
                Err(code) => Outcome::status(code, commit),
            }
        }
        code::GET_CONSUMER_GROUPS => {
            let Ok(request) = GetConsumerGroupsRequest::decode(body) else {
                return Outcome::status(ErrorCode::InvalidCommand, commit);
            };
            match topic_known(state, horizon, &request.stream, &request.topic) {
                Ok(topic) => {
                    let groups: Vec<ConsumerGroupInfo> =
                        topic.groups.all().map(|g| info(topic, g)).collect();
                    let mut out = BytesMut::new();
                    ConsumerGroupInfo::encode_list(&groups, &mut out);
                    Outcome::ok(out.freeze(), commit)
                }
                Err(code) => Outcome::status(code, commit),
            }
        }
        code::SYNC_CONSUMER_GROUP => {
            let assignment = ConsumerGroupRef::decode(body).ok().and_then(|request| {
                let topic = topic_known(state, horizon, &request.stream, &request.topic).ok()?;
                let group = topic.groups.find(lookup(&request.group))?;
                let member = group.member(client)?;
                Some(ConsumerGroupAssignment {
                    generation: group.generation,
                    partitions: member.pollable(),
                })
            });
            let mut out = BytesMut::new();
            if let Some(assignment) = assignment {
                assignment.encode(&mut out);
            }
            Outcome::ok(out.freeze(), commit)
        }
        _ => Outcome::status(ErrorCode::InvalidCommand, commit),
    }
}

/// The group writes this module answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GroupWrite {
    Create,
    Delete,
    Join,
    Leave,
}

/// A group write received by `connection`'s node.
pub(super) fn write(
    connection: &NodeConnection,
    state: &mut ClusterState,
    operation: GroupWrite,
    body: &[u8],
) -> Outcome {
    let commit = state.commit();
    let decoded = match operation {
        GroupWrite::Create => CreateConsumerGroupRequest::decode(body).map(Write::Create),
        GroupWrite::Delete => ConsumerGroupRef::decode(body).map(Write::Delete),
        GroupWrite::Join => ConsumerGroupRef::decode(body).map(Write::Join),
        GroupWrite::Leave => ConsumerGroupRef::decode(body).map(Write::Leave),
    };
    let Ok(change) = decoded else {
        return Outcome::status(ErrorCode::InvalidCommand, commit);
    };
    if connection.node() != state.metadata_leader() {
        return Outcome::result_rejected(ErrorCode::TransientNotAccepted, commit);
    }
    // The session that sent it: the server puts the connection's own client id on it.
    let client = connection.binding().map_or(0, |binding| binding.client_id);
    match apply(state, change, client) {
        Ok(payload) => Outcome::result_ok(&payload, state.bump_commit()),
        Err(code) => Outcome::result_rejected(code, commit),
    }
}

enum Write {
    Create(CreateConsumerGroupRequest),
    Delete(ConsumerGroupRef),
    Join(ConsumerGroupRef),
    Leave(ConsumerGroupRef),
}

fn apply(state: &mut ClusterState, change: Write, client: u128) -> Result<BytesMut, ErrorCode> {
    // A join is applied by the metadata leader, at the op's time.
    let (leader, now) = (state.metadata_leader(), state.clock_micros());
    let (stream, topic) = match &change {
        Write::Create(request) => (&request.stream, &request.topic),
        Write::Delete(request) | Write::Join(request) | Write::Leave(request) => {
            (&request.stream, &request.topic)
        }
    };
    let topic = state
        .catalog
        .topic_mut(lookup(stream), lookup(topic))
        .map_err(|error: CatalogError| error_code(error))?;
    let partitions = partitions_count(topic);
    let group_code = |error: GroupError| ErrorCode::from_u32(error.code());
    match change {
        Write::Create(request) => {
            let id = topic
                .groups
                .create(request.name.as_str())
                .map_err(group_code)?
                .id;
            let topic = &*topic;
            let group = topic
                .groups
                .find(super::catalog::Lookup::Id(id))
                .ok_or(ErrorCode::from_u32(GroupError::NotFound.code()))?;
            Ok(details(topic, group))
        }
        Write::Delete(request) => {
            topic
                .groups
                .delete(lookup(&request.group))
                .map_err(group_code)?;
            Ok(BytesMut::new())
        }
        Write::Join(request) => {
            // What the group has in flight, as the leader's replicas see it, is revoked
            // rather than moved.
            let in_flight = revocations::in_flight(topic, lookup(&request.group), leader);
            topic
                .groups
                .join(lookup(&request.group), client, partitions, &in_flight, now)
                .map_err(group_code)?;
            Ok(BytesMut::new())
        }
        Write::Leave(request) => {
            topic
                .groups
                .leave(lookup(&request.group), client, partitions)
                .map_err(group_code)?;
            Ok(BytesMut::new())
        }
    }
}

/// The topic as `horizon`'s copy holds it: a stream or topic created since is not there yet.
fn topic_known<'s>(
    state: &'s ClusterState,
    horizon: Option<u64>,
    stream: &Identifier,
    topic: &Identifier,
) -> Result<&'s Topic, ErrorCode> {
    let found = state
        .catalog
        .topic(lookup(stream), lookup(topic))
        .map_err(error_code)?;
    let stream_known = state
        .catalog
        .stream(lookup(stream))
        .is_some_and(|s| known_by(horizon, s.created_at));
    if !stream_known {
        return Err(ErrorCode::StreamIdNotFound);
    }
    if !known_by(horizon, found.created_at) {
        return Err(ErrorCode::TopicIdNotFound);
    }
    Ok(found)
}

fn info(topic: &Topic, group: &Group) -> ConsumerGroupInfo {
    ConsumerGroupInfo {
        id: group.id,
        partitions_count: partitions_count(topic),
        members_count: u32::try_from(group.members.len()).unwrap_or(u32::MAX),
        name: name_of(&group.name),
    }
}

fn details(topic: &Topic, group: &Group) -> BytesMut {
    let details = ConsumerGroupDetails {
        info: info(topic, group),
        members: group
            .members
            .iter()
            .map(|member| ConsumerGroupMember {
                id: member.slot,
                partitions: member.partitions.clone(),
            })
            .collect(),
    };
    let mut out = BytesMut::new();
    details.encode(&mut out);
    out
}

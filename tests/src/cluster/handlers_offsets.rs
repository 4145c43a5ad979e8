//! Consumer offsets: `GET_CONSUMER_OFFSET` (120, any node, which answers from the latest
//! replicated offsets, or its own where an auto-commit poll it served left one: the model
//! does not make a backup's copy of the replicated ones lag) and the partition-plane writes
//! `STORE_CONSUMER_OFFSET` (121, operation 161) and `DELETE_CONSUMER_OFFSET` (122,
//! operation 162), which only the partition's primary admits.
//!
//! 161/162 are result-framed, but their refusals before admission go out on the status
//! channel (protocol §5.6 and §13.3, "Offset writes"); success is `[0,0,0,0]`.

use bytes::BytesMut;
use iggy_route_core::wire::{
    ConsumerKind, ConsumerOffsetInfo, ConsumerOffsetKey, DeleteConsumerOffsetRequest, ErrorCode,
    StoreConsumerOffsetRequest,
};

use super::catalog::CatalogError;
use super::handlers_metadata::lookup;
use super::node::NodeConnection;
use super::outcome::Outcome;
use super::state::{ClusterState, NodeId};
use super::target::{offset_owner, resolve};

/// `GET_CONSUMER_OFFSET`, as the server answers it (`handle_get_consumer_offset`,
/// core/server/src/dispatch.rs): the stored offset, or an empty body when there is none,
/// when the stream, topic or group does not resolve, or when the body does not decode. Only a
/// missing partition of an existing topic is denied, on the status channel. Without a
/// partition id it reads partition 0, for a consumer group too.
pub(super) fn get_offset(state: &ClusterState, node: NodeId, body: &[u8]) -> Outcome {
    let commit = state.commit();
    let Ok(key) = ConsumerOffsetKey::decode(body) else {
        return Outcome::empty(commit);
    };
    let owner = offset_owner(state, (&key.stream, &key.topic), &key.consumer);
    let partition = match state.catalog.partition(
        lookup(&key.stream),
        lookup(&key.topic),
        key.partition_id.unwrap_or(0),
    ) {
        Ok(partition) => partition,
        Err(CatalogError::PartitionNotFound) => {
            return Outcome::status(ErrorCode::PartitionNotFound, commit);
        }
        Err(_) => return Outcome::empty(commit),
    };
    // A group the stream and topic do not hold (deleted, perhaps created again under
    // another id) has no offset: the server keys a group's offsets by the id it resolves
    // the group to, and answers a group it cannot resolve with an empty body, whatever
    // the deleted group stored.
    if key.consumer.kind == ConsumerKind::ConsumerGroup && !group_exists(state, &key) {
        return Outcome::empty(commit);
    }
    match partition.offset_seen_by(node, &owner) {
        Some(stored) => {
            let info = ConsumerOffsetInfo {
                partition_id: partition.id,
                current_offset: partition.current_offset(),
                stored_offset: stored,
            };
            let mut out = BytesMut::new();
            info.encode(&mut out);
            Outcome::ok(out.freeze(), commit)
        }
        None => Outcome::empty(commit),
    }
}

fn group_exists(state: &ClusterState, key: &ConsumerOffsetKey) -> bool {
    state
        .catalog
        .topic(lookup(&key.stream), lookup(&key.topic))
        .is_ok_and(|topic| topic.groups.find(lookup(&key.consumer.id)).is_some())
}

/// The two partition-plane offset writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OffsetWrite {
    Store,
    Delete,
}

/// `STORE_CONSUMER_OFFSET` or `DELETE_CONSUMER_OFFSET`.
pub(super) fn write(
    connection: &NodeConnection,
    state: &mut ClusterState,
    operation: OffsetWrite,
    body: &[u8],
) -> Outcome {
    let commit = state.commit();
    let decoded = match operation {
        OffsetWrite::Store => StoreConsumerOffsetRequest::decode(body)
            .map(|request| (request.key, Some(request.offset))),
        OffsetWrite::Delete => {
            DeleteConsumerOffsetRequest::decode(body).map(|request| (request.key, None))
        }
    };
    let Ok((key, offset)) = decoded else {
        return Outcome::status(ErrorCode::InvalidFormat, commit);
    };
    // An offset write is a partition-plane op: the server resolves its partition without a
    // default, and whatever does not resolve (no partition id, or a stream, topic or
    // partition it does not know) is denied `ResourceNotFound` before the plane is
    // touched, as a send's is (seen on the real cluster for a delete without a partition).
    if key.partition_id.is_none() {
        return Outcome::status(ErrorCode::ResourceNotFound, commit);
    }
    let Ok(target) = resolve(
        state,
        &key.consumer,
        &key.stream,
        &key.topic,
        key.partition_id,
    ) else {
        return Outcome::status(ErrorCode::ResourceNotFound, commit);
    };
    // The group fence, before the primary check: a group's offset is written only by a
    // member that owns the partition now (one it is handing over included: committing it
    // is how the handover completes), and the member is the identity the sending
    // connection signed in with, not the header's `client` (the server's
    // `fence_group_offset`, keyed by the connection's bound VSR id). Anything else is
    // `ResourceNotFound` on every node.
    if key.consumer.kind == ConsumerKind::ConsumerGroup
        && !owns(state, connection, &key, target.partition_id)
    {
        return Outcome::status(ErrorCode::ResourceNotFound, commit);
    }
    let owner = offset_owner(state, (&key.stream, &key.topic), &key.consumer);
    let node = connection.node();
    let nodes = state.node_count();
    let Some(primary) = target.partition_mut(state).map(|p| p.primary) else {
        return Outcome::status(ErrorCode::ResourceNotFound, commit);
    };
    let horizon = state.messages_horizon(node, primary);
    let Some(partition) = target.partition_mut(state) else {
        return Outcome::status(ErrorCode::ResourceNotFound, commit);
    };
    // The range check comes before the primary check, against the node's own copy (the
    // server's admission, `iggy_partition.rs`): a backup that has not yet received the
    // offset denies it `InvalidOffset`, not 58.
    if let Some(offset) = offset
        && (partition.messages_count(horizon) == 0
            || offset > partition.reported_current_offset(horizon))
    {
        return Outcome::status(ErrorCode::InvalidOffset, commit);
    }
    if partition.primary != node {
        // Its refusal names its view of the group, as a send's does (§4.4).
        let view = partition.view_naming_primary(nodes);
        let replica = u8::try_from(node).unwrap_or(u8::MAX);
        return Outcome::status(ErrorCode::TransientNotAccepted, commit).with_stamp(view, replica);
    }
    match offset {
        Some(offset) => {
            partition.store_offset(owner, offset);
        }
        None => {
            if !partition.delete_offset(&owner) {
                return Outcome::status(ErrorCode::ConsumerOffsetNotFound, commit);
            }
        }
    }
    state.note_partition_commit(node);
    Outcome::result_ok(&[], commit)
}

/// Whether the member the connection acts for owns `partition` of the key's group.
fn owns(
    state: &ClusterState,
    connection: &NodeConnection,
    key: &ConsumerOffsetKey,
    partition: u32,
) -> bool {
    // Where the routing commands exist, a data connection attached to a session acts for
    // it (§13.2), as it does for a routed poll.
    let member = match (connection.attachment(), connection.binding()) {
        (Some(parent), _) => parent.client_id,
        (None, Some(binding)) => binding.client_id,
        (None, None) => return false,
    };
    state
        .catalog
        .topic(lookup(&key.stream), lookup(&key.topic))
        .ok()
        .and_then(|topic| topic.groups.find(lookup(&key.consumer.id)))
        .and_then(|group| group.member(member))
        .is_some_and(|member| member.owns(partition))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::catalog::Lookup;
    use super::super::testkit::{Client, cluster, encode, seed_topic, send_body};
    use super::*;
    use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Operation, code};

    fn key(stream: u32, topic: u32) -> ConsumerOffsetKey {
        ConsumerOffsetKey {
            consumer: Consumer {
                kind: ConsumerKind::Consumer,
                id: Identifier::Numeric(3),
            },
            stream: Identifier::Numeric(stream),
            topic: Identifier::Numeric(topic),
            partition_id: Some(0),
        }
    }

    fn store(stream: u32, topic: u32, offset: u64) -> bytes::Bytes {
        let request = StoreConsumerOffsetRequest {
            key: key(stream, topic),
            offset,
        };
        encode(|out| request.encode(out))
    }

    #[test]
    fn offset_writes_are_primary_gated_on_the_status_channel() {
        let mut state = cluster(2);
        let (stream, topic) = seed_topic(&mut state, 1);
        let mut primary = Client::signed_in(&mut state, 0, 1);
        primary.write(
            &mut state,
            Operation::SendMessages,
            send_body(stream, topic, 0, &["a", "b"]),
        );
        let mut backup = Client::signed_in(&mut state, 1, 2);
        let refused = backup.write(
            &mut state,
            Operation::StoreConsumerOffset,
            store(stream, topic, 1),
        );
        assert_eq!(refused.status(), 58);

        let stored = primary.write(
            &mut state,
            Operation::StoreConsumerOffset,
            store(stream, topic, 1),
        );
        assert_eq!(stored.body().as_ref(), &[0, 0, 0, 0]);
        let too_far = primary.write(
            &mut state,
            Operation::StoreConsumerOffset,
            store(stream, topic, 9),
        );
        assert_eq!(too_far.status(), ErrorCode::InvalidOffset.as_u32());

        let body = backup.read(
            &mut state,
            code::GET_CONSUMER_OFFSET,
            encode(|o| key(stream, topic).encode(o)),
        );
        let info = ConsumerOffsetInfo::decode(&body.body()).unwrap().unwrap();
        assert_eq!((info.current_offset, info.stored_offset), (1, 1));
    }

    #[test]
    fn deleting_a_missing_offset_is_consumer_offset_not_found() {
        let mut state = cluster(1);
        let (stream, topic) = seed_topic(&mut state, 1);
        let mut client = Client::signed_in(&mut state, 0, 1);
        let delete = DeleteConsumerOffsetRequest {
            key: key(stream, topic),
        };
        let body = encode(|out| delete.encode(out));
        let answer = client.write(&mut state, Operation::DeleteConsumerOffset, body.clone());
        assert_eq!(answer.status(), ErrorCode::ConsumerOffsetNotFound.as_u32());
        state
            .catalog
            .partition_mut(Lookup::Id(stream), Lookup::Id(topic), 0)
            .unwrap()
            .offsets
            .insert(super::super::partition::OffsetOwner::ConsumerId(3), 0);
        let answer = client.write(&mut state, Operation::DeleteConsumerOffset, body);
        assert_eq!(answer.result_code(), 0);
        let empty = client.read(
            &mut state,
            code::GET_CONSUMER_OFFSET,
            encode(|o| key(stream, topic).encode(o)),
        );
        assert!(empty.body().is_empty());
    }
}

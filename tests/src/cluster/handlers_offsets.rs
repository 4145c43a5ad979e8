//! Consumer offsets: `GET_CONSUMER_OFFSET` (120, any node) and the partition-plane writes
//! `STORE_CONSUMER_OFFSET` (121, operation 161) and `DELETE_CONSUMER_OFFSET` (122,
//! operation 162), which only the partition's primary admits.
//!
//! 161/162 are result-framed, but their refusals before admission go out on the status
//! channel (protocol §5.6 and §13.3, "Offset writes"); success is `[0,0,0,0]`.

use bytes::BytesMut;
use iggy_route_core::wire::{
    ConsumerOffsetInfo, ConsumerOffsetKey, DeleteConsumerOffsetRequest, ErrorCode,
    StoreConsumerOffsetRequest,
};

use super::node::NodeConnection;
use super::outcome::Outcome;
use super::state::ClusterState;
use super::target::{offset_owner, resolve};

/// `GET_CONSUMER_OFFSET`: the stored offset, or an empty body when there is none.
pub(super) fn get_offset(state: &ClusterState, body: &[u8]) -> Outcome {
    let commit = state.commit();
    let Ok(key) = ConsumerOffsetKey::decode(body) else {
        return Outcome::status(ErrorCode::InvalidFormat, commit);
    };
    let target = match resolve(
        state,
        &key.consumer,
        &key.stream,
        &key.topic,
        key.partition_id,
    ) {
        Ok(target) => target,
        Err(code) => return Outcome::status(code, commit),
    };
    let Some(partition) = target.partition(state) else {
        return Outcome::status(ErrorCode::PartitionNotFound, commit);
    };
    match partition.offsets.get(&offset_owner(&key.consumer)) {
        Some(stored) => {
            let info = ConsumerOffsetInfo {
                partition_id: partition.id,
                current_offset: partition.current_offset(),
                stored_offset: *stored,
            };
            let mut out = BytesMut::new();
            info.encode(&mut out);
            Outcome::ok(out.freeze(), commit)
        }
        None => Outcome::empty(commit),
    }
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
    // §13.3: an unresolved namespace is denied with the resolver's own code.
    let target = match resolve(
        state,
        &key.consumer,
        &key.stream,
        &key.topic,
        key.partition_id,
    ) {
        Ok(target) => target,
        Err(code) => return Outcome::status(code, commit),
    };
    let node = connection.node();
    let Some(partition) = target.partition_mut(state) else {
        return Outcome::status(ErrorCode::PartitionNotFound, commit);
    };
    if partition.primary != node {
        return Outcome::status(ErrorCode::TransientNotAccepted, commit);
    }
    let owner = offset_owner(&key.consumer);
    match offset {
        Some(offset) => {
            if partition.log.is_empty() || offset > partition.current_offset() {
                return Outcome::status(ErrorCode::InvalidOffset, commit);
            }
            partition.offsets.insert(owner, offset);
        }
        None => {
            if partition.offsets.remove(&owner).is_none() {
                return Outcome::status(ErrorCode::ConsumerOffsetNotFound, commit);
            }
        }
    }
    Outcome::result_ok(&[], commit)
}

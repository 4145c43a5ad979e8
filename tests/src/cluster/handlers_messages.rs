//! The message family: `SEND_MESSAGES` (101, operation 160), `POLL_MESSAGES` (100) and
//! `POLL_MESSAGES_ON_PRIMARY` (104).
//!
//! Only a partition's primary admits a send; every other node refuses it with status 58 and
//! an empty body, never admitted (protocol §4.4). Plain polls are served by any node from
//! the shared log (§5.1), but only the primary advances the consumer offset on auto-commit.
//! 104 is served only by the primary, and only on a connection attached to a live parent
//! session (§13.3).

use bytes::{BufMut, Bytes, BytesMut};
use iggy_route_core::partitioning::{Partitioning, resolve_partition};
use iggy_route_core::wire::{
    ErrorCode, Message, PollMessagesRequest, PollingStrategy, RequestHeader, SendConfirmation,
    SendMessagesReply, SendMessagesRequest, encode_batch,
};

use super::catalog::{NewMessage, StoredMessage};
use super::handlers_metadata::lookup;
use super::node::NodeConnection;
use super::outcome::Outcome;
use super::state::ClusterState;
use super::target::{offset_owner, resolve};

/// `SEND_MESSAGES`, a partition-plane op.
pub(super) fn send(
    connection: &NodeConnection,
    state: &mut ClusterState,
    header: &RequestHeader,
    body: &[u8],
) -> Outcome {
    let commit = state.commit();
    let Ok(request) = SendMessagesRequest::decode(body) else {
        return Outcome::status(ErrorCode::InvalidFormat, commit);
    };
    let timestamp = state.next_timestamp();
    // §4.2: the confirmation names the numeric ids even when the request used names.
    let stream_id = state
        .catalog
        .stream(lookup(&request.stream))
        .map_or(0, |stream| stream.id);
    // §4.4: an unresolved namespace on the partition path is `ResourceNotFound`.
    let Ok(topic) = state
        .catalog
        .topic_mut(lookup(&request.stream), lookup(&request.topic))
    else {
        return Outcome::status(ErrorCode::ResourceNotFound, commit);
    };
    let topic_id = topic.id;
    let count = topic.partitions.len() as u32;
    let partition_id = match &request.partitioning {
        Partitioning::PartitionId(id) => Some(*id),
        // §4.3: the server hashes the key the same way and indexes its partition list.
        Partitioning::MessagesKey(key) => resolve_partition(key, count),
        Partitioning::Balanced => {
            let next = topic.balanced_cursor;
            topic.balanced_cursor = topic.balanced_cursor.wrapping_add(1);
            next.checked_rem(count)
        }
    };
    let Some(partition) = partition_id.and_then(|id| topic.partition_mut(id)) else {
        return Outcome::status(ErrorCode::ResourceNotFound, commit);
    };
    if partition.primary != connection.node() {
        return Outcome::status(ErrorCode::TransientNotAccepted, partition.next_offset());
    }
    if !partition.record_request(header.client, header.request) {
        // §13.5: a duplicate of a committed send gets the empty success, not a second append.
        return Outcome::empty(partition.next_offset());
    }
    let messages = request.messages.into_iter().map(new_message).collect();
    let base_offset = partition.append(timestamp, messages);
    let op = partition.next_offset();
    let reply = SendMessagesReply {
        confirmations: vec![SendConfirmation {
            stream_id,
            topic_id,
            partition_id: partition.id,
            base_offset,
        }],
    };
    let mut out = BytesMut::with_capacity(reply.encoded_len());
    reply.encode(&mut out);
    Outcome::ok(out.freeze(), op).with_op(op)
}

fn new_message(message: Message) -> NewMessage {
    NewMessage {
        id: message.id,
        origin_timestamp: message.origin_timestamp,
        payload: message.payload,
        user_headers: message.user_headers,
    }
}

/// `POLL_MESSAGES` (`on_primary == false`) or `POLL_MESSAGES_ON_PRIMARY`.
pub(super) fn poll(
    connection: &NodeConnection,
    state: &mut ClusterState,
    body: &[u8],
    on_primary: bool,
) -> Outcome {
    let commit = state.commit();
    if on_primary {
        // §13.3 step 1: the attachment authorises a 104, and it dies with its parent.
        let Some(attachment) = connection.attachment() else {
            return Outcome::status(ErrorCode::Unauthenticated, commit);
        };
        let parent = state.session(attachment.client_id);
        if parent.map(|record| record.session) != Some(attachment.session) {
            return Outcome::status(ErrorCode::StaleClient, commit);
        }
    }
    let request = match PollMessagesRequest::decode(body) {
        Ok(request) if on_primary && !request.auto_commit => {
            return Outcome::status(ErrorCode::InvalidCommand, commit);
        }
        Ok(request) => request,
        Err(_) if on_primary => return Outcome::status(ErrorCode::InvalidCommand, commit),
        Err(_) => return Outcome::status(ErrorCode::InvalidFormat, commit),
    };
    let target = match resolve(
        state,
        &request.consumer,
        &request.stream,
        &request.topic,
        request.partition_id,
    ) {
        Ok(target) => target,
        Err(code) => return Outcome::status(code, commit),
    };
    let node = connection.node();
    let owner = offset_owner(&request.consumer);
    let Some(partition) = target.partition_mut(state) else {
        return Outcome::status(ErrorCode::PartitionNotFound, commit);
    };
    if on_primary && partition.primary != node {
        return Outcome::status(ErrorCode::TransientNotAccepted, commit);
    }
    let start = match request.strategy {
        PollingStrategy::Offset(offset) => offset,
        PollingStrategy::First => 0,
        PollingStrategy::Last => partition
            .next_offset()
            .saturating_sub(u64::from(request.count)),
        PollingStrategy::Next => partition.offsets.get(&owner).map_or(0, |stored| stored + 1),
        PollingStrategy::Timestamp(from) => partition
            .log
            .iter()
            .find(|message| message.timestamp >= from)
            .map_or(partition.next_offset(), |message| message.offset),
    };
    let messages = partition.read(start, request.count);
    let body = encode_poll_reply(partition.id, partition.current_offset(), messages);
    let last = messages.last().map(|message| message.offset);
    // §5.1: a poll served by a backup does not advance the durable offset.
    if let (true, Some(last), true) = (request.auto_commit, last, partition.primary == node) {
        partition.offsets.insert(owner, last);
    }
    Outcome::ok(body, commit)
}

/// `[partition_id:u32][current_offset:u64][count:u32]` then one batch record per run of
/// messages that were stored by the same send (they share the batch's server timestamp).
fn encode_poll_reply(partition_id: u32, current_offset: u64, messages: &[StoredMessage]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_u32_le(partition_id);
    out.put_u64_le(current_offset);
    out.put_u32_le(u32::try_from(messages.len()).unwrap_or(u32::MAX));
    for run in messages.chunk_by(|a, b| a.timestamp == b.timestamp && a.offset + 1 == b.offset) {
        let Some(first) = run.first() else { continue };
        let batch: Vec<Message> = run
            .iter()
            .map(|stored| Message {
                id: stored.id,
                origin_timestamp: stored.origin_timestamp,
                payload: stored.payload.clone(),
                user_headers: stored.user_headers.clone(),
            })
            .collect();
        encode_batch(
            partition_id,
            first.offset,
            first.timestamp,
            &batch,
            &mut out,
        );
    }
    out.freeze()
}

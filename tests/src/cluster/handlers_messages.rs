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
    ConsumerKind, ErrorCode, Message, PollMessagesRequest, PollingStrategy, RequestHeader,
    SendConfirmation, SendMessagesReply, SendMessagesRequest, encode_batch,
};

use super::handlers_metadata::lookup;
use super::node::NodeConnection;
use super::outcome::Outcome;
use super::partition::{NewMessage, StoredMessage};
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
    let nodes = state.node_count();
    let Ok(request) = SendMessagesRequest::decode(body) else {
        return Outcome::status(ErrorCode::InvalidFormat, commit);
    };
    let timestamp = state.next_timestamp();
    let window_bytes = state.retention.payload_bytes;
    // A node's partition plane knows the partitions its metadata copy holds: a partition
    // (or topic) created since is an unresolved namespace there, as on the real cluster.
    let horizon = state.metadata_horizon(connection.node());
    let unknown_here = |created_at: u64| horizon.is_some_and(|horizon| created_at > horizon);
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
    let topic_unknown = unknown_here(topic.created_at);
    let Some(partition) = partition_id.and_then(|id| topic.partition_mut(id)) else {
        return Outcome::status(ErrorCode::ResourceNotFound, commit);
    };
    if topic_unknown || unknown_here(partition.created_at) {
        return Outcome::status(ErrorCode::ResourceNotFound, commit);
    }
    if partition.primary != connection.node() {
        // Its refusal names its view of the group, as the real server's does (§4.4).
        let (partition_id, commit) = (partition.id, partition.next_offset());
        let view = partition.view_naming_primary(nodes);
        let replica = u8::try_from(connection.node()).unwrap_or(u8::MAX);
        state.note_refused_send(stream_id, topic_id, partition_id);
        return Outcome::status(ErrorCode::TransientNotAccepted, commit).with_stamp(view, replica);
    }
    if !partition.record_request(header.client, header.request) {
        // §13.5: a duplicate of a committed send gets the empty success, not a second append.
        return Outcome::empty(partition.next_offset());
    }
    let messages = request.messages.into_iter().map(new_message).collect();
    let base_offset = partition.append(timestamp, messages, window_bytes);
    let op = partition.next_offset();
    let (partition_id, primary) = (partition.id, partition.primary);
    state.note_partition_commit(primary);
    let reply = SendMessagesReply {
        confirmations: vec![SendConfirmation {
            stream_id,
            topic_id,
            partition_id,
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
    (client, body): (u128, &[u8]),
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
    // The group fence: a group poll reads only a partition its member owns now and is not
    // handing over (pending revocation). The member is the header's client id on a plain
    // poll (the server reads it from the header), the attached parent on a 104. Anything
    // else (not a member, no such group, a partition handed over or being handed over) is
    // the empty poll whose partition is `u32::MAX`: re-sync.
    let mut group_id = None;
    if request.consumer.kind == ConsumerKind::ConsumerGroup {
        let member = if on_primary {
            connection.attachment().map_or(0, |parent| parent.client_id)
        } else {
            client
        };
        group_id = state
            .catalog
            .topic(lookup(&request.stream), lookup(&request.topic))
            .ok()
            .and_then(|topic| topic.groups.find(lookup(&request.consumer.id)))
            .filter(|group| {
                group
                    .member(member)
                    .is_some_and(|found| found.may_poll(target.partition_id))
            })
            .map(|group| group.id);
        if group_id.is_none() {
            return Outcome::ok(encode_poll_reply(RESYNC_PARTITION, 0, &[]), commit);
        }
    }
    let node = connection.node();
    let owner = offset_owner(state, (&request.stream, &request.topic), &request.consumer);
    let Some(primary) = target.partition_mut(state).map(|found| found.primary) else {
        return Outcome::status(ErrorCode::PartitionNotFound, commit);
    };
    // A backup serves what reached it: the messages stored before its horizon.
    let horizon = state.messages_horizon(node, primary);
    let regenerate = state.retention.regenerate.clone();
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
        PollingStrategy::Next => partition
            .offset_seen_by(node, &owner)
            .map_or(0, |stored| stored + 1),
        PollingStrategy::Timestamp(from) => partition.log.first_at_or_after(from),
    };
    let held = partition.held_by(horizon);
    let shown = held.saturating_sub(start).min(u64::from(request.count));
    // A payload dropped from the window and not rebuildable is refused, never faked: see
    // the module doc of `log`.
    let Ok(messages) = partition.log.read(start, shown, regenerate.as_ref()) else {
        return Outcome::status(ErrorCode::InvalidOffset, commit);
    };
    let current_offset = if held == partition.next_offset() {
        partition.current_offset()
    } else {
        held.saturating_sub(1)
    };
    let body = encode_poll_reply(partition.id, current_offset, &messages);
    let last = messages.last().map(|message| message.offset);
    // The serving replica marks the highest offset it handed the group, before any
    // auto-commit: what a join and the reconciler compare the committed offset with.
    if let (Some(group), Some(last)) = (group_id, last) {
        partition.note_group_poll(node, group, last);
    }
    // A poll served by a backup does not advance the durable offset, only the backup's
    // own copy (§5.1; see `Partition::auto_commit`).
    if let (true, Some(last)) = (request.auto_commit, last) {
        partition.auto_commit(node, owner, last);
    }
    Outcome::ok(body, commit)
}

/// The partition id of an empty group poll that tells the member to re-sync.
const RESYNC_PARTITION: u32 = u32::MAX;

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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::catalog::Lookup;
    use super::super::testkit::{Client, cluster, poll_body, seed_topic, send_body};
    use super::*;
    use iggy_route_core::wire::{Operation, PollMessagesReply, code};

    #[test]
    fn a_refusal_names_the_primary_by_its_view_and_the_view_only_grows() {
        let mut state = cluster(3);
        let (stream, topic) = seed_topic(&mut state, 1);
        let mut clients: Vec<Client> = (0..3)
            .map(|node| Client::signed_in(&mut state, node, 10 + node as u128))
            .collect();
        let mut last_view = 0;
        // Partition 0 moves 0 -> 2 -> 1 -> 0; each time a backup refuses with a view
        // naming the new primary (`view % 3`) and its own replica index.
        for primary in [2usize, 1, 0] {
            state
                .catalog
                .partition_mut(Lookup::Id(stream), Lookup::Id(topic), 0)
                .unwrap()
                .primary = primary;
            let backup = (primary + 1) % 3;
            let refused = clients[backup].write(
                &mut state,
                Operation::SendMessages,
                send_body(stream, topic, 0, &["x"]),
            );
            assert_eq!(refused.status(), 58);
            let header = refused.header();
            assert_eq!(
                header.view % 3,
                primary as u32,
                "the view names the primary"
            );
            assert_eq!(
                usize::from(header.replica),
                backup,
                "stamped by the refuser"
            );
            assert!(
                header.view > last_view,
                "views only grow: {} then {}",
                last_view,
                header.view
            );
            last_view = header.view;
            assert_eq!(state.take_refused_send(), Some((stream, topic, 0)));
        }
    }

    #[test]
    fn only_the_primary_admits_a_send_and_offsets_follow_the_order() {
        let mut state = cluster(2);
        let (stream, topic) = seed_topic(&mut state, 2);
        state
            .catalog
            .partition_mut(Lookup::Id(stream), Lookup::Id(topic), 1)
            .unwrap()
            .primary = 1;
        let mut on_node0 = Client::signed_in(&mut state, 0, 1);
        let refused = on_node0.write(
            &mut state,
            Operation::SendMessages,
            send_body(stream, topic, 1, &["x"]),
        );
        assert_eq!(refused.status(), 58);
        assert_eq!(refused.header().size, 256, "a refusal has an empty body");
        assert_eq!(state.stats(0).refusals, 1);

        let mut on_node1 = Client::signed_in(&mut state, 1, 2);
        for (payloads, base) in [(&["a", "b"][..], 0), (&["c"][..], 2)] {
            let answer = on_node1.write(
                &mut state,
                Operation::SendMessages,
                send_body(stream, topic, 1, payloads),
            );
            let reply = SendMessagesReply::decode(&answer.body()).unwrap();
            assert_eq!(
                reply.confirmations,
                vec![SendConfirmation {
                    stream_id: stream,
                    topic_id: topic,
                    partition_id: 1,
                    base_offset: base
                }]
            );
        }
        let target = (Lookup::Id(stream), Lookup::Id(topic));
        let log = &state.catalog.partition(target.0, target.1, 1).unwrap().log;
        let stored: Vec<(u64, &[u8])> = log
            .complete()
            .unwrap()
            .iter()
            .map(|m| (m.offset, m.payload.as_ref()))
            .collect();
        assert_eq!(stored, vec![(0, &b"a"[..]), (1, &b"b"[..]), (2, &b"c"[..])]);
    }

    #[test]
    fn a_replayed_send_is_acknowledged_without_a_second_append() {
        let mut state = cluster(1);
        let (stream, topic) = seed_topic(&mut state, 1);
        let mut client = Client::signed_in(&mut state, 0, 1);
        let header = RequestHeader::new(Operation::SendMessages, 0, 1, client.session, 7, 0);
        let body = send_body(stream, topic, 0, &["once"]);
        let header = RequestHeader {
            size: 256 + body.len() as u32,
            ..header
        };
        let first = client.send_frame(&mut state, header, body.clone());
        assert!(!first.body().is_empty());
        let replay = client.send_frame(&mut state, header, body);
        assert!(
            replay.body().is_empty(),
            "the duplicate gets the empty success"
        );
        let partition = state
            .catalog
            .partition(Lookup::Id(stream), Lookup::Id(topic), 0)
            .unwrap();
        assert_eq!(partition.log.len(), 1);
    }

    #[test]
    fn any_node_serves_a_poll_but_only_the_primary_commits_it() {
        let mut state = cluster(2);
        let (stream, topic) = seed_topic(&mut state, 1);
        let mut writer = Client::signed_in(&mut state, 0, 1);
        writer.write(
            &mut state,
            Operation::SendMessages,
            send_body(stream, topic, 0, &["a", "b"]),
        );
        let mut reader = Client::signed_in(&mut state, 1, 2);
        let body = reader
            .read(
                &mut state,
                code::POLL_MESSAGES,
                poll_body(stream, topic, 0, true),
            )
            .body();
        let reply = PollMessagesReply::decode(&body).unwrap();
        assert_eq!(
            reply.messages.iter().map(|m| m.offset).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(reply.current_offset, 1);
        let partition = state
            .catalog
            .partition(Lookup::Id(stream), Lookup::Id(topic), 0)
            .unwrap();
        assert!(
            partition.offsets.is_empty(),
            "a backup-served poll does not commit"
        );
        writer.read(
            &mut state,
            code::POLL_MESSAGES,
            poll_body(stream, topic, 0, true),
        );
        let partition = state
            .catalog
            .partition(Lookup::Id(stream), Lookup::Id(topic), 0)
            .unwrap();
        assert_eq!(
            partition.offsets.values().copied().collect::<Vec<_>>(),
            vec![1]
        );
    }

    #[test]
    fn poll_on_primary_needs_an_attachment_and_the_primary() {
        let mut state = cluster(2);
        let (stream, topic) = seed_topic(&mut state, 1);
        let mut data = Client::signed_in(&mut state, 1, 1);
        let unattached = data.read(
            &mut state,
            code::POLL_MESSAGES_ON_PRIMARY,
            poll_body(stream, topic, 0, true),
        );
        assert_eq!(unattached.status(), ErrorCode::Unauthenticated.as_u32());
        data.connection.attachment = Some(super::super::node::Attachment {
            client_id: 1,
            session: data.session,
        });
        let not_primary = data.read(
            &mut state,
            code::POLL_MESSAGES_ON_PRIMARY,
            poll_body(stream, topic, 0, true),
        );
        assert_eq!(not_primary.status(), 58);
        let mut on_primary = Client::signed_in(&mut state, 0, 2);
        on_primary.connection.attachment = data.connection.attachment;
        let served = on_primary.read(
            &mut state,
            code::POLL_MESSAGES_ON_PRIMARY,
            poll_body(stream, topic, 0, true),
        );
        assert_eq!(served.status(), 0);
        let no_commit = on_primary.read(
            &mut state,
            code::POLL_MESSAGES_ON_PRIMARY,
            poll_body(stream, topic, 0, false),
        );
        assert_eq!(no_commit.status(), ErrorCode::InvalidCommand.as_u32());
    }

    #[test]
    fn a_dropped_payload_is_refused_unless_it_can_be_rebuilt_exactly() {
        let mut state = cluster(1);
        // No payload window at all: every payload is dropped as soon as it is stored.
        state.retention.payload_bytes = 0;
        let (stream, topic) = seed_topic(&mut state, 1);
        let mut client = Client::signed_in(&mut state, 0, 1);
        let body = send_body(stream, topic, 0, &["a", "b"]);
        client.write(&mut state, Operation::SendMessages, body);
        let poll = || poll_body(stream, topic, 0, false);
        let refused = client.read(&mut state, code::POLL_MESSAGES, poll());
        assert_eq!(refused.status(), ErrorCode::InvalidOffset.as_u32());
        // `send_body` numbers its messages from 1: a generator that knows that rebuilds them.
        state.retention.regenerate = Some(std::sync::Arc::new(|id| {
            Bytes::from(if id == 1 { "a" } else { "b" })
        }));
        let served = client.read(&mut state, code::POLL_MESSAGES, poll()).body();
        let reply = PollMessagesReply::decode(&served).unwrap();
        let payloads: Vec<Bytes> = reply.messages.iter().map(|m| m.payload.clone()).collect();
        assert_eq!(payloads, vec![Bytes::from("a"), Bytes::from("b")]);
        // A generator that does not give back the stored bytes is caught by the checksum.
        state.retention.regenerate = Some(std::sync::Arc::new(|_| Bytes::from("a")));
        let wrong = client.read(&mut state, code::POLL_MESSAGES, poll());
        assert_eq!(wrong.status(), ErrorCode::InvalidOffset.as_u32());
    }

    #[test]
    fn sends_to_unknown_partitions_are_resource_not_found() {
        let mut state = cluster(1);
        let (stream, topic) = seed_topic(&mut state, 1);
        let mut client = Client::signed_in(&mut state, 0, 1);
        for body in [
            send_body(stream, topic, 5, &["x"]),
            send_body(9, topic, 0, &["x"]),
        ] {
            let answer = client.write(&mut state, Operation::SendMessages, body);
            assert_eq!(answer.status(), ErrorCode::ResourceNotFound.as_u32());
        }
        let garbage = client.write(
            &mut state,
            Operation::SendMessages,
            Bytes::from_static(b"\x01"),
        );
        assert_eq!(garbage.status(), ErrorCode::InvalidFormat.as_u32());
    }
}

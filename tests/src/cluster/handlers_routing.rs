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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::catalog::Lookup;
    use super::super::testkit::{Client, cluster, encode, poll_body, seed_topic};
    use super::*;
    use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier};

    fn offset_key(stream: u32, topic: u32, partition: u32) -> bytes::Bytes {
        let key = ConsumerOffsetKey {
            consumer: Consumer {
                kind: ConsumerKind::Consumer,
                id: Identifier::Numeric(1),
            },
            stream: Identifier::Numeric(stream),
            topic: Identifier::Numeric(topic),
            partition_id: Some(partition),
        };
        encode(|out| key.encode(out))
    }

    #[test]
    fn routing_names_the_primary_and_the_callers_own_session() {
        let mut state = cluster(3);
        state.set_node_addr(2, "127.0.0.1:4002".parse().unwrap());
        let (stream, topic) = seed_topic(&mut state, 1);
        let partition = state
            .catalog
            .partition_mut(Lookup::Id(stream), Lookup::Id(topic), 0);
        partition.unwrap().primary = 2;
        let mut coordinator = Client::signed_in(&mut state, 0, 77);
        for (command, body) in [
            (code::GET_POLL_ROUTING, poll_body(stream, topic, 0, true)),
            (
                code::GET_CONSUMER_OFFSET_ROUTING,
                offset_key(stream, topic, 0),
            ),
        ] {
            let reply = coordinator.read(&mut state, command, body).body();
            let routing = PollRouting::decode(&reply).unwrap();
            assert_eq!(routing.consumer_session.client_id, 77);
            assert_eq!(routing.consumer_session.session, coordinator.session);
            assert!(routing.consumer_session.metadata_watermark >= coordinator.session);
            assert_eq!(
                (routing.primary.tcp_port, routing.primary.role),
                (4002, NodeRole::Leader)
            );
        }
    }

    #[test]
    fn routing_refuses_bad_bodies_and_missing_partitions() {
        let mut state = cluster(1);
        let (stream, topic) = seed_topic(&mut state, 1);
        let mut client = Client::signed_in(&mut state, 0, 1);
        let manual = client.read(
            &mut state,
            code::GET_POLL_ROUTING,
            poll_body(stream, topic, 0, false),
        );
        assert_eq!(manual.status(), ErrorCode::InvalidCommand.as_u32());
        let missing = client.read(
            &mut state,
            code::GET_POLL_ROUTING,
            poll_body(stream, topic, 4, true),
        );
        assert_eq!(missing.status(), ErrorCode::PartitionNotFound.as_u32());
        let missing = client.read(
            &mut state,
            code::GET_CONSUMER_OFFSET_ROUTING,
            offset_key(9, 1, 0),
        );
        assert_eq!(missing.status(), ErrorCode::StreamIdNotFound.as_u32());
    }

    #[test]
    fn attach_checks_parent_epoch_and_user_cluster_wide() {
        let mut state = cluster(2);
        let other_user = state.add_user("other", "secret");
        let parent = Client::signed_in(&mut state, 0, 10);
        let mut data = Client::signed_in(&mut state, 1, 11);
        let attach_body = |session: u64| {
            let body = ConsumerSession {
                client_id: 10,
                session,
                metadata_watermark: 0,
            };
            encode(|out| body.encode(out))
        };
        let stale = data.read(
            &mut state,
            code::ATTACH_CONSUMER_SESSION,
            attach_body(parent.session + 1),
        );
        assert_eq!(stale.status(), ErrorCode::StaleClient.as_u32());
        let attached = data.read(
            &mut state,
            code::ATTACH_CONSUMER_SESSION,
            attach_body(parent.session),
        );
        assert!(attached.body().is_empty());
        assert_eq!(data.connection.attachment().unwrap().client_id, 10);

        let mut stranger = Client::open(&mut state, 1, 12);
        let anonymous = stranger.read(
            &mut state,
            code::ATTACH_CONSUMER_SESSION,
            attach_body(parent.session),
        );
        assert_eq!(anonymous.status(), ErrorCode::Unauthenticated.as_u32());
        stranger.login(&mut state, "other", "secret");
        stranger.session = state.session(12).unwrap().session;
        assert_eq!(state.session(12).unwrap().user_id, other_user);
        let wrong_user = stranger.read(
            &mut state,
            code::ATTACH_CONSUMER_SESSION,
            attach_body(parent.session),
        );
        assert_eq!(wrong_user.status(), ErrorCode::StaleClient.as_u32());
    }
}

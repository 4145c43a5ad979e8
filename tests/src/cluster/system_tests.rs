//! The partition, segment, flush, consumer-offset and system commands of the node model,
//! answered as the 0.11.0 server answers them (the stream and topic commands are in
//! [`super::admin_tests`]).
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use iggy_route_core::wire::{
    ClientDetails, ClientInfo, ConsumerOffsetInfo, ConsumerOffsetKey, DeleteConsumerOffsetRequest,
    DeletePartitionsRequest, DeleteSegmentsRequest, ErrorCode, FlushUnsavedBufferRequest,
    GetClientRequest, GetStreamRequest, Operation, ServerStats, StreamDetails, code,
};

use super::admin_tests::{get_topic, id, offset_key, store_offset};
use super::testkit::{Answer, Client, cluster, encode, seed_topic, send_body};

// ---- partitions, segments, flush ---------------------------------------------------

fn delete_partitions(count: u32) -> Bytes {
    let request = DeletePartitionsRequest {
        stream: 0.into(),
        topic: id("t"),
        partitions_count: count,
    };
    encode(|o| request.encode(o))
}

#[test]
fn delete_partitions_removes_the_highest_ids_and_checks_the_count() {
    let mut state = cluster(1);
    seed_topic(&mut state, 3);
    let mut client = Client::signed_in(&mut state, 0, 1);
    let deleted = client.write(
        &mut state,
        Operation::DeletePartitions,
        delete_partitions(2),
    );
    assert_eq!(deleted.result_code(), 0);
    let topic = get_topic(&mut client, &mut state, 0.into()).unwrap();
    let ids: Vec<u32> = topic.partitions.iter().map(|p| p.id).collect();
    assert_eq!((ids, topic.summary.partitions_count), (vec![0], 1));
    let too_many = client.write(
        &mut state,
        Operation::DeletePartitions,
        delete_partitions(2),
    );
    assert_eq!(too_many.result_code(), 2019, "InvalidPartitionsCount");
    let zero = client.write(
        &mut state,
        Operation::DeletePartitions,
        delete_partitions(0),
    );
    assert_eq!(zero.status(), 2015, "TooManyPartitions, before consensus");
    let missing = DeletePartitionsRequest {
        stream: 5.into(),
        topic: 0.into(),
        partitions_count: 1,
    };
    let answer = client.write(
        &mut state,
        Operation::DeletePartitions,
        encode(|o| missing.encode(o)),
    );
    assert_eq!(answer.result_code(), ErrorCode::StreamIdNotFound.as_u32());
}

fn delete_segments(partition_id: u32) -> Bytes {
    let request = DeleteSegmentsRequest {
        stream: id("s"),
        topic: 0.into(),
        partition_id,
        segments_count: 1,
    };
    encode(|o| request.encode(o))
}

#[test]
fn delete_segments_commits_as_truncate_partition_on_the_leader() {
    let mut state = cluster(2);
    seed_topic(&mut state, 1);
    let mut leader = Client::signed_in(&mut state, 0, 1);
    leader.write(
        &mut state,
        Operation::SendMessages,
        send_body(0, 0, 0, &["a"]),
    );
    let before = state.commit();
    let deleted = leader.write(&mut state, Operation::DeleteSegments, delete_segments(0));
    assert_eq!(deleted.header().operation, Operation::TruncatePartition);
    assert_eq!(deleted.result_code(), 0);
    assert_eq!(deleted.header().commit, before + 1);
    // Only the open segment exists: nothing was sealed, nothing is removed.
    assert_eq!(
        get_topic(&mut leader, &mut state, 0.into())
            .unwrap()
            .summary
            .messages_count,
        1
    );
    let missing = leader.write(&mut state, Operation::DeleteSegments, delete_segments(4));
    assert_eq!(missing.result_code(), ErrorCode::PartitionNotFound.as_u32());
    let mut follower = Client::signed_in(&mut state, 1, 2);
    let refused = follower.write(&mut state, Operation::DeleteSegments, delete_segments(0));
    assert_eq!(refused.header().operation, Operation::TruncatePartition);
    assert_eq!(
        refused.result_code(),
        ErrorCode::TransientNotAccepted.as_u32()
    );
}

#[test]
fn flush_is_refused_as_unavailable_on_every_node_and_needs_a_login() {
    let mut state = cluster(2);
    seed_topic(&mut state, 1);
    let request = FlushUnsavedBufferRequest {
        stream: 0.into(),
        topic: 0.into(),
        partition_id: 0,
        fsync: true,
    };
    for node in 0..2 {
        let mut client = Client::signed_in(&mut state, node, node as u128 + 1);
        let answer = client.read(
            &mut state,
            code::FLUSH_UNSAVED_BUFFER,
            encode(|o| request.encode(o)),
        );
        assert_eq!(answer.status(), ErrorCode::FeatureUnavailable.as_u32());
    }
    let mut anonymous = Client::open(&mut state, 0, 9);
    let answer = anonymous.read(&mut state, code::FLUSH_UNSAVED_BUFFER, Bytes::new());
    assert_eq!(answer.status(), ErrorCode::Unauthenticated.as_u32());
}

// ---- consumer offsets --------------------------------------------------------------

#[test]
fn get_consumer_offset_answers_like_the_server_for_every_miss() {
    let mut state = cluster(1);
    seed_topic(&mut state, 1);
    let mut client = Client::signed_in(&mut state, 0, 1);
    client.write(
        &mut state,
        Operation::SendMessages,
        send_body(0, 0, 0, &["a", "b"]),
    );
    client.write(
        &mut state,
        Operation::StoreConsumerOffset,
        store_offset(0, 1),
    );
    let read = |client: &mut Client, state: &mut super::ClusterState, key: ConsumerOffsetKey| {
        client.read(state, code::GET_CONSUMER_OFFSET, encode(|o| key.encode(o)))
    };
    // Without a partition id, a group reads partition 0.
    let answer = read(&mut client, &mut state, offset_key(None));
    let info = ConsumerOffsetInfo::decode(&answer.body()).unwrap().unwrap();
    assert_eq!(
        (info.partition_id, info.stored_offset, info.current_offset),
        (0, 1, 1)
    );
    let missing_partition = read(&mut client, &mut state, offset_key(Some(3)));
    assert_eq!(
        missing_partition.status(),
        ErrorCode::PartitionNotFound.as_u32()
    );
    let missing_stream = ConsumerOffsetKey {
        stream: 8.into(),
        ..offset_key(Some(0))
    };
    assert!(
        read(&mut client, &mut state, missing_stream)
            .body()
            .is_empty()
    );
    let garbage = client.read(
        &mut state,
        code::GET_CONSUMER_OFFSET,
        Bytes::from_static(&[1]),
    );
    assert!(garbage.body().is_empty());
    // An offset write needs its partition: without one every node refuses it, as the real
    // server's partition dispatch refuses any namespace it cannot resolve.
    let delete = DeleteConsumerOffsetRequest {
        key: offset_key(None),
    };
    let answer = client.write(
        &mut state,
        Operation::DeleteConsumerOffset,
        encode(|o| delete.encode(o)),
    );
    assert_eq!(answer.status(), ErrorCode::ResourceNotFound.as_u32());
}

// ---- system ------------------------------------------------------------------------

#[test]
fn stats_count_the_catalog_and_the_node_s_own_clients() {
    let mut state = cluster(2);
    seed_topic(&mut state, 3);
    let mut client = Client::signed_in(&mut state, 1, 1);
    // The partitions' primary is node 0, the leader when the topic was created.
    let mut producer = Client::signed_in(&mut state, 0, 2);
    producer.write(
        &mut state,
        Operation::SendMessages,
        send_body(0, 0, 0, &["a", "b"]),
    );
    let stats = ServerStats::decode(
        &client
            .read(&mut state, code::GET_STATS, Bytes::new())
            .body(),
    )
    .unwrap();
    assert_eq!(
        (
            stats.streams_count,
            stats.topics_count,
            stats.partitions_count,
            stats.segments_count
        ),
        (1, 1, 3, 3)
    );
    assert_eq!((stats.messages_count, stats.clients_count), (2, 1));
    assert_eq!(stats.hostname, "node-1");
    assert_eq!(stats.iggy_server_semver, Some(11_000));
}

#[test]
fn get_me_get_client_and_get_clients_see_the_node_s_own_sessions() {
    let mut state = cluster(2);
    let mut me = Client::signed_in(&mut state, 0, 0xAB_0000_0007);
    let _neighbour = Client::signed_in(&mut state, 0, 8);
    let _elsewhere = Client::signed_in(&mut state, 1, 9);
    let details =
        ClientDetails::decode(&me.read(&mut state, code::GET_ME, Bytes::new()).body()).unwrap();
    assert_eq!(
        (details.client.client_id, details.client.user_id),
        (7, super::ROOT_USER_ID)
    );
    assert!(details.consumer_groups.is_empty());

    let get = |client_id: u32| encode(|o| GetClientRequest { client_id }.encode(o));
    let found = me.read(&mut state, code::GET_CLIENT, get(7)).body();
    assert_eq!(
        ClientDetails::decode_optional(&found).unwrap(),
        Some(details)
    );
    let other_node = me.read(&mut state, code::GET_CLIENT, get(9)).body();
    assert!(other_node.is_empty(), "a node knows only its own clients");
    assert!(
        me.read(&mut state, code::GET_CLIENT, Bytes::new())
            .body()
            .is_empty()
    );

    let listed =
        ClientInfo::decode_list(&me.read(&mut state, code::GET_CLIENTS, Bytes::new()).body())
            .unwrap();
    let ids: Vec<u32> = listed.iter().map(|c| c.client_id).collect();
    assert_eq!(ids, [8, 7]);
    let mut anonymous = Client::open(&mut state, 0, 5);
    assert!(matches!(
        anonymous.read(&mut state, code::GET_ME, Bytes::new()),
        Answer::Reply { header, .. } if header.status == ErrorCode::Unauthenticated.as_u32()
    ));
}

#[test]
fn the_new_reads_need_a_login() {
    let mut state = cluster(1);
    let mut anonymous = Client::open(&mut state, 0, 5);
    for command in [
        code::GET_STATS,
        code::GET_CLIENTS,
        code::GET_STREAMS,
        code::GET_TOPICS,
    ] {
        assert_eq!(
            anonymous.read(&mut state, command, Bytes::new()).status(),
            ErrorCode::Unauthenticated.as_u32()
        );
    }
    // The stream details still decode after every admin change (a smoke check of shapes).
    seed_topic(&mut state, 1);
    let mut client = Client::signed_in(&mut state, 0, 1);
    let get = GetStreamRequest { stream: 0.into() };
    let body = client
        .read(&mut state, code::GET_STREAM, encode(|o| get.encode(o)))
        .body();
    assert_eq!(StreamDetails::decode(&body).unwrap().topics_count, 1);
}

//! Whose identity the server's consumer-group fences read, tried on raw connections (no
//! router in between) against the loopback cluster and, when `IGGY_ROUTE_REAL_CLUSTER` is
//! set, the real one, with the same assertions: the design of group membership in the
//! router rests on these answers, so the model must give the server's.
//!
//! - A membership belongs to the client id of the connection that sent `JOIN` to the
//!   metadata leader.
//! - `SYNC` and a group poll are fenced by the request header's `client` field alone: any
//!   connection on any node that writes the member's id there is answered as the member; its
//!   own id gets the re-sync poll (`partition_id = u32::MAX`).
//! - A group offset write is fenced by the id the sending connection signed in with (a
//!   stranger gets 20 on every node, before the primary check), and only the partition's
//!   primary admits it (58 elsewhere).
//! - A second connection signing in with the member's id may write the member's offsets on
//!   another primary; when it closes, the membership ends.
//! - An auto-commit poll served by a backup moves only that backup's own copy of the offset
//!   (a group's or a plain consumer's): the primary, and so the durable offset, never hears
//!   of it.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use iggy_route_core::wire::{
    Consumer, ConsumerGroupAssignment, ConsumerGroupRef, ConsumerKind, ConsumerOffsetInfo,
    ConsumerOffsetKey, CreateConsumerGroupRequest, Frame, Identifier, LoginRegisterReply,
    LoginRegisterRequest, Name, Operation, PROTOCOL_VERSION, Password, PollMessagesReply,
    PollMessagesRequest, PollingStrategy, RequestHeader, SDK_NAME, SDK_VERSION,
    StoreConsumerOffsetRequest, code, decode_one, split_result,
};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tests::real_cluster::{RealCluster, unique_name};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TOPIC: &str = "t";
const GROUP: &str = "g";
const PARTITIONS: u32 = 4;
/// A plain consumer that polls with auto-commit (consumer 7 writes offsets by hand).
const PLAIN: Consumer = Consumer {
    kind: ConsumerKind::Consumer,
    id: Identifier::Numeric(8),
};
/// The partition id of the empty poll that tells a member to re-sync.
const RESYNC: u32 = u32::MAX;

/// One signed-in connection to one node.
struct Raw {
    stream: TcpStream,
    client: u128,
    session: u64,
    next_request: u64,
}

/// A reply: its status and body.
struct Answer {
    status: u32,
    body: Bytes,
}

impl Answer {
    /// The result-section code of a result-framed reply (0 = success), or the status.
    fn result(&self) -> u32 {
        if self.status != 0 {
            return self.status;
        }
        match split_result(&self.body).unwrap() {
            Ok(_) => 0,
            Err(code) => code.as_u32(),
        }
    }
}

fn encode(write: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut out = BytesMut::new();
    write(&mut out);
    out.freeze()
}

fn name(text: &str) -> Identifier {
    Identifier::Named(Name::new(text).unwrap())
}

impl Raw {
    async fn sign_in(addr: &str, client: u128) -> Raw {
        let mut raw = Raw {
            stream: TcpStream::connect(addr).await.unwrap(),
            client,
            session: 0,
            next_request: 1,
        };
        let request = LoginRegisterRequest {
            protocol_version: PROTOCOL_VERSION,
            sdk_name: Name::new(SDK_NAME).unwrap(),
            sdk_version: Name::new(SDK_VERSION).unwrap(),
            username: Name::new("iggy").unwrap(),
            password: Password::new("iggy").unwrap(),
            context: Bytes::new(),
        };
        let body = encode(|out| request.encode(out));
        let header = RequestHeader::new(Operation::Register, 0, client, 0, 0, body.len());
        let answer = raw.exchange(header, &body).await;
        assert_eq!(answer.result(), 0, "sign-in on {addr}");
        let payload = split_result(&answer.body).unwrap().unwrap();
        raw.session = LoginRegisterReply::decode(payload).unwrap().session;
        raw
    }

    async fn exchange(&mut self, header: RequestHeader, body: &[u8]) -> Answer {
        let mut out = BytesMut::new();
        header.encode(&mut out);
        out.extend_from_slice(body);
        self.stream.write_all(&out).await.unwrap();
        let mut frame = vec![0u8; 256];
        tokio::time::timeout(Duration::from_secs(10), self.stream.read_exact(&mut frame))
            .await
            .expect("an answer within 10 s")
            .unwrap();
        let size = u32::from_le_bytes(frame[48..52].try_into().unwrap()) as usize;
        frame.resize(size, 0);
        self.stream.read_exact(&mut frame[256..]).await.unwrap();
        match decode_one(&frame).unwrap() {
            Frame::Reply { header, body } => Answer {
                status: header.status,
                body,
            },
            other @ (Frame::Request { .. } | Frame::Eviction(_)) => {
                panic!("expected a reply, got {other:?}")
            }
        }
    }

    /// A non-replicated request whose header names `client`, which need not be ours.
    async fn read_as(&mut self, client: u128, code: u32, body: Bytes) -> Answer {
        let header = RequestHeader::new(
            Operation::NonReplicated,
            code,
            client,
            self.session,
            self.next_request,
            body.len(),
        );
        self.exchange(header, &body).await
    }

    /// A replicated write, replayed byte for byte while the server answers 57 (not
    /// committed yet: busy after a restart), as a client must.
    async fn write(&mut self, operation: Operation, body: Bytes) -> Answer {
        let request = self.next_request;
        self.next_request += 1;
        let header =
            RequestHeader::new(operation, 0, self.client, self.session, request, body.len());
        for _ in 0..100 {
            let answer = self.exchange(header, &body).await;
            if answer.result() != 57 {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{operation:?} not committed in 10 s");
    }
}

fn group_ref(stream: &str) -> Bytes {
    let request = ConsumerGroupRef {
        stream: name(stream),
        topic: name(TOPIC),
        group: name(GROUP),
    };
    encode(|out| request.encode(out))
}

fn consumer(kind: ConsumerKind) -> Consumer {
    let id = match kind {
        ConsumerKind::ConsumerGroup => name(GROUP),
        ConsumerKind::Consumer => Identifier::Numeric(7),
    };
    Consumer { kind, id }
}

fn offset_key(stream: &str, kind: ConsumerKind, partition: u32) -> ConsumerOffsetKey {
    ConsumerOffsetKey {
        consumer: consumer(kind),
        stream: name(stream),
        topic: name(TOPIC),
        partition_id: Some(partition),
    }
}

fn store(stream: &str, kind: ConsumerKind, partition: u32, offset: u64) -> Bytes {
    let request = StoreConsumerOffsetRequest {
        key: offset_key(stream, kind, partition),
        offset,
    };
    encode(|out| request.encode(out))
}

fn group_poll(stream: &str, partition: u32, auto_commit: bool) -> Bytes {
    let request = PollMessagesRequest {
        consumer: consumer(ConsumerKind::ConsumerGroup),
        stream: name(stream),
        topic: name(TOPIC),
        partition_id: Some(partition),
        strategy: PollingStrategy::Next,
        count: 1,
        auto_commit,
    };
    encode(|out| request.encode(out))
}

/// The partition a group poll answered for and how many messages it carried.
fn polled(answer: &Answer) -> (u32, usize) {
    assert_eq!(answer.status, 0);
    let reply = PollMessagesReply::decode(&answer.body).unwrap();
    (reply.partition_id, reply.messages.len())
}

async fn assignment(raw: &mut Raw, member: u128, stream: &str) -> Vec<u32> {
    let answer = raw
        .read_as(member, code::SYNC_CONSUMER_GROUP, group_ref(stream))
        .await;
    assert_eq!(answer.status, 0);
    ConsumerGroupAssignment::decode(&answer.body)
        .unwrap()
        .map(|assigned| assigned.partitions)
        .unwrap_or_default()
}

/// A poll of `partition` for plain consumer 8, from its stored offset on.
fn plain_poll(stream: &str, partition: u32, auto_commit: bool) -> Bytes {
    let request = PollMessagesRequest {
        consumer: PLAIN,
        stream: name(stream),
        topic: name(TOPIC),
        partition_id: Some(partition),
        strategy: PollingStrategy::Next,
        count: 1,
        auto_commit,
    };
    encode(|out| request.encode(out))
}

/// Plain consumer 8's stored offset of `partition`, as the node `raw` is on sees it.
async fn plain_offset(raw: &mut Raw, stream: &str, partition: u32) -> Option<u64> {
    let key = ConsumerOffsetKey {
        consumer: PLAIN,
        ..offset_key(stream, ConsumerKind::Consumer, partition)
    };
    let answer = raw
        .read_as(
            raw.client,
            code::GET_CONSUMER_OFFSET,
            encode(|o| key.encode(o)),
        )
        .await;
    assert_eq!(answer.status, 0);
    ConsumerOffsetInfo::decode(&answer.body)
        .unwrap()
        .map(|info| info.stored_offset)
}

async fn stored_group_offset(raw: &mut Raw, stream: &str, partition: u32) -> Option<u64> {
    let key = offset_key(stream, ConsumerKind::ConsumerGroup, partition);
    let answer = raw
        .read_as(
            raw.client,
            code::GET_CONSUMER_OFFSET,
            encode(|o| key.encode(o)),
        )
        .await;
    assert_eq!(answer.status, 0);
    ConsumerOffsetInfo::decode(&answer.body)
        .unwrap()
        .map(|info| info.stored_offset)
}

/// The day, on `nodes` (addresses by node index), for stream `stream` whose topic `t` has
/// four partitions of at least one message each, at least one led by a node other than the
/// metadata leader (after a restart the leader may lead none).
async fn identity_day(nodes: &[String], stream: &str) {
    let mut next_id = 0x5eed_0000_u128;
    let mut fresh_id = || {
        next_id += 1;
        next_id
    };
    // The metadata leader is the node that admits the group's creation (a follower answers
    // 58 in the result section); each partition's primary is the one node that admits a
    // plain consumer's offset write for it.
    let mut leader = None;
    let mut primary = vec![None; PARTITIONS as usize];
    for (node, addr) in nodes.iter().enumerate() {
        let mut raw = Raw::sign_in(addr, fresh_id()).await;
        if leader.is_none() {
            let create = CreateConsumerGroupRequest {
                stream: name(stream),
                topic: name(TOPIC),
                name: Name::new(GROUP).unwrap(),
            };
            let answer = raw
                .write(Operation::CreateConsumerGroup, encode(|o| create.encode(o)))
                .await;
            match answer.result() {
                0 => leader = Some(node),
                58 => {}
                other => panic!("create group on node {node}: {other}"),
            }
        }
        for partition in 0..PARTITIONS {
            let answer = raw
                .write(
                    Operation::StoreConsumerOffset,
                    store(stream, ConsumerKind::Consumer, partition, 0),
                )
                .await;
            match answer.result() {
                0 => primary[partition as usize] = Some(node),
                // A backup refuses it, or checks it first against its own copy, which may
                // not hold the message yet (`InvalidOffset`, 4100): not the primary either.
                58 | 4100 => {}
                other => panic!("plain offset write of {partition} on node {node}: {other}"),
            }
        }
    }
    let leader = leader.expect("one node admits the group's creation");
    let primary: Vec<usize> = primary.into_iter().map(Option::unwrap).collect();
    let elsewhere = (0..PARTITIONS)
        .find(|p| primary[*p as usize] != leader)
        .expect("a partition led off the metadata leader");

    // The member joins on the leader and owns every partition.
    let member_id = fresh_id();
    let mut member = Raw::sign_in(&nodes[leader], member_id).await;
    assert_eq!(
        member
            .write(Operation::JoinConsumerGroup, group_ref(stream))
            .await
            .result(),
        0
    );
    let all: Vec<u32> = (0..PARTITIONS).collect();
    assert_eq!(assignment(&mut member, member_id, stream).await, all);

    for (node, addr) in nodes.iter().enumerate() {
        let stranger_id = fresh_id();
        let mut stranger = Raw::sign_in(addr, stranger_id).await;
        // SYNC and group polls answer whoever the header names.
        assert_eq!(
            assignment(&mut stranger, member_id, stream).await,
            all,
            "sync as the member on node {node}"
        );
        assert!(
            assignment(&mut stranger, stranger_id, stream)
                .await
                .is_empty()
        );
        for partition in 0..PARTITIONS {
            let as_member = stranger
                .read_as(
                    member_id,
                    code::POLL_MESSAGES,
                    group_poll(stream, partition, false),
                )
                .await;
            assert_eq!(polled(&as_member).0, partition, "node {node}");
            let as_itself = stranger
                .read_as(
                    stranger_id,
                    code::POLL_MESSAGES,
                    group_poll(stream, partition, false),
                )
                .await;
            assert_eq!(polled(&as_itself), (RESYNC, 0), "node {node}");
            // Offset writes are fenced by the connection's own identity, before the
            // primary check: 20 on every node.
            let write = stranger
                .write(
                    Operation::StoreConsumerOffset,
                    store(stream, ConsumerKind::ConsumerGroup, partition, 0),
                )
                .await;
            assert_eq!(
                write.result(),
                20,
                "stranger's write of {partition} on {node}"
            );
        }
    }

    // The member's own connection writes the partitions its node leads, no others: 58, or
    // `InvalidOffset` (4100) while the leader's copy of the partition lags (the server checks
    // the offset against the node's own copy before it checks for the primary).
    for partition in 0..PARTITIONS {
        let write = member
            .write(
                Operation::StoreConsumerOffset,
                store(stream, ConsumerKind::ConsumerGroup, partition, 0),
            )
            .await;
        if primary[partition as usize] == leader {
            assert_eq!(write.result(), 0, "member's write of {partition}");
        } else {
            assert!(
                matches!(write.result(), 58 | 4100),
                "member's write of {partition}: {}",
                write.result()
            );
        }
    }

    // An auto-commit group poll moves the group's offset only where the partition's primary
    // serves it: served by a backup (the member's own connection, on the leader), nothing
    // is stored; served by the primary, to a connection that only names the member in its
    // header, the served offset is.
    let mut on_primary = Raw::sign_in(&nodes[primary[elsewhere as usize]], fresh_id()).await;
    assert_eq!(
        stored_group_offset(&mut on_primary, stream, elsewhere).await,
        None
    );
    // A backup serves what has reached it: ask until the first message has.
    let caught_up = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let served = member
            .read_as(
                member_id,
                code::POLL_MESSAGES,
                group_poll(stream, elsewhere, true),
            )
            .await;
        match polled(&served) {
            (partition, 1) if partition == elsewhere => break,
            (partition, 0) if partition == elsewhere => {
                assert!(
                    tokio::time::Instant::now() < caught_up,
                    "a backup never caught up"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!("a backup's group poll: {other:?}"),
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        stored_group_offset(&mut on_primary, stream, elsewhere).await,
        None,
        "a backup's auto-commit"
    );
    let served = on_primary
        .read_as(
            member_id,
            code::POLL_MESSAGES,
            group_poll(stream, elsewhere, true),
        )
        .await;
    assert_eq!(polled(&served), (elsewhere, 1));
    assert_eq!(
        stored_group_offset(&mut on_primary, stream, elsewhere).await,
        Some(0),
        "the primary's auto-commit"
    );

    // The same holds for a plain consumer, whose offsets are not fenced: an auto-commit
    // poll served by a backup moves the backup's own copy of the offset, which it then
    // serves and reports, and nothing the primary holds.
    let backup = (0..nodes.len())
        .find(|node| *node != primary[elsewhere as usize])
        .unwrap();
    let mut on_backup = Raw::sign_in(&nodes[backup], fresh_id()).await;
    let mut seen = Vec::new();
    for _ in 0..3 {
        let answer = on_backup
            .read_as(
                on_backup.client,
                code::POLL_MESSAGES,
                plain_poll(stream, elsewhere, true),
            )
            .await;
        assert_eq!(answer.status, 0);
        let reply = PollMessagesReply::decode(&answer.body).unwrap();
        seen.extend(reply.messages.iter().map(|message| message.offset));
    }
    assert_eq!(seen, [0, 1], "each auto-commit poll on the backup moved on");
    assert_eq!(
        plain_offset(&mut on_backup, stream, elsewhere).await,
        Some(1),
        "the backup's own copy"
    );
    assert_eq!(
        plain_offset(&mut on_primary, stream, elsewhere).await,
        None,
        "the primary never heard of it"
    );

    // A twin signed in with the member's id on the other primary may write there; the
    // membership survives its sign-in, and ends when it closes.
    let mut twin = Raw::sign_in(&nodes[primary[elsewhere as usize]], member_id).await;
    let write = twin
        .write(
            Operation::StoreConsumerOffset,
            store(stream, ConsumerKind::ConsumerGroup, elsewhere, 0),
        )
        .await;
    assert_eq!(write.result(), 0, "twin's write of {elsewhere}");
    // Read where it was written: a backup's copy of the offsets may lag.
    assert_eq!(
        stored_group_offset(&mut twin, stream, elsewhere).await,
        Some(0)
    );
    assert_eq!(assignment(&mut member, member_id, stream).await, all);
    drop(twin);
    let ended = tokio::time::Instant::now() + Duration::from_secs(5);
    while !assignment(&mut member, member_id, stream).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < ended,
            "the membership outlived its twin's connection"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Four partitions of two messages each: 0 and 1 led by node 1 (also the metadata
/// leader), 2 and 3 by node 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_fences_read_the_identities_the_server_reads_on_the_model() {
    let cluster = TestCluster::start(3).await;
    let (stream, topic) = cluster.create_stream_and_topic("ids", TOPIC, PARTITIONS);
    for partition in 0..PARTITIONS {
        let node = if partition < 2 { 1 } else { 0 };
        assert!(cluster.set_primary(stream, topic, partition, node));
    }
    cluster.set_metadata_leader(1);
    let nodes: Vec<String> = cluster.addrs().iter().map(ToString::to_string).collect();
    seed_messages(&cluster.connection_string(), "ids").await;
    identity_day(&nodes, "ids").await;
    cluster.shutdown().await;
}

/// The same on the real cluster (skipped without it): two partitions moved off node 0 by a
/// restart, two created after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_fences_read_the_identities_the_server_reads_on_the_real_cluster() {
    let Some(cluster) = RealCluster::with_ctl_from_env("group_identity") else {
        return;
    };
    let stream = unique_name("group-ids");
    let url = format!("iggy://iggy:iggy@{}", cluster.nodes.join(","));
    let config = iggy_route_core::Config::from_connection_string(&url).unwrap();
    let client = iggy_route_tokio::Client::connect(config).await.unwrap();
    client.create_stream(&stream).await.unwrap();
    client
        .create_topic(stream.as_str(), TOPIC, 2)
        .await
        .unwrap();
    let bounce = cluster.clone();
    tokio::task::spawn_blocking(move || bounce.bounce(0))
        .await
        .unwrap();
    client
        .create_partitions(stream.as_str(), TOPIC, PARTITIONS - 2)
        .await
        .unwrap();
    client.shutdown().await;
    seed_messages(&url, &stream).await;
    identity_day(&cluster.nodes, &stream).await;
}

async fn seed_messages(url: &str, stream: &str) {
    let config = iggy_route_core::Config::from_connection_string(url).unwrap();
    let client = iggy_route_tokio::Client::connect(config).await.unwrap();
    for partition in 0..PARTITIONS {
        for i in 0..2u8 {
            let message = iggy_route_core::wire::Message {
                payload: Bytes::from(vec![i]),
                ..iggy_route_core::wire::Message::default()
            };
            client
                .send(
                    stream,
                    TOPIC,
                    iggy_route_core::partitioning::Partitioning::PartitionId(partition),
                    vec![message],
                )
                .await
                .unwrap();
        }
    }
    client.shutdown().await;
}

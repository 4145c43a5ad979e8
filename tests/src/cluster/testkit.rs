//! Helpers for the sans-IO unit tests of the node model: build request frames the way the
//! 0.11.0 SDK does, feed them to a [`NodeConnection`], and decode the reply frame.

#![allow(clippy::unwrap_used)]

use bytes::{Bytes, BytesMut};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{
    Consumer, ConsumerKind, EvictionHeader, Frame, Identifier, LoginRegisterReply,
    LoginRegisterRequest, Message, Name, Operation, PROTOCOL_VERSION, Password,
    PollMessagesRequest, PollingStrategy, ReplyHeader, RequestHeader, SDK_NAME, SDK_VERSION,
    SendMessagesRequest, decode_one, split_result,
};

use super::node::NodeConnection;
use super::state::{ClusterConfig, ClusterState, NodeId};

/// What came back for one request.
#[derive(Debug)]
pub(super) enum Answer {
    Reply { header: ReplyHeader, body: Bytes },
    Evicted(EvictionHeader),
    Dropped,
}

impl Answer {
    pub(super) fn status(&self) -> u32 {
        match self {
            Answer::Reply { header, .. } => header.status,
            other @ (Answer::Evicted(_) | Answer::Dropped) => {
                panic!("expected a reply, got {other:?}")
            }
        }
    }

    pub(super) fn body(&self) -> Bytes {
        match self {
            Answer::Reply { header, body } => {
                assert_eq!(header.status, 0, "expected status 0");
                body.clone()
            }
            other @ (Answer::Evicted(_) | Answer::Dropped) => {
                panic!("expected a reply, got {other:?}")
            }
        }
    }

    pub(super) fn header(&self) -> ReplyHeader {
        match self {
            Answer::Reply { header, .. } => *header,
            other @ (Answer::Evicted(_) | Answer::Dropped) => {
                panic!("expected a reply, got {other:?}")
            }
        }
    }

    /// The result-section code of a result-framed reply (0 = success).
    pub(super) fn result_code(&self) -> u32 {
        match split_result(&self.body()).unwrap() {
            Ok(_) => 0,
            Err(code) => code.as_u32(),
        }
    }

    pub(super) fn result_payload(&self) -> Bytes {
        let body = self.body();
        let payload = split_result(&body).unwrap().unwrap().len();
        body.slice(body.len() - payload..)
    }
}

/// One client connection to one node of a sans-IO cluster.
#[derive(Debug)]
pub(super) struct Client {
    pub(super) connection: NodeConnection,
    pub(super) node: NodeId,
    pub(super) client_id: u128,
    pub(super) session: u64,
    pub(super) next_request: u64,
}

pub(super) fn cluster(nodes: usize) -> ClusterState {
    // Unit tests of the model set no clock, so no copy may lag behind one.
    ClusterState::new(&ClusterConfig {
        lag: super::state::Lag::NONE,
        ..ClusterConfig::new(nodes)
    })
}

impl Client {
    pub(super) fn open(state: &mut ClusterState, node: NodeId, client_id: u128) -> Self {
        Client {
            connection: NodeConnection::open(state, node),
            node,
            client_id,
            session: 0,
            next_request: 1,
        }
    }

    /// Open a connection and sign in as root.
    pub(super) fn signed_in(state: &mut ClusterState, node: NodeId, client_id: u128) -> Self {
        let mut client = Self::open(state, node, client_id);
        let answer = client.login(state, "iggy", "iggy");
        let reply = LoginRegisterReply::decode(&answer.result_payload()).unwrap();
        client.session = reply.session;
        client
    }

    pub(super) fn send_frame(
        &mut self,
        state: &mut ClusterState,
        header: RequestHeader,
        body: Bytes,
    ) -> Answer {
        match self.connection.handle(state, self.node, header, body) {
            None => Answer::Dropped,
            Some(frame) => match decode_one(&frame).unwrap() {
                Frame::Reply { header, body } => Answer::Reply { header, body },
                Frame::Eviction(eviction) => Answer::Evicted(eviction),
                Frame::Request { .. } => panic!("the node answered with a request"),
            },
        }
    }

    pub(super) fn login(&mut self, state: &mut ClusterState, user: &str, password: &str) -> Answer {
        let request = LoginRegisterRequest {
            protocol_version: PROTOCOL_VERSION,
            sdk_name: Name::new(SDK_NAME).unwrap(),
            sdk_version: Name::new(SDK_VERSION).unwrap(),
            username: Name::new(user).unwrap(),
            password: Password::new(password).unwrap(),
            context: Bytes::new(),
        };
        let mut body = BytesMut::new();
        request.encode(&mut body);
        let header = RequestHeader::new(Operation::Register, 0, self.client_id, 0, 0, body.len());
        self.send_frame(state, header, body.freeze())
    }

    /// A `NonReplicated` read: it carries the current request number without using it.
    pub(super) fn read(&mut self, state: &mut ClusterState, code: u32, body: Bytes) -> Answer {
        let header = RequestHeader::new(
            Operation::NonReplicated,
            code,
            self.client_id,
            self.session,
            self.next_request,
            body.len(),
        );
        self.send_frame(state, header, body)
    }

    /// A replicated op: it takes the next request number.
    pub(super) fn write(
        &mut self,
        state: &mut ClusterState,
        operation: Operation,
        body: Bytes,
    ) -> Answer {
        let request = self.next_request;
        self.next_request += 1;
        let header = RequestHeader::new(
            operation,
            0,
            self.client_id,
            self.session,
            request,
            body.len(),
        );
        self.send_frame(state, header, body)
    }
}

pub(super) fn encode(write: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut out = BytesMut::new();
    write(&mut out);
    out.freeze()
}

pub(super) fn send_body(stream: u32, topic: u32, partition: u32, payloads: &[&str]) -> Bytes {
    let messages = payloads
        .iter()
        .enumerate()
        .map(|(index, payload)| Message {
            id: index as u128 + 1,
            origin_timestamp: 1_000,
            payload: Bytes::copy_from_slice(payload.as_bytes()),
            user_headers: Bytes::new(),
        })
        .collect();
    let request = SendMessagesRequest {
        stream: Identifier::Numeric(stream),
        topic: Identifier::Numeric(topic),
        partitioning: Partitioning::PartitionId(partition),
        messages,
    };
    encode(|out| request.encode(out))
}

pub(super) fn poll_body(stream: u32, topic: u32, partition: u32, auto_commit: bool) -> Bytes {
    let request = PollMessagesRequest {
        consumer: Consumer {
            kind: ConsumerKind::Consumer,
            id: Identifier::Numeric(1),
        },
        stream: Identifier::Numeric(stream),
        topic: Identifier::Numeric(topic),
        partition_id: Some(partition),
        strategy: PollingStrategy::Offset(0),
        count: 100,
        auto_commit,
    };
    encode(|out| request.encode(out))
}

/// A stream with one topic of `partitions` partitions, created directly in the model.
pub(super) fn seed_topic(state: &mut ClusterState, partitions: u32) -> (u32, u32) {
    use super::catalog::Lookup;
    let leader = state.metadata_leader();
    let stream = state.catalog.create_stream("s", 1).unwrap();
    let topic = state
        .catalog
        .create_topic(Lookup::Id(stream), "t", partitions, 1, leader)
        .unwrap();
    (stream, topic)
}

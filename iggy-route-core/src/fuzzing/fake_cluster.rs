//! A tiny in-memory cluster that answers the router's frames, for the transcript tests of
//! the outer face and the `router_ops` fuzz target. Deliberately minimal (topic 1/1 only,
//! sends, lookups, reads): the full node model lives in the tests crate.
#![allow(clippy::wildcard_enum_match_arm)]

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};

use crate::ids::LinkId;
use crate::partitioning::Partitioning;
use crate::wire::Name;
use crate::wire::{
    ClusterMetadata, ClusterNode, ConsumerSession, Frame, LoginRegisterReply, NodeRole, NodeStatus,
    Operation, PROTOCOL_VERSION, PartitionInfo, PollMessagesRequest, PollRouting, ReplyHeader,
    RequestHeader, SendConfirmation, SendMessagesReply, SendMessagesRequest, TopicDetails,
    TopicSummary, code, decode_one, put_result_ok,
};

/// The address of fake node `node`.
pub fn addr(node: usize) -> String {
    format!("127.0.0.1:{}", 9000 + node)
}

/// The fake cluster's whole state.
#[derive(Debug)]
pub struct FakeCluster {
    /// How many nodes.
    pub nodes: usize,
    /// The metadata leader.
    pub leader: usize,
    /// Partitions of topic 1/1.
    pub partitions: u32,
    /// Primary node of each partition of topic 1/1.
    pub primaries: Vec<usize>,
    /// Answer 103 with InvalidCommand, as servers without routing commands do.
    pub routing_commands: bool,
    /// The last session handed out.
    pub next_session: u64,
    /// Per partition: offsets assigned so far.
    pub logs: BTreeMap<u32, u64>,
    /// Evict every login with `InvalidCredentials`, as a server does for a bad password.
    pub refuse_logins: bool,
    /// Answer this many of the next sends and metadata writes with `TransientNotCommitted`
    /// (57), outcome unknown.
    pub not_committed: usize,
    /// Logins served.
    pub logins: usize,
    /// Sends refused (status 58).
    pub refusals: usize,
    /// Commands (by code) answered with an eviction of this reason instead of a reply, as
    /// the real server answers a legacy login code or a body it refuses.
    pub evict_codes: BTreeMap<u32, crate::wire::EvictionReason>,
}

impl FakeCluster {
    /// `nodes` nodes; partition `p`'s primary is `primaries[p]`.
    pub fn new(nodes: usize, primaries: Vec<usize>) -> Self {
        Self {
            nodes,
            leader: 0,
            partitions: u32::try_from(primaries.len()).unwrap_or(0),
            primaries,
            routing_commands: true,
            next_session: 100,
            refuse_logins: false,
            not_committed: 0,
            logs: BTreeMap::new(),
            logins: 0,
            refusals: 0,
            evict_codes: BTreeMap::new(),
        }
    }

    /// The reply to one request frame received by `node`, and a short name for the request.
    pub fn answer(&mut self, node: usize, frame: &[u8]) -> (String, Bytes) {
        let Ok(Frame::Request { header, body }) = decode_one(frame) else {
            panic!("router sent something that is not one request frame");
        };
        let evicted = match header.operation {
            Operation::Register if self.refuse_logins => {
                Some(crate::wire::EvictionReason::InvalidCredentials)
            }
            Operation::NonReplicated => self.evict_codes.get(&header.code).copied(),
            _ => None,
        };
        if let Some(reason) = evicted {
            let eviction = crate::wire::EvictionHeader {
                cluster: 0,
                client: header.client,
                server_protocol_version: 0,
                server_protocol_version_min: 0,
                reason,
            };
            let mut frame = BytesMut::new();
            eviction.encode(&mut frame);
            let name = match header.operation {
                Operation::Register => "LOGIN EVICTED".to_owned(),
                _ => format!("code {} EVICTED", header.code),
            };
            return (name, frame.freeze());
        }
        let mut out = BytesMut::new();
        let (name, status, commit) = match header.operation {
            Operation::Register => {
                self.logins += 1;
                self.next_session += 1;
                put_result_ok(&mut out);
                LoginRegisterReply {
                    user_id: 1,
                    session: self.next_session,
                    server_protocol_version: PROTOCOL_VERSION,
                    server_version: Name::new("0.11.0").unwrap_or_else(|_| unreachable!()),
                }
                .encode(&mut out);
                ("LOGIN".to_owned(), 0, self.next_session)
            }
            Operation::SendMessages if self.not_committed > 0 => {
                self.not_committed -= 1;
                ("SEND 57".to_owned(), 57, 0)
            }
            Operation::SendMessages => {
                let request = SendMessagesRequest::decode(&body).unwrap_or_else(|e| panic!("{e}"));
                let Partitioning::PartitionId(p) = request.partitioning else {
                    panic!("the router must resolve partitions itself");
                };
                if self.primaries.get(p as usize) == Some(&node) {
                    let offset = self.logs.entry(p).or_insert(0);
                    let base = *offset;
                    *offset += request.messages.len() as u64;
                    SendMessagesReply {
                        confirmations: vec![SendConfirmation {
                            stream_id: 1,
                            topic_id: 1,
                            partition_id: p,
                            base_offset: base,
                        }],
                    }
                    .encode(&mut out);
                    match request.messages.len() {
                        1 => (format!("SEND p{p}"), 0, 0),
                        n => (format!("SEND p{p} x{n}"), 0, 0),
                    }
                } else {
                    self.refusals += 1;
                    (format!("SEND p{p} REFUSED"), 58, 0)
                }
            }
            Operation::NonReplicated => self.read(node, &header, &body, &mut out),
            // A metadata write answers in its result section, as the server's do: 57 while
            // `not_committed` lasts (in flight on the leader), then an empty success.
            other if other.is_metadata() && self.not_committed > 0 => {
                self.not_committed -= 1;
                crate::wire::put_result_rejection(
                    crate::wire::ErrorCode::TransientNotCommitted.as_u32(),
                    &mut out,
                );
                (format!("{other:?} 57"), 0, 0)
            }
            other if other.is_metadata() => {
                put_result_ok(&mut out);
                (format!("{other:?}"), 0, 1)
            }
            other => panic!("unexpected operation {other:?}"),
        };
        let reply = ReplyHeader::for_request(&header, status, commit, out.len());
        let mut frame = BytesMut::new();
        reply.encode(&mut frame);
        frame.extend_from_slice(&out);
        (name, frame.freeze())
    }

    fn read(
        &mut self,
        node: usize,
        header: &RequestHeader,
        body: &[u8],
        out: &mut BytesMut,
    ) -> (String, u32, u64) {
        match header.code {
            code::PING => ("PING".to_owned(), 0, 0),
            code::GET_CLUSTER_METADATA => {
                ClusterMetadata {
                    name: "fake".to_owned(),
                    nodes: (0..self.nodes)
                        .map(|n| self.node(n, n == self.leader))
                        .collect(),
                }
                .encode(out);
                ("ROSTER".to_owned(), 0, 0)
            }
            code::GET_TOPIC => {
                self.topic().encode(out);
                // A metadata read carries the node's metadata commit; every node here has
                // applied everything, and the logins' commits are the highest handed out.
                ("GET_TOPIC".to_owned(), 0, self.next_session)
            }
            code::GET_POLL_ROUTING => {
                if !self.routing_commands {
                    return ("ROUTE? unsupported".to_owned(), 3, 0);
                }
                let request = PollMessagesRequest::decode(body).unwrap_or_else(|e| panic!("{e}"));
                let p = request.partition_id.unwrap_or(0);
                let primary = self.primaries.get(p as usize).copied().unwrap_or(0);
                PollRouting {
                    consumer_session: ConsumerSession {
                        client_id: header.client,
                        session: header.session,
                        metadata_watermark: 0,
                    },
                    primary: self.node(primary, true),
                }
                .encode(out);
                (format!("ROUTE? p{p} -> node{primary}"), 0, 0)
            }
            other => {
                let _ = node;
                (format!("code {other}"), 3, 0)
            }
        }
    }

    fn node(&self, n: usize, leader: bool) -> ClusterNode {
        ClusterNode {
            name: format!("node{n}"),
            ip: "127.0.0.1".to_owned(),
            tcp_port: u16::try_from(9000 + n).unwrap_or(0),
            quic_port: 0,
            http_port: 0,
            websocket_port: 0,
            role: if leader {
                NodeRole::Leader
            } else {
                NodeRole::Follower
            },
            status: NodeStatus::Healthy,
        }
    }

    fn topic(&self) -> TopicDetails {
        TopicDetails {
            summary: TopicSummary {
                id: 1,
                created_at: 0,
                partitions_count: self.partitions,
                message_expiry: 0,
                compression: 1,
                max_topic_size: 0,
                size_bytes: 0,
                messages_count: 0,
                name: Name::new("t").unwrap_or_else(|_| unreachable!()),
            },
            partitions: (0..self.partitions)
                .map(|id| PartitionInfo {
                    id,
                    created_at: 0,
                    segments_count: 0,
                    current_offset: 0,
                    size_bytes: 0,
                    messages_count: 0,
                })
                .collect(),
        }
    }
}

/// Which node each link leads to.
pub type Links = BTreeMap<LinkId, usize>;

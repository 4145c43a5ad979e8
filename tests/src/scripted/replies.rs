//! The scripted node's answers: the reply to each request as the script has it (status,
//! body, a bogus copy), and the wire values they are built from.

#[allow(clippy::wildcard_imports)] // the node's own types and the wire codec it answers with
use super::*;

/// The reply the node would give with no fault.
pub(super) fn reply_to(shared: &Shared, header: &RequestHeader, body: &[u8]) -> Bytes {
    let mut out = BytesMut::new();
    let status = match command_of(header) {
        code::LOGIN_REGISTER => {
            let session = {
                let mut state = shared.state();
                state.next_session += 1;
                state.next_session
            };
            put_result_ok(&mut out);
            LoginRegisterReply {
                user_id: 1,
                session,
                server_protocol_version: PROTOCOL_VERSION,
                server_version: name("0.11.0"),
            }
            .encode(&mut out);
            0
        }
        code::PING => 0,
        code::GET_CLUSTER_METADATA => {
            let mut nodes = vec![self_node(shared)];
            let peers = shared.script().peers.clone();
            nodes.extend(
                peers
                    .into_iter()
                    .map(|peer| peer_node(peer, NodeRole::Follower)),
            );
            ClusterMetadata {
                name: "scripted".to_owned(),
                nodes,
            }
            .encode(&mut out);
            0
        }
        code::GET_TOPIC => match GetTopicRequest::decode(body) {
            Ok(request) if is_our_topic(&request.stream, &request.topic) => {
                topic(TOPIC_NAME, shared.script().partitions).encode(&mut out);
                0
            }
            // An empty body: no such topic.
            Ok(_) => 0,
            Err(_) => ErrorCode::InvalidFormat.as_u32(),
        },
        code::GET_POLL_ROUTING => {
            if !shared.script().routing_commands {
                ErrorCode::InvalidCommand.as_u32()
            } else if PollMessagesRequest::decode(body).is_ok() {
                let named = shared.script().route_primary;
                let primary = match named {
                    Some(peer) if peer != shared.addr => peer_node(peer, NodeRole::Follower),
                    _ => self_node(shared),
                };
                PollRouting {
                    consumer_session: ConsumerSession {
                        client_id: header.client,
                        session: header.session,
                        metadata_watermark: 1,
                    },
                    primary,
                }
                .encode(&mut out);
                0
            } else {
                ErrorCode::InvalidFormat.as_u32()
            }
        }
        code::SEND_MESSAGES => match scripted_send_status(shared, body) {
            Some(status) => {
                shared.state().stats.refused_sends += 1;
                status
            }
            None => match store(shared, body) {
                Some(confirmation) => {
                    SendMessagesReply {
                        confirmations: vec![confirmation],
                    }
                    .encode(&mut out);
                    0
                }
                None => ErrorCode::InvalidFormat.as_u32(),
            },
        },
        _ => ErrorCode::InvalidCommand.as_u32(),
    };
    frame(header, status, &out)
}

/// A reply to `header` that no request asked for: a confirmation at [`BOGUS_OFFSET`] for a
/// send, a topic named "bogus" for a topic read, otherwise the ordinary reply again.
pub(super) fn bogus_reply(shared: &Shared, header: &RequestHeader, body: &[u8]) -> Bytes {
    let mut out = BytesMut::new();
    match command_of(header) {
        code::SEND_MESSAGES => {
            let partition = match SendMessagesRequest::decode(body).map(|r| r.partitioning) {
                Ok(Partitioning::PartitionId(p)) => p,
                _ => 0,
            };
            SendMessagesReply {
                confirmations: vec![SendConfirmation {
                    stream_id: 1,
                    topic_id: 1,
                    partition_id: partition,
                    base_offset: BOGUS_OFFSET,
                }],
            }
            .encode(&mut out);
        }
        code::GET_TOPIC => topic("bogus", 77).encode(&mut out),
        _ => return reply_to(shared, header, body),
    }
    frame(header, 0, &out)
}

/// The status the script answers this send with, if any: its partition's own rule, else
/// the rule for every partition.
pub(super) fn scripted_send_status(shared: &Shared, body: &[u8]) -> Option<u32> {
    let partition = SendMessagesRequest::decode(body)
        .ok()
        .and_then(|request| partition_of(&request));
    let script = shared.script();
    partition
        .and_then(|p| script.send_status.get(&Some(p)))
        .or_else(|| script.send_status.get(&None))
        .copied()
}

/// Stores a send's batch and returns its confirmation.
pub(super) fn store(shared: &Shared, body: &[u8]) -> Option<SendConfirmation> {
    let request = SendMessagesRequest::decode(body).ok()?;
    let Partitioning::PartitionId(partition) = request.partitioning else {
        return None;
    };
    let mut state = shared.state();
    let next = state.offsets.entry(partition).or_insert(0);
    let base_offset = *next;
    *next += request.messages.len() as u64;
    state.stored.push(StoredBatch {
        partition,
        base_offset,
        payloads: request.messages.into_iter().map(|m| m.payload).collect(),
    });
    Some(SendConfirmation {
        stream_id: 1,
        topic_id: 1,
        partition_id: partition,
        base_offset,
    })
}

pub(super) fn frame(header: &RequestHeader, status: u32, body: &[u8]) -> Bytes {
    // commit 1: a constant metadata watermark, so routes never go stale.
    let reply = ReplyHeader::for_request(header, status, 1, body.len());
    let mut out = BytesMut::new();
    reply.encode(&mut out);
    out.extend_from_slice(body);
    out.freeze()
}

pub(super) fn self_node(shared: &Shared) -> ClusterNode {
    ClusterNode {
        name: "scripted".to_owned(),
        ip: shared.script().roster_host.clone(),
        tcp_port: shared.addr.port(),
        quic_port: 0,
        http_port: 0,
        websocket_port: 0,
        role: NodeRole::Leader,
        status: NodeStatus::Healthy,
    }
}

/// Another node of the scripted cluster, as the roster and route answers name it.
pub(super) fn peer_node(addr: SocketAddr, role: NodeRole) -> ClusterNode {
    ClusterNode {
        name: format!("scripted-{}", addr.port()),
        ip: addr.ip().to_string(),
        tcp_port: addr.port(),
        quic_port: 0,
        http_port: 0,
        websocket_port: 0,
        role,
        status: NodeStatus::Healthy,
    }
}

pub(super) fn is_our_topic(stream: &Identifier, topic: &Identifier) -> bool {
    let ours = |id: &Identifier, named: &str| match id {
        Identifier::Numeric(n) => *n == 1,
        Identifier::Named(name) => name.as_str() == named,
    };
    ours(stream, "s") && ours(topic, TOPIC_NAME)
}

pub(super) fn topic(topic_name: &str, partitions: u32) -> TopicDetails {
    TopicDetails {
        summary: TopicSummary {
            id: 1,
            created_at: 0,
            partitions_count: partitions,
            message_expiry: 0,
            compression: 1,
            max_topic_size: 0,
            size_bytes: 0,
            messages_count: 0,
            name: name(topic_name),
        },
        partitions: (0..partitions)
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

pub(super) fn name(value: &str) -> Name {
    Name::new(value).unwrap_or_else(|error| panic!("name {value:?}: {error}"))
}

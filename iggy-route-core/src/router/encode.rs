//! Request bodies, encoded when an attempt is written (they were checked at `submit`, by
//! [`Request::validate`]).

use bytes::{BufMut, Bytes, BytesMut};

use crate::partitioning::Partitioning;
use crate::request::{AdminRequest, PollRequest, Request};
use crate::wire::{
    Consumer, ConsumerKind, ConsumerOffsetKey, CreatePartitionsRequest, CreateStreamRequest,
    CreateTopicRequest, GetStreamRequest, GetTopicRequest, HEADER_SIZE, Identifier, Name,
    Operation, PollMessagesRequest, PollingStrategy, SendMessagesRequest,
    StoreConsumerOffsetRequest, code,
};

/// The consumer named in route lookups made for sends: lookups need a poll body, and a
/// plain consumer carries no group fence.
fn lookup_consumer() -> Consumer {
    Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(1),
    }
}

/// The `GET_POLL_ROUTING` (103) body for a partition: a whole poll request with
/// `auto_commit` set, as the server requires (protocol §13.1).
pub(super) fn route_lookup_body(stream: &Identifier, topic: &Identifier, partition: u32) -> Bytes {
    let request = PollMessagesRequest {
        consumer: lookup_consumer(),
        stream: stream.clone(),
        topic: topic.clone(),
        partition_id: Some(partition),
        strategy: PollingStrategy::Next,
        count: 1,
        auto_commit: true,
    };
    let mut out = BytesMut::with_capacity(request.encoded_len());
    request.encode(&mut out);
    out.freeze()
}

/// The `GET_TOPIC` (300) body.
pub(super) fn get_topic_body(stream: &Identifier, topic: &Identifier) -> Bytes {
    let request = GetTopicRequest {
        stream: stream.clone(),
        topic: topic.clone(),
    };
    let mut out = BytesMut::with_capacity(request.encoded_len());
    request.encode(&mut out);
    out.freeze()
}

/// How one attempt of a request goes on the wire: its operation, its command code, and a
/// frame whose first 256 bytes are a placeholder for the link to write its header over.
#[derive(Debug)]
pub(super) struct Encoded {
    pub(super) operation: Operation,
    pub(super) code: u32,
    pub(super) frame: BytesMut,
}

impl Encoded {
    /// Nothing to write (a frame whose requests are all over).
    pub(super) fn empty() -> Self {
        Self {
            operation: Operation::for_code(code::SEND_MESSAGES),
            code: code::SEND_MESSAGES,
            frame: BytesMut::new(),
        }
    }
}

/// A send's message count.
pub(super) fn message_count(request: &Request) -> u32 {
    match request {
        Request::Send(send) => u32::try_from(send.messages.len()).unwrap_or(u32::MAX),
        Request::Poll(_) | Request::StoreOffset(_) | Request::Admin(_) | Request::Command(_) => 0,
    }
}

/// One `SEND_MESSAGES` frame carrying the messages of several sends of one partition, in
/// order: the first send's stream and topic (routing merges only sends of one lane, so
/// they name them alike).
pub(super) fn encode_sends<'a>(
    sends: impl Iterator<Item = &'a Request> + Clone,
    partition: Option<u32>,
) -> Encoded {
    let mut out = BytesMut::new();
    out.put_bytes(0, HEADER_SIZE);
    let parts = sends.filter_map(|request| match request {
        Request::Send(send) => Some(send),
        Request::Poll(_) | Request::StoreOffset(_) | Request::Admin(_) | Request::Command(_) => {
            None
        }
    });
    if let Some(first) = parts.clone().next() {
        SendMessagesRequest::encode_parts(
            &first.stream,
            &first.topic,
            &Partitioning::PartitionId(partition.unwrap_or(0)),
            parts.flat_map(|send| send.messages.iter()),
            &mut out,
        );
    }
    Encoded {
        operation: Operation::for_code(code::SEND_MESSAGES),
        code: code::SEND_MESSAGES,
        frame: out,
    }
}

/// Encodes a request for one attempt. `primary_gated` selects the routed forms (a poll as
/// `POLL_MESSAGES_ON_PRIMARY`, 104) used on data links of clusters with routing commands.
pub(super) fn encode(request: &Request, partition: Option<u32>, primary_gated: bool) -> Encoded {
    let mut out = BytesMut::new();
    out.put_bytes(0, HEADER_SIZE);
    let code = match request {
        Request::Send(send) => {
            // The 0.11.0 SDK resolves the partition itself and always sends kind 2.
            SendMessagesRequest::encode_parts(
                &send.stream,
                &send.topic,
                &Partitioning::PartitionId(partition.unwrap_or(0)),
                send.messages.iter(),
                &mut out,
            );
            code::SEND_MESSAGES
        }
        Request::Poll(poll) => {
            poll_body(poll, partition).encode(&mut out);
            if primary_gated {
                code::POLL_MESSAGES_ON_PRIMARY
            } else {
                code::POLL_MESSAGES
            }
        }
        Request::StoreOffset(store) => {
            StoreConsumerOffsetRequest {
                key: ConsumerOffsetKey {
                    consumer: store.consumer.clone(),
                    stream: store.stream.clone(),
                    topic: store.topic.clone(),
                    partition_id: Some(store.partition_id),
                },
                offset: store.offset,
            }
            .encode(&mut out);
            code::STORE_CONSUMER_OFFSET
        }
        Request::Admin(admin) => encode_admin(admin, &mut out),
        Request::Command(command) => {
            out.put_slice(&command.body);
            command.code
        }
    };
    Encoded {
        operation: Operation::for_code(code),
        code,
        frame: out,
    }
}

fn poll_body(poll: &PollRequest, partition: Option<u32>) -> PollMessagesRequest {
    PollMessagesRequest {
        consumer: poll.consumer.clone(),
        stream: poll.stream.clone(),
        topic: poll.topic.clone(),
        partition_id: partition.or(poll.partition_id),
        strategy: poll.strategy,
        count: poll.count,
        auto_commit: poll.auto_commit,
    }
}

fn encode_admin(admin: &AdminRequest, out: &mut BytesMut) -> u32 {
    match admin {
        AdminRequest::CreateStream { name } => {
            CreateStreamRequest { name: name.clone() }.encode(out);
            code::CREATE_STREAM
        }
        AdminRequest::CreateTopic {
            stream,
            name,
            partitions_count,
        } => {
            create_topic(stream, name, *partitions_count).encode(out);
            code::CREATE_TOPIC
        }
        AdminRequest::CreatePartitions {
            stream,
            topic,
            partitions_count,
        } => {
            CreatePartitionsRequest {
                stream: stream.clone(),
                topic: topic.clone(),
                partitions_count: *partitions_count,
            }
            .encode(out);
            code::CREATE_PARTITIONS
        }
        AdminRequest::GetStream { stream } => {
            GetStreamRequest {
                stream: stream.clone(),
            }
            .encode(out);
            code::GET_STREAM
        }
        AdminRequest::GetTopic { stream, topic } => {
            GetTopicRequest {
                stream: stream.clone(),
                topic: topic.clone(),
            }
            .encode(out);
            code::GET_TOPIC
        }
    }
}

fn create_topic(stream: &Identifier, name: &Name, partitions_count: u32) -> CreateTopicRequest {
    CreateTopicRequest {
        stream: stream.clone(),
        partitions_count,
        name: name.clone(),
        options: Bytes::new(),
    }
}

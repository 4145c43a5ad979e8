//! The administration operations as [`Call`]s: streams, topics, partitions and segments.
//! Each one is a [`Call::command`]: its body encoded here, the [`Plane`] that says which
//! node serves it, and the decoder of its reply payload. Names and arguments follow the
//! SDK's `IggyClient`.
//!
//! # Implementation note: `DELETE_SEGMENTS` is a metadata write
//!
//! The 0.11.0 server resolves a `DELETE_SEGMENTS` on the node that receives it and
//! commits it as a metadata op (`TruncatePartition`, `handle_delete_segments_request` in
//! `core/server/src/dispatch.rs`), so it goes to the metadata leader, not to the
//! partition's primary. The system reads, offsets and flush are in
//! [`super::calls_system`].

use bytes::{Bytes, BytesMut};

use super::{Call, ClientError, identifier};
use crate::Plane;
use crate::wire::{
    DeletePartitionsRequest, DeleteSegmentsRequest, DeleteStreamRequest, DeleteTopicRequest,
    GetTopicsRequest, Identifier, Name, PurgeStreamRequest, PurgeTopicRequest, StreamSummary,
    TopicSummary, TopicUpdateOptions, UpdateStreamRequest, UpdateTopicRequest, code, empty_reply,
};

/// A body of `len` bytes written by `write`.
pub(super) fn body(len: usize, write: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut out = BytesMut::with_capacity(len);
    write(&mut out);
    out.freeze()
}

/// The partition plane of one partition.
pub(super) fn partition(
    stream: &Identifier,
    topic: &Identifier,
    partition: u32,
    write: bool,
) -> Plane {
    Plane::Partition {
        stream: stream.clone(),
        topic: topic.clone(),
        partition,
        write,
    }
}

impl Call<()> {
    /// Renames a stream (streams have no updatable setting in 0.11.0).
    pub fn update_stream(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        name: &str,
    ) -> Result<Self, ClientError> {
        let request = UpdateStreamRequest {
            stream: identifier(stream)?,
            name: Name::new(name)?,
            options: Bytes::new(),
        };
        Ok(Self::command(
            "update stream",
            code::UPDATE_STREAM,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            empty_reply,
        ))
    }

    /// Deletes a stream with its topics and messages.
    pub fn delete_stream(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request = DeleteStreamRequest {
            stream: identifier(stream)?,
        };
        Ok(Self::command(
            "delete stream",
            code::DELETE_STREAM,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            empty_reply,
        ))
    }

    /// Deletes every message and consumer offset of a stream's topics, keeping them.
    pub fn purge_stream(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request = PurgeStreamRequest {
            stream: identifier(stream)?,
        };
        Ok(Self::command(
            "purge stream",
            code::PURGE_STREAM,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            empty_reply,
        ))
    }

    /// Renames a topic and changes the settings `options` holds (the others stay).
    pub fn update_topic(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        name: &str,
        options: TopicUpdateOptions,
    ) -> Result<Self, ClientError> {
        let request = UpdateTopicRequest::new(
            identifier(stream)?,
            identifier(topic)?,
            Name::new(name)?,
            &options,
        );
        Ok(Self::command(
            "update topic",
            code::UPDATE_TOPIC,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            empty_reply,
        ))
    }

    /// Deletes a topic with its partitions and messages.
    pub fn delete_topic(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request = DeleteTopicRequest {
            stream: identifier(stream)?,
            topic: identifier(topic)?,
        };
        Ok(Self::command(
            "delete topic",
            code::DELETE_TOPIC,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            empty_reply,
        ))
    }

    /// Deletes every message and consumer offset of a topic, keeping its partitions.
    pub fn purge_topic(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request = PurgeTopicRequest {
            stream: identifier(stream)?,
            topic: identifier(topic)?,
        };
        Ok(Self::command(
            "purge topic",
            code::PURGE_TOPIC,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            empty_reply,
        ))
    }

    /// Removes a topic's last `partitions_count` partitions (the highest ids).
    pub fn delete_partitions(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partitions_count: u32,
    ) -> Result<Self, ClientError> {
        let request = DeletePartitionsRequest {
            stream: identifier(stream)?,
            topic: identifier(topic)?,
            partitions_count,
        };
        Ok(Self::command(
            "delete partitions",
            code::DELETE_PARTITIONS,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            empty_reply,
        ))
    }

    /// Removes a partition's oldest `segments_count` sealed segments (committed by the
    /// metadata leader: see the module's implementation note).
    pub fn delete_segments(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partition_id: u32,
        segments_count: u32,
    ) -> Result<Self, ClientError> {
        let request = DeleteSegmentsRequest {
            stream: identifier(stream)?,
            topic: identifier(topic)?,
            partition_id,
            segments_count,
        };
        Ok(Self::command(
            "delete segments",
            code::DELETE_SEGMENTS,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            empty_reply,
        ))
    }
}

impl Call<Vec<StreamSummary>> {
    /// Every stream.
    pub fn get_streams() -> Self {
        Self::command(
            "get streams",
            code::GET_STREAMS,
            Bytes::new(),
            Plane::MetadataRead,
            StreamSummary::decode_list,
        )
    }
}

impl Call<Vec<TopicSummary>> {
    /// Every topic of a stream (none when the stream does not exist, as the server
    /// answers).
    pub fn get_topics(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request = GetTopicsRequest {
            stream: identifier(stream)?,
        };
        Ok(Self::command(
            "get topics",
            code::GET_TOPICS,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataRead,
            TopicSummary::decode_list,
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::{Consumer, ConsumerKind, WireError};
    use crate::{CommandRequest, Reply, ReplyPayload, Request};

    fn command<T>(call: &Call<T>) -> CommandRequest {
        let Request::Command(command) = &call.request else {
            panic!("not a command: {:?}", call.request);
        };
        command.clone()
    }

    fn named(text: &str) -> Identifier {
        Identifier::try_from(text).unwrap()
    }

    fn consumer() -> Consumer {
        Consumer {
            kind: ConsumerKind::ConsumerGroup,
            id: named("readers"),
        }
    }

    fn encoded(write: impl FnOnce(&mut BytesMut)) -> Bytes {
        body(0, write)
    }

    #[test]
    fn stream_and_topic_writes_go_to_the_metadata_leader() {
        let options = TopicUpdateOptions {
            message_expiry: Some(5),
            ..TopicUpdateOptions::default()
        };
        let cases = [
            (Call::update_stream("s", "s2").unwrap(), code::UPDATE_STREAM),
            (Call::delete_stream(1u32).unwrap(), code::DELETE_STREAM),
            (Call::purge_stream("s").unwrap(), code::PURGE_STREAM),
            (
                Call::update_topic("s", 2u32, "t2", options).unwrap(),
                code::UPDATE_TOPIC,
            ),
            (Call::delete_topic(1u32, "t").unwrap(), code::DELETE_TOPIC),
            (Call::purge_topic(1u32, 2u32).unwrap(), code::PURGE_TOPIC),
            (
                Call::delete_partitions(1u32, 2u32, 3).unwrap(),
                code::DELETE_PARTITIONS,
            ),
            (
                Call::delete_segments(1u32, 2u32, 0, 4).unwrap(),
                code::DELETE_SEGMENTS,
            ),
        ];
        for (call, expected_code) in &cases {
            let request = command(call);
            assert_eq!(request.code, *expected_code);
            assert_eq!(request.plane, Plane::MetadataWrite);
        }
        let expected =
            UpdateTopicRequest::new(named("s"), 2.into(), Name::new("t2").unwrap(), &options);
        assert_eq!(
            command(&cases[3].0).body,
            encoded(|out| expected.encode(out))
        );
        let expected = DeleteSegmentsRequest {
            stream: 1.into(),
            topic: 2.into(),
            partition_id: 0,
            segments_count: 4,
        };
        assert_eq!(
            command(&cases[7].0).body,
            encoded(|out| expected.encode(out))
        );
        assert!(matches!(
            Call::update_stream("s", ""),
            Err(ClientError::Invalid(WireError::InvalidLength { .. }))
        ));
    }

    #[test]
    fn replies_decode_their_payloads_and_empty_reads_are_none() {
        let payload = |bytes: &[u8]| Reply::Payload(ReplyPayload(Bytes::copy_from_slice(bytes)));
        let get = Call::get_consumer_offset(consumer(), "s", 2u32, Some(3)).unwrap();
        assert_eq!(get.reply.extract(payload(&[])).unwrap(), None);
        let client = Call::get_client(1);
        assert_eq!(client.reply.extract(payload(&[])).unwrap(), None);
        let topics = Call::get_topics("s").unwrap();
        assert!(
            topics
                .reply
                .extract(payload(&[0, 0, 0, 0]))
                .unwrap()
                .is_empty()
        );
        let streams = Call::get_streams();
        assert!(streams.reply.extract(payload(&[])).unwrap().is_empty());
        let stats = Call::get_stats();
        assert!(matches!(
            stats.reply.extract(payload(&[1, 2, 3])),
            Err(ClientError::Request(crate::RequestError::Malformed(_)))
        ));
        let purge = Call::purge_topic(1u32, 2u32).unwrap();
        assert!(purge.reply.extract(payload(&[])).is_ok());
        let ping = Call::ping();
        assert!(matches!(
            ping.reply.extract(Reply::OffsetStored),
            Err(ClientError::UnexpectedReply { operation: "ping" })
        ));
    }
}

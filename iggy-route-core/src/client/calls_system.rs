//! The system reads, consumer offsets and flush as [`Call`]s: `PING`, `GET_STATS`,
//! `GET_ME`, `GET_CLIENT`, `GET_CLIENTS`, `GET_CONSUMER_OFFSET`, `DELETE_CONSUMER_OFFSET`
//! and `FLUSH_UNSAVED_BUFFER`, built like those of [`super::calls_admin`].
//!
//! # Implementation note: which node serves what
//!
//! From the 0.11.0 server's dispatch (`core/server/src/dispatch.rs`):
//! - each node lists only the clients connected to it, so `get_me`, `get_client` and
//!   `get_clients` go to the coordinator, which holds our session: the id `get_me` reports
//!   is then one `get_client` finds;
//! - a consumer offset read without a partition reads partition 0 (the server's
//!   `unwrap_or(0)`), so it goes to partition 0's primary like `Some(0)`; a delete without
//!   a partition is refused by every node alike (`InvalidIdentifier`), so it stays on the
//!   coordinator;
//! - the server has no flush: every node refuses `FLUSH_UNSAVED_BUFFER` with
//!   `FeatureUnavailable`. It goes to the partition's primary, where a flush would be
//!   served, as an idempotent request.

use bytes::Bytes;

use super::calls_admin::{body, partition};
use super::{Call, ClientError, identifier};
use crate::Plane;
use crate::wire::{
    ClientDetails, ClientInfo, Consumer, ConsumerOffsetInfo, ConsumerOffsetKey,
    DeleteConsumerOffsetRequest, FlushUnsavedBufferRequest, GetClientRequest, Identifier,
    ServerStats, code, empty_reply,
};

impl Call<()> {
    /// Checks that the session's node answers (`PING`).
    pub fn ping() -> Self {
        Self::command(
            "ping",
            code::PING,
            Bytes::new(),
            Plane::Session,
            empty_reply,
        )
    }

    /// Deletes `consumer`'s stored offset on a partition, on the partition's primary.
    pub fn delete_consumer_offset(
        consumer: Consumer,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partition_id: Option<u32>,
    ) -> Result<Self, ClientError> {
        let key = ConsumerOffsetKey {
            consumer,
            stream: identifier(stream)?,
            topic: identifier(topic)?,
            partition_id,
        };
        let plane = match partition_id {
            Some(id) => partition(&key.stream, &key.topic, id, true),
            None => Plane::Session,
        };
        let request = DeleteConsumerOffsetRequest { key };
        Ok(Self::command(
            "delete consumer offset",
            code::DELETE_CONSUMER_OFFSET,
            body(request.encoded_len(), |out| request.encode(out)),
            plane,
            empty_reply,
        ))
    }

    /// Asks the partition's primary to write its unsaved messages to disk. The 0.11.0
    /// server has no such operation and answers `FeatureUnavailable`.
    pub fn flush_unsaved_buffer(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partition_id: u32,
        fsync: bool,
    ) -> Result<Self, ClientError> {
        let request = FlushUnsavedBufferRequest {
            stream: identifier(stream)?,
            topic: identifier(topic)?,
            partition_id,
            fsync,
        };
        let plane = partition(&request.stream, &request.topic, partition_id, false);
        Ok(Self::command(
            "flush unsaved buffer",
            code::FLUSH_UNSAVED_BUFFER,
            body(request.encoded_len(), |out| request.encode(out)),
            plane,
            empty_reply,
        ))
    }
}

impl Call<ServerStats> {
    /// The server's statistics (its clients count is the answering node's).
    pub fn get_stats() -> Self {
        Self::command(
            "get stats",
            code::GET_STATS,
            Bytes::new(),
            Plane::Session,
            ServerStats::decode,
        )
    }
}

impl Call<ClientDetails> {
    /// This client's own connection, as the coordinator sees it.
    pub fn get_me() -> Self {
        Self::command(
            "get me",
            code::GET_ME,
            Bytes::new(),
            Plane::Session,
            ClientDetails::decode,
        )
    }
}

impl Call<Option<ClientDetails>> {
    /// A client connected to the coordinator, or `None` when it has no such client.
    pub fn get_client(client_id: u32) -> Self {
        let request = GetClientRequest { client_id };
        Self::command(
            "get client",
            code::GET_CLIENT,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::Session,
            ClientDetails::decode_optional,
        )
    }
}

impl Call<Vec<ClientInfo>> {
    /// The clients connected to the coordinator.
    pub fn get_clients() -> Self {
        Self::command(
            "get clients",
            code::GET_CLIENTS,
            Bytes::new(),
            Plane::Session,
            ClientInfo::decode_list,
        )
    }
}

impl Call<Option<ConsumerOffsetInfo>> {
    /// `consumer`'s stored offset on a partition (partition 0 for `None`, as the server
    /// reads it), or `None` when it has none. Read on the partition's primary, which has
    /// every offset stored so far.
    pub fn get_consumer_offset(
        consumer: Consumer,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partition_id: Option<u32>,
    ) -> Result<Self, ClientError> {
        let key = ConsumerOffsetKey {
            consumer,
            stream: identifier(stream)?,
            topic: identifier(topic)?,
            partition_id,
        };
        let plane = partition(&key.stream, &key.topic, partition_id.unwrap_or(0), false);
        Ok(Self::command(
            "get consumer offset",
            code::GET_CONSUMER_OFFSET,
            body(key.encoded_len(), |out| key.encode(out)),
            plane,
            ConsumerOffsetInfo::decode,
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use bytes::BytesMut;

    use super::*;
    use crate::wire::ConsumerKind;
    use crate::{CommandRequest, Request};

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
    fn system_reads_are_empty_bodies_on_their_planes() {
        let cases: [(CommandRequest, u32, Plane); 4] = [
            (command(&Call::ping()), code::PING, Plane::Session),
            (command(&Call::get_stats()), code::GET_STATS, Plane::Session),
            (command(&Call::get_me()), code::GET_ME, Plane::Session),
            (
                command(&Call::get_clients()),
                code::GET_CLIENTS,
                Plane::Session,
            ),
        ];
        for (request, expected_code, plane) in cases {
            assert_eq!(request.code, expected_code);
            assert!(request.body.is_empty());
            assert_eq!(request.plane, plane);
        }
        let streams = Call::get_streams();
        assert_eq!(command(&streams).code, code::GET_STREAMS);
        assert_eq!(command(&streams).plane, Plane::MetadataRead);
        let client = Call::get_client(42);
        assert_eq!(command(&client).body.as_ref(), &42u32.to_le_bytes());
        assert_eq!(command(&client).plane, Plane::Session);
    }

    #[test]
    fn offsets_and_flush_go_to_the_partition_primary() {
        let get = Call::get_consumer_offset(consumer(), "s", 2u32, Some(3)).unwrap();
        let key = ConsumerOffsetKey {
            consumer: consumer(),
            stream: named("s"),
            topic: 2.into(),
            partition_id: Some(3),
        };
        assert_eq!(command(&get).code, code::GET_CONSUMER_OFFSET);
        assert_eq!(command(&get).body, encoded(|out| key.encode(out)));
        assert_eq!(
            command(&get).plane,
            partition(&named("s"), &2.into(), 3, false)
        );
        let whole_topic = Call::get_consumer_offset(consumer(), "s", 2u32, None).unwrap();
        assert_eq!(
            command(&whole_topic).plane,
            partition(&named("s"), &2.into(), 0, false),
            "the server reads partition 0 for None"
        );

        let delete = Call::delete_consumer_offset(consumer(), "s", 2u32, Some(3)).unwrap();
        let request = DeleteConsumerOffsetRequest { key };
        assert_eq!(command(&delete).code, code::DELETE_CONSUMER_OFFSET);
        assert_eq!(command(&delete).body, encoded(|out| request.encode(out)));
        assert_eq!(
            command(&delete).plane,
            partition(&named("s"), &2.into(), 3, true)
        );
        let unnamed = Call::delete_consumer_offset(consumer(), "s", 2u32, None).unwrap();
        assert_eq!(command(&unnamed).plane, Plane::Session);

        let flush = Call::flush_unsaved_buffer(1u32, "t", 5, true).unwrap();
        assert_eq!(command(&flush).code, code::FLUSH_UNSAVED_BUFFER);
        assert_eq!(
            command(&flush).plane,
            partition(&1.into(), &named("t"), 5, false)
        );
        assert_eq!(command(&flush).body.last(), Some(&1));
    }
}

//! The consumer-group administration as [`Call`]s: get, list, create and delete a group.
//! Names and arguments follow the SDK's `ConsumerGroupClient`.
//!
//! Reads go where metadata reads go (the coordinator, or the metadata leader right after
//! our own metadata write); create, delete, join and leave are metadata writes, sent to the
//! leader over a data link. A membership belongs to the identity of the link whose join
//! the leader admitted (a follower refuses a join): the router keeps that link as the
//! group's member link, and answers syncs and group polls as that member (see
//! `router::membership`).

use super::calls_admin::body;
use super::{Call, ClientError, identifier};
use crate::Plane;
use crate::wire::{
    ConsumerGroupAssignment, ConsumerGroupDetails, ConsumerGroupInfo, ConsumerGroupRef,
    CreateConsumerGroupRequest, GetConsumerGroupsRequest, Identifier, Name, WireError, code,
    empty_reply,
};

/// A group's three identifiers, checked as the SDK checks them.
fn group_ref(
    stream: impl TryInto<Identifier, Error: Into<ClientError>>,
    topic: impl TryInto<Identifier, Error: Into<ClientError>>,
    group: impl TryInto<Identifier, Error: Into<ClientError>>,
) -> Result<ConsumerGroupRef, ClientError> {
    Ok(ConsumerGroupRef {
        stream: identifier(stream)?,
        topic: identifier(topic)?,
        group: identifier(group)?,
    })
}

/// The answer to a create: the new group's details. An empty payload answers nothing.
fn created_group(payload: &[u8]) -> Result<ConsumerGroupDetails, WireError> {
    ConsumerGroupDetails::decode(payload)?.ok_or(WireError::InvalidLength {
        field: "created consumer group",
        len: 0,
    })
}

impl Call<Option<ConsumerGroupDetails>> {
    /// A group with its members and their partitions, or `None` when there is no such
    /// group.
    pub fn get_consumer_group(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        group: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request = group_ref(stream, topic, group)?;
        Ok(Self::command(
            "get consumer group",
            code::GET_CONSUMER_GROUP,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataRead,
            ConsumerGroupDetails::decode,
        ))
    }
}

impl Call<Vec<ConsumerGroupInfo>> {
    /// Every group of a topic.
    pub fn get_consumer_groups(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request = GetConsumerGroupsRequest {
            stream: identifier(stream)?,
            topic: identifier(topic)?,
        };
        Ok(Self::command(
            "get consumer groups",
            code::GET_CONSUMER_GROUPS,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataRead,
            ConsumerGroupInfo::decode_list,
        ))
    }
}

impl Call<ConsumerGroupDetails> {
    /// Creates a group on a topic; the server picks its id (0-based, never reused).
    pub fn create_consumer_group(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        name: &str,
    ) -> Result<Self, ClientError> {
        let request = CreateConsumerGroupRequest {
            stream: identifier(stream)?,
            topic: identifier(topic)?,
            name: Name::new(name)?,
        };
        Ok(Self::command(
            "create consumer group",
            code::CREATE_CONSUMER_GROUP,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            created_group,
        ))
    }
}

impl Call<()> {
    /// Deletes a group, its membership and its stored offsets.
    pub fn delete_consumer_group(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        group: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request = group_ref(stream, topic, group)?;
        Ok(Self::command(
            "delete consumer group",
            code::DELETE_CONSUMER_GROUP,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            empty_reply,
        ))
    }
}

impl Call<()> {
    /// Joins a group (a metadata write, on the leader).
    pub fn join_consumer_group(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        group: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request = group_ref(stream, topic, group)?;
        Ok(Self::command(
            "join consumer group",
            code::JOIN_CONSUMER_GROUP,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            empty_reply,
        ))
    }

    /// Leaves a group (on the member link that joined).
    pub fn leave_consumer_group(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        group: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request = group_ref(stream, topic, group)?;
        Ok(Self::command(
            "leave consumer group",
            code::LEAVE_CONSUMER_GROUP,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataWrite,
            empty_reply,
        ))
    }
}

impl Call<Option<ConsumerGroupAssignment>> {
    /// The member's partitions and the group's generation (a read any node answers for
    /// whoever the header names; the router puts the member's id there).
    pub fn sync_consumer_group(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        group: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request = group_ref(stream, topic, group)?;
        Ok(Self::command(
            "sync consumer group",
            code::SYNC_CONSUMER_GROUP,
            body(request.encoded_len(), |out| request.encode(out)),
            Plane::MetadataRead,
            ConsumerGroupAssignment::decode,
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use bytes::{Bytes, BytesMut};

    use super::*;
    use crate::{CommandRequest, Reply, ReplyPayload, Request};

    fn command<T>(call: &Call<T>) -> CommandRequest {
        let Request::Command(command) = &call.request else {
            panic!("not a command: {:?}", call.request);
        };
        command.clone()
    }

    fn payload(bytes: &[u8]) -> Reply {
        Reply::Payload(ReplyPayload(Bytes::copy_from_slice(bytes)))
    }

    #[test]
    fn reads_are_metadata_reads_and_writes_go_to_the_leader() {
        let expected = ConsumerGroupRef {
            stream: Identifier::try_from("s").unwrap(),
            topic: Identifier::Numeric(2),
            group: Identifier::try_from("billing").unwrap(),
        };
        let mut bytes = BytesMut::new();
        expected.encode(&mut bytes);
        let get = Call::get_consumer_group("s", 2u32, "billing").unwrap();
        assert_eq!(command(&get).code, code::GET_CONSUMER_GROUP);
        assert_eq!(command(&get).plane, Plane::MetadataRead);
        assert_eq!(command(&get).body, bytes.freeze());
        let list = Call::get_consumer_groups("s", 2u32).unwrap();
        assert_eq!(
            (command(&list).code, command(&list).plane),
            (code::GET_CONSUMER_GROUPS, Plane::MetadataRead)
        );
        let create = Call::create_consumer_group("s", 2u32, "billing").unwrap();
        assert_eq!(
            (command(&create).code, command(&create).plane),
            (code::CREATE_CONSUMER_GROUP, Plane::MetadataWrite)
        );
        let delete = Call::delete_consumer_group("s", 2u32, 0u32).unwrap();
        assert_eq!(
            (command(&delete).code, command(&delete).plane),
            (code::DELETE_CONSUMER_GROUP, Plane::MetadataWrite)
        );
    }

    #[test]
    fn bad_names_are_refused_before_sending() {
        assert!(Call::create_consumer_group("s", 1u32, "").is_err());
        assert!(Call::create_consumer_group("s", 1u32, &"g".repeat(256)).is_err());
        assert!(Call::get_consumer_group("", 1u32, 0u32).is_err());
        assert!(Call::delete_consumer_group("s", 1u32, "").is_err());
    }

    #[test]
    fn a_missing_group_is_none_and_a_create_must_answer_its_group() {
        let get = Call::get_consumer_group(1u32, 1u32, 0u32).unwrap();
        assert_eq!(get.reply.extract(payload(&[])).unwrap(), None);
        let list = Call::get_consumer_groups(1u32, 1u32).unwrap();
        assert!(list.reply.extract(payload(&[])).unwrap().is_empty());
        let create = Call::create_consumer_group(1u32, 1u32, "g").unwrap();
        assert!(matches!(
            create.reply.extract(payload(&[])),
            Err(ClientError::Request(crate::RequestError::Malformed(_)))
        ));
        let create = Call::create_consumer_group(1u32, 1u32, "g").unwrap();
        let details = [0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, b'g'];
        let group = create.reply.extract(payload(&details)).unwrap();
        assert_eq!((group.info.id, group.info.partitions_count), (0, 3));
        assert!(group.members.is_empty());
    }
}

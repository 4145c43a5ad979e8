//! Consumer groups: `GET_CONSUMER_GROUP` (600), `GET_CONSUMER_GROUPS` (601),
//! `CREATE_CONSUMER_GROUP` (602), `DELETE_CONSUMER_GROUP` (603), `JOIN_CONSUMER_GROUP`
//! (604), `LEAVE_CONSUMER_GROUP` (605) and `SYNC_CONSUMER_GROUP` (606).
//!
//! Shapes follow the 0.11.0 crate, and what the server answers follows its source:
//! - every body but create and list names a group: `[stream][topic][group]`;
//! - a group reads as `[id:u32][partitions_count:u32][members_count:u32][name]`; the
//!   details add each member as `[id:u32][count:u32][partition_id:u32]*`. A member id is
//!   the server's slot for it, not a client id. Group ids start at 0 and are never reused;
//! - `GET_CONSUMER_GROUP` of a missing group answers an empty payload, and so does
//!   `SYNC_CONSUMER_GROUP` for a client that is not a member: both are "none", not errors;
//! - create answers the new group's details after its result section (the crate types it
//!   as empty; the SDK and the server use the details); delete, join and leave answer an
//!   empty payload after theirs.

#[cfg(feature = "server")]
use bytes::BufMut;
use bytes::BytesMut;

#[cfg(feature = "server")]
use super::topics::whole_body;
use super::{Identifier, Name, Reader, WireError};

/// Smallest encoded group header: the fixed fields and a one-byte name.
const MIN_GROUP_LEN: usize = 12 + 2;

/// A body that names one group: get (600), delete (603), join (604), leave (605) and sync
/// (606) all carry exactly this.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConsumerGroupRef {
    /// The stream.
    pub stream: Identifier,
    /// The topic.
    pub topic: Identifier,
    /// The group, by id or by name.
    pub group: Identifier,
}

impl ConsumerGroupRef {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.stream.encode(out);
        self.topic.encode(out);
        self.group.encode(out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.stream.encoded_len() + self.topic.encoded_len() + self.group.encoded_len()
    }
}

#[cfg(feature = "server")]
whole_body!(ConsumerGroupRef, "consumer group request", |r| {
    ConsumerGroupRef {
        stream: Identifier::decode(&mut r)?,
        topic: Identifier::decode(&mut r)?,
        group: Identifier::decode(&mut r)?,
    }
});

/// The `GET_CONSUMER_GROUPS` body: the topic whose groups are listed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GetConsumerGroupsRequest {
    /// The stream.
    pub stream: Identifier,
    /// The topic.
    pub topic: Identifier,
}

impl GetConsumerGroupsRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.stream.encode(out);
        self.topic.encode(out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.stream.encoded_len() + self.topic.encoded_len()
    }
}

#[cfg(feature = "server")]
whole_body!(
    GetConsumerGroupsRequest,
    "get consumer groups request",
    |r| {
        GetConsumerGroupsRequest {
            stream: Identifier::decode(&mut r)?,
            topic: Identifier::decode(&mut r)?,
        }
    }
);

/// The `CREATE_CONSUMER_GROUP` body: the topic and the new group's name (the server picks
/// its id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CreateConsumerGroupRequest {
    /// The stream.
    pub stream: Identifier,
    /// The topic.
    pub topic: Identifier,
    /// The group's name.
    pub name: Name,
}

impl CreateConsumerGroupRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.stream.encode(out);
        self.topic.encode(out);
        self.name.encode(out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.stream.encoded_len() + self.topic.encoded_len() + self.name.encoded_len()
    }
}

#[cfg(feature = "server")]
whole_body!(
    CreateConsumerGroupRequest,
    "create consumer group request",
    |r| CreateConsumerGroupRequest {
        stream: Identifier::decode(&mut r)?,
        topic: Identifier::decode(&mut r)?,
        name: r.name()?,
    }
);

/// One group, as listed (`ConsumerGroupResponse`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConsumerGroupInfo {
    /// The group's id (0-based, never reused within its topic).
    pub id: u32,
    /// The topic's partitions count.
    pub partitions_count: u32,
    /// How many members the group has.
    pub members_count: u32,
    /// The group's name.
    pub name: Name,
}

impl ConsumerGroupInfo {
    /// Read one group header.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            id: r.u32()?,
            partitions_count: r.u32()?,
            members_count: r.u32()?,
            name: r.name()?,
        })
    }

    /// Decode a `GET_CONSUMER_GROUPS` payload: headers until the payload ends (an empty
    /// payload is no groups).
    pub fn decode_list(payload: &[u8]) -> Result<Vec<Self>, WireError> {
        let mut r = Reader::new(payload);
        let mut groups = Vec::with_capacity(payload.len() / MIN_GROUP_LEN);
        while r.remaining() > 0 {
            groups.push(Self::read(&mut r)?);
        }
        Ok(groups)
    }
}

#[cfg(feature = "server")]
impl ConsumerGroupInfo {
    /// Append one group header.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.id);
        out.put_u32_le(self.partitions_count);
        out.put_u32_le(self.members_count);
        self.name.encode(out);
    }

    /// Append a `GET_CONSUMER_GROUPS` payload.
    pub fn encode_list(groups: &[Self], out: &mut BytesMut) {
        for group in groups {
            group.encode(out);
        }
    }
}

/// One member of a group and the partitions assigned to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConsumerGroupMember {
    /// The server's slot for the member (not its client id).
    pub id: u32,
    /// Its partitions, including any it is handing over.
    pub partitions: Vec<u32>,
}

/// A group with its members (`GET_CONSUMER_GROUP`, and the answer to a create).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConsumerGroupDetails {
    /// The group.
    pub info: ConsumerGroupInfo,
    /// Its members, as many as `info.members_count`.
    pub members: Vec<ConsumerGroupMember>,
}

impl ConsumerGroupDetails {
    /// Decode a details payload. An empty payload is `None`: the group does not exist.
    pub fn decode(payload: &[u8]) -> Result<Option<Self>, WireError> {
        if payload.is_empty() {
            return Ok(None);
        }
        let mut r = Reader::new(payload);
        let info = ConsumerGroupInfo::read(&mut r)?;
        let mut members = Vec::with_capacity((info.members_count as usize).min(r.remaining() / 8));
        for _ in 0..info.members_count {
            let id = r.u32()?;
            let partitions = read_partition_ids(&mut r)?;
            members.push(ConsumerGroupMember { id, partitions });
        }
        r.finish("consumer group details")?;
        Ok(Some(Self { info, members }))
    }
}

#[cfg(feature = "server")]
impl ConsumerGroupDetails {
    /// Append a details payload; `members_count` is written as the members listed.
    pub fn encode(&self, out: &mut BytesMut) {
        let info = ConsumerGroupInfo {
            members_count: super::len_u32(self.members.len()),
            ..self.info.clone()
        };
        info.encode(out);
        for member in &self.members {
            out.put_u32_le(member.id);
            put_partition_ids(&member.partitions, out);
        }
    }
}

/// What `SYNC_CONSUMER_GROUP` answers a member: the group's rebalance generation and the
/// partitions this member may poll now (possibly none, when the group has more members
/// than the topic has partitions).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConsumerGroupAssignment {
    /// Bumped by the server on every join, leave and repartition.
    pub generation: u64,
    /// The member's pollable partitions, in the server's order.
    pub partitions: Vec<u32>,
}

impl ConsumerGroupAssignment {
    /// Decode a sync payload. An empty payload is `None`: not a member (or no such group).
    pub fn decode(payload: &[u8]) -> Result<Option<Self>, WireError> {
        if payload.is_empty() {
            return Ok(None);
        }
        let mut r = Reader::new(payload);
        let generation = r.u64()?;
        let partitions = read_partition_ids(&mut r)?;
        r.finish("consumer group assignment")?;
        Ok(Some(Self {
            generation,
            partitions,
        }))
    }
}

#[cfg(feature = "server")]
impl ConsumerGroupAssignment {
    /// Append a sync payload.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u64_le(self.generation);
        put_partition_ids(&self.partitions, out);
    }
}

/// `[count:u32][partition_id:u32]*`, refusing a count the payload cannot hold.
fn read_partition_ids(r: &mut Reader<'_>) -> Result<Vec<u32>, WireError> {
    let count = r.u32()? as usize;
    let mut partitions = Vec::with_capacity(count.min(r.remaining() / 4));
    for _ in 0..count {
        partitions.push(r.u32()?);
    }
    Ok(partitions)
}

#[cfg(feature = "server")]
fn put_partition_ids(partitions: &[u32], out: &mut BytesMut) {
    out.put_u32_le(super::len_u32(partitions.len()));
    for &partition in partitions {
        out.put_u32_le(partition);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn info(id: u32, name: &str, members_count: u32) -> ConsumerGroupInfo {
        ConsumerGroupInfo {
            id,
            partitions_count: 3,
            members_count,
            name: Name::new(name).unwrap(),
        }
    }

    #[test]
    fn a_group_list_runs_to_the_end_and_a_cut_one_fails() {
        let groups = vec![info(0, "g", 0), info(4, "billing", 2)];
        let mut out = BytesMut::new();
        ConsumerGroupInfo::encode_list(&groups, &mut out);
        assert_eq!(ConsumerGroupInfo::decode_list(&out).unwrap(), groups);
        assert!(ConsumerGroupInfo::decode_list(&[]).unwrap().is_empty());
        let first = 12 + 2;
        for cut in (1..out.len()).filter(|&cut| cut != first) {
            assert!(
                ConsumerGroupInfo::decode_list(&out[..cut]).is_err(),
                "{cut}"
            );
        }
    }

    #[test]
    fn details_carry_each_member_s_partitions_and_empty_is_none() {
        let details = ConsumerGroupDetails {
            info: info(1, "g1", 2),
            members: vec![
                ConsumerGroupMember {
                    id: 0,
                    partitions: vec![0, 2],
                },
                ConsumerGroupMember {
                    id: 1,
                    partitions: vec![1],
                },
            ],
        };
        let mut out = BytesMut::new();
        details.encode(&mut out);
        assert_eq!(out.len(), 12 + 3 + (8 + 8) + (8 + 4));
        assert_eq!(ConsumerGroupDetails::decode(&out).unwrap(), Some(details));
        assert_eq!(ConsumerGroupDetails::decode(&[]).unwrap(), None);
        let mut extra = out.clone();
        extra.extend_from_slice(&[0]);
        assert!(ConsumerGroupDetails::decode(&extra).is_err());
    }

    #[test]
    fn huge_counts_fail_cleanly_without_allocating_them() {
        let mut members = BytesMut::new();
        info(0, "g", u32::MAX).encode(&mut members);
        assert!(ConsumerGroupDetails::decode(&members).is_err());
        let mut sync = BytesMut::new();
        sync.put_u64_le(7);
        sync.put_u32_le(u32::MAX);
        assert!(ConsumerGroupAssignment::decode(&sync).is_err());
    }

    #[test]
    fn an_assignment_may_be_empty_and_no_payload_is_no_membership() {
        let none = ConsumerGroupAssignment {
            generation: 3,
            partitions: Vec::new(),
        };
        let mut out = BytesMut::new();
        none.encode(&mut out);
        assert_eq!(&out[..], &[3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(ConsumerGroupAssignment::decode(&out).unwrap(), Some(none));
        assert_eq!(ConsumerGroupAssignment::decode(&[]).unwrap(), None);
    }

    #[test]
    fn request_bodies_decode_whole_and_refuse_trailing_bytes() {
        let group = ConsumerGroupRef {
            stream: Identifier::Numeric(1),
            topic: Identifier::try_from("t").unwrap(),
            group: Identifier::Numeric(0),
        };
        let mut out = BytesMut::new();
        group.encode(&mut out);
        assert_eq!(out.len(), group.encoded_len());
        assert_eq!(ConsumerGroupRef::decode(&out).unwrap(), group);
        out.extend_from_slice(&[9]);
        assert!(ConsumerGroupRef::decode(&out).is_err());
        let create = CreateConsumerGroupRequest {
            stream: Identifier::Numeric(1),
            topic: Identifier::Numeric(2),
            name: Name::new("grp").unwrap(),
        };
        let mut out = BytesMut::new();
        create.encode(&mut out);
        // The crate's own vector for CREATE(1, 2, "grp").
        assert_eq!(
            &out[..],
            &[1, 4, 1, 0, 0, 0, 1, 4, 2, 0, 0, 0, 3, b'g', b'r', b'p']
        );
        assert_eq!(CreateConsumerGroupRequest::decode(&out).unwrap(), create);
    }
}

//! Body conformance of the consumer-group commands (600-606) against the published 0.11.0
//! crate: for every request and reply, ours encodes to the bytes theirs encodes for the
//! same values, and each side decodes the other's bytes.
#![allow(clippy::unwrap_used)]

use bytes::BytesMut;
use iggy_binary_protocol::requests::consumer_groups as req;
use iggy_binary_protocol::responses::consumer_groups as resp;
use iggy_binary_protocol::{WireDecode, WireEncode, WireIdentifier, WireName};
use iggy_route_core::wire::{
    ConsumerGroupAssignment, ConsumerGroupDetails, ConsumerGroupInfo, ConsumerGroupMember,
    ConsumerGroupRef, CreateConsumerGroupRequest, GetConsumerGroupsRequest, Identifier, Name,
};

fn ours(encode: impl Fn(&mut BytesMut)) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode(&mut out);
    out.to_vec()
}

/// Their bytes equal ours, and their decode of our bytes re-encodes to the same.
fn same<T: WireEncode + WireDecode>(their: &T, our_bytes: &[u8]) {
    assert_eq!(their.to_bytes().as_ref(), our_bytes);
    let (decoded, used) = T::decode(our_bytes).unwrap();
    assert_eq!(used, our_bytes.len());
    assert_eq!(decoded.to_bytes().as_ref(), our_bytes);
}

/// A named stream, a numeric topic and a group named both ways, on both sides.
fn cases() -> Vec<(ConsumerGroupRef, [WireIdentifier; 3])> {
    let stream = || Identifier::try_from("orders").unwrap();
    vec![
        (
            ConsumerGroupRef {
                stream: stream(),
                topic: Identifier::Numeric(7),
                group: Identifier::Numeric(0),
            },
            [
                WireIdentifier::named("orders").unwrap(),
                WireIdentifier::numeric(7),
                WireIdentifier::numeric(0),
            ],
        ),
        (
            ConsumerGroupRef {
                stream: stream(),
                topic: Identifier::Numeric(7),
                group: Identifier::try_from("billing").unwrap(),
            },
            [
                WireIdentifier::named("orders").unwrap(),
                WireIdentifier::numeric(7),
                WireIdentifier::named("billing").unwrap(),
            ],
        ),
    ]
}

#[test]
fn the_five_bodies_that_name_a_group_match_the_crate() {
    for (group, [stream_id, topic_id, group_id]) in cases() {
        let bytes = ours(|out| group.encode(out));
        assert_eq!(bytes.len(), group.encoded_len());
        let get = req::GetConsumerGroupRequest {
            stream_id: stream_id.clone(),
            topic_id: topic_id.clone(),
            group_id: group_id.clone(),
        };
        same(&get, &bytes);
        let delete = req::DeleteConsumerGroupRequest {
            stream_id: stream_id.clone(),
            topic_id: topic_id.clone(),
            group_id: group_id.clone(),
        };
        same(&delete, &bytes);
        let join = req::JoinConsumerGroupRequest {
            stream_id: stream_id.clone(),
            topic_id: topic_id.clone(),
            group_id: group_id.clone(),
        };
        same(&join, &bytes);
        let leave = req::LeaveConsumerGroupRequest {
            stream_id: stream_id.clone(),
            topic_id: topic_id.clone(),
            group_id: group_id.clone(),
        };
        same(&leave, &bytes);
        let sync = req::SyncConsumerGroupRequest {
            stream_id,
            topic_id,
            group_id,
        };
        same(&sync, &bytes);
        assert_eq!(ConsumerGroupRef::decode(&sync.to_bytes()).unwrap(), group);
    }
}

#[test]
fn create_and_list_bodies_match_the_crate() {
    let create = CreateConsumerGroupRequest {
        stream: Identifier::try_from("orders").unwrap(),
        topic: Identifier::Numeric(7),
        name: Name::new("billing").unwrap(),
    };
    let theirs = req::CreateConsumerGroupRequest {
        stream_id: WireIdentifier::named("orders").unwrap(),
        topic_id: WireIdentifier::numeric(7),
        name: WireName::new("billing").unwrap(),
    };
    let bytes = ours(|out| create.encode(out));
    assert_eq!(bytes.len(), create.encoded_len());
    same(&theirs, &bytes);
    assert_eq!(
        CreateConsumerGroupRequest::decode(&theirs.to_bytes()).unwrap(),
        create
    );
    let list = GetConsumerGroupsRequest {
        stream: Identifier::Numeric(1),
        topic: Identifier::try_from("t").unwrap(),
    };
    let theirs = req::GetConsumerGroupsRequest {
        stream_id: WireIdentifier::numeric(1),
        topic_id: WireIdentifier::named("t").unwrap(),
    };
    same(&theirs, &ours(|out| list.encode(out)));
}

fn info(
    id: u32,
    name: &str,
    members_count: u32,
) -> (ConsumerGroupInfo, resp::ConsumerGroupResponse) {
    (
        ConsumerGroupInfo {
            id,
            partitions_count: 6,
            members_count,
            name: Name::new(name).unwrap(),
        },
        resp::ConsumerGroupResponse {
            id,
            partitions_count: 6,
            members_count,
            name: WireName::new(name).unwrap(),
        },
    )
}

#[test]
fn group_listings_match_the_crate() {
    let (a, their_a) = info(0, "g", 0);
    let (b, their_b) = info(3, "billing", 2);
    let bytes = ours(|out| ConsumerGroupInfo::encode_list(&[a.clone(), b.clone()], out));
    let theirs = resp::GetConsumerGroupsResponse {
        groups: vec![their_a, their_b],
    };
    same(&theirs, &bytes);
    assert_eq!(
        ConsumerGroupInfo::decode_list(&theirs.to_bytes()).unwrap(),
        vec![a, b]
    );
    let empty = resp::GetConsumerGroupsResponse { groups: Vec::new() };
    assert!(
        ConsumerGroupInfo::decode_list(&empty.to_bytes())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn group_details_match_the_crate() {
    let (group, their_group) = info(1, "billing", 2);
    let members = [vec![0, 2, 4], vec![1, 3, 5]];
    let details = ConsumerGroupDetails {
        info: group,
        members: members
            .iter()
            .enumerate()
            .map(|(id, partitions)| ConsumerGroupMember {
                id: u32::try_from(id).unwrap(),
                partitions: partitions.clone(),
            })
            .collect(),
    };
    let theirs = resp::ConsumerGroupDetailsResponse {
        group: their_group,
        members: members
            .iter()
            .enumerate()
            .map(|(id, partitions)| resp::ConsumerGroupMemberResponse {
                id: u32::try_from(id).unwrap(),
                partitions_count: u32::try_from(partitions.len()).unwrap(),
                partitions: partitions.clone(),
            })
            .collect(),
    };
    same(&theirs, &ours(|out| details.encode(out)));
    assert_eq!(
        ConsumerGroupDetails::decode(&theirs.to_bytes()).unwrap(),
        Some(details)
    );
}

#[test]
fn sync_answers_match_the_crate() {
    for partitions in [vec![], vec![2], vec![0, 3, 5]] {
        let ours_value = ConsumerGroupAssignment {
            generation: 9,
            partitions: partitions.clone(),
        };
        let theirs = resp::SyncConsumerGroupResponse {
            generation: 9,
            partitions,
        };
        same(&theirs, &ours(|out| ours_value.encode(out)));
        assert_eq!(
            ConsumerGroupAssignment::decode(&theirs.to_bytes()).unwrap(),
            Some(ours_value)
        );
    }
}

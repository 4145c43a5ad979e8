//! What the scripted-node tests of both adapters assert about a result: that a topic read
//! is the node's topic, and that a success is the reply to this very request.

use bytes::Bytes;
use iggy_route_core::SendReceipt;
use iggy_route_core::wire::TopicDetails;

use super::{BOGUS_OFFSET, ScriptedNode, TOPIC_NAME};

/// The topic read is the scripted node's topic 1/1, with its three partitions.
///
/// # Panics
/// If it is not.
pub fn assert_our_topic(topic: Option<TopicDetails>) {
    let topic = topic.expect("topic 1/1 exists");
    assert_eq!(topic.summary.name.as_str(), TOPIC_NAME, "{topic:?}");
    assert_eq!(topic.summary.partitions_count, 3);
}

/// A success must be the reply to this very request: the node stored exactly this payload
/// in this partition, at the offset the receipt names (and no bogus reply was taken).
///
/// # Panics
/// If it is not.
pub fn assert_genuine(node: &ScriptedNode, receipt: &SendReceipt, partition: u32, payload: &Bytes) {
    let offset = receipt.base_offset.expect("the node always confirms");
    assert!(
        offset < BOGUS_OFFSET,
        "a reply to nothing was taken: {receipt:?}"
    );
    let stored = node.stored();
    let batch = stored
        .iter()
        .find(|b| b.payloads.first() == Some(payload))
        .unwrap_or_else(|| panic!("no batch with this payload stored; receipt {receipt:?}"));
    assert_eq!((batch.partition, batch.base_offset), (partition, offset));
    assert_eq!(receipt.partition_id, partition);
}

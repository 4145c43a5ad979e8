//! Small identifiers shared by the routing layer, the link layer and the adapters.

use std::fmt;

use crate::wire::Identifier;

/// A node of the cluster, as the router knows it: an index into its node table.
///
/// The seed addresses get the first ids, in the order given; nodes first seen in a roster
/// get the next ones. An id is never reused for another address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

/// One connection attempt. Every `Output::Connect` names a fresh one; ids are never reused,
/// so a late event for a closed link can be told apart from the link that replaced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u64);

/// A request accepted by `submit`, completed exactly once by `Output::Completed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "link{}", self.0)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "req{}", self.0)
    }
}

/// A topic as the caller names it: stream and topic identifiers, numeric or by name.
///
/// Two spellings of one topic (`1` and `"orders"`) are two keys, as in the SDK's own cache:
/// the router never guesses that they are the same topic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicKey {
    /// The stream.
    pub stream: Identifier,
    /// The topic within the stream.
    pub topic: Identifier,
}

/// One partition of a topic: the unit that has its own primary.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionKey {
    /// The topic.
    pub topic: TopicKey,
    /// The 0-based partition id, as the 0.11.0 SDK sends it.
    pub partition: u32,
}

impl fmt::Display for TopicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.stream, self.topic)
    }
}

impl fmt::Display for PartitionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.topic, self.partition)
    }
}

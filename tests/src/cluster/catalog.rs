//! Streams, topics and partitions of the test cluster, with one append-only log and the
//! consumer offsets of every partition.
//!
//! Stream and topic ids are numeric and start at the catalog's first id: 0 on the real
//! cluster of `tests/real-cluster` (server 0.9.0-edge.5), 1 on the servers the protocol
//! document describes. Partition ids are 0-based, because that is what the 0.11.0 SDK sends
//! (protocol §2, last paragraph).

use std::collections::BTreeMap;

use super::groups::Groups;
use super::partition::{OffsetOwner, Partition};
use super::state::NodeId;

/// A stream or topic reference as a request names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// By numeric id.
    Id(u32),
    /// By name.
    Name(&'a str),
}

/// A topic and its partitions.
#[derive(Debug, Clone)]
pub struct Topic {
    /// Numeric id, from 1.
    pub id: u32,
    /// Name, unique in its stream.
    pub name: String,
    /// Creation time (µs).
    pub created_at: u64,
    /// Message expiry in µs, 0 = never.
    pub message_expiry: u64,
    /// Maximum size in bytes, 0 = unlimited.
    pub max_topic_size: u64,
    /// Compression algorithm byte (1 = none, 2 = gzip).
    pub compression: u8,
    /// Partitions, index = partition id.
    pub partitions: Vec<Partition>,
    /// Server-side round-robin cursor for `Balanced` sends (the SDK resolves it itself).
    pub balanced_cursor: u32,
    /// Its consumer groups.
    pub groups: Groups,
}

impl Topic {
    /// The offset group `group` (by name) stored on `partition`, as the primary keeps it:
    /// under the group's id, however its requests named it.
    pub fn group_offset(&self, partition: u32, group: &str) -> Option<u64> {
        let id = self.groups.find(Lookup::Name(group))?.id;
        self.partition(partition)?
            .offsets
            .get(&OffsetOwner::GroupId(id))
            .copied()
    }

    /// The partition with this 0-based id.
    pub fn partition(&self, id: u32) -> Option<&Partition> {
        self.partitions.get(id as usize)
    }

    /// The partition with this 0-based id, mutably.
    pub fn partition_mut(&mut self, id: u32) -> Option<&mut Partition> {
        self.partitions.get_mut(id as usize)
    }

    /// Total messages in all partitions, as the server's counters report them (a purge
    /// zeroes them at once, before its wipe lands).
    pub fn messages_count(&self) -> u64 {
        self.partitions.iter().map(|p| p.messages_count(None)).sum()
    }

    /// Total size of all partitions.
    pub fn size_bytes(&self) -> u64 {
        self.partitions.iter().map(Partition::size_bytes).sum()
    }

    /// Add `count` partitions whose primary is `primary`.
    fn add_partitions(&mut self, count: u32, created_at: u64, primary: NodeId) {
        for _ in 0..count {
            let id = self.partitions.len() as u32;
            self.partitions
                .push(Partition::new(id, created_at, primary));
        }
    }
}

/// A stream and its topics.
#[derive(Debug, Clone)]
pub struct Stream {
    /// Numeric id, from 1.
    pub id: u32,
    /// Unique name.
    pub name: String,
    /// Creation time (µs).
    pub created_at: u64,
    /// Topics by id.
    pub topics: BTreeMap<u32, Topic>,
}

impl Stream {
    /// The topic named by `topic`.
    pub fn topic(&self, topic: Lookup<'_>) -> Option<&Topic> {
        match topic {
            Lookup::Id(id) => self.topics.get(&id),
            Lookup::Name(name) => self.topics.values().find(|t| t.name == name),
        }
    }

    fn topic_id(&self, topic: Lookup<'_>) -> Option<u32> {
        self.topic(topic).map(|t| t.id)
    }
}

/// Why a catalog operation failed, as the `IggyError` code a server would send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogError {
    /// 1009
    StreamNotFound,
    /// 1012
    StreamNameTaken,
    /// 2010
    TopicNotFound,
    /// 2013
    TopicNameTaken,
    /// 2019
    InvalidPartitionsCount,
    /// 3007
    PartitionNotFound,
}

impl CatalogError {
    /// The `IggyError` code of this failure.
    pub fn code(self) -> u32 {
        match self {
            Self::StreamNotFound => 1009,
            Self::StreamNameTaken => 1012,
            Self::TopicNotFound => 2010,
            Self::TopicNameTaken => 2013,
            Self::InvalidPartitionsCount => 2019,
            Self::PartitionNotFound => 3007,
        }
    }
}

/// Upper bound on partitions per topic, so a hostile count cannot exhaust memory.
pub const MAX_PARTITIONS_PER_TOPIC: u32 = 1000;

/// All streams of the cluster.
#[derive(Debug, Clone)]
pub struct Catalog {
    streams: BTreeMap<u32, Stream>,
    /// The id of the first stream, and of each stream's first topic.
    first_id: u32,
    /// The earliest time (µs) a purge acknowledged is due to wipe its partitions, if one
    /// is pending: what keeps [`Catalog::settle_purges`] from walking every partition on
    /// every request.
    purge_due: Option<u64>,
}

impl Catalog {
    /// An empty catalog whose ids start at `first_id`.
    pub fn new(first_id: u32) -> Catalog {
        Catalog {
            streams: BTreeMap::new(),
            first_id,
            purge_due: None,
        }
    }

    /// Acknowledge a purge of a topic: its counters read zero at once, its partitions'
    /// logs and consumer offsets are wiped at `due_micros` (see
    /// [`super::state::PURGE_RECONCILE`]). The partitions are kept.
    pub fn purge_topic(
        &mut self,
        stream: Lookup<'_>,
        topic: Lookup<'_>,
        due_micros: u64,
    ) -> Result<(), CatalogError> {
        let topic = self.topic_mut(stream, topic)?;
        topic
            .partitions
            .iter_mut()
            .for_each(|partition| partition.schedule_purge(due_micros));
        self.note_purge_due(due_micros);
        Ok(())
    }

    /// Acknowledge a purge of every topic of a stream, as [`Catalog::purge_topic`] does.
    pub fn purge_stream(
        &mut self,
        stream: Lookup<'_>,
        due_micros: u64,
    ) -> Result<(), CatalogError> {
        let stream = self
            .stream_mut(stream)
            .ok_or(CatalogError::StreamNotFound)?;
        stream
            .topics
            .values_mut()
            .flat_map(|topic| topic.partitions.iter_mut())
            .for_each(|partition| partition.schedule_purge(due_micros));
        self.note_purge_due(due_micros);
        Ok(())
    }

    fn note_purge_due(&mut self, due_micros: u64) {
        self.purge_due = Some(self.purge_due.map_or(due_micros, |due| due.min(due_micros)));
    }

    /// Wipe every partition whose purge is due at `now_micros`.
    pub fn settle_purges(&mut self, now_micros: u64) {
        if self.purge_due.is_none_or(|due| now_micros < due) {
            return;
        }
        self.purge_due = self
            .streams
            .values_mut()
            .flat_map(|stream| stream.topics.values_mut())
            .flat_map(|topic| topic.partitions.iter_mut())
            .filter_map(|partition| partition.settle_purge(now_micros))
            .min();
    }

    /// The stream named by `stream`.
    pub fn stream(&self, stream: Lookup<'_>) -> Option<&Stream> {
        match stream {
            Lookup::Id(id) => self.streams.get(&id),
            Lookup::Name(name) => self.streams.values().find(|s| s.name == name),
        }
    }

    /// The topic named by `stream` and `topic`, or the level that missed.
    pub fn topic(&self, stream: Lookup<'_>, topic: Lookup<'_>) -> Result<&Topic, CatalogError> {
        let stream = self.stream(stream).ok_or(CatalogError::StreamNotFound)?;
        stream.topic(topic).ok_or(CatalogError::TopicNotFound)
    }

    /// The topic named by `stream` and `topic`, mutably.
    pub fn topic_mut(
        &mut self,
        stream: Lookup<'_>,
        topic: Lookup<'_>,
    ) -> Result<&mut Topic, CatalogError> {
        let stream_id = self.stream(stream).ok_or(CatalogError::StreamNotFound)?.id;
        let stream = self
            .streams
            .get_mut(&stream_id)
            .ok_or(CatalogError::StreamNotFound)?;
        let topic_id = stream.topic_id(topic).ok_or(CatalogError::TopicNotFound)?;
        stream
            .topics
            .get_mut(&topic_id)
            .ok_or(CatalogError::TopicNotFound)
    }

    /// The partition, or the level that missed.
    pub fn partition(
        &self,
        stream: Lookup<'_>,
        topic: Lookup<'_>,
        partition: u32,
    ) -> Result<&Partition, CatalogError> {
        self.topic(stream, topic)?
            .partition(partition)
            .ok_or(CatalogError::PartitionNotFound)
    }

    /// The partition, mutably.
    pub fn partition_mut(
        &mut self,
        stream: Lookup<'_>,
        topic: Lookup<'_>,
        partition: u32,
    ) -> Result<&mut Partition, CatalogError> {
        self.topic_mut(stream, topic)?
            .partition_mut(partition)
            .ok_or(CatalogError::PartitionNotFound)
    }

    /// Create a stream; returns its id.
    pub fn create_stream(&mut self, name: &str, created_at: u64) -> Result<u32, CatalogError> {
        if self.stream(Lookup::Name(name)).is_some() {
            return Err(CatalogError::StreamNameTaken);
        }
        let id = lowest_free_id(&self.streams, self.first_id);
        self.streams.insert(
            id,
            Stream {
                id,
                name: name.to_owned(),
                created_at,
                topics: BTreeMap::new(),
            },
        );
        Ok(id)
    }

    /// Create a topic with `partitions` partitions, all with `primary` as their primary;
    /// returns the topic id.
    pub fn create_topic(
        &mut self,
        stream: Lookup<'_>,
        name: &str,
        partitions: u32,
        created_at: u64,
        primary: NodeId,
    ) -> Result<u32, CatalogError> {
        if partitions > MAX_PARTITIONS_PER_TOPIC {
            return Err(CatalogError::InvalidPartitionsCount);
        }
        let stream_id = self.stream(stream).ok_or(CatalogError::StreamNotFound)?.id;
        let stream = self
            .streams
            .get_mut(&stream_id)
            .ok_or(CatalogError::StreamNotFound)?;
        if stream.topic(Lookup::Name(name)).is_some() {
            return Err(CatalogError::TopicNameTaken);
        }
        let id = lowest_free_id(&stream.topics, self.first_id);
        let mut topic = Topic {
            id,
            name: name.to_owned(),
            created_at,
            message_expiry: 0,
            max_topic_size: 0,
            compression: 1,
            partitions: Vec::new(),
            balanced_cursor: 0,
            groups: Groups::default(),
        };
        topic.add_partitions(partitions, created_at, primary);
        stream.topics.insert(id, topic);
        Ok(id)
    }

    /// Add `count` partitions to a topic, all with `primary` as their primary.
    pub fn create_partitions(
        &mut self,
        stream: Lookup<'_>,
        topic: Lookup<'_>,
        count: u32,
        created_at: u64,
        primary: NodeId,
    ) -> Result<(), CatalogError> {
        let topic = self.topic_mut(stream, topic)?;
        let total = topic.partitions.len() as u64 + u64::from(count);
        if count == 0 || total > u64::from(MAX_PARTITIONS_PER_TOPIC) {
            return Err(CatalogError::InvalidPartitionsCount);
        }
        topic.add_partitions(count, created_at, primary);
        topic.groups.repartitioned(partitions_count(topic));
        Ok(())
    }

    /// Every stream, by id.
    pub fn streams(&self) -> impl Iterator<Item = &Stream> {
        self.streams.values()
    }

    /// The stream named by `stream`, mutably.
    pub fn stream_mut(&mut self, stream: Lookup<'_>) -> Option<&mut Stream> {
        let id = self.stream(stream)?.id;
        self.streams.get_mut(&id)
    }

    /// Rename a stream; a name another stream holds is taken, its own name is not.
    pub fn rename_stream(&mut self, stream: Lookup<'_>, name: &str) -> Result<(), CatalogError> {
        let id = self.stream(stream).ok_or(CatalogError::StreamNotFound)?.id;
        if self
            .stream(Lookup::Name(name))
            .is_some_and(|holder| holder.id != id)
        {
            return Err(CatalogError::StreamNameTaken);
        }
        let stream = self
            .streams
            .get_mut(&id)
            .ok_or(CatalogError::StreamNotFound)?;
        name.clone_into(&mut stream.name);
        Ok(())
    }

    /// Remove a stream with its topics; its id is free for the next stream.
    pub fn delete_stream(&mut self, stream: Lookup<'_>) -> Result<Stream, CatalogError> {
        let id = self.stream(stream).ok_or(CatalogError::StreamNotFound)?.id;
        self.streams.remove(&id).ok_or(CatalogError::StreamNotFound)
    }

    /// Rename a topic; a name another topic of the stream holds is taken.
    pub fn rename_topic(
        &mut self,
        stream: Lookup<'_>,
        topic: Lookup<'_>,
        name: &str,
    ) -> Result<(), CatalogError> {
        let stream = self
            .stream_mut(stream)
            .ok_or(CatalogError::StreamNotFound)?;
        let id = stream.topic_id(topic).ok_or(CatalogError::TopicNotFound)?;
        if stream
            .topic(Lookup::Name(name))
            .is_some_and(|holder| holder.id != id)
        {
            return Err(CatalogError::TopicNameTaken);
        }
        let topic = stream
            .topics
            .get_mut(&id)
            .ok_or(CatalogError::TopicNotFound)?;
        name.clone_into(&mut topic.name);
        Ok(())
    }

    /// Remove a topic with its partitions; its id is free for the stream's next topic.
    pub fn delete_topic(
        &mut self,
        stream: Lookup<'_>,
        topic: Lookup<'_>,
    ) -> Result<Topic, CatalogError> {
        let stream = self
            .stream_mut(stream)
            .ok_or(CatalogError::StreamNotFound)?;
        let id = stream.topic_id(topic).ok_or(CatalogError::TopicNotFound)?;
        stream.topics.remove(&id).ok_or(CatalogError::TopicNotFound)
    }

    /// Remove a topic's last `count` partitions (the highest ids), as the server does.
    pub fn delete_partitions(
        &mut self,
        stream: Lookup<'_>,
        topic: Lookup<'_>,
        count: u32,
    ) -> Result<(), CatalogError> {
        let topic = self.topic_mut(stream, topic)?;
        let kept = topic
            .partitions
            .len()
            .checked_sub(count as usize)
            .ok_or(CatalogError::InvalidPartitionsCount)?;
        topic.partitions.truncate(kept);
        topic.groups.repartitioned(partitions_count(topic));
        Ok(())
    }

    /// A session ended: its consumer-group memberships end with it, in every topic.
    pub fn session_ended(&mut self, client: u128) {
        for stream in self.streams.values_mut() {
            for topic in stream.topics.values_mut() {
                let partitions = partitions_count(topic);
                topic.groups.session_ended(client, partitions);
            }
        }
    }
}

/// A topic's partitions count, as the wire carries it.
pub(super) fn partitions_count(topic: &Topic) -> u32 {
    u32::try_from(topic.partitions.len()).unwrap_or(u32::MAX)
}

/// The lowest id at or above `first_id` that `taken` does not hold: the real server
/// allocates stream and topic ids this way (`IdSlab::vacant_key` in
/// `core/metadata/src/stm/id_slab.rs`), so a deleted stream's id goes to the next one.
fn lowest_free_id<T>(taken: &BTreeMap<u32, T>, first_id: u32) -> u32 {
    let mut id = first_id;
    // Keys are sorted: the first gap at or above `first_id` is the answer.
    for &key in taken.range(first_id..).map(|(key, _)| key) {
        if key != id {
            break;
        }
        id = id.saturating_add(1);
    }
    id
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_start_at_the_first_id_and_partitions_at_zero() {
        let mut catalog = Catalog::new(0);
        let stream = catalog.create_stream("s", 1).unwrap();
        let topic = catalog
            .create_topic(Lookup::Id(stream), "t", 1, 1, 0)
            .unwrap();
        assert_eq!((stream, topic), (0, 0), "the real cluster's ids");
        let mut catalog = Catalog::new(1);
        let stream = catalog.create_stream("s", 1).unwrap();
        let topic = catalog
            .create_topic(Lookup::Id(stream), "t", 2, 1, 0)
            .unwrap();
        assert_eq!((stream, topic), (1, 1));
        let topic = catalog.topic(Lookup::Name("s"), Lookup::Name("t")).unwrap();
        let ids: Vec<u32> = topic.partitions.iter().map(|p| p.id).collect();
        assert_eq!(ids, vec![0, 1]);
    }

    #[test]
    fn duplicate_names_and_missing_levels_are_typed() {
        let mut catalog = Catalog::new(1);
        catalog.create_stream("s", 1).unwrap();
        assert_eq!(
            catalog.create_stream("s", 1),
            Err(CatalogError::StreamNameTaken)
        );
        let missing = catalog
            .partition(Lookup::Id(9), Lookup::Id(1), 0)
            .unwrap_err();
        assert_eq!(missing.code(), 1009);
        catalog.create_topic(Lookup::Id(1), "t", 1, 1, 0).unwrap();
        let missing = catalog
            .partition(Lookup::Id(1), Lookup::Id(1), 5)
            .unwrap_err();
        assert_eq!(missing.code(), 3007);
        let too_many = catalog.create_partitions(Lookup::Id(1), Lookup::Id(1), u32::MAX, 1, 0);
        assert_eq!(too_many, Err(CatalogError::InvalidPartitionsCount));
    }

    #[test]
    fn deleted_ids_are_reused_lowest_first_and_renames_keep_names_unique() {
        let mut catalog = Catalog::new(0);
        for name in ["a", "b", "c"] {
            catalog.create_stream(name, 1).unwrap();
        }
        catalog.delete_stream(Lookup::Name("a")).unwrap();
        catalog.delete_stream(Lookup::Id(1)).unwrap();
        assert_eq!(catalog.create_stream("d", 2), Ok(0));
        assert_eq!(catalog.create_stream("e", 2), Ok(1));
        assert_eq!(catalog.create_stream("f", 2), Ok(3));
        assert_eq!(
            catalog.rename_stream(Lookup::Id(0), "e"),
            Err(CatalogError::StreamNameTaken)
        );
        catalog.rename_stream(Lookup::Id(0), "d").unwrap();
        catalog.rename_stream(Lookup::Id(0), "z").unwrap();
        assert_eq!(catalog.stream(Lookup::Name("z")).unwrap().id, 0);
        catalog.create_topic(Lookup::Id(0), "t", 3, 1, 0).unwrap();
        catalog.create_topic(Lookup::Id(0), "u", 1, 1, 0).unwrap();
        assert_eq!(
            catalog.rename_topic(Lookup::Id(0), Lookup::Name("t"), "u"),
            Err(CatalogError::TopicNameTaken)
        );
        assert_eq!(
            catalog.delete_partitions(Lookup::Id(0), Lookup::Id(0), 4),
            Err(CatalogError::InvalidPartitionsCount)
        );
        catalog
            .delete_partitions(Lookup::Id(0), Lookup::Id(0), 2)
            .unwrap();
        let topic = catalog.topic(Lookup::Id(0), Lookup::Id(0)).unwrap();
        assert_eq!(topic.partitions.len(), 1);
        catalog.delete_topic(Lookup::Id(0), Lookup::Id(0)).unwrap();
        assert_eq!(
            catalog
                .delete_topic(Lookup::Id(0), Lookup::Id(0))
                .unwrap_err(),
            CatalogError::TopicNotFound
        );
        assert_eq!(catalog.create_topic(Lookup::Id(0), "v", 1, 1, 0), Ok(0));
        assert_eq!(lowest_free_id(&BTreeMap::<u32, ()>::new(), 1), 1);
    }
}

//! A membership is the server's, whatever identifiers name its group, and an SDK program
//! may join a group by name and then poll, commit or leave it by number (the SDK's
//! connection is the member either way). The router keeps a membership under the
//! identifiers its join named (it does not resolve names), so here a group request that
//! names a joined group otherwise is written with the join's identifiers.
//!
//! Before a first join, the stream, the topic and the group are read once for their ids
//! and names, and the group is joined by its ids (which no rename changes); a group whose
//! ids cannot be read is joined, and matched, only as it was named. The entry ends with a
//! leave or a delete through this client; one that outlived its group (deleted by another
//! client) names an id that is gone, so a join it would redirect is resolved and sent
//! again. A rename through this client reads the names again.

use std::sync::{Mutex, MutexGuard, PoisonError};

use iggy_route_core::RequestError;
use iggy_route_core::client::ClientError;
use iggy_route_core::wire::{Consumer, ConsumerKind, ErrorCode, Identifier, Name};

use super::groups::GroupKey;
use crate::Client;

/// The groups this client joined, as their joins named them.
#[derive(Debug, Default)]
pub(super) struct JoinedGroups {
    joined: Mutex<Vec<Joined>>,
}

/// One group joined: the identifiers its join used, and the stream's, topic's and
/// group's ids and names.
#[derive(Debug, Clone)]
pub(super) struct Joined {
    as_joined: GroupKey,
    names: [(u32, Name); 3],
}

impl Joined {
    /// The identifiers its join uses.
    pub(super) fn key(&self) -> &GroupKey {
        &self.as_joined
    }

    /// Whether `key` names this group: each of its identifiers by id or by name.
    fn named_by(&self, key: &GroupKey) -> bool {
        let (stream, topic, group) = key;
        [stream, topic, group]
            .into_iter()
            .zip(&self.names)
            .all(|(identifier, (id, name))| match identifier {
                Identifier::Numeric(numeric) => numeric == id,
                Identifier::Named(named) => named == name,
            })
    }
}

impl JoinedGroups {
    fn lock(&self) -> MutexGuard<'_, Vec<Joined>> {
        // A panic elsewhere must not stop the group calls: the list is valid whatever it held.
        self.joined.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The identifiers to write a request of `key`'s group with: its join's, when `key`
    /// names a group this client joined otherwise; else `key` itself.
    pub(super) fn as_joined(&self, key: GroupKey) -> GroupKey {
        self.lock()
            .iter()
            .find(|joined| joined.named_by(&key))
            .map_or(key, |joined| joined.as_joined.clone())
    }

    /// Keeps a group joined.
    pub(super) fn keep(&self, joined: Joined) {
        let mut list = self.lock();
        list.retain(|old| old.as_joined != joined.as_joined && old.names != joined.names);
        list.push(joined);
    }

    fn keys(&self) -> Vec<GroupKey> {
        self.lock()
            .iter()
            .map(|joined| joined.as_joined.clone())
            .collect()
    }

    /// The membership joined as `as_joined` is over (a leave, a delete).
    pub(super) fn forget(&self, as_joined: &GroupKey) {
        self.lock().retain(|joined| &joined.as_joined != as_joined);
    }
}

/// Whether a join's error says the stream, topic or group it named is not there.
pub(super) fn names_nothing(error: &ClientError) -> bool {
    if let ClientError::Request(RequestError::Server { code }) = error {
        return code.is_not_found()
            || matches!(
                code,
                ErrorCode::ConsumerGroupIdNotFound | ErrorCode::ConsumerGroupNameNotFound
            );
    }
    matches!(
        error,
        ClientError::Request(RequestError::TopicNotFound { .. })
    )
}

impl Client {
    /// A request's stream, topic and consumer as the join of its group named them, when
    /// the consumer is a group this client joined; else as given.
    pub(super) fn as_joined(
        &self,
        stream: Identifier,
        topic: Identifier,
        consumer: Consumer,
    ) -> (Identifier, Identifier, Consumer) {
        if consumer.kind != ConsumerKind::ConsumerGroup {
            return (stream, topic, consumer);
        }
        let joined = &self.sdk_state().joined_groups;
        let (stream, topic, group) = joined.as_joined((stream, topic, consumer.id));
        let consumer = Consumer {
            kind: ConsumerKind::ConsumerGroup,
            id: group,
        };
        (stream, topic, consumer)
    }

    /// This client renamed a stream or a topic: the names of the groups it joined are
    /// read again, by their ids, so that requests naming a group by its new names find it
    /// and its old names no longer do. (A rename by another client is not seen: requests
    /// then name such a group by its ids or its old names.)
    pub(super) async fn renamed_for_groups(&self) {
        let joined = &self.sdk_state().joined_groups;
        for key in joined.keys() {
            if let Some(group) = self.resolve_group(&key).await {
                joined.keep(group);
            }
        }
    }

    /// The ids and names of the group `as_named` names, read before it is joined: it is
    /// joined by its ids, which no rename changes, and requests naming it by any of these
    /// names or ids are written with them. `None` when a read fails or finds nothing (the
    /// group is then joined as named, and matched only so).
    pub(super) async fn resolve_group(&self, as_named: &GroupKey) -> Option<Joined> {
        let (stream, topic, group) = as_named.clone();
        let stream_details = Client::get_stream(self, stream.clone()).await.ok()??;
        let topic_summary = stream_details.topics.iter().find(|summary| match &topic {
            Identifier::Numeric(id) => summary.id == *id,
            Identifier::Named(name) => summary.name == *name,
        })?;
        let group_details = Client::get_consumer_group(self, stream, topic, group)
            .await
            .ok()??;
        let as_joined = (
            Identifier::Numeric(stream_details.id),
            Identifier::Numeric(topic_summary.id),
            Identifier::Numeric(group_details.info.id),
        );
        let names = [
            (stream_details.id, stream_details.name.clone()),
            (topic_summary.id, topic_summary.name.clone()),
            (group_details.info.id, group_details.info.name),
        ];
        Some(Joined { as_joined, names })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn name(text: &str) -> Name {
        Name::new(text).unwrap()
    }

    fn key(stream: Identifier, topic: Identifier, group: Identifier) -> GroupKey {
        (stream, topic, group)
    }

    fn by_name(text: &str) -> Identifier {
        Identifier::Named(name(text))
    }

    fn ids(stream: u32, topic: u32, group: u32) -> GroupKey {
        key(
            Identifier::Numeric(stream),
            Identifier::Numeric(topic),
            Identifier::Numeric(group),
        )
    }

    /// As [`Client::resolve_group`] keeps a group: joined by its ids.
    fn joined_by_ids(names: [(u32, &str); 3]) -> Joined {
        let [(stream, s), (topic, t), (group, g)] = names;
        Joined {
            as_joined: ids(stream, topic, group),
            names: [(stream, name(s)), (topic, name(t)), (group, name(g))],
        }
    }

    #[test]
    fn a_group_joined_by_its_ids_is_found_by_any_mix_of_names_and_ids() {
        let joined = JoinedGroups::default();
        joined.keep(joined_by_ids([(3, "shop"), (1, "orders"), (7, "billing")]));
        let as_joined = ids(3, 1, 7);
        let named = key(by_name("shop"), by_name("orders"), by_name("billing"));
        assert_eq!(joined.as_joined(named.clone()), as_joined);
        assert_eq!(joined.as_joined(as_joined.clone()), as_joined);
        let mixed = key(
            by_name("shop"),
            Identifier::Numeric(1),
            Identifier::Numeric(7),
        );
        assert_eq!(joined.as_joined(mixed), as_joined);
        // Another group of the topic, another topic: as named.
        let other = key(by_name("shop"), by_name("orders"), Identifier::Numeric(8));
        assert_eq!(joined.as_joined(other.clone()), other);
        let elsewhere = key(by_name("shop"), by_name("refunds"), by_name("billing"));
        assert_eq!(joined.as_joined(elsewhere.clone()), elsewhere);
        joined.forget(&as_joined);
        assert_eq!(joined.as_joined(named.clone()), named);
    }

    #[test]
    fn a_group_read_again_after_a_rename_keeps_one_entry_under_its_new_names() {
        let joined = JoinedGroups::default();
        joined.keep(joined_by_ids([(0, "s"), (0, "t"), (2, "g")]));
        joined.keep(joined_by_ids([(0, "s"), (0, "t2"), (2, "g")]));
        assert_eq!(joined.lock().len(), 1);
        let renamed = key(by_name("s"), by_name("t2"), by_name("g"));
        assert_eq!(joined.as_joined(renamed), ids(0, 0, 2));
        let old = key(by_name("s"), by_name("t"), by_name("g"));
        assert_eq!(joined.as_joined(old.clone()), old);
    }
}

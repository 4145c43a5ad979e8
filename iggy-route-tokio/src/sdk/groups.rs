//! A consumer-group poll that names no partition, resolved on the client as the SDK 0.11.0
//! resolves it: the 0.11.0 server reads only the partition a poll names, so the member's
//! assignment is read (`SYNC_CONSUMER_GROUP`), kept, and its partitions polled in turn.
//! Each poll then names its partition and goes where iggy-route routes a group poll of
//! that partition.
//!
//! A poll the server answers "re-sync" (an empty reply for partition `u32::MAX`), or
//! refuses as not this member's partition now (`ConsumerGroupPartitionNotOwned`), reads the
//! assignment again, its rotation from the start, and tries once more; two such answers in
//! a row are an empty poll, as with the SDK (the caller polls again). A refresh keeps the
//! rotation where it was unless the assignment's generation changed, as the SDK's does.
//!
//! The SDK reads every kept assignment again after each heartbeat, so a member whose
//! assignment grew (another member left, partitions were added) polls its new partitions
//! within a heartbeat interval, though none of its polls is ever fenced. Here a poll reads
//! the assignment again first when it was read a heartbeat interval ago or more: the same
//! bound, with no task of its own. A member holding no partition reads it at every poll,
//! as the SDK's does.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use iggy_common::{
    IggyError, NO_ASSIGNED_PARTITION, PolledMessages, PollingStrategy as SdkPollingStrategy,
    RESYNC_REQUIRED_PARTITION_SENTINEL,
};
use iggy_route_core::PollRequest;
use iggy_route_core::wire::{Consumer, Identifier};

use super::IntoIggyError;
use super::convert_messages::{route_strategy, sdk_identifier, sdk_polled};
use crate::Client;

/// Polls of one group call: the first, and one after a re-sync.
const GROUP_POLL_ATTEMPTS: usize = 2;

/// Stream, topic and group, as the caller named them.
pub(super) type GroupKey = (Identifier, Identifier, Identifier);

/// The assignments this client read for the groups it polls without a partition.
#[derive(Debug, Default)]
pub(super) struct Assignments {
    groups: Mutex<HashMap<GroupKey, Cursor>>,
}

/// A member's partitions and the one it polls next.
#[derive(Debug)]
struct Cursor {
    /// The assignment's generation: a new one starts the rotation again.
    generation: u64,
    partitions: Vec<u32>,
    next: usize,
    /// When it was read: one a heartbeat interval old is read again before the next poll.
    read_at: Instant,
}

/// The partition to poll next.
enum Turn {
    /// No assignment read (or the member is gone): sync first.
    Unknown,
    /// A member holding no partitions.
    Idle,
    Poll(u32),
}

impl Assignments {
    fn lock(&self) -> MutexGuard<'_, HashMap<GroupKey, Cursor>> {
        // A panic elsewhere must not stop the polls: the map is valid whatever it held.
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn turn(&self, key: &GroupKey) -> Turn {
        let mut groups = self.lock();
        let Some(cursor) = groups.get_mut(key) else {
            return Turn::Unknown;
        };
        let Some(&partition) = cursor
            .partitions
            .get(cursor.next % cursor.partitions.len().max(1))
        else {
            return Turn::Idle;
        };
        cursor.next = cursor.next.wrapping_add(1);
        Turn::Poll(partition)
    }

    /// Whether an assignment is kept for the group, holds a partition and was read less
    /// than `max_age` ago. A member holding none reads it again at every poll, as the
    /// SDK's does: a partition it gets is polled at once.
    fn fresh(&self, key: &GroupKey, now: Instant, max_age: Duration) -> bool {
        self.lock().get(key).is_some_and(|cursor| {
            !cursor.partitions.is_empty() && now.saturating_duration_since(cursor.read_at) < max_age
        })
    }

    /// Keeps a read assignment. The rotation goes on where it was while the generation is
    /// the same (a refresh that found nothing new), as the SDK's does.
    fn set(&self, key: GroupKey, generation: u64, partitions: Vec<u32>, read_at: Instant) {
        let mut groups = self.lock();
        let next = groups
            .get(&key)
            .filter(|cursor| cursor.generation == generation)
            .map_or(0, |cursor| cursor.next);
        groups.insert(
            key,
            Cursor {
                generation,
                partitions,
                next,
                read_at,
            },
        );
    }

    /// Drops what is known of the group: after a join or a leave the assignment changed.
    pub(super) fn forget(&self, key: &GroupKey) {
        self.lock().remove(key);
    }

    /// The groups whose assignment is kept.
    pub(super) fn keys(&self) -> Vec<GroupKey> {
        self.lock().keys().cloned().collect()
    }
}

impl Client {
    /// Reads the member's assignment again and keeps it; forgets it when this client is not
    /// (or no longer) a member.
    pub(super) async fn sync_assignment(&self, key: &GroupKey) -> Result<(), IggyError> {
        let (stream, topic, group) = key.clone();
        let asked_at = Instant::now();
        let assignment = Client::sync_consumer_group(self, stream, topic, group)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        let groups = &self.sdk_state().groups;
        match assignment {
            Some(assignment) => {
                let (generation, partitions) = (assignment.generation, assignment.partitions);
                groups.set(key.clone(), generation, partitions, asked_at);
            }
            None => groups.forget(key),
        }
        Ok(())
    }

    /// See the module documentation. `consumer` is a group.
    pub(super) async fn poll_group(
        &self,
        key: GroupKey,
        consumer: Consumer,
        strategy_for: &(dyn Fn(u32) -> SdkPollingStrategy + Send + Sync),
        count: u32,
        auto_commit: bool,
    ) -> Result<PolledMessages, IggyError> {
        let state = self.sdk_state();
        let groups = &state.groups;
        let max_age = state.heartbeat_interval().get_duration();
        if !groups.fresh(&key, Instant::now(), max_age) {
            self.sync_assignment(&key).await?;
        }
        for _ in 0..GROUP_POLL_ATTEMPTS {
            let partition = match groups.turn(&key) {
                Turn::Poll(partition) => partition,
                Turn::Idle => {
                    return Ok(PolledMessages {
                        partition_id: NO_ASSIGNED_PARTITION,
                        ..PolledMessages::empty()
                    });
                }
                // Not a member: the caller must join again. The SDK has no client id to
                // name either.
                Turn::Unknown => {
                    return Err(IggyError::ConsumerGroupMemberNotFound(
                        0,
                        sdk_identifier(&key.2),
                        sdk_identifier(&key.1),
                    ));
                }
            };
            let request = PollRequest {
                consumer: consumer.clone(),
                stream: key.0.clone(),
                topic: key.1.clone(),
                partition_id: Some(partition),
                strategy: route_strategy(&strategy_for(partition)),
                count,
                auto_commit,
            };
            match Client::poll_request(self, request).await {
                Ok(reply)
                    if reply.messages.is_empty()
                        && reply.partition_id == RESYNC_REQUIRED_PARTITION_SENTINEL =>
                {
                    // A fenced assignment is read anew, its rotation from the start.
                    groups.forget(&key);
                    self.sync_assignment(&key).await?;
                }
                Ok(reply) => return Ok(sdk_polled(reply)),
                Err(error) => {
                    let error = error.into_iggy_error();
                    if !matches!(error, IggyError::ConsumerGroupPartitionNotOwned(..)) {
                        return Err(error);
                    }
                    groups.forget(&key);
                    self.sync_assignment(&key).await?;
                }
            }
        }
        Ok(PolledMessages::empty())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn key() -> GroupKey {
        (
            Identifier::Numeric(0),
            Identifier::Numeric(0),
            Identifier::try_from("billing").unwrap(),
        )
    }

    #[test]
    fn a_members_partitions_are_polled_in_turn() {
        let groups = Assignments::default();
        assert!(matches!(groups.turn(&key()), Turn::Unknown));
        let read_at = Instant::now();
        groups.set(key(), 1, vec![4, 1], read_at);
        let turn = || match groups.turn(&key()) {
            Turn::Poll(partition) => partition,
            Turn::Idle | Turn::Unknown => u32::MAX,
        };
        let turns: Vec<u32> = (0..3).map(|_| turn()).collect();
        assert_eq!(turns, [4, 1, 4]);
        // A refresh of the same generation goes on; a new generation starts again.
        groups.set(key(), 1, vec![4, 1], read_at);
        assert_eq!(turn(), 1);
        groups.set(key(), 2, vec![4, 1], read_at);
        assert_eq!(turn(), 4);
        groups.set(key(), 3, Vec::new(), read_at);
        assert!(matches!(groups.turn(&key()), Turn::Idle));
        groups.forget(&key());
        assert!(groups.keys().is_empty());
    }

    #[test]
    fn an_assignment_a_heartbeat_old_is_read_again() {
        let groups = Assignments::default();
        let (read_at, heartbeat) = (Instant::now(), Duration::from_secs(5));
        assert!(!groups.fresh(&key(), read_at, heartbeat));
        groups.set(key(), 1, vec![0], read_at);
        assert!(groups.fresh(&key(), read_at + heartbeat / 2, heartbeat));
        assert!(!groups.fresh(&key(), read_at + heartbeat, heartbeat));
        // A clock read before the assignment was kept (another task's) is not "old".
        let earlier = read_at
            .checked_sub(Duration::from_millis(1))
            .unwrap_or(read_at);
        assert!(groups.fresh(&key(), earlier, heartbeat));
        // Holding nothing, a member asks again at once.
        groups.set(key(), 2, Vec::new(), read_at);
        assert!(!groups.fresh(&key(), read_at, heartbeat));
    }
}

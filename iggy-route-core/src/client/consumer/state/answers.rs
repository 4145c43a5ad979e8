//! The answers a consumer gets, and what it makes of them (see the module documentation of
//! `client::consumer`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use super::{Asked, ConsumerState, Position, View};
use crate::client::consumer::{ReceivedMessage, ResolvedGroup};
use crate::client::{Call, ClientError};
use crate::request::{Reply, RequestError};
use crate::wire::{ConsumerGroupAssignment, ErrorCode, Identifier};

impl ConsumerState {
    /// The answer to the request out: the messages it brought wait for
    /// [`Self::next_message`]; an error is the caller's to see (the step is asked again
    /// after `poll_interval`).
    pub fn answer(
        &mut self,
        now: Instant,
        answer: Result<Reply, ClientError>,
    ) -> Result<(), ClientError> {
        let Some(asked) = self.asked.take() else {
            return Ok(());
        };
        let result = self.apply(now, asked, answer);
        if result.is_err() {
            self.retry_at = Some(now + self.config.poll_interval);
            // The caller's commit ends with the error.
            self.commit_requested = false;
        }
        result
    }

    fn apply(
        &mut self,
        now: Instant,
        asked: Asked,
        answer: Result<Reply, ClientError>,
    ) -> Result<(), ClientError> {
        match asked {
            Asked::CreateGroup => {
                match answer {
                    Ok(_) => {}
                    // Created by another member first.
                    Err(error)
                        if server_code(&error)
                            == Some(ErrorCode::ConsumerGroupNameAlreadyExists) => {}
                    Err(error) => return Err(error),
                }
                self.group_created = true;
            }
            Asked::ResolveStream => {
                let stream = Call::get_stream(self.config.stream.clone())?
                    .reply
                    .extract(answer?)?;
                let topic = stream.as_ref().and_then(|stream| {
                    stream.topics.iter().find(|topic| match &self.config.topic {
                        Identifier::Numeric(id) => topic.id == *id,
                        Identifier::Named(name) => topic.name == *name,
                    })
                });
                match (&stream, topic) {
                    (Some(stream), Some(topic)) => {
                        self.resolving = Some((
                            (stream.id, stream.name.clone()),
                            (topic.id, topic.name.clone()),
                        ));
                    }
                    // Not there: the join says so.
                    _ => self.resolved = true,
                }
            }
            Asked::ResolveGroup => {
                let group = Call::get_consumer_group(
                    self.config.stream.clone(),
                    self.config.topic.clone(),
                    self.group().cloned().unwrap_or(Identifier::Numeric(0)),
                )?
                .reply
                .extract(answer?)?;
                let (Some(group), Some((stream, topic))) = (group, self.resolving.take()) else {
                    self.resolved = true;
                    return Ok(());
                };
                if let Some(claim) = &self.claim {
                    claim.resolve(ResolvedGroup {
                        stream,
                        topic,
                        group: (group.info.id, group.info.name),
                    })?;
                }
                self.resolved = true;
            }
            Asked::Join => {
                answer?;
                self.joined = true;
                self.known = false;
                // A membership of its own: nothing carries over from an earlier one.
                self.view = None;
                self.end_every_drain();
                self.stats.joins += 1;
            }
            Asked::Sync(handouts, takes) => {
                let payload = answer?;
                let assignment = Call::<Option<ConsumerGroupAssignment>>::sync_consumer_group(
                    self.config.stream.clone(),
                    self.config.topic.clone(),
                    self.group().cloned().unwrap_or(Identifier::Numeric(0)),
                )?
                .reply
                .extract(payload)?;
                self.stats.syncs += 1;
                self.synced_at = Some(now);
                match assignment {
                    Some(assignment) => self.assign(assignment, (handouts, takes)),
                    // The membership ended (its link was lost): join again, not at once,
                    // as a node that has not applied our join yet answers so too.
                    None => {
                        self.joined = false;
                        self.known = false;
                        self.view = None;
                        self.end_every_drain();
                        self.retry_at = Some(now + self.config.poll_interval);
                    }
                }
            }
            Asked::Partitions => {
                let topic = Call::get_topic(self.config.stream.clone(), self.config.topic.clone())?
                    .reply
                    .extract(answer?)?;
                let Some(topic) = topic else {
                    return Err(ClientError::Request(RequestError::Server {
                        code: ErrorCode::TopicIdNotFound,
                    }));
                };
                self.partitions = (0..topic.summary.partitions_count).collect();
                self.known = true;
            }
            Asked::Stored(partition) => {
                let stored = Call::get_consumer_offset(
                    self.consumer(),
                    self.config.stream.clone(),
                    self.config.topic.clone(),
                    Some(partition),
                )?
                .reply
                .extract(answer?)?;
                let stored = stored.map(|info| info.stored_offset);
                if self.draining.contains_key(&partition) {
                    self.drain_read(now, partition, stored);
                } else if let Some(position) = self.positions.get_mut(&partition)
                    && position.next.is_none()
                {
                    match stored {
                        Some(_) => position.from_stored = true,
                        None => position.nothing_stored = true,
                    }
                }
            }
            Asked::StoredBeforeCommit(partition) => {
                let stored = Call::get_consumer_offset(
                    self.consumer(),
                    self.config.stream.clone(),
                    self.config.topic.clone(),
                    Some(partition),
                )?
                .reply
                .extract(answer?)?
                .map(|info| info.stored_offset);
                let past = self
                    .positions
                    .get(&partition)
                    .is_some_and(|position| stored > position.committed);
                if past {
                    // Another member read on and stored past this member: what it handed
                    // out is not its to store; it reads on from the stored offset.
                    self.drop_unsure_ready(|p| p != partition);
                    if let Some(position) = self.positions.get_mut(&partition) {
                        position.verify = true;
                        position.stored_read_at = None;
                    }
                } else if let Some(position) = self.positions.get_mut(&partition) {
                    position.stored_read_at = Some(now);
                }
            }
            Asked::Commit(partition, offset) => {
                return self.commit_answered(now, partition, offset, answer);
            }
            Asked::DrainListing => {
                let group = Call::get_consumer_group(
                    self.config.stream.clone(),
                    self.config.topic.clone(),
                    self.group().cloned().unwrap_or(Identifier::Numeric(0)),
                )?
                .reply
                .extract(answer?)?;
                self.drain_listing(group.as_ref().map_or(&[], |g| g.members.as_slice()));
            }
            Asked::Drain(partition) => match answer {
                Ok(_) => {
                    self.stats.commits += 1;
                    self.drain_answered(partition);
                }
                Err(error) if is_fenced(&error) => {
                    self.stats.commits_fenced += 1;
                    self.drain_answered(partition);
                }
                Err(error) => {
                    self.stats.commit_failures += 1;
                    return Err(error);
                }
            },
            Asked::Poll(partition) => return self.polled(now, partition, answer),
        }
        Ok(())
    }

    fn commit_answered(
        &mut self,
        now: Instant,
        partition: u32,
        offset: u64,
        answer: Result<Reply, ClientError>,
    ) -> Result<(), ClientError> {
        self.committed_at = Some(now);
        match answer {
            Ok(_) => {
                self.stats.commits += 1;
                if let Some(position) = self.positions.get_mut(&partition) {
                    position.committed = position.committed.max(Some(offset));
                    position.stored_read_at = None;
                    position.commit_failures = 0;
                }
                Ok(())
            }
            Err(error) if self.group().is_some() && is_fenced(&error) => {
                // Another member's now: nothing of it is ours to store or read; sync again.
                // Listed again in this membership (a fence of the server's moment, seen on
                // the real cluster), it goes on after the last offset handed out, verified.
                self.stats.commits_fenced += 1;
                self.ready.retain(|(_, m)| m.partition_id != partition);
                match self.positions.get_mut(&partition) {
                    Some(position) if position.handed_out.is_some() => {
                        position.next = position.handed_out.map(|offset| offset + 1);
                        position.verify = true;
                        position.stored_read_at = None;
                    }
                    Some(_) | None => {
                        self.positions.remove(&partition);
                    }
                }
                self.resync();
                Ok(())
            }
            Err(error) => {
                self.stats.commit_failures += 1;
                if !self.commit_requested
                    && let Some(position) = self.positions.get_mut(&partition)
                {
                    // An automatic commit comes before the partition's next poll, and the
                    // next step would be the same write: the partition waits instead
                    // (doubling, up to 128 poll intervals) while the others are read, and
                    // its offset is stored when it is due again. Nothing more of it is
                    // handed out meanwhile.
                    let streak = position.commit_failures.min(6);
                    position.commit_failures = position.commit_failures.saturating_add(1);
                    let wait = self
                        .config
                        .poll_interval
                        .saturating_mul(2u32.pow(streak + 1));
                    position.idle_until = Some(now + wait);
                }
                Err(error)
            }
        }
    }

    fn polled(
        &mut self,
        now: Instant,
        partition: u32,
        answer: Result<Reply, ClientError>,
    ) -> Result<(), ClientError> {
        let polled = match answer {
            Ok(Reply::Polled(polled)) => polled,
            Ok(_) => {
                return Err(ClientError::UnexpectedReply {
                    operation: "poll messages",
                });
            }
            Err(error)
                if server_code(&error) == Some(ErrorCode::ConsumerGroupPartitionNotOwned) =>
            {
                self.fenced_poll(now, partition);
                return Ok(());
            }
            Err(error) => return Err(error),
        };
        self.stats.polls += 1;
        if polled.partition_id == u32::MAX && polled.messages.is_empty() {
            // Not this member's partition (any more): read the assignment again.
            self.fenced_poll(now, partition);
            return Ok(());
        }
        let count = self.partitions.len().max(1);
        self.cursor = (self.cursor + 1) % count;
        let member = self.group().is_some();
        let position = self.positions.entry(partition).or_default();
        // A member's first poll of a partition (unless the group had stored nothing and
        // the configured strategy placed it) starts after the group's stored offset too.
        let from_stored_offset = position.next.is_none() && member && !position.nothing_stored;
        let verified = std::mem::take(&mut position.verify);
        let Some(last) = polled.messages.last().map(|m| m.offset) else {
            if verified {
                // Nothing after the group's stored offset: what this member handed out
                // is stored, or lies behind what another member stored. Either way the
                // partition goes on from the stored offset, and nothing of ours is stored.
                *position = Position {
                    from_stored: true,
                    ..Position::default()
                };
            }
            position.idle_until = Some(now + self.config.poll_interval);
            return Ok(());
        };
        // Only what lies at or after the position: a message handed out is never handed
        // out again by this consumer. A poll from the stored offset that verified the
        // position starts at or before it when nobody stored past it (the position
        // stands), and after it when someone did (it moves on to there).
        let from = position.next.unwrap_or(0);
        if (verified || from_stored_offset)
            && let Some(first) = polled.messages.first().map(|m| m.offset)
        {
            // The poll started after the group's stored offset: that is `first - 1`, and
            // what this member handed out up to there is not its to store.
            position.committed = position.committed.max(first.checked_sub(1));
        }
        position.next = Some(from.max(last + 1));
        position.idle_until = None;
        if last >= from {
            self.handouts += 1;
        }
        let answered_at = self.handouts;
        let current_offset = polled.current_offset;
        let before = self.ready.len();
        self.ready.extend(
            polled
                .messages
                .into_iter()
                .filter(|m| m.offset >= from)
                .map(|message| {
                    let message = ReceivedMessage {
                        partition_id: partition,
                        current_offset,
                        message,
                    };
                    (answered_at, message)
                }),
        );
        self.stats.messages += (self.ready.len() - before) as u64;
        Ok(())
    }

    /// A poll the group fenced: sync again, and do not ask this partition again before
    /// `poll_interval` (a node that has not applied our join yet fences us too, and a
    /// sync may show the partition still ours).
    fn fenced_poll(&mut self, now: Instant, partition: u32) {
        self.positions.entry(partition).or_default().idle_until =
            Some(now + self.config.poll_interval);
        self.resync();
    }

    fn resync(&mut self) {
        self.stats.resyncs += 1;
        self.known = false;
    }

    /// A new assignment, from a sync sent when `sent_at` polls had been answered and
    /// messages taken.
    /// A partition kept since the last view keeps its position (and the batches handed
    /// out before the sync are confirmed ours); one given up is drained (see `drain`); one taken over starts
    /// from the group's stored offset; one listed again after changes the member did not
    /// see is verified against the stored offset before it is read on or committed.
    fn assign(&mut self, assignment: ConsumerGroupAssignment, sent_at: (u64, u64)) {
        let view = self.view.take();
        let kept = |partition: u32| {
            view.as_ref()
                .is_some_and(|v| v.kept(&assignment, partition))
        };
        if view.as_ref().map(|v| v.generation) != Some(assignment.generation) {
            self.cursor = 0;
        }
        // A partition given up keeps no position. What the member polled of it and did not
        // store is drained when the partition's offset fence shows it still the member's
        // (a join leaves it so until then); else its next owner reads it.
        let positions = std::mem::take(&mut self.positions);
        let mut given_up = Vec::new();
        for (partition, position) in positions {
            if !assignment.partitions.contains(&partition) {
                given_up.push((partition, position));
                continue;
            }
            if kept(partition) {
                self.positions.insert(partition, position);
            } else {
                // Listed again after changes this member did not see: someone else may
                // have read and stored it meanwhile.
                self.positions.insert(
                    partition,
                    Position {
                        verify: true,
                        ..position
                    },
                );
            }
        }
        for partition in &assignment.partitions {
            if let Some(position) = self.end_drain(*partition) {
                // Listed again while it was being handed over: read on from the stored
                // offset, as after changes the member did not see.
                self.positions.insert(
                    *partition,
                    Position {
                        verify: true,
                        ..position
                    },
                );
            }
            self.positions.entry(*partition).or_insert(Position {
                from_stored: self.assigned_before,
                ..Position::default()
            });
        }
        // A partition given up that the member polled past its stored offset may be
        // pending hand-over: it is drained (see `drain`).
        self.drain_synced(assignment.generation);
        let from = view.as_ref().map_or(u64::MAX - 1, |v| v.generation);
        for (partition, position) in given_up {
            self.start_drain(partition, position, (from, assignment.generation));
        }
        let draining: BTreeSet<u32> = self.draining.keys().copied().collect();
        self.drop_unsure_ready(|partition| {
            (assignment.partitions.contains(&partition) && kept(partition))
                || draining.contains(&partition)
        });
        (self.confirmed, self.confirmed_takes) = sent_at;
        self.assigned_before = true;
        self.partitions = assignment.partitions.clone();
        self.view = Some(View {
            generation: assignment.generation,
            partitions: assignment.partitions,
        });
        self.known = true;
    }

    /// Drops the messages polled and not taken of every partition not `kept` since they
    /// were polled; a partition still the member's reads them again (its position goes
    /// back to the first of them), after whatever another member stored.
    fn drop_unsure_ready(&mut self, kept: impl Fn(u32) -> bool) {
        let mut first_dropped: BTreeMap<u32, u64> = BTreeMap::new();
        self.ready.retain(|(_, m)| {
            if kept(m.partition_id) {
                return true;
            }
            first_dropped
                .entry(m.partition_id)
                .or_insert(m.message.offset);
            false
        });
        for (partition, offset) in first_dropped {
            if let Some(position) = self.positions.get_mut(&partition) {
                position.next = position.next.map(|next| next.min(offset));
            }
        }
    }
}

/// Whether a group offset write was refused because the partition is not the member's
/// (any more): the fence answers `ConsumerGroupPartitionNotOwned`, or `ResourceNotFound`
/// as the server's offset fence does.
fn is_fenced(error: &ClientError) -> bool {
    matches!(
        server_code(error),
        Some(
            ErrorCode::ConsumerGroupPartitionNotOwned
                | ErrorCode::ResourceNotFound
                | ErrorCode::ConsumerGroupMemberNotFound
        )
    )
}

fn server_code(error: &ClientError) -> Option<ErrorCode> {
    if let ClientError::Request(RequestError::Server { code }) = error {
        Some(*code)
    } else {
        None
    }
}

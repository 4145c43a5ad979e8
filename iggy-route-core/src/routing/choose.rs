//! Which partition a balanced or keyed request goes to, among a topic's `count`.

use std::time::Instant;

use super::{LaneKey, PartitionChoice, Routing};
use crate::ids::{PartitionKey, TopicKey};

/// How many partitions a balanced send looks at, at most, for one that is not stalled:
/// bounds the work per send on a topic with many partitions.
const BALANCED_LOOK_AHEAD: u32 = 256;

/// A partition queue shorter than this (requests in flight and waiting) takes a balanced
/// send in its turn; a longer one is passed over for a shorter one. A failover stalls a
/// partition (a crashed primary, or commits waiting 250 ms for a prepare retransmit
/// while the next replica is down) and its queue grows: the sends go where they are
/// admitted now, rather than each holding a producer's in-flight slot behind it.
const BALANCED_SHORT_QUEUE: usize = 4;

/// What [`Routing::choose`] picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Chosen {
    /// The partition, `None` if the choice has none (a topic without partitions).
    pub(super) partition: Option<u32>,
    /// How far the balanced cursor moves: 1 for the turn's own partition.
    pub(super) steps: u32,
    /// Whether a partition waiting for its primary was passed over on the way.
    pub(super) passed_stalled: bool,
}
impl Routing {
    /// The partition `choice` picks among `count` with the round-robin cursor at
    /// `cursor`. A balanced choice (see [`Config::balanced_skips_stalled`]) looks from the
    /// cursor on, at most [`BALANCED_LOOK_AHEAD`] partitions, for the first whose queue is
    /// short, passing over those waiting for their primary; failing that it takes the
    /// shortest queue with room, then the first waiting queue with room (so a send is not
    /// refused for a full queue while another could hold it), and failing all of these the
    /// cursor's own.
    ///
    /// [`Config::balanced_skips_stalled`]: crate::Config::balanced_skips_stalled
    pub(super) fn choose(
        &self,
        now: Instant,
        topic: &TopicKey,
        choice: PartitionChoice,
        count: u32,
        cursor: u32,
    ) -> Chosen {
        let first = choice.resolve(count, cursor);
        let turn = Chosen {
            partition: first,
            steps: 1,
            passed_stalled: false,
        };
        if choice != PartitionChoice::Balanced || !self.config.balanced_skips_stalled {
            return turn;
        }
        let Some(first) = first else {
            return turn;
        };
        let limit = self.config.max_pending_per_lane;
        let short = BALANCED_SHORT_QUEUE.min(limit);
        let look_ahead = count.min(BALANCED_LOOK_AHEAD);
        // (queue length, partition, steps) of the shortest queue with room not waiting.
        let mut shortest: Option<(usize, u32, u32)> = None;
        // (partition, steps) of the first queue with room that waits for its primary.
        let mut waiting_with_room: Option<(u32, u32)> = None;
        // The step of the first partition seen waiting for its primary.
        let mut stalled_at: Option<u32> = None;
        let chosen = |partition: u32, steps: u32, stalled_at: Option<u32>| Chosen {
            partition: Some(partition),
            steps,
            passed_stalled: stalled_at.is_some_and(|at| at < steps),
        };
        let mut steps = 0;
        // The partitions from the cursor's to the last, then from 0 to the cursor's: the
        // topic's lanes are walked in key order beside them (no key built per step).
        'walk: for (from, to) in [(first, count), (0, first)] {
            let mut lanes = self.topic_lanes(topic, from, to).peekable();
            for partition in from..to {
                if steps == look_ahead {
                    break 'walk;
                }
                steps += 1;
                let lane = lanes
                    .next_if(|(at, _)| *at == partition)
                    .map(|(_, lane)| lane);
                // No lane: nothing queued there.
                let Some(lane) = lane else {
                    return chosen(partition, steps, stalled_at);
                };
                let queued = lane.len();
                if lane.waits_for_primary(now) {
                    stalled_at.get_or_insert(steps);
                    if queued < limit && waiting_with_room.is_none() {
                        waiting_with_room = Some((partition, steps));
                    }
                    continue;
                }
                if queued < short {
                    return chosen(partition, steps, stalled_at);
                }
                if queued < limit && shortest.is_none_or(|(length, ..)| queued < length) {
                    shortest = Some((queued, partition, steps));
                }
            }
        }
        let fallback = shortest
            .map(|(_, partition, steps)| (partition, steps))
            .or(waiting_with_room);
        match fallback {
            Some((partition, steps)) => chosen(partition, steps, stalled_at),
            None => turn,
        }
    }

    /// The lanes of `topic`'s partitions `from..to`, in partition order.
    fn topic_lanes<'a>(
        &'a self,
        topic: &'a TopicKey,
        from: u32,
        to: u32,
    ) -> impl Iterator<Item = (u32, &'a super::Lane)> + 'a {
        let start = LaneKey::Partition(PartitionKey {
            topic: topic.clone(),
            partition: from,
        });
        self.lanes
            .range(start..)
            .map_while(move |(key, lane)| match key {
                LaneKey::Partition(p) if p.topic == *topic && p.partition < to => {
                    Some((p.partition, lane))
                }
                LaneKey::Partition(_) | LaneKey::MetadataLeader => None,
            })
    }
}

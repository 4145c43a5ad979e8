//! When acknowledgements came during a run: messages per 100 ms (the throughput curve of
//! the chart and the per-second spread), and, per partition, the instants at which a send
//! to it was acknowledged (to 100 µs, for the recovery time after a move or a crash).

use std::time::Duration;

/// Width of a throughput bucket.
pub const BUCKET: Duration = Duration::from_millis(100);

/// Resolution of the per-partition acknowledgement instants.
pub const ACK_RESOLUTION: Duration = Duration::from_micros(100);

/// Buckets per second.
const BUCKETS_PER_SECOND: usize = 10;

/// Acknowledgements over a run, as offsets from its start.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Messages acknowledged in each [`BUCKET`], by the instant of the acknowledgement.
    messages_per_bucket: Vec<u64>,
    /// Per partition, a bit per [`ACK_RESOLUTION`] tick: set when a send to that partition
    /// was acknowledged in that tick.
    acks: Vec<Vec<u64>>,
}

impl Timeline {
    /// Records `messages` acknowledged `offset` after the start, for `partition` if known.
    pub fn record_ack(&mut self, offset: Duration, messages: u64, partition: Option<u32>) {
        let bucket = index(offset, BUCKET);
        if self.messages_per_bucket.len() <= bucket {
            self.messages_per_bucket.resize(bucket + 1, 0);
        }
        self.messages_per_bucket[bucket] += messages;
        if let Some(partition) = partition {
            let partition = partition as usize;
            if self.acks.len() <= partition {
                self.acks.resize_with(partition + 1, Vec::new);
            }
            let tick = index(offset, ACK_RESOLUTION);
            let bits = &mut self.acks[partition];
            if bits.len() <= tick / 64 {
                bits.resize(tick / 64 + 1, 0);
            }
            bits[tick / 64] |= 1 << (tick % 64);
        }
    }

    /// Adds another producer's timeline to this one.
    pub fn merge(&mut self, other: &Timeline) {
        if self.messages_per_bucket.len() < other.messages_per_bucket.len() {
            self.messages_per_bucket
                .resize(other.messages_per_bucket.len(), 0);
        }
        for (mine, theirs) in self
            .messages_per_bucket
            .iter_mut()
            .zip(&other.messages_per_bucket)
        {
            *mine += theirs;
        }
        if self.acks.len() < other.acks.len() {
            self.acks.resize_with(other.acks.len(), Vec::new);
        }
        for (mine, theirs) in self.acks.iter_mut().zip(&other.acks) {
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), 0);
            }
            for (word, other_word) in mine.iter_mut().zip(theirs) {
                *word |= other_word;
            }
        }
    }

    /// Messages acknowledged in each [`BUCKET`] from the start.
    pub fn messages_per_bucket(&self) -> &[u64] {
        &self.messages_per_bucket
    }

    /// The offset of the first acknowledgement of a send to `partition` at or after
    /// `from` (to [`ACK_RESOLUTION`], rounded down), if one came.
    pub fn first_ack_from(&self, partition: u32, from: Duration) -> Option<Duration> {
        let bits = self.acks.get(partition as usize)?;
        let first = index(from, ACK_RESOLUTION);
        let mut word_index = first / 64;
        let mut word = *bits.get(word_index)? & (u64::MAX << (first % 64));
        loop {
            if word != 0 {
                let tick = word_index * 64 + word.trailing_zeros() as usize;
                let tick = u32::try_from(tick).unwrap_or(u32::MAX);
                return Some(ACK_RESOLUTION * tick);
            }
            word_index += 1;
            word = *bits.get(word_index)?;
        }
    }

    /// Messages acknowledged in each whole second of the first `duration` of the run (a
    /// last partial second is left out: it would read as a dip).
    pub fn per_second(&self, duration: Duration) -> Vec<u64> {
        let seconds = usize::try_from(duration.as_secs()).unwrap_or(usize::MAX);
        (0..seconds)
            .map(|second| {
                let start = second * BUCKETS_PER_SECOND;
                (start..start + BUCKETS_PER_SECOND)
                    .map(|bucket| self.messages_per_bucket.get(bucket).copied().unwrap_or(0))
                    .sum()
            })
            .collect()
    }
}

/// The lowest and the highest second's throughput over the median second's, or `None`
/// when the run had no whole second or its median second acknowledged nothing.
pub fn second_spread(per_second: &[u64]) -> Option<(f64, f64)> {
    let mut sorted = per_second.to_vec();
    sorted.sort_unstable();
    let median = match sorted.len() {
        0 => return None,
        n if n % 2 == 1 => sorted[n / 2] as f64,
        n => (sorted[n / 2 - 1] + sorted[n / 2]) as f64 / 2.0,
    };
    if median <= 0.0 {
        return None;
    }
    let lowest = *sorted.first()? as f64;
    let highest = *sorted.last()? as f64;
    Some((lowest / median, highest / median))
}

fn index(offset: Duration, width: Duration) -> usize {
    usize::try_from(offset.as_nanos() / width.as_nanos()).unwrap_or(usize::MAX / 2)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn first_ack_finds_the_next_tick_across_words_and_partitions() {
        let mut timeline = Timeline::default();
        timeline.record_ack(Duration::from_millis(5), 1, Some(2));
        timeline.record_ack(Duration::from_millis(40), 1, Some(2));
        timeline.record_ack(Duration::from_millis(1), 1, Some(0));
        let first = |p, ms| timeline.first_ack_from(p, Duration::from_millis(ms));
        assert_eq!(first(2, 0), Some(Duration::from_millis(5)));
        assert_eq!(first(2, 5), Some(Duration::from_millis(5)));
        assert_eq!(first(2, 6), Some(Duration::from_millis(40)));
        assert_eq!(first(2, 41), None);
        assert_eq!(first(1, 0), None, "no ack of partition 1 at all");
        assert_eq!(first(0, 2), None);
    }

    #[test]
    fn merge_adds_buckets_and_joins_acks() {
        let mut one = Timeline::default();
        one.record_ack(Duration::from_millis(50), 10, Some(1));
        let mut two = Timeline::default();
        two.record_ack(Duration::from_millis(60), 5, Some(1));
        two.record_ack(Duration::from_millis(1_250), 7, None);
        one.merge(&two);
        assert_eq!(one.messages_per_bucket()[0], 15);
        assert_eq!(one.messages_per_bucket()[12], 7);
        assert_eq!(
            one.first_ack_from(1, Duration::from_millis(51)),
            Some(Duration::from_millis(60))
        );
        assert_eq!(one.per_second(Duration::from_millis(2_500)), vec![15, 7]);
    }

    #[test]
    fn spread_is_against_the_median_second() {
        assert_eq!(second_spread(&[]), None);
        assert_eq!(second_spread(&[0, 0, 5]), None);
        let (low, high) = second_spread(&[100, 50, 100, 200, 100]).unwrap();
        assert!((low - 0.5).abs() < 1e-9 && (high - 2.0).abs() < 1e-9);
        let (low, high) = second_spread(&[90, 110]).unwrap();
        assert!((low - 0.9).abs() < 1e-9 && (high - 1.1).abs() < 1e-9);
    }
}

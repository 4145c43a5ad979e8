//! What every client's producers share: the batch they send, the key of each batch, the
//! tally of each producer, the merged measurement of a run and the progress line.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;

use super::Load;
use super::timeline::Timeline;

/// Latencies are recorded in µs, from 1 µs to 10 minutes, to 3 significant digits.
const LATENCY_MAX_MICROS: u64 = 600_000_000;

/// How often the progress line is redrawn.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);

/// An empty latency histogram in µs.
pub fn latency_histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts (1 <= low, high >= 2 * low).
    Histogram::new_with_bounds(1, LATENCY_MAX_MICROS, 3)
        .unwrap_or_else(|error| unreachable!("constant histogram bounds: {error}"))
}

/// The payload every message carries. One buffer shared by every message (a `Bytes`
/// clone is a reference count), so the clients compete on routing, not on allocation.
pub fn payload(load: &Load) -> Bytes {
    Bytes::from(
        (0..load.payload_bytes)
            .map(|index| b'a' + (index % 26) as u8)
            .collect::<Vec<u8>>(),
    )
}

/// The messages key of one batch. Every batch of every producer has its own key, so
/// consecutive sends hash to different partitions: the producer of the bug report.
pub fn batch_key(producer: usize, batch: u64) -> u64 {
    ((producer as u64) << 40) ^ batch.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// What a send call reports when the cluster acknowledged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acked {
    /// Messages acknowledged.
    pub messages: u64,
    /// The partition they went to, when the client says (or the key tells).
    pub partition: Option<u32>,
}

/// A window of a run during which a node is down: the partitions in `affected` (a bit per
/// partition id) cannot be served, and the latency of sends to the others, started inside
/// the window, is kept apart (they must not stall).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutageWindow {
    /// From this offset of the run...
    pub from: Duration,
    /// ...to this one.
    pub to: Duration,
    /// The partitions whose primary was on the node that went down, and those whose
    /// commits wait for it (the server's replica chain passes through it).
    pub affected: u64,
}

impl OutageWindow {
    /// True when `partition` is one the outage hits.
    pub fn hits(&self, partition: u32) -> bool {
        partition < 64 && self.affected & (1 << partition) != 0
    }
}

/// The deadlines of one run.
#[derive(Debug, Clone, Copy)]
pub struct RunClock {
    /// When the load started.
    pub started: Instant,
    /// No send starts after this instant.
    pub deadline: Instant,
    /// A send still pending at this instant is cut off.
    pub cut_off: Instant,
    /// The node outage planned in this run, if any.
    pub outage: Option<OutageWindow>,
    /// A paced load's time between two sends of one producer (`None`: each producer
    /// sends as fast as it is answered).
    pace: Option<Duration>,
    /// Producers in the run (a paced load staggers their sends over one pace).
    producers: u32,
}

impl RunClock {
    /// Starts the clock at the load's epoch when it has one (a run whose faults are
    /// scheduled from the same instant), now otherwise.
    pub fn start(load: &Load) -> Self {
        let started = load.epoch.unwrap_or_else(Instant::now);
        Self {
            started,
            deadline: started + load.duration,
            cut_off: started + load.duration + load.drain_grace,
            outage: load.outage,
            pace: load.pace(),
            producers: u32::try_from(load.producers.max(1)).unwrap_or(u32::MAX),
        }
    }

    /// When send `send` of producer `producer` is due on a paced load: at its place in the
    /// schedule, the producers' sends interleaved evenly (`None`: unpaced, due once the
    /// previous one is answered).
    pub fn due(&self, producer: usize, send: u64) -> Option<Instant> {
        let pace = self.pace?;
        let slot = u32::try_from(producer).unwrap_or(u32::MAX) % self.producers;
        let send = u32::try_from(send).unwrap_or(u32::MAX);
        Some(self.started + pace * send + pace * slot / self.producers)
    }

    /// Whether a send due at `due` may still start: it is due before the deadline and the
    /// deadline has not passed (a producer that fell behind does not go on sending after
    /// it; the sends it did not make show as a rate below the one offered).
    pub fn may_start(&self, due: Option<Instant>) -> bool {
        let now = Instant::now();
        due.unwrap_or(now) < self.deadline && now < self.deadline
    }

    /// Waits for a send due at `due` and returns the instant its latency counts from:
    /// `due` itself, so that the wait a slow answer caused the sends behind it is counted
    /// (no coordinated omission), except for a timer's own lateness of up to
    /// [`TIMER_SLACK`] (tokio's timer wheel ticks by the millisecond); a wake later than
    /// that (a saturated runtime or machine) counts. Unpaced: now.
    pub async fn wait_until_due(due: Option<Instant>) -> Instant {
        if let Some(due) = due
            && due > Instant::now()
        {
            tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await;
        }
        latency_start(due, Instant::now())
    }

    /// [`RunClock::wait_until_due`] on a blocking thread.
    pub fn block_until_due(due: Option<Instant>) -> Instant {
        if let Some(due) = due {
            let wait = due.saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
        }
        latency_start(due, Instant::now())
    }

    /// Blocks the calling thread until the run's start (at once when it has passed).
    pub fn wait_for_start(&self) {
        let wait = self.started.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }

    /// Waits until the run's start (at once when it has passed).
    pub async fn start_reached(&self) {
        tokio::time::sleep_until(tokio::time::Instant::from_std(self.started)).await;
    }

    /// Whether a send to `partition` started at `started` is one the outage must not
    /// stall: inside the window, to a partition it does not hit.
    fn spared_by_outage(&self, started: Instant, partition: Option<u32>) -> bool {
        let (Some(outage), Some(partition)) = (self.outage, partition) else {
            return false;
        };
        let offset = started.saturating_duration_since(self.started);
        offset >= outage.from && offset < outage.to && !outage.hits(partition)
    }

    /// Whether a send to `partition` started at `started` went to a partition the outage
    /// hits before the outage began: its acknowledgement, even if it arrives after the
    /// crash (a reply written before the links were cut and read after), says nothing
    /// about when the partition took sends again.
    fn admitted_before_outage(&self, started: Instant, partition: Option<u32>) -> bool {
        let (Some(outage), Some(partition)) = (self.outage, partition) else {
            return false;
        };
        let offset = started.saturating_duration_since(self.started);
        offset < outage.from && outage.hits(partition)
    }
}

/// How late a timer may wake without the lateness counting as the client's.
pub const TIMER_SLACK: Duration = Duration::from_millis(1);

/// Where a send's latency starts when it was due at `due` and went at `went`: see
/// [`RunClock::wait_until_due`].
pub fn latency_start(due: Option<Instant>, went: Instant) -> Instant {
    match due {
        Some(due) => due.max(went.checked_sub(TIMER_SLACK).unwrap_or(due)),
        None => went,
    }
}

/// One producer's record of its sends.
#[derive(Debug)]
pub struct ProducerTally {
    latency_micros: Histogram<u64>,
    acked_messages: u64,
    sends: u64,
    failed_sends: u64,
    late_sends: u64,
    cut_off_sends: u64,
    first_error: Option<String>,
    finished: Option<Instant>,
    timeline: Timeline,
    spared_latency_micros: Histogram<u64>,
}

impl Default for ProducerTally {
    fn default() -> Self {
        Self {
            timeline: Timeline::default(),
            spared_latency_micros: latency_histogram(),
            latency_micros: latency_histogram(),
            acked_messages: 0,
            sends: 0,
            failed_sends: 0,
            late_sends: 0,
            cut_off_sends: 0,
            first_error: None,
            finished: None,
        }
    }
}

impl ProducerTally {
    /// Records one send call that started at `started` and ended now: `Ok` when the
    /// cluster acknowledged its messages.
    pub fn record(
        &mut self,
        clock: &RunClock,
        started: Instant,
        outcome: Result<Acked, String>,
        progress: &Progress,
    ) {
        self.record_at(clock, started, Instant::now(), outcome, progress);
    }

    /// Records one send call that started at `started` and whose outcome was known at
    /// `finished`.
    pub fn record_at(
        &mut self,
        clock: &RunClock,
        started: Instant,
        finished: Instant,
        outcome: Result<Acked, String>,
        progress: &Progress,
    ) {
        let micros =
            u64::try_from(finished.duration_since(started).as_micros()).unwrap_or(u64::MAX);
        self.latency_micros.saturating_record(micros.max(1));
        self.sends += 1;
        if finished > clock.deadline {
            self.late_sends += 1;
        }
        self.finished = Some(self.finished.map_or(finished, |last| last.max(finished)));
        match outcome {
            Ok(Acked {
                messages,
                partition,
            }) => {
                if clock.spared_by_outage(started, partition) {
                    self.spared_latency_micros.saturating_record(micros.max(1));
                }
                let offset = finished.saturating_duration_since(clock.started);
                // Every acknowledgement counts in the throughput; only those of sends
                // that could show the partition taking sends count for its recovery.
                let recovering =
                    partition.filter(|_| !clock.admitted_before_outage(started, partition));
                self.timeline.record_ack(offset, messages, recovering);
                self.acked_messages += messages;
                progress.acked.fetch_add(messages, Ordering::Relaxed);
            }
            Err(error) => {
                self.failed_sends += 1;
                progress.failed.fetch_add(1, Ordering::Relaxed);
                self.first_error.get_or_insert(error);
            }
        }
    }

    /// Records a send abandoned at the cut-off: its outcome is unknown, so its messages
    /// are not counted (the stored-count check may then find more than was acknowledged).
    pub fn record_cut_off(&mut self, clock: &RunClock) {
        self.cut_off_sends += 1;
        self.finished = Some(clock.cut_off);
    }
}

/// A whole run: every producer's tally merged.
#[derive(Debug)]
pub struct Measurement {
    /// When the load started (the run clock's start).
    pub started: Instant,
    /// When producers stopped starting sends.
    pub deadline: Instant,
    /// Per send call, µs.
    pub latency_micros: Histogram<u64>,
    /// Messages the cluster acknowledged.
    pub acked_messages: u64,
    /// Send calls that returned (acknowledged or failed).
    pub sends: u64,
    /// Send calls that returned an error.
    pub failed_sends: u64,
    /// Send calls that started before the deadline and returned after it.
    pub late_sends: u64,
    /// Send calls abandoned at the cut-off.
    pub cut_off_sends: u64,
    /// The first error any producer saw.
    pub first_error: Option<String>,
    /// From the start of the load to the last producer's last send (late ones included).
    pub wall: Duration,
    /// When the acknowledgements came.
    pub timeline: Timeline,
    /// Latency (µs) of the acknowledged sends the run's outage must not stall: to the
    /// partitions it does not hit, started while the node was down. Empty without one.
    pub spared_latency_micros: Histogram<u64>,
}

impl Measurement {
    /// Merges the producers' tallies of a run that started at `clock.started`.
    pub fn merge(clock: &RunClock, tallies: Vec<ProducerTally>) -> Self {
        let mut merged = Self {
            started: clock.started,
            deadline: clock.deadline,
            latency_micros: latency_histogram(),
            acked_messages: 0,
            sends: 0,
            failed_sends: 0,
            late_sends: 0,
            cut_off_sends: 0,
            first_error: None,
            wall: Duration::ZERO,
            timeline: Timeline::default(),
            spared_latency_micros: latency_histogram(),
        };
        let mut last = clock.deadline;
        for tally in tallies {
            // Both histograms have the same bounds, so adding cannot fail.
            let _ = merged.latency_micros.add(&tally.latency_micros);
            let _ = merged
                .spared_latency_micros
                .add(&tally.spared_latency_micros);
            merged.timeline.merge(&tally.timeline);
            merged.acked_messages += tally.acked_messages;
            merged.sends += tally.sends;
            merged.failed_sends += tally.failed_sends;
            merged.late_sends += tally.late_sends;
            merged.cut_off_sends += tally.cut_off_sends;
            if merged.first_error.is_none() {
                merged.first_error = tally.first_error;
            }
            last = last.max(tally.finished.unwrap_or(clock.deadline));
        }
        merged.wall = last.duration_since(clock.started);
        merged
    }

    /// Acknowledged messages per second of wall time.
    pub fn messages_per_second(&self) -> f64 {
        let seconds = self.wall.as_secs_f64();
        if seconds > 0.0 {
            self.acked_messages as f64 / seconds
        } else {
            0.0
        }
    }

    /// A latency quantile in ms (0 when nothing was recorded).
    pub fn latency_ms(&self, quantile: f64) -> f64 {
        if self.latency_micros.is_empty() {
            return 0.0;
        }
        self.latency_micros.value_at_quantile(quantile) as f64 / 1000.0
    }
}

/// Counters the producers bump and the progress line reads.
#[derive(Debug, Default)]
pub struct Progress {
    acked: AtomicU64,
    failed: AtomicU64,
}

/// The progress line on stderr, redrawn in place with `\r` until it is finished.
#[derive(Debug)]
pub struct ProgressLine {
    progress: Arc<Progress>,
    stop: Arc<AtomicBool>,
    painter: Option<JoinHandle<()>>,
}

impl ProgressLine {
    /// Starts redrawing `label: elapsed, acknowledged messages, rate` every 250 ms.
    pub fn start(label: String, load: &Load) -> Self {
        let progress = Arc::new(Progress::default());
        let stop = Arc::new(AtomicBool::new(false));
        let duration = load.duration;
        let painter = {
            let (progress, stop) = (Arc::clone(&progress), Arc::clone(&stop));
            std::thread::spawn(move || paint(&label, duration, &progress, &stop))
        };
        Self {
            progress,
            stop,
            painter: Some(painter),
        }
    }

    /// The counters to hand to the producers.
    pub fn progress(&self) -> Arc<Progress> {
        Arc::clone(&self.progress)
    }

    /// Stops redrawing and clears the line.
    pub fn finish(mut self) {
        self.stop_painter();
    }

    fn stop_painter(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(painter) = self.painter.take() {
            let _ = painter.join();
        }
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        self.stop_painter();
    }
}

fn paint(label: &str, duration: Duration, progress: &Progress, stop: &AtomicBool) {
    let started = Instant::now();
    let mut stderr = std::io::stderr();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(PROGRESS_INTERVAL);
        let elapsed = started.elapsed().as_secs_f64();
        let acked = progress.acked.load(Ordering::Relaxed);
        let failed = progress.failed.load(Ordering::Relaxed);
        let phase = if elapsed > duration.as_secs_f64() {
            "draining sends in flight"
        } else {
            "running"
        };
        let _ = write!(
            stderr,
            "\r{label}: {elapsed:5.1}/{:.0} s, {acked} messages acknowledged ({:.0} msg/s), {failed} failed sends, {phase}\x1b[K",
            duration.as_secs_f64(),
            acked as f64 / elapsed.max(0.001),
        );
        let _ = stderr.flush();
    }
    let _ = write!(stderr, "\r\x1b[K");
    let _ = stderr.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::LoadKind;

    fn load(rate: Option<u64>) -> Load {
        Load {
            kind: LoadKind::Batch100,
            producers: 12,
            partitions: crate::demo::PARTITIONS,
            payload_bytes: 100,
            duration: Duration::from_secs(1),
            drain_grace: Duration::from_secs(30),
            sdk_nodelay: true,
            producer_window: None,
            epoch: None,
            outage: None,
            follow_refusal_view: true,
            tls: false,
            rate,
        }
    }

    #[test]
    fn a_paced_load_interleaves_the_producers_sends_evenly() {
        // 600,000 msg/s of 100-message sends by 12 producers: 500 sends/s each, 2 ms apart,
        // producer p offset by p/12 of that.
        let load = load(Some(600_000));
        assert_eq!(load.pace(), Some(Duration::from_millis(2)));
        let clock = RunClock::start(&load);
        let offset = |producer, send| {
            clock
                .due(producer, send)
                .map(|due| due.duration_since(clock.started))
        };
        assert_eq!(offset(0, 0), Some(Duration::ZERO));
        assert_eq!(offset(0, 5), Some(Duration::from_millis(10)));
        assert_eq!(offset(3, 5), Some(Duration::from_micros(10_500)));
        assert_eq!(
            offset(11, 0),
            Some(Duration::from_nanos(2_000_000 * 11 / 12))
        );
        // The last send due before the 1 s deadline is number 499; number 500 is not made.
        assert!(clock.may_start(clock.due(0, 499)));
        assert!(!clock.may_start(clock.due(0, 500)));
    }

    #[test]
    fn an_ack_after_a_crash_of_a_send_admitted_before_it_is_no_recovery() {
        let outage = OutageWindow {
            from: Duration::from_secs(1),
            to: Duration::from_secs(3),
            affected: 1 << 2,
        };
        let clock = RunClock::start(&Load {
            outage: Some(outage),
            ..load(None)
        });
        let at = |ms| clock.started + Duration::from_millis(ms);
        let acked = |partition| {
            Ok(Acked {
                messages: 100,
                partition: Some(partition),
            })
        };
        let progress = Progress::default();
        let mut tally = ProducerTally::default();
        // Started before the crash, its reply read after it: throughput, not recovery.
        tally.record_at(&clock, at(900), at(1_001), acked(2), &progress);
        // A partition the crash spares recovers nothing and counts as before.
        tally.record_at(&clock, at(900), at(1_002), acked(4), &progress);
        assert_eq!(tally.acked_messages, 200);
        assert_eq!(
            tally.timeline.first_ack_from(2, Duration::from_secs(1)),
            None
        );
        assert!(
            tally
                .timeline
                .first_ack_from(4, Duration::from_secs(1))
                .is_some()
        );
        // Started after the crash and acknowledged once the partition moved: recovery.
        tally.record_at(&clock, at(1_100), at(2_000), acked(2), &progress);
        let recovered = tally.timeline.first_ack_from(2, Duration::from_secs(1));
        assert!(
            recovered.is_some_and(|at| at >= Duration::from_millis(1_990)),
            "{recovered:?}"
        );
    }

    #[test]
    fn an_unpaced_load_has_no_schedule() {
        let load = load(None);
        assert_eq!(load.pace(), None);
        let clock = RunClock::start(&load);
        assert_eq!(clock.due(0, 1_000), None);
        assert!(clock.may_start(None), "before the deadline");
    }

    #[test]
    fn a_send_made_late_counts_from_its_place_in_the_schedule() {
        let due = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(latency_start(Some(due), due), due, "on time");
        assert_eq!(
            latency_start(Some(due), due + ms(1)),
            due,
            "a timer's slack"
        );
        assert_eq!(
            latency_start(Some(due), due + ms(50)),
            due + ms(49),
            "later than the slack: the rest counts"
        );
        assert_eq!(latency_start(None, due + ms(50)), due + ms(50), "unpaced");
        let future = Instant::now() + ms(20);
        assert!(
            RunClock::block_until_due(Some(future)) >= future,
            "waited for its place"
        );
    }
}

//! What the machine itself did during a run, read beside the clients' figures:
//!
//! - hiccups, measured as jHiccup does: a thread asks to sleep 1 ms over and over and
//!   records how much later than that it woke. The hypervisor running another guest, or
//!   the scheduler running the demo's own producers and the embedded cluster first,
//!   delays it as it delays them. It is a reference for a run's tail, not a bound: a
//!   thread that mostly sleeps is scheduled sooner than busy ones.
//! - the share of the CPU the hypervisor gave other guests ([`CpuTimes`]), read every
//!   100 ms.
//!
//! Both are kept with their instants, so a row's figures cover its load (from the run's
//! start to its deadline), not its connecting and draining.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::load::latency_histogram;
use super::steal::CpuTimes;

/// The sleep asked for each time.
const TICK: Duration = Duration::from_millis(1);

/// How often the CPU times are read.
const CPU_EVERY: Duration = Duration::from_millis(100);

/// A running meter; [`MachineMeter::stop`] returns what it saw.
#[derive(Debug)]
pub struct MachineMeter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<MachineLog>>,
}

/// What a meter saw, with instants.
#[derive(Debug, Default)]
pub struct MachineLog {
    /// When each sleep ended and how late it woke, µs.
    wakes: Vec<(Instant, u64)>,
    /// The CPU times as read, every [`CPU_EVERY`].
    cpu: Vec<(Instant, CpuTimes)>,
}

impl MachineMeter {
    /// Starts the meter's thread (`None` if it cannot be started: the run goes on
    /// without the figures).
    pub fn start() -> Option<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("machine-meter".to_owned())
            .spawn(move || {
                let mut log = MachineLog::default();
                let mut next_cpu = Instant::now();
                while !stopped.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    if now >= next_cpu {
                        if let Some(times) = CpuTimes::now() {
                            log.cpu.push((now, times));
                        }
                        next_cpu = now + CPU_EVERY;
                    }
                    let asked = Instant::now();
                    std::thread::sleep(TICK);
                    let woke = Instant::now();
                    let late = woke.saturating_duration_since(asked).saturating_sub(TICK);
                    let micros = u64::try_from(late.as_micros()).unwrap_or(u64::MAX);
                    log.wakes.push((woke, micros));
                }
                if let Some(times) = CpuTimes::now() {
                    log.cpu.push((Instant::now(), times));
                }
                log
            })
            .ok()?;
        Some(Self {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the meter and returns what it saw.
    pub fn stop(mut self) -> Option<MachineLog> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take()?.join().ok()
    }
}

impl Drop for MachineMeter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl MachineLog {
    /// The hiccups of the wakes between `from` and `to`.
    pub fn hiccups(&self, from: Instant, to: Instant) -> Option<Hiccups> {
        let mut late_micros = latency_histogram();
        for &(at, micros) in &self.wakes {
            if at >= from && at <= to {
                late_micros.saturating_record(micros.max(1));
            }
        }
        (!late_micros.is_empty()).then(|| Hiccups {
            p999_ms: late_micros.value_at_quantile(0.999) as f64 / 1_000.0,
            max_ms: late_micros.max() as f64 / 1_000.0,
        })
    }

    /// The share of the CPU stolen from the last reading at or before `from` (the first,
    /// if none) to the first at or after `to` (the last, if none).
    pub fn stolen(&self, from: Instant, to: Instant) -> Option<f64> {
        let before = self
            .cpu
            .iter()
            .rev()
            .find(|(at, _)| *at <= from)
            .or_else(|| self.cpu.first())?;
        let after = self
            .cpu
            .iter()
            .find(|(at, _)| *at >= to)
            .or_else(|| self.cpu.last())?;
        before.1.stolen_since(after.1)
    }
}

/// How late the meter's 1 ms sleeps woke during a run, ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hiccups {
    /// p99.9 of how late a wake was.
    pub p999_ms: f64,
    /// The latest wake.
    pub max_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_of_the_measuring_thread_shows_as_a_late_wake() {
        let from = Instant::now();
        let meter = MachineMeter::start().expect("meter");
        std::thread::sleep(Duration::from_millis(50));
        let log = meter.stop().expect("log");
        let hiccups = log
            .hiccups(from, Instant::now())
            .expect("it woke at least once");
        assert!(hiccups.max_ms >= hiccups.p999_ms);
    }

    #[test]
    fn figures_cover_only_the_window_asked_for() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let times = |stolen, total| CpuTimes { stolen, total };
        let log = MachineLog {
            wakes: vec![
                (at(10), 50_000),
                (at(200), 100),
                (at(300), 200),
                (at(900), 70_000),
            ],
            cpu: vec![
                (at(0), times(0, 0)),
                (at(100), times(10, 100)),
                (at(500), times(30, 500)),
                (at(1_000), times(530, 1_000)),
            ],
        };
        // The late wakes at 10 ms and 900 ms are outside 100-500 ms.
        let hiccups = log.hiccups(at(100), at(500)).expect("two wakes inside");
        assert!(hiccups.max_ms < 1.0, "{hiccups:?}");
        // From the reading at 100 ms to the one at 500 ms: 20 of 400 ticks stolen.
        assert_eq!(log.stolen(at(100), at(500)), Some(0.05));
        assert_eq!(
            log.stolen(at(150), at(450)),
            Some(0.05),
            "the readings around it"
        );
        assert_eq!(log.hiccups(at(2_000), at(3_000)), None, "no wake inside");
    }
}

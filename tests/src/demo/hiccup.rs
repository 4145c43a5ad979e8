//! The machine's own stalls during a run, measured as jHiccup does: a thread that asks to
//! sleep 1 ms over and over and records how much later than that it woke. Whatever stalls
//! it (the hypervisor running another guest, the scheduler running other threads first)
//! stalls the clients and the embedded cluster too, so its p99.9 is a floor under any
//! client's p99.9 in the same run: a client's tail can only be judged above it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::load::latency_histogram;

/// The sleep asked for each time.
const TICK: Duration = Duration::from_millis(1);

/// A running meter; [`HiccupMeter::stop`] returns what it saw.
#[derive(Debug)]
pub struct HiccupMeter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Histogram<u64>>>,
}

impl HiccupMeter {
    /// Starts the meter's thread (`None` if the thread cannot be started: the run goes
    /// on without the figure).
    pub fn start() -> Option<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("hiccup-meter".to_owned())
            .spawn(move || {
                let mut late_micros = latency_histogram();
                while !stopped.load(Ordering::Relaxed) {
                    let asked = Instant::now();
                    std::thread::sleep(TICK);
                    let late = asked.elapsed().saturating_sub(TICK);
                    let micros = u64::try_from(late.as_micros()).unwrap_or(u64::MAX);
                    late_micros.saturating_record(micros.max(1));
                }
                late_micros
            })
            .ok()?;
        Some(Self {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the meter and returns how late each wake was, µs.
    pub fn stop(mut self) -> Option<Histogram<u64>> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take()?.join().ok()
    }
}

impl Drop for HiccupMeter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What a run's meter saw, ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hiccups {
    /// p99.9 of how late a 1 ms sleep woke.
    pub p999_ms: f64,
    /// The latest wake.
    pub max_ms: f64,
}

impl Hiccups {
    /// The figures of a stopped meter's histogram (`None` when it recorded nothing).
    pub fn of(late_micros: &Histogram<u64>) -> Option<Self> {
        (!late_micros.is_empty()).then(|| Self {
            p999_ms: late_micros.value_at_quantile(0.999) as f64 / 1_000.0,
            max_ms: late_micros.max() as f64 / 1_000.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_of_the_measuring_thread_shows_as_a_late_wake() {
        let meter = HiccupMeter::start().expect("meter");
        std::thread::sleep(Duration::from_millis(30));
        let late = meter.stop().expect("histogram");
        assert!(late.len() >= 5, "it woke repeatedly ({} wakes)", late.len());
        let hiccups = Hiccups::of(&late).expect("figures");
        assert!(hiccups.max_ms >= hiccups.p999_ms);
    }

    #[test]
    fn an_empty_meter_has_no_figures() {
        assert_eq!(Hiccups::of(&latency_histogram()), None);
    }
}

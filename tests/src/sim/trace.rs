//! The trace of a run: one line per input and per output, hashed as it goes (FNV-1a, so
//! the hash is the same on every platform and Rust version), with the last lines kept for
//! the failure message.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::time::Duration;

/// Lines kept for a failure message.
const TAIL_LINES: usize = 60;

/// See the module doc.
#[derive(Debug)]
pub struct Trace {
    hash: u64,
    tail: VecDeque<String>,
    /// Print every line to stderr (for replaying one seed).
    verbose: bool,
}

impl Trace {
    /// An empty trace.
    pub fn new(verbose: bool) -> Self {
        Self {
            hash: 0xCBF2_9CE4_8422_2325,
            tail: VecDeque::with_capacity(TAIL_LINES),
            verbose,
        }
    }

    /// Record one line at simulated time `now`.
    pub fn line(&mut self, now: Duration, args: std::fmt::Arguments<'_>) {
        let mut line = String::with_capacity(48);
        let _ = write!(line, "{:>10.3}ms ", now.as_secs_f64() * 1_000.0);
        let _ = line.write_fmt(args);
        for byte in line.bytes() {
            self.hash ^= u64::from(byte);
            self.hash = self.hash.wrapping_mul(0x0100_0000_01B3);
        }
        if self.verbose {
            eprintln!("{line}");
        }
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(line);
    }

    /// The hash of every line so far.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The last lines, one per line.
    pub fn tail(&self) -> String {
        self.tail.iter().fold(String::new(), |mut out, line| {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
            out
        })
    }
}

//! The nemesis run's report: printed, written as JSON, and drawn as a throughput chart
//! with the faults marked (the demo's own chart drawer), under `target/nemesis/`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use iggy_route_core::Stats;

use super::Settings;
use super::checker::{Findings, SHOWN};
use super::faults::{Fault, FaultKind};
use super::ledger::{Ended, Records};
use super::readback::Readback;
use super::recovery::{reconnects_bound, session_moves_bound};
use crate::demo::chart::{self, CRASH, Curve, MOVE, Marker, RESTART};

/// Everything the report shows.
#[derive(Debug)]
pub struct Report<'a> {
    /// Length and seed.
    pub settings: &'a Settings,
    /// Where the main clients' sessions started.
    pub coordinator: usize,
    /// The run's stream.
    pub stream: &'a str,
    /// When the load stopped.
    pub load_end: Duration,
    /// The faults.
    pub faults: &'a [Fault],
    /// The checker's findings.
    pub findings: &'a Findings,
    /// The load's records.
    pub records: &'a Records,
    /// The end of the run.
    pub readback: &'a Readback,
    /// Each client's counters.
    pub stats: &'a [(String, Stats)],
    /// Refusals in the servers' logs before and after the run.
    pub refusals: (Option<u64>, Option<u64>),
    /// When the run started, by the wall clock.
    pub start_wall: std::time::SystemTime,
}

fn secs(duration: Duration) -> String {
    format!("{:.2}", duration.as_secs_f64())
}

fn opt_secs(duration: Option<Duration>) -> String {
    duration.map_or_else(|| "-".to_owned(), secs)
}

impl Report<'_> {
    /// Prints the report and writes its JSON and its chart.
    pub fn publish(&self) {
        print!("{}", self.text());
        let directory = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map(|root| root.join("target").join("nemesis"))
            .unwrap_or_else(|| PathBuf::from("target/nemesis"));
        if let Err(error) = std::fs::create_dir_all(&directory) {
            println!("real_nemesis: no {}: {error}", directory.display());
            return;
        }
        let stem = format!("nemesis-{}-{}s", self.settings.seed, self.settings.seconds);
        let json = directory.join(format!("{stem}.json"));
        match std::fs::write(&json, super::report_json::json(self)) {
            Ok(()) => println!("real_nemesis: wrote {}", json.display()),
            Err(error) => println!("real_nemesis: {}: {error}", json.display()),
        }
        let trace = directory.join(format!("{stem}.trace"));
        match std::fs::write(&trace, self.trace()) {
            Ok(()) => println!("real_nemesis: wrote {}", trace.display()),
            Err(error) => println!("real_nemesis: {}: {error}", trace.display()),
        }
        let svg = directory.join(format!("{stem}.svg"));
        match self.chart(&svg) {
            Ok(()) => println!("real_nemesis: wrote {}", svg.display()),
            Err(error) => println!("real_nemesis: chart: {error}"),
        }
    }

    /// Every fault's actions, every consumer request and every send that was not
    /// acknowledged, in time order: what to read when the checker finds something.
    fn trace(&self) -> String {
        let mut lines: Vec<(Duration, String)> = Vec::new();
        for fault in self.faults {
            for (at, text) in &fault.events {
                lines.push((*at, format!("nemesis {text}")));
            }
        }
        for request in &self.records.requests {
            let name = &self.records.consumers[request.consumer].name;
            let error = request
                .error
                .as_ref()
                .map_or_else(String::new, |error| format!(" ERROR {error}"));
            lines.push((
                request.started,
                format!(
                    "{name}: {} took {:.3} s: {}{error}",
                    request.what,
                    (request.ended_at.saturating_sub(request.started)).as_secs_f64(),
                    request.detail
                ),
            ));
        }
        for call in &self.records.sends {
            if matches!(call.ended, Ended::Acked { .. }) {
                continue;
            }
            lines.push((
                call.started,
                format!(
                    "{} call {} {:?} x{} ended at {:.3} s: {:?}",
                    self.records.sources[call.source].name,
                    call.seq,
                    call.kind,
                    call.count,
                    call.ended_at.as_secs_f64(),
                    call.ended
                ),
            ));
        }
        lines.sort_by_key(|(at, _)| *at);
        let mut out = format!(
            "t = 0 s is {} (unix {:.3} s)\n",
            self.start_wall_text(),
            self.start_unix()
        );
        for (at, line) in lines {
            let _ = writeln!(out, "[{:>8.3}] {line}", at.as_secs_f64());
        }
        out
    }

    fn start_unix(&self) -> f64 {
        self.start_wall
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64())
    }

    fn start_wall_text(&self) -> String {
        let at = format!("@{:.3}", self.start_unix());
        super::report_json::output_of("date", &["-u", "-d", &at, "+%Y-%m-%dT%H:%M:%S.%3NZ"])
            .unwrap_or_default()
    }

    /// How many faults of each kind.
    pub fn kinds(&self) -> BTreeMap<FaultKind, usize> {
        let mut kinds = BTreeMap::new();
        for fault in self.faults {
            *kinds.entry(fault.kind).or_default() += 1;
        }
        kinds
    }

    fn text(&self) -> String {
        let (counts, mut out) = (&self.findings.counts, String::new());
        let _ = writeln!(
            out,
            "\nreal_nemesis report: seed {} ({}), {} s of load on stream {}, main sessions on \
             node {}",
            self.settings.seed,
            if self.settings.drawn {
                "drawn"
            } else {
                "given"
            },
            self.settings.seconds,
            self.stream,
            self.coordinator
        );
        if self.load_end + Duration::from_secs(1) < Duration::from_secs(self.settings.seconds) {
            let _ = writeln!(
                out,
                "the load stopped early, at {:.1} s: the server did not recover a partition",
                self.load_end.as_secs_f64()
            );
        }
        let kinds: Vec<String> = self
            .kinds()
            .iter()
            .map(|(kind, n)| format!("{} {n}", kind.name()))
            .collect();
        let _ = writeln!(out, "faults: {} ({})", self.faults.len(), kinds.join(", "));
        let _ = writeln!(
            out,
            "  #  start s  kind                  node  aimed at         hold s  whole at s  \
             first ack s  every partition s  longest stall s (partition)  held"
        );
        for (fault, recovery) in self.faults.iter().zip(&self.findings.recoveries) {
            let node = match fault.restarted {
                Some(restarted) => format!("{}+{restarted}", fault.node),
                None => fault.node.to_string(),
            };
            let _ = writeln!(
                out,
                "  {:<2} {:>7}  {:<20}  {node:<4}  {:<15}  {:>6}  {:>10}  {:>11}  {:>17}  {:>9} ({:?})  {}",
                fault.number,
                secs(fault.started),
                fault.kind.name(),
                fault.role.name(),
                secs(fault.hold),
                opt_secs(fault.whole_again),
                opt_secs(recovery.first_ack),
                opt_secs(recovery.every_partition),
                secs(recovery.longest_stall.0),
                recovery.longest_stall.1,
                fault.held
            );
        }
        let _ = writeln!(
            out,
            "calls: {} ; acknowledged {} ({} messages, {} receipts without an offset); \
             OutcomeUnknown {} (stored {}, not stored {}); TimedOut {} (stored {}, not stored \
             {}); cut short by the run's shutdown {} (stored {}); failed {} {:?}; stored from \
             calls that never settled {}",
            counts.calls,
            counts.acked.0,
            counts.acked.1,
            counts.no_offset,
            counts.unknown.0 + counts.unknown.1,
            counts.unknown.0,
            counts.unknown.1,
            counts.timed_out.0 + counts.timed_out.1,
            counts.timed_out.0,
            counts.timed_out.1,
            counts.cut_short.0 + counts.cut_short.1,
            counts.cut_short.0,
            counts.failed.values().sum::<u64>(),
            counts.failed,
            counts.unsettled_stored
        );
        let _ = writeln!(
            out,
            "stored: {} messages in {} partitions (read from replicas {:?}); settled at {} s \
             after {} probe rounds; longest call {:.2} s ({:.0}% of its bound)",
            counts.stored,
            self.readback.logs.len(),
            self.readback.read_from,
            opt_secs(self.readback.settled_at),
            self.readback.probe_rounds,
            counts.longest_call.0.as_secs_f64(),
            counts.longest_call.1 * 100.0
        );
        let _ = writeln!(
            out,
            "each node's copy (messages per node, by partition): {:?}; read from the longest \
             copy, no primary being known: {:?}",
            self.readback.copies, self.readback.longest_copy
        );
        let (before, after) = self.refusals;
        let _ = writeln!(
            out,
            "refusals in the servers' logs: before {before:?}, after {after:?}"
        );
        let _ = writeln!(
            out,
            "clients (bounds for these faults: {} session moves, {} reconnects):",
            session_moves_bound(self.faults),
            reconnects_bound(self.faults)
        );
        for (name, stats) in self.stats {
            let _ = writeln!(
                out,
                "  {name:<14} sends {:>7}  refusals {:>5}  reconnects {:>4}  session moves {:>2}  \
                 memberships lost {:>2}  timeouts {:>4}",
                stats.sends,
                stats.refusals,
                stats.reconnects,
                stats.session_moves,
                stats.memberships_lost,
                stats.timeouts
            );
        }
        let _ = writeln!(out, "consumers:");
        for summary in &self.findings.consumers {
            let _ = writeln!(
                out,
                "  {:<22} handed out {:>7} (again after a rejoin {}), joins {}, offset writes {} \
                 ({} failed), errors {}{}",
                summary.name,
                summary.handed,
                summary.again_after_rejoin,
                summary.joins,
                summary.commits.0,
                summary.commits.1,
                summary.errors,
                if summary.stalled {
                    "; lost its membership and handed nothing out after the last fault"
                } else {
                    ""
                }
            );
        }
        if let Some(read) = &self.findings.group_read_after {
            let _ = writeln!(
                out,
                "group: partitions read by a member after the last fault: {read:?} of {}",
                self.readback.logs.len()
            );
        }
        let violations = &self.findings.violations;
        let _ = writeln!(out, "violations: {}", violations.len());
        for violation in violations.iter().take(SHOWN) {
            let _ = writeln!(out, "  {violation}");
        }
        if violations.len() > SHOWN {
            let _ = writeln!(out, "  ... and {} more", violations.len() - SHOWN);
        }
        out
    }

    fn chart(&self, path: &std::path::Path) -> Result<(), String> {
        let [tokio, mio] = &self.records.timelines;
        let mut all = tokio.clone();
        all.merge(mio);
        let curves = [
            Curve {
                name: "both adapters",
                per_bucket: all.messages_per_bucket(),
            },
            Curve {
                name: "iggy-route-tokio",
                per_bucket: tokio.messages_per_bucket(),
            },
            Curve {
                name: "iggy-route-mio",
                per_bucket: mio.messages_per_bucket(),
            },
        ];
        let mut markers = Vec::new();
        for fault in self.faults {
            let (label, colour) = match fault.kind {
                FaultKind::Kill => (format!("{} kill n{}", fault.number, fault.node), CRASH),
                FaultKind::Pause => (format!("{} pause n{}", fault.number, fault.node), MOVE),
                FaultKind::RestartWhilePaused => (
                    format!(
                        "{} pause n{} restart n{}",
                        fault.number,
                        fault.node,
                        fault.restarted.unwrap_or(fault.node)
                    ),
                    CRASH,
                ),
            };
            markers.push(Marker {
                at: fault.started,
                label,
                colour,
            });
            if let Some(whole) = fault.whole_again {
                markers.push(Marker {
                    at: whole,
                    label: format!("{} whole", fault.number),
                    colour: RESTART,
                });
            }
        }
        let title = format!(
            "nemesis on the real cluster: seed {}, {} faults",
            self.settings.seed,
            self.faults.len()
        );
        chart::write_timeline(path, &title, &curves, &markers, self.load_end)
    }
}

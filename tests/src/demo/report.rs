//! The results: one row per load, scenario and client, printed as a table with notes, and
//! as one JSON object for scripts.

use std::fmt::Write as _;

use super::failover::Recovery;
use super::hiccup::Hiccups;
use super::load::Measurement;
use super::timeline::second_spread;
use super::{ClientKind, LoadKind, Scenario};

/// Who counted a row's refusals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalSource {
    /// The embedded cluster's node stats (every refusal any node sent).
    Cluster,
    /// The client's own stats (a real cluster exposes no such counter).
    Client,
    /// Not observable: the SDK on a real cluster without a control command to read the
    /// servers' logs (its session moves are not observable there either).
    Unknown,
}

/// One client's run of one load in one scenario.
#[derive(Debug)]
pub struct Row {
    /// The load.
    pub load: LoadKind,
    /// The client.
    pub client: ClientKind,
    /// The scenario.
    pub scenario: Scenario,
    /// What the producers measured.
    pub measurement: Measurement,
    /// Times a session moved to another node during the load.
    pub session_moves: u64,
    /// Refusals (status 58) during the load.
    pub refusals: u64,
    /// Who counted `refusals`.
    pub refusals_source: RefusalSource,
    /// Messages the cluster stored during the run, when it could be read.
    pub stored_messages: Option<u64>,
    /// For a run whose primaries moved: the faults and the recovery of each partition
    /// they hit.
    pub recovery: Option<Recovery>,
    /// How long the producers were to start sends (the load's duration).
    pub planned: std::time::Duration,
    /// The run was against a real cluster (`--cluster`), not the embedded one.
    pub on_real_cluster: bool,
    /// The share of the machine's CPU the hypervisor took during the run, where known.
    pub cpu_stolen: Option<f64>,
    /// The machine's own stalls during the run (a floor under the clients' tails).
    pub hiccups: Option<Hiccups>,
}

impl Row {
    /// Acknowledged messages per second of wall time.
    pub fn messages_per_second(&self) -> f64 {
        self.measurement.messages_per_second()
    }

    /// The lowest and the highest whole second's throughput over the median second's.
    pub fn second_spread(&self) -> Option<(f64, f64)> {
        second_spread(&self.measurement.timeline.per_second(self.run_seconds()))
    }

    /// The part of the run in which producers started sends (whole seconds of it count).
    fn run_seconds(&self) -> std::time::Duration {
        self.measurement.wall.min(self.planned)
    }

    /// p99.9 (ms) of the sends the run's outage must not stall, when it had one. Every
    /// client counts each call when its own outcome is known, so a call to a spared
    /// partition carries no wait of an earlier call to a stopped one.
    pub fn spared_p999_ms(&self) -> Option<f64> {
        let spared = &self.measurement.spared_latency_micros;
        (!spared.is_empty()).then(|| spared.value_at_quantile(0.999) as f64 / 1000.0)
    }

    /// True when the cluster holds exactly the acknowledged messages.
    pub fn stored_matches(&self) -> bool {
        self.stored_messages == Some(self.measurement.acked_messages)
    }

    /// The messages stored beyond the acknowledged ones, when the sends whose outcome is
    /// not known to be a failure (failed or cut off: one in flight on a cut link may or
    /// may not have been stored) could hold them all. Consistent with nothing lost and
    /// nothing doubled, though a duplicate of as many messages would look the same.
    pub fn stored_beyond_acked(&self) -> Option<u64> {
        let m = &self.measurement;
        let extra = self.stored_messages?.checked_sub(m.acked_messages)?;
        let unknown = (m.failed_sends + m.cut_off_sends) * self.load.messages_per_send() as u64;
        (extra > 0 && extra <= unknown).then_some(extra)
    }
}

/// The table as printed: a header, one line per row, then a note per row.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<14} {:<17} {:<8} {:>10} {:>8} {:>9} {:>9} {:>6} {:>9} {:>8} {:>12}",
        "load",
        "client",
        "scenario",
        "msg/s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "moves",
        "refusals",
        "vs SDK",
        "split/single"
    );
    for row in rows {
        let m = &row.measurement;
        let _ = writeln!(
            out,
            "{:<14} {:<17} {:<8} {:>10} {:>8.2} {:>9.2} {:>9.2} {:>6} {:>9} {:>8} {:>12}",
            row.load.name(),
            row.client.name(),
            row.scenario.name(),
            thousands(row.messages_per_second()),
            m.latency_ms(0.50),
            m.latency_ms(0.99),
            m.latency_ms(0.999),
            moves(row),
            refusals(row),
            ratio(vs_sdk(rows, row)),
            ratio(split_over_single(rows, row)),
        );
    }
    out.push('\n');
    for row in rows {
        let _ = writeln!(out, "{}", note(row));
    }
    out
}

/// The rows of runs whose primaries moved, as a second table: the spread of the run's
/// seconds, the recovery of the partitions the faults hit, and, in a crash, the p99.9 of
/// the sends to the partitions the stopped node did not lead.
pub fn failover_table(rows: &[Row]) -> String {
    let mut out = String::new();
    if rows.iter().all(|row| row.recovery.is_none()) {
        return out;
    }
    // The same client's `split` run, where it was measured, is the baseline: the embedded
    // cluster's own second-to-second spread without any move.
    let moved: Vec<&Row> = rows
        .iter()
        .filter(|row| row.recovery.is_some() || row.scenario == Scenario::Split)
        .collect();
    let _ = writeln!(
        out,
        "{:<14} {:<25} {:<8} {:>10} {:>9} {:>8} {:>8} {:>6} {:>9} {:>9} {:>9} {:>6} {:>12} {:>7} {:>8}",
        "load",
        "client",
        "scenario",
        "msg/s",
        "p99.9 ms",
        "low/med",
        "high/med",
        "hit",
        "rec p50",
        "rec p99",
        "rec max",
        "moves",
        "spared p99.9",
        "stolen",
        "hiccup"
    );
    for row in moved {
        let (low, high) = row
            .second_spread()
            .map_or(("-".to_owned(), "-".to_owned()), |(low, high)| {
                (format!("{low:.2}"), format!("{high:.2}"))
            });
        let recovery = row.recovery.as_ref();
        let hit = recovery.map_or(0, |r| r.samples.len() as u64 + r.unrecovered);
        let recovery_ms = |figure: fn(&Recovery) -> f64| {
            recovery.map_or_else(|| "-".to_owned(), |r| format!("{:.2}", figure(r)))
        };
        let spared = row
            .spared_p999_ms()
            .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.2} ms"));
        let _ = writeln!(
            out,
            "{:<14} {:<25} {:<8} {:>10} {:>9.2} {:>8} {:>8} {:>6} {:>9} {:>9} {:>9} {:>6} {:>12} {:>7} {:>8}",
            row.load.name(),
            row.client.name(),
            row.scenario.name(),
            thousands(row.messages_per_second()),
            row.measurement.latency_ms(0.999),
            low,
            high,
            hit,
            recovery_ms(|r| r.ms(0.50)),
            recovery_ms(|r| r.ms(0.99)),
            recovery_ms(Recovery::max_ms),
            moves(row),
            spared,
            row.cpu_stolen.map_or_else(
                || "-".to_owned(),
                |stolen| format!("{:.0}%", stolen * 100.0)
            ),
            row.hiccups.map_or_else(
                || "-".to_owned(),
                |hiccups| format!("{:.2}", hiccups.p999_ms)
            ),
        );
        if let Some(recovery) = recovery.filter(|r| r.unrecovered > 0) {
            let _ = writeln!(
                out,
                "  {} of the {hit} partitions hit saw no acknowledged send afterwards (not in the recovery figures)",
                recovery.unrecovered
            );
        }
    }
    out.push_str(
        "split rows: the baseline, primaries that never move. \
         low/med, high/med: the run's lowest and highest whole second over its median second. \
         stolen: the share of the machine's CPU the hypervisor gave other guests during the \
         run. hiccup: p99.9 ms of how late a thread asking to sleep 1 ms woke during the run \
         (the machine's and the demo's own stalls: a reference for the run's tail). \
         hit: partitions the faults hit; rec: ms from a move's first refusal (or the crash) to \
         that partition's next acknowledged send. spared p99.9: sends started while the node \
         was down to the partitions it neither led nor delays (the server's replica chain \
         makes the commits of the node before it wait 250 ms for a prepare retransmit). The \
         background producers' calls are counted when each is acknowledged.\n",
    );
    out
}

/// Warnings for rows whose stored count differs from the acknowledged count.
pub fn warnings(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .filter(|row| !row.stored_matches())
        .map(|row| {
            if let Some(extra) = row.stored_beyond_acked() {
                return format!(
                    "NOTE: {} {} {}: the cluster stored {extra} messages more than were \
                     acknowledged, no more than the {} failed or cut-off sends held (their \
                     outcome is unknown)",
                    row.load.name(),
                    row.client.name(),
                    row.scenario.name(),
                    row.measurement.failed_sends + row.measurement.cut_off_sends
                );
            }
            let stored = row
                .stored_messages
                .map_or_else(|| "an unknown number of".to_owned(), |n| n.to_string());
            format!(
                "WARNING: {} {} {}: the cluster stored {stored} messages, {} were acknowledged",
                row.load.name(),
                row.client.name(),
                row.scenario.name(),
                row.measurement.acked_messages
            )
        })
        .collect()
}

/// `{"slow_commit_ms":N,"tls":B,"results":[...]}` on one line. `slow_commit_ms` is the
/// embedded cluster's commit time, `null` on a real cluster (whose commit time is its own);
/// `tls` says whether every client spoke TLS, so that figures with and without it are never
/// compared unawares.
pub fn json(rows: &[Row], slow_commit_ms: Option<u64>, tls: bool, rate: Option<u64>) -> String {
    let entries: Vec<String> = rows
        .iter()
        .map(|row| {
            let m = &row.measurement;
            format!(
                concat!(
                    "{{\"load\":\"{}\",\"client\":\"{}\",\"scenario\":\"{}\",",
                    "\"msgs_per_sec\":{:.1},",
                    "\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"p999_ms\":{:.3},",
                    "\"session_moves\":{},\"refusals\":{},\"acked_messages\":{},",
                    "\"sends\":{},\"failed_sends\":{},\"late_sends\":{},",
                    "\"cut_off_sends\":{},\"wall_seconds\":{:.3},\"stored_ok\":{},",
                    "\"stored_messages\":{},\"stored_beyond_acked_unknown_outcome\":{},",
                    "\"lowest_second_ratio\":{},\"highest_second_ratio\":{},",
                    "\"spared_p999_ms\":{},\"cpu_stolen\":{},",
                    "\"hiccup_p999_ms\":{},\"hiccup_max_ms\":{},\"recovery\":{},",
                    "\"messages_per_100ms\":[{}]}}"
                ),
                row.load.name(),
                row.client.name(),
                row.scenario.name(),
                row.messages_per_second(),
                m.latency_ms(0.50),
                m.latency_ms(0.99),
                m.latency_ms(0.999),
                json_moves(row),
                json_refusals(row),
                m.acked_messages,
                m.sends,
                m.failed_sends,
                m.late_sends,
                m.cut_off_sends,
                m.wall.as_secs_f64(),
                row.stored_matches(),
                row.stored_messages
                    .map_or_else(|| "null".to_owned(), |n| n.to_string()),
                row.stored_beyond_acked()
                    .map_or_else(|| "null".to_owned(), |n| n.to_string()),
                json_number(row.second_spread().map(|(low, _)| low)),
                json_number(row.second_spread().map(|(_, high)| high)),
                json_number(row.spared_p999_ms()),
                json_number(row.cpu_stolen),
                json_number(row.hiccups.map(|h| h.p999_ms)),
                json_number(row.hiccups.map(|h| h.max_ms)),
                row.recovery
                    .as_ref()
                    .map_or_else(|| "null".to_owned(), json_recovery),
                m.timeline
                    .messages_per_bucket()
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            )
        })
        .collect();
    let slow_commit_ms = slow_commit_ms.map_or_else(|| "null".to_owned(), |ms| ms.to_string());
    let rate = rate.map_or_else(|| "null".to_owned(), |rate| rate.to_string());
    format!(
        "{{\"slow_commit_ms\":{slow_commit_ms},\"tls\":{tls},\"offered_msgs_per_sec\":{rate},\"results\":[{}]}}",
        entries.join(",")
    )
}

fn json_number(value: Option<f64>) -> String {
    value.map_or_else(|| "null".to_owned(), |value| format!("{value:.3}"))
}

fn json_recovery(recovery: &Recovery) -> String {
    let faults: Vec<String> = recovery
        .faults
        .iter()
        .map(|timed| {
            format!(
                "{{\"at_ms\":{:.1},\"fault\":\"{}\"}}",
                timed.at.as_secs_f64() * 1_000.0,
                timed.fault.label()
            )
        })
        .collect();
    let samples: Vec<String> = recovery
        .samples
        .iter()
        .map(|sample| format!("{:.3}", sample.as_secs_f64() * 1_000.0))
        .collect();
    format!(
        concat!(
            "{{\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3},\"unrecovered\":{},",
            "\"samples_ms\":[{}],\"faults\":[{}]}}"
        ),
        recovery.ms(0.50),
        recovery.ms(0.99),
        recovery.max_ms(),
        recovery.unrecovered,
        samples.join(","),
        faults.join(",")
    )
}

fn note(row: &Row) -> String {
    let m = &row.measurement;
    let mut line = format!(
        "{} {} {}: {} messages acknowledged in {} sends over {:.2} s wall",
        row.load.name(),
        row.client.name(),
        row.scenario.name(),
        m.acked_messages,
        m.sends,
        m.wall.as_secs_f64()
    );
    if m.late_sends > 0 {
        let _ = write!(
            line,
            "; {} sends were in flight at the deadline and were waited for (included)",
            m.late_sends
        );
    }
    if m.cut_off_sends > 0 {
        let _ = write!(
            line,
            "; {} sends cut off at the drain limit (not counted)",
            m.cut_off_sends
        );
    }
    if m.failed_sends > 0 {
        let _ = write!(line, "; {} sends failed", m.failed_sends);
        if let Some(error) = &m.first_error {
            let _ = write!(line, " (first: {error})");
        }
    }
    if let Some(stolen) = row.cpu_stolen {
        let _ = write!(
            line,
            "; the hypervisor took {:.0}% of the CPU meanwhile",
            stolen * 100.0
        );
    }
    if let Some(hiccups) = row.hiccups {
        let _ = write!(
            line,
            "; a 1 ms sleep woke up to {:.2} ms late (p99.9 {:.2} ms)",
            hiccups.max_ms, hiccups.p999_ms
        );
    }
    match row.stored_messages {
        Some(stored) if row.stored_matches() => {
            let _ = write!(line, "; cluster stored exactly {stored}");
        }
        Some(stored) => match row.stored_beyond_acked() {
            Some(extra) => {
                let _ = write!(
                    line,
                    "; cluster stored {stored}, {extra} more than acknowledged: consistent \
                     with the failed or cut-off sends (outcome unknown)"
                );
            }
            None => {
                let _ = write!(line, "; cluster stored {stored} (MISMATCH)");
            }
        },
        None => line.push_str("; stored count unknown"),
    }
    line
}

fn refusals(row: &Row) -> String {
    match row.refusals_source {
        RefusalSource::Cluster => row.refusals.to_string(),
        RefusalSource::Client => format!("{}*", row.refusals),
        RefusalSource::Unknown => "n/a".to_owned(),
    }
}

/// Whether the row's session moves were observed: not for the SDK on a real cluster
/// (which exposes no login counter; its rows count refusals from the servers' logs).
fn moves_known(row: &Row) -> bool {
    !(row.client == ClientKind::Sdk && (row.scenario == Scenario::External || row.on_real_cluster))
}

fn moves(row: &Row) -> String {
    if moves_known(row) {
        row.session_moves.to_string()
    } else {
        "n/a".to_owned()
    }
}

fn json_moves(row: &Row) -> String {
    if moves_known(row) {
        row.session_moves.to_string()
    } else {
        "null".to_owned()
    }
}

fn json_refusals(row: &Row) -> String {
    match row.refusals_source {
        RefusalSource::Unknown => "null".to_owned(),
        RefusalSource::Cluster | RefusalSource::Client => row.refusals.to_string(),
    }
}

/// An iggy-route row's rate over the SDK's with the same load in the same scenario.
fn vs_sdk(rows: &[Row], row: &Row) -> Option<f64> {
    if !row.client.is_iggy_route() {
        return None;
    }
    let sdk = rows.iter().find(|other| {
        other.client == ClientKind::Sdk && other.load == row.load && other.scenario == row.scenario
    })?;
    divide(row.messages_per_second(), sdk.messages_per_second())
}

/// A `split` row's rate over the same client's `single` rate with the same load.
fn split_over_single(rows: &[Row], row: &Row) -> Option<f64> {
    if row.scenario != Scenario::Split {
        return None;
    }
    let single = rows.iter().find(|other| {
        other.client == row.client && other.load == row.load && other.scenario == Scenario::Single
    })?;
    divide(row.messages_per_second(), single.messages_per_second())
}

fn divide(numerator: f64, denominator: f64) -> Option<f64> {
    (denominator > 0.0).then(|| numerator / denominator)
}

fn ratio(value: Option<f64>) -> String {
    match value {
        Some(value) if value >= 100.0 => format!("{value:.0}x"),
        Some(value) => format!("{value:.2}x"),
        None => "-".to_owned(),
    }
}

fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    grouped
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn thousands_groups_digits_by_three() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1234.0), "1,234");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
    }
}

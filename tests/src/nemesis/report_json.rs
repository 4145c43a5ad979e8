//! The nemesis report as JSON, for scripts (written next to the chart under
//! `target/nemesis/`).

use std::fmt::Write as _;
use std::time::Duration;

use super::recovery::{reconnects_bound, session_moves_bound};
use super::report::Report;

/// The report as one JSON object.
pub fn json(report: &Report<'_>) -> String {
    let counts = &report.findings.counts;
    let faults: Vec<String> = report
        .faults
        .iter()
        .zip(&report.findings.recoveries)
        .map(|(fault, recovery)| {
            let events: Vec<String> = fault
                .events
                .iter()
                .map(|(at, text)| format!("[{:.3},{}]", at.as_secs_f64(), json_string(text)))
                .collect();
            format!(
                "{{\"number\":{},\"kind\":{},\"aimed_at\":{},\"node\":{},\"restarted\":{},\
                 \"held\":{},\"started_s\":{:.3},\"hold_s\":{:.3},\"whole_again_s\":{},\
                 \"first_ack_s\":{},\"every_partition_s\":{},\"longest_stall_s\":{:.3},\
                 \"unrecovered_partitions\":{:?},\"events\":[{}]}}",
                fault.number,
                json_string(fault.kind.name()),
                json_string(fault.role.name()),
                fault.node,
                fault
                    .restarted
                    .map_or_else(|| "null".to_owned(), |n| n.to_string()),
                json_string(&fault.held),
                fault.started.as_secs_f64(),
                fault.hold.as_secs_f64(),
                json_secs(fault.whole_again),
                json_secs(recovery.first_ack),
                json_secs(recovery.every_partition),
                recovery.longest_stall.0.as_secs_f64(),
                fault.unrecovered,
                events.join(",")
            )
        })
        .collect();
    let kinds: Vec<String> = report
        .kinds()
        .iter()
        .map(|(kind, n)| format!("{}:{n}", json_string(kind.name())))
        .collect();
    let failed: Vec<String> = counts
        .failed
        .iter()
        .map(|(error, n)| format!("{}:{n}", json_string(error)))
        .collect();
    let clients: Vec<String> = report
        .stats
        .iter()
        .map(|(name, s)| {
            format!(
                "{{\"name\":{},\"sends\":{},\"refusals\":{},\"reconnects\":{},\
                 \"session_moves\":{},\"memberships_lost\":{},\"timeouts\":{}}}",
                json_string(name),
                s.sends,
                s.refusals,
                s.reconnects,
                s.session_moves,
                s.memberships_lost,
                s.timeouts
            )
        })
        .collect();
    let consumers: Vec<String> = report
        .findings
        .consumers
        .iter()
        .map(|c| {
            format!(
                "{{\"name\":{},\"handed_out\":{},\"again_after_rejoin\":{},\"joins\":{},\
                 \"offset_writes\":{},\"offset_writes_failed\":{},\"errors\":{},\
                 \"stalled_after_lost_membership\":{}}}",
                json_string(&c.name),
                c.handed,
                c.again_after_rejoin,
                c.joins,
                c.commits.0,
                c.commits.1,
                c.errors,
                c.stalled
            )
        })
        .collect();
    let violations: Vec<String> = report
        .findings
        .violations
        .iter()
        .map(|v| json_string(v))
        .collect();
    let copies: Vec<String> = report
        .readback
        .copies
        .iter()
        .map(|(partition, lengths)| {
            let lengths: Vec<String> = lengths
                .iter()
                .map(|n| n.map_or_else(|| "null".to_owned(), |n| n.to_string()))
                .collect();
            format!("\"{partition}\":[{}]", lengths.join(","))
        })
        .collect();
    let longest: Vec<String> = report
        .readback
        .longest_copy
        .iter()
        .map(|(partition, node)| format!("\"{partition}\":{node}"))
        .collect();
    let text = |value: Option<String>| {
        value.map_or_else(|| "null".to_owned(), |value| json_string(&value))
    };
    let number = |value: Option<u64>| value.map_or_else(|| "null".to_owned(), |n| n.to_string());
    format!(
        "{{\"seed\":{},\"seed_drawn\":{},\"seconds\":{},\"commit\":{},\"date\":{},\
         \"server_build\":\"debug\",\"stream\":{},\"coordinator\":{},\"load_end_s\":{:.3},\
         \"faults_by_kind\":{{{}}},\"faults\":[{}],\"calls\":{},\"acknowledged_calls\":{},\
         \"acknowledged_messages\":{},\"receipts_without_offset\":{},\
         \"unknown\":{{\"stored\":{},\"not_stored\":{}}},\
         \"timed_out\":{{\"stored\":{},\"not_stored\":{}}},\
         \"cut_short\":{{\"stored\":{},\"not_stored\":{}}},\"unsettled_stored\":{},\
         \"failed\":{{{}}},\
         \"stored_messages\":{},\"copies\":{{{}}},\"read_from_longest_copy\":{{{}}},\
         \"settled_at_s\":{},\"probe_rounds\":{},\
         \"refusals_before\":{},\"refusals_after\":{},\"session_moves_bound\":{},\
         \"reconnects_bound\":{},\"clients\":[{}],\"consumers\":[{}],\
         \"longest_call_s\":{:.3},\"group_partitions_read_after_last_fault\":{},\
         \"violations\":[{}]}}\n",
        report.settings.seed,
        report.settings.drawn,
        report.settings.seconds,
        text(output_of("git", &["rev-parse", "--short", "HEAD"])),
        text(output_of("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"])),
        json_string(report.stream),
        report.coordinator,
        report.load_end.as_secs_f64(),
        kinds.join(","),
        faults.join(","),
        counts.calls,
        counts.acked.0,
        counts.acked.1,
        counts.no_offset,
        counts.unknown.0,
        counts.unknown.1,
        counts.timed_out.0,
        counts.timed_out.1,
        counts.cut_short.0,
        counts.cut_short.1,
        counts.unsettled_stored,
        failed.join(","),
        counts.stored,
        copies.join(","),
        longest.join(","),
        json_secs(report.readback.settled_at),
        report.readback.probe_rounds,
        number(report.refusals.0),
        number(report.refusals.1),
        session_moves_bound(report.faults),
        reconnects_bound(report.faults),
        clients.join(","),
        consumers.join(","),
        counts.longest_call.0.as_secs_f64(),
        report.findings.group_read_after.as_ref().map_or_else(
            || "null".to_owned(),
            |read| format!("{:?}", read.iter().collect::<Vec<_>>())
        ),
        violations.join(",")
    )
}

fn json_secs(duration: Option<Duration>) -> String {
    duration.map_or_else(|| "null".to_owned(), |d| format!("{:.3}", d.as_secs_f64()))
}

fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The output of `program args` run in the workspace's root, trimmed, if it ran.
pub fn output_of(program: &str, args: &[&str]) -> Option<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    let output = std::process::Command::new(program)
        .args(args)
        .current_dir(root)
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

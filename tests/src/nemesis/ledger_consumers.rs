//! What the nemesis run's consumers did, as the ledger (`ledger.rs`) keeps it: each
//! consumer, each message it handed out, each offset a member wrote, each request a member
//! made, with its time.

use std::time::Duration;

use crate::scripted::clients::Adapter;

/// A consumer of the run: a plain consumer or a group member.
#[derive(Debug, Clone)]
pub struct ConsumerInfo {
    /// Its name in the report.
    pub name: String,
    /// Its adapter.
    pub adapter: Adapter,
    /// Whether it is a member of the run's group.
    pub member: bool,
}

/// One message handed out by a consumer.
#[derive(Debug, Clone, Copy)]
pub struct HandOut {
    /// Index in [`Records::consumers`].
    pub consumer: usize,
    /// The member's joins so far (its membership); 0 for a plain consumer.
    pub membership: u64,
    /// The partition.
    pub partition: u32,
    /// The offset.
    pub offset: u64,
    /// The message's id.
    pub id: u128,
    /// Whether its payload was the one its id names.
    pub payload_ok: bool,
    /// When, from the start of the run.
    pub at: Duration,
}

/// One offset write of a group member.
#[derive(Debug, Clone)]
pub struct Commit {
    /// Index in [`Records::consumers`].
    pub consumer: usize,
    /// The partition.
    pub partition: u32,
    /// The offset written.
    pub offset: u64,
    /// The highest offset of the partition the member had handed out when it sent the
    /// write (`None`: none).
    pub handed_max: Option<u64>,
    /// When it was sent, from the start of the run.
    pub at: Duration,
    /// Its outcome (`None`: stored).
    pub error: Option<String>,
}

/// One request of a consumer, timed.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    /// Index in [`Records::consumers`].
    pub consumer: usize,
    /// What it was (`poll`, `store offset`, `sync`, ...).
    pub what: String,
    /// When it was submitted, from the start of the run.
    pub started: Duration,
    /// When it was answered.
    pub ended_at: Duration,
    /// The longest it may take (request timeout plus the slack).
    pub bound: Duration,
    /// Its error, if it failed.
    pub error: Option<String>,
    /// What it asked and what it was answered, in short.
    pub detail: String,
}

//! Replays the committed `router_ops` fuzz corpus, and runs the same target over random
//! inputs, so CI exercises it without a fuzzer.
//!
//! Regenerate the seeds with
//! `IGGY_ROUTE_WRITE_CORPUS=1 cargo test -p iggy-route-core --test router_ops -- --ignored`.
#![allow(clippy::unwrap_used)]
// A test needs one real instant as the origin of its timeline; the core never reads the clock.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::time::Instant;

use proptest::prelude::*;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/router_ops")
}

#[test]
fn every_corpus_file_replays_without_breaking_a_promise() {
    let mut files: Vec<_> = std::fs::read_dir(corpus_dir())
        .expect("the router_ops corpus folder exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(
        files.len() >= 10,
        "the router_ops corpus holds {} files",
        files.len()
    );
    for path in files {
        let data = std::fs::read(&path).unwrap();
        let summary = iggy_route_core::fuzzing::router_ops(Instant::now(), &data);
        let name = path.file_name().unwrap().to_string_lossy();
        if !name.starts_with("random") {
            // The hand-written seeds get past sign-in and lookups to admitted sends.
            assert!(summary.succeeded > 0, "{name}: {summary:?}");
        }
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

proptest! {
    // A fixed seed: the same 300 sequences on every run, so that CI's verdict does not
    // depend on the draw. A hunt for new ones sets more cases or another seed:
    // `ROUTER_OPS_CASES=30000 ROUTER_OPS_SEED=7 cargo test --release -p iggy-route-core
    // --test router_ops`.
    #![proptest_config(ProptestConfig {
        cases: env_or("ROUTER_OPS_CASES", 300),
        rng_seed: proptest::test_runner::RngSeed::Fixed(env_or("ROUTER_OPS_SEED", 0x1a2b_3c4d)),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_operation_sequences_never_break_a_promise(data in prop::collection::vec(any::<u8>(), 0..600)) {
        iggy_route_core::fuzzing::router_ops(Instant::now(), &data);
    }
}

/// Found by a 30,000-case run: with little room (setup byte 0x80) a keyed send that waited
/// for its topic's partition count found its partition's queue full and went back to the
/// line; let in again at once (the count was cleared for another request's read again, so
/// its partition could not be checked), it read the topic again, found the queue full, and
/// so on, over 50,000 `GET_TOPIC` on the coordinator link at one `now`. The harness bounds
/// that loop and names it a storm; admission now checks the partition by the last count
/// read, and the call waits until that queue has room.
#[test]
fn a_topic_read_storm_at_one_instant() {
    // (byte, how many times) runs of the shrunk input.
    let runs: [(u8, usize); 38] = [
        (128, 1),
        (0, 422),
        (159, 1),
        (0, 1),
        (1, 1),
        (0, 1),
        (49, 1),
        (0, 1),
        (1, 1),
        (0, 1),
        (1, 1),
        (0, 1),
        (1, 1),
        (0, 1),
        (1, 1),
        (0, 1),
        (1, 1),
        (0, 1),
        (1, 1),
        (0, 11),
        (175, 1),
        (0, 17),
        (240, 1),
        (113, 1),
        (0, 2),
        (69, 1),
        (0, 33),
        (124, 1),
        (86, 1),
        (0, 2),
        (168, 1),
        (255, 1),
        (0, 8),
        (108, 1),
        (22, 1),
        (0, 2),
        (128, 1),
        (143, 1),
    ];
    let data: Vec<u8> = runs
        .iter()
        .flat_map(|&(byte, times)| std::iter::repeat_n(byte, times))
        .collect();
    iggy_route_core::fuzzing::router_ops(Instant::now(), &data);
}

/// Seeds: hand-written sequences (the happy path, the bug report's alternation, refusals
/// after a moved primary, link loss, garbage) and a few pseudo-random ones.
#[test]
#[ignore = "writes the corpus; run with IGGY_ROUTE_WRITE_CORPUS=1 when the op encoding changes"]
fn write_corpus() {
    if std::env::var_os("IGGY_ROUTE_WRITE_CORPUS").is_none() {
        return;
    }
    let connect = [1u8, 0];
    let answer = [2u8, 0];
    let mut seeds: Vec<(String, Vec<u8>)> = Vec::new();
    let mut happy = vec![0b0000_0100u8];
    for _ in 0..6 {
        happy.extend(connect);
        happy.extend(answer);
    }
    for p in 0..4u8 {
        happy.extend([0, p << 2]);
        for _ in 0..6 {
            happy.extend(connect);
            happy.extend([2, p * 7]);
        }
    }
    seeds.push(("happy".into(), happy.clone()));
    let mut moved = happy.clone();
    moved.extend([5, 0b0000_0100]);
    for _ in 0..10 {
        moved.extend([0, 0]);
        moved.extend(connect);
        moved.extend(answer);
    }
    seeds.push(("moved-primary".into(), moved));
    let mut discovery = vec![0x40u8];
    discovery.extend(&happy[1..]);
    seeds.push(("discovery".into(), discovery));
    let mut lossy = happy.clone();
    lossy.extend([3, 0, 0, 1, 1, 0x80, 4, 200, 1, 0, 2, 0, 6, 17]);
    seeds.push(("lossy".into(), lossy));
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..12 {
        let len = 64 + i * 37;
        let data: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        seeds.push((format!("random-{i:02}"), data));
    }
    std::fs::create_dir_all(corpus_dir()).unwrap();
    for (name, data) in seeds {
        std::fs::write(corpus_dir().join(name), data).unwrap();
    }
}

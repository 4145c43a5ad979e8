//! Adversarial tests of evictions through the router's outer face (sans IO): requests the
//! server ends a session for, on every plane, alone and in storms, mixed with link losses,
//! 57 replays, merged send frames, withdrawals, short deadlines and shutdown.
//!
//! Every frame the router writes is decoded here and answered by a per-test script (the
//! fake cluster's answer, an eviction, a status, silence, a closed link, or held for later),
//! so each test can count exactly how often each request reached the wire.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
// A test needs one real instant as the origin of its timeline; every other instant is
// derived from it, and the code under test never reads the clock.
#![allow(clippy::disallowed_methods)]
// Each of the two files uses only part of the shared harness.
#![allow(dead_code, unused_imports)]

include!("eviction_support/harness.rs");

// 1. Blamed evictions -------------------------------------------------------------------------

/// Every reason that blames the request, on every plane (the session's link, the metadata
/// leader's data link, a partition primary's data link): the request ends in the instant
/// the eviction arrives with the reason and the SDK's code, is written once, and the
/// client goes on (a ping on the session and a send on the evicted partition's node).
#[test]
fn every_blamed_reason_on_every_plane_ends_the_request_at_once_and_it_is_never_written_again() {
    for reason in BLAMED {
        for (name, plane) in planes() {
            let mut h = Harness::new(|_| {});
            h.set_script(move |w, _| {
                if w.code == DOOMED {
                    Act::Evict(reason)
                } else {
                    Act::Answer
                }
            });
            let warm = h.submit(send_with_id(0, 1));
            assert!(h.outcome(warm).is_ok(), "{:?}", h.outcome(warm));
            let asked = h.now;
            let bad = h.submit(doomed(1, plane));
            assert_eq!(
                h.outcome(bad).as_ref().unwrap_err(),
                &RequestError::Evicted {
                    reason,
                    code: sdk_code(reason)
                },
                "{reason:?} on {name}"
            );
            assert_eq!(
                h.completed_at(bad),
                asked,
                "{reason:?} on {name}: not at once"
            );
            h.advance_to(Duration::from_secs(30));
            assert_eq!(h.writes_of(1), 1, "{reason:?} on {name}: written again");
            let pinged = h.submit(ping());
            let sent = h.submit(send_with_id(0, 2));
            let sent1 = h.submit(send_with_id(1, 3));
            h.advance_by(Duration::from_secs(2));
            for id in [pinged, sent, sent1] {
                assert!(
                    h.outcome(id).is_ok(),
                    "{reason:?} on {name}: the client did not go on: {:?}",
                    h.outcome(id)
                );
            }
        }
    }
}

/// A blamed eviction of a command held on a partition's only data link while sends to that
/// partition queue behind it: the command ends once, the sends all go (on a new sign-in),
/// each written once, and the command is not written again.
#[test]
fn sends_queued_behind_a_blamed_eviction_on_a_data_link_all_succeed_once() {
    let mut h = Harness::new(|config| config.data_links_per_node = 1);
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.code == DOOMED {
            Act::Hold
        } else {
            Act::Answer
        }
    });
    let bad = h.submit(doomed(7, partition_plane(0, true)));
    let sends: Vec<RequestId> = (10..30u128)
        .map(|id| h.submit(send_with_id(0, id)))
        .collect();
    assert_eq!(h.held.len(), 1, "the command is held on the wire");
    h.release(Act::Evict(EvictionReason::InvalidRequestBody));
    h.advance_by(Duration::from_secs(5));
    assert!(is_evicted(h.outcome(bad)), "{:?}", h.outcome(bad));
    for (id, message) in sends.iter().zip(10..30u128) {
        assert!(h.outcome(*id).is_ok(), "{:?}", h.outcome(*id));
        assert_eq!(h.writes_of_message(message).len(), 1, "message {message}");
    }
    assert_eq!(h.writes_of(7), 1);
}

// 2. Session-level evictions and mixes --------------------------------------------------------

/// A session-level eviction on every plane is written again once; a second one ends the
/// request with it and the SDK's code; never a third write.
#[test]
fn a_session_level_eviction_twice_ends_the_request_on_every_plane_after_exactly_two_writes() {
    for reason in SESSION_LEVEL {
        for (name, plane) in planes() {
            let mut h = Harness::new(|_| {});
            h.set_script(move |w, _| {
                if w.code == DOOMED {
                    Act::Evict(reason)
                } else {
                    Act::Answer
                }
            });
            let bad = h.submit(doomed(3, plane));
            h.advance_to(Duration::from_secs(40));
            assert_eq!(
                h.outcome(bad).as_ref().unwrap_err(),
                &RequestError::Evicted {
                    reason,
                    code: sdk_code(reason)
                },
                "{reason:?} on {name}"
            );
            assert_eq!(h.writes_of(3), 2, "{reason:?} on {name}");
            let sent = h.submit(send_with_id(0, 2));
            h.advance_by(Duration::from_secs(2));
            assert!(h.outcome(sent).is_ok(), "{:?}", h.outcome(sent));
        }
    }
}

/// A session-level eviction, then a blamed one: ends with the blamed reason after two
/// writes.
#[test]
fn a_session_eviction_then_a_blamed_one_ends_with_the_blamed_reason() {
    for (name, plane) in planes() {
        let mut h = Harness::new(|_| {});
        h.set_script(|w, nth| match (w.code, nth) {
            (DOOMED, 0) => Act::Evict(EvictionReason::NoSession),
            (DOOMED, _) => Act::Evict(EvictionReason::InvalidRequestOperation),
            _ => Act::Answer,
        });
        let bad = h.submit(doomed(4, plane));
        h.advance_to(Duration::from_secs(40));
        assert_eq!(
            h.outcome(bad).as_ref().unwrap_err(),
            &RequestError::Evicted {
                reason: EvictionReason::InvalidRequestOperation,
                code: ErrorCode::InvalidCommand
            },
            "{name}"
        );
        assert_eq!(h.writes_of(4), 2, "{name}");
    }
}

/// A session-level eviction, then the link goes silent (or closes) with the request in
/// flight again: a second session ended under it. A write ends `OutcomeUnknown`, a read
/// `ConnectionLost`; neither is written a third time.
#[test]
fn a_session_eviction_then_a_lost_link_ends_writes_unknown_and_reads_lost() {
    for second in [Act::Silent, Act::Close] {
        for (name, plane, write) in [
            ("session read", Plane::Session, false),
            ("metadata read", Plane::MetadataRead, false),
            ("partition read", partition_plane(1, false), false),
            ("partition write", partition_plane(0, true), true),
            ("metadata write", Plane::MetadataWrite, true),
        ] {
            let mut h = Harness::new(|config| {
                config.attempt_timeout = Duration::from_millis(500);
                config.request_timeout = Duration::from_secs(20);
            });
            h.set_script(move |w, nth| match (w.code, nth) {
                (DOOMED, 0) => Act::Evict(EvictionReason::NoSession),
                (DOOMED, _) => second,
                _ => Act::Answer,
            });
            let bad = h.submit(doomed(5, plane));
            h.advance_to(Duration::from_secs(30));
            let outcome = h.outcome(bad).clone();
            if write {
                assert!(
                    matches!(outcome, Err(RequestError::OutcomeUnknown { .. })),
                    "{name}, then {second:?}: {outcome:?}"
                );
            } else {
                assert!(
                    matches!(outcome, Err(RequestError::ConnectionLost { .. })),
                    "{name}, then {second:?}: {outcome:?}"
                );
            }
            assert_eq!(h.writes_of(5), 2, "{name}, then {second:?}");
        }
    }
}

/// The other order: a read whose link goes silent, written again, then evicted for the
/// session: that is the second session ended under it, so it ends (evicted), with no third
/// write.
#[test]
fn a_silent_link_then_a_session_eviction_ends_a_read_after_two_writes() {
    for (name, plane) in [
        ("session", Plane::Session),
        ("partition read", partition_plane(1, false)),
    ] {
        let mut h = Harness::new(|config| {
            config.attempt_timeout = Duration::from_millis(500);
            config.request_timeout = Duration::from_secs(20);
        });
        h.set_script(|w, nth| match (w.code, nth) {
            (DOOMED, 0) => Act::Silent,
            (DOOMED, _) => Act::Evict(EvictionReason::NoSession),
            _ => Act::Answer,
        });
        let bad = h.submit(doomed(6, plane));
        h.advance_to(Duration::from_secs(30));
        assert!(is_evicted(h.outcome(bad)), "{name}: {:?}", h.outcome(bad));
        assert_eq!(h.writes_of(6), 2, "{name}");
    }
}

/// Status 40 (`Unauthenticated`) and 30 (`StaleClient`) answer a request whose session
/// ended: mixed with a session-level eviction, the second such end finishes the request.
/// Never a third write, whatever the order.
#[test]
fn status_40_or_30_mixed_with_a_session_eviction_ends_the_request_after_two_writes() {
    for status in [40, 30] {
        for (first, second) in [
            (Act::Evict(EvictionReason::NoSession), Act::Status(status)),
            (Act::Status(status), Act::Evict(EvictionReason::NoSession)),
            (Act::Status(status), Act::Status(status)),
        ] {
            for (name, plane) in [
                ("session", Plane::Session),
                ("partition write", partition_plane(0, true)),
                ("metadata write", Plane::MetadataWrite),
            ] {
                let mut h = Harness::new(|config| {
                    config.request_timeout = Duration::from_secs(20);
                });
                h.set_script(move |w, nth| match (w.code, nth) {
                    (DOOMED, 0) => first,
                    (DOOMED, _) => second,
                    _ => Act::Answer,
                });
                let bad = h.submit(doomed(8, plane));
                h.advance_to(Duration::from_secs(30));
                assert!(
                    h.outcome(bad).is_err(),
                    "{name}: {first:?} then {second:?}: {:?}",
                    h.outcome(bad)
                );
                assert!(
                    !matches!(h.outcome(bad), Err(RequestError::TimedOut { .. })),
                    "{name}: {first:?} then {second:?}: ran out its deadline instead: {:?}",
                    h.outcome(bad)
                );
                assert!(
                    h.writes_of(8) <= 2,
                    "{name}: {first:?} then {second:?}: written {} times",
                    h.writes_of(8)
                );
                let sent = h.submit(send_with_id(0, 99));
                h.advance_by(Duration::from_secs(3));
                assert!(h.outcome(sent).is_ok(), "{name}: {:?}", h.outcome(sent));
            }
        }
    }
}

// 3. Evictions after a 57 replay ---------------------------------------------------------------

/// A send answered 57 (outcome unknown: the first write may still commit) whose replay on
/// the same link is then evicted with a reason that blames it: it ends in that instant and
/// is not written a third time, on any session.
#[test]
fn a_blamed_eviction_of_a_57_replay_ends_the_send_and_it_is_not_written_again() {
    let mut h = Harness::new(|config| config.request_timeout = Duration::from_secs(10));
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.ids.contains(&500) {
            Act::Hold
        } else {
            Act::Answer
        }
    });
    let send = h.submit(send_with_id(0, 500));
    h.release(Act::Status(57));
    // The replay comes after the replay interval, on the same link.
    h.advance_by(Duration::from_millis(300));
    assert_eq!(h.held.len(), 1, "the 57 was replayed");
    let asked = h.now;
    h.release(Act::Evict(EvictionReason::InvalidRequestBody));
    let outcome = h.outcome(send).clone();
    assert!(
        matches!(
            outcome,
            Err(RequestError::Evicted { .. } | RequestError::OutcomeUnknown { .. })
        ),
        "{outcome:?}"
    );
    assert_eq!(h.completed_at(send), asked);
    h.advance_to(Duration::from_secs(30));
    assert_eq!(h.writes_of_message(500).len(), 2);
}

/// A send answered 57 (the first write may still commit), whose replay is evicted for the
/// session (`NoSession`): the server's dedup of that write went with the session, so writing
/// it again on a new session may store it twice. The send must end without a write on
/// another session (outcome unknown), as a write lost in flight does.
#[test]
fn a_session_eviction_of_a_57_replay_does_not_write_the_send_on_a_new_session() {
    let mut h = Harness::new(|config| config.request_timeout = Duration::from_secs(10));
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.ids.contains(&600) {
            Act::Hold
        } else {
            Act::Answer
        }
    });
    let send = h.submit(send_with_id(0, 600));
    h.release(Act::Status(57));
    h.advance_by(Duration::from_millis(300));
    assert_eq!(h.held.len(), 1, "the 57 was replayed");
    h.release(Act::Evict(EvictionReason::NoSession));
    h.advance_by(Duration::from_secs(2));
    // Whatever is held now is a third write: answer it as the node would (stored).
    while !h.held.is_empty() {
        h.release(Act::Answer);
    }
    h.advance_to(Duration::from_secs(30));
    let writes = h.writes_of_message(600);
    let links: Vec<LinkId> = writes.iter().map(|w| w.link).collect();
    assert_eq!(
        writes.len(),
        2,
        "a send of unknown outcome was written on a new session: {links:?}; outcome {:?}",
        h.outcome(send)
    );
    assert!(
        matches!(h.outcome(send), Err(RequestError::OutcomeUnknown { .. })),
        "{:?}",
        h.outcome(send)
    );
}

/// The same for a metadata write answered 57 in its result section (in flight on the
/// leader), whose replay is evicted for the session.
#[test]
fn a_session_eviction_of_a_metadata_write_57_replay_does_not_write_it_on_a_new_session() {
    let mut h = Harness::new(|config| config.request_timeout = Duration::from_secs(10));
    let delete = code::DELETE_STREAM;
    h.cluster.not_committed = 1;
    h.set_script(move |w, nth| {
        if w.code == delete && nth == 1 {
            Act::Evict(EvictionReason::NoSession)
        } else {
            Act::Answer
        }
    });
    let call = iggy_route_core::client::Call::delete_stream(1u32).unwrap();
    let id = h.submit(call.request);
    h.advance_to(Duration::from_secs(30));
    let writes = h.writes_of_code(delete);
    assert_eq!(
        writes,
        2,
        "a metadata write of unknown outcome was written on a new session; outcome {:?}",
        h.outcome(id)
    );
    assert!(
        matches!(h.outcome(id), Err(RequestError::OutcomeUnknown { .. })),
        "{:?}",
        h.outcome(id)
    );
}

// 4. Merged send frames --------------------------------------------------------------------------

/// Sends merged into one frame behind a write in flight, the merged frame evicted with a
/// reason that blames it: every rider completes exactly once, and none that ended evicted
/// is written again; the partition goes on.
#[test]
fn a_merged_send_frame_evicted_for_the_request_ends_each_rider_once_and_none_is_rewritten() {
    let mut h = Harness::new(|_| {});
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.code == code::SEND_MESSAGES {
            Act::Hold
        } else {
            Act::Answer
        }
    });
    let head = h.submit(send_with_id(0, 100));
    let riders: Vec<(RequestId, u128)> = (101..109u128)
        .map(|id| (h.submit(send_with_id(0, id)), id))
        .collect();
    h.release(Act::Answer);
    assert!(h.outcome(head).is_ok());
    assert_eq!(h.held.len(), 1, "the riders go in one frame");
    assert!(h.written.last().unwrap().ids.len() > 1, "merged");
    h.release(Act::Evict(EvictionReason::InvalidRequestBodySize));
    // From now on sends are answered.
    h.set_script(|_, _| Act::Answer);
    while !h.held.is_empty() {
        h.release(Act::Answer);
    }
    h.advance_to(Duration::from_secs(40));
    for (id, message) in &riders {
        let outcome = h.outcome(*id).clone();
        let writes = h.writes_of_message(*message).len();
        if is_evicted(&outcome) {
            assert_eq!(writes, 1, "rider {message} evicted yet written again");
        } else {
            assert!(writes <= 2, "rider {message}: {writes} writes, {outcome:?}");
        }
    }
    let after = h.submit(send_with_id(0, 200));
    h.advance_by(Duration::from_secs(2));
    assert!(h.outcome(after).is_ok(), "{:?}", h.outcome(after));
}

/// A merged frame evicted for the session twice: each rider completes once and is written
/// at most twice.
#[test]
fn a_merged_send_frame_evicted_for_the_session_twice_ends_each_rider_after_two_writes() {
    let mut h = Harness::new(|_| {});
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.code == code::SEND_MESSAGES {
            Act::Hold
        } else {
            Act::Answer
        }
    });
    let head = h.submit(send_with_id(0, 100));
    let riders: Vec<(RequestId, u128)> = (101..105u128)
        .map(|id| (h.submit(send_with_id(0, id)), id))
        .collect();
    h.release(Act::Answer);
    assert!(h.outcome(head).is_ok());
    h.release(Act::Evict(EvictionReason::NoSession));
    h.advance_by(Duration::from_secs(2));
    // Evict every send frame written from now on too.
    h.set_script(|w, _| {
        if w.code == code::SEND_MESSAGES {
            Act::Evict(EvictionReason::NoSession)
        } else {
            Act::Answer
        }
    });
    while !h.held.is_empty() {
        h.release(Act::Evict(EvictionReason::NoSession));
    }
    h.advance_to(Duration::from_secs(40));
    for (id, message) in &riders {
        let outcome = h.outcome(*id).clone();
        assert!(outcome.is_err(), "{outcome:?}");
        let writes = h.writes_of_message(*message).len();
        assert!(writes <= 2, "rider {message}: {writes} writes, {outcome:?}");
    }
}

// 5. Storms and the sign-in budget ----------------------------------------------------------------

/// Sixty raw commands on every plane, a third evicted for the session, the rest blamed, with
/// sends to both partitions among them, all at once: each completes exactly once, a blamed
/// one is written at most once and a session-level one at most twice, every send succeeds,
/// and no node sees more than 2 x (links per node + 1) new links in any one second.
#[test]
fn a_storm_of_mixed_evictions_on_every_plane_keeps_sign_ins_within_budget() {
    let links_per_node = 2;
    let mut h = Harness::new(|config| {
        config.data_links_per_node = links_per_node;
        config.request_timeout = Duration::from_secs(60);
        config.max_pending_requests = 10_000;
    });
    let warm = h.submit(send_with_id(0, 1));
    let warm1 = h.submit(send_with_id(1, 2));
    assert!(h.outcome(warm).is_ok() && h.outcome(warm1).is_ok());
    h.set_script(|w, _| match tag_of(w) {
        Some(tag) if tag % 3 == 0 => Act::Evict(EvictionReason::NoSession),
        Some(tag) => Act::Evict(BLAMED[(tag % 6) as usize]),
        None => Act::Answer,
    });
    let planes = planes();
    let mut doomed_ids = Vec::new();
    let mut sends = Vec::new();
    for tag in 0..60u64 {
        let plane = planes[(tag % planes.len() as u64) as usize].1.clone();
        doomed_ids.push((tag, h.submit_quiet(doomed(tag, plane))));
        if tag % 2 == 0 {
            let message = 1_000 + u128::from(tag);
            sends.push((
                message,
                h.submit_quiet(send_with_id((tag % 4 / 2) as u32, message)),
            ));
        }
    }
    h.run();
    h.advance_to(Duration::from_secs(90));
    for (tag, id) in &doomed_ids {
        let outcome = h.outcome(*id);
        assert!(is_evicted(outcome), "tag {tag}: {outcome:?}");
        let most = if tag % 3 == 0 { 2 } else { 1 };
        assert!(
            h.writes_of(*tag) <= most,
            "tag {tag}: {} writes",
            h.writes_of(*tag)
        );
        assert!(h.writes_of(*tag) >= 1, "tag {tag} evicted without a write");
    }
    for (message, id) in &sends {
        assert!(
            h.outcome(*id).is_ok(),
            "send {message}: {:?}",
            h.outcome(*id)
        );
        assert_eq!(h.writes_of_message(*message).len(), 1);
    }
    let budget = 2 * (links_per_node + 1);
    for node in 0..3 {
        let most = h.most_connects_in_a_second(node);
        assert!(
            most <= budget,
            "node {node}: {most} links opened in one second"
        );
        let logins = h.most_logins_in_a_second(node);
        assert!(
            logins <= budget,
            "node {node}: {logins} sign-ins in one second"
        );
    }
    assert_eq!(h.router.pending_count(), 0);
}

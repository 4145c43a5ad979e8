//! Adversarial tests of evictions through the router's outer face (sans IO), second part:
//! the sign-in budget under storms and short deadlines, withdrawals, shutdown mid-storm,
//! login codes, and odd arrivals (split, duplicated or unsolicited eviction frames).
//! The harness is shared with `router_eviction_adversary.rs`.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
// A test needs one real instant as the origin of its timeline; every other instant is
// derived from it, and the code under test never reads the clock.
#![allow(clippy::disallowed_methods)]
// Each of the two files uses only part of the shared harness.
#![allow(dead_code, unused_imports)]

include!("eviction_support/harness.rs");

/// Deadlines shorter than the sign-in budget's wait: forty blamed evictions on the session
/// need forty sessions, far more than a second's budget. Every request ends by its own
/// deadline (evicted, or timed out), exactly once, and none is written after its deadline.
#[test]
fn deadlines_shorter_than_the_sign_in_wait_end_on_time_and_nothing_is_written_late() {
    let timeout = Duration::from_millis(700);
    let mut h = Harness::new(|config| {
        config.request_timeout = timeout;
        config.data_links_per_node = 1;
        config.max_pending_requests = 10_000;
    });
    h.set_script(|w, _| {
        if w.code == DOOMED {
            Act::Evict(EvictionReason::InvalidRequestBody)
        } else {
            Act::Answer
        }
    });
    let mut all = Vec::new();
    for round in 0..4u64 {
        for i in 0..10u64 {
            let tag = round * 100 + i;
            let plane = if i % 2 == 0 {
                Plane::Session
            } else {
                partition_plane(0, true)
            };
            let submitted = h.now;
            all.push((tag, h.submit(doomed(tag, plane)), submitted));
        }
        h.advance_by(Duration::from_millis(250));
    }
    h.advance_by(Duration::from_secs(10));
    let mut timed_out = 0;
    for (tag, id, submitted) in &all {
        let outcome = h.outcome(*id).clone();
        let done = h.completed_at(*id);
        assert!(
            done <= *submitted + timeout,
            "tag {tag} ended {:?} after submit, deadline {timeout:?}: {outcome:?}",
            done - *submitted
        );
        match outcome {
            Err(RequestError::Evicted { .. }) => assert_eq!(h.writes_of(*tag), 1, "tag {tag}"),
            Err(RequestError::TimedOut { .. }) => {
                timed_out += 1;
                assert!(h.writes_of(*tag) <= 1, "tag {tag}");
            }
            other => panic!("tag {tag}: {other:?}"),
        }
        for w in h.written.iter().filter(|w| tag_of(w) == Some(*tag)) {
            assert!(
                w.at <= *submitted + timeout,
                "tag {tag} written after its deadline"
            );
        }
    }
    assert!(timed_out < all.len(), "nothing was evicted at all");
    let budget = 2 * (1 + 1);
    for node in 0..3 {
        assert!(h.most_connects_in_a_second(node) <= budget, "node {node}");
    }
}

/// A node that drops every data link right after signing it in: sends to its partition keep
/// asking for links, and the node still sees at most 2 x (links + 1) in any one second.
#[test]
fn a_node_that_drops_every_data_link_after_its_sign_in_is_not_stormed() {
    let links_per_node = 3;
    let mut h = Harness::new(|config| {
        config.data_links_per_node = links_per_node;
        config.request_timeout = Duration::from_secs(5);
        config.max_pending_requests = 10_000;
    });
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.node == 1 && w.code == code::LOGIN_REGISTER {
            Act::AnswerThenClose
        } else {
            Act::Answer
        }
    });
    for round in 0..20u128 {
        for i in 0..5u128 {
            h.submit_quiet(send_with_id(0, 10_000 + round * 10 + i));
        }
        h.run();
        h.advance_by(Duration::from_millis(250));
    }
    h.advance_by(Duration::from_secs(10));
    let budget = 2 * (links_per_node + 1);
    let most = h.most_connects_in_a_second(1);
    assert!(most <= budget, "node 1: {most} links opened in one second");
    assert_eq!(h.router.pending_count(), 0);
}

// 6. Withdrawal -----------------------------------------------------------------------------------

/// Requests waiting for a session the budget holds back are withdrawn: they complete
/// `Withdrawn` at once, exactly once, and are never written. Withdrawing one that is over
/// (evicted), or twice, does nothing.
#[test]
fn withdrawn_requests_waiting_for_the_sign_in_budget_are_never_written() {
    let mut h = Harness::new(|config| {
        config.request_timeout = Duration::from_secs(30);
        config.max_pending_requests = 10_000;
    });
    h.set_script(|w, _| {
        if w.code == DOOMED {
            Act::Evict(EvictionReason::InvalidRequestBody)
        } else {
            Act::Answer
        }
    });
    // Twenty requests that each end the session, all on the session's lane.
    let doomed_ids: Vec<(u64, RequestId)> = (0..20u64)
        .map(|tag| (tag, h.submit_quiet(doomed(tag, Plane::Session))))
        .collect();
    h.run();
    h.advance_by(Duration::from_millis(100));
    let mut withdrawn = Vec::new();
    let mut kept = Vec::new();
    for (tag, id) in &doomed_ids {
        if h.completions(*id) > 0 {
            assert!(!h.router.withdraw(h.now, *id), "tag {tag} is over");
            continue;
        }
        if h.writes_of(*tag) == 0 && tag % 2 == 0 {
            assert!(h.router.withdraw(h.now, *id), "tag {tag} was never written");
            assert!(!h.router.withdraw(h.now, *id), "withdrawn twice");
            withdrawn.push((*tag, *id));
        } else {
            kept.push((*tag, *id));
        }
    }
    h.run();
    assert!(
        !withdrawn.is_empty(),
        "nothing was left waiting to withdraw"
    );
    for (_, id) in &withdrawn {
        assert!(
            matches!(h.outcome(*id), Err(RequestError::Withdrawn)),
            "{:?}",
            h.outcome(*id)
        );
    }
    h.advance_to(Duration::from_secs(40));
    for (tag, id) in &withdrawn {
        assert_eq!(h.writes_of(*tag), 0, "withdrawn tag {tag} was written");
        assert_eq!(h.completions(*id), 1);
    }
    for (tag, id) in &kept {
        assert!(
            is_evicted(h.outcome(*id)),
            "tag {tag}: {:?}",
            h.outcome(*id)
        );
    }
    for (_, id) in &doomed_ids {
        assert!(!h.router.withdraw(h.now, *id));
    }
    h.run();
    for (_, id) in &doomed_ids {
        assert_eq!(h.completions(*id), 1);
    }
}

/// A request evicted for the session and waiting to be written again has been on the wire:
/// whatever `withdraw` says about it, it completes exactly once, and if it was withdrawn it
/// is never written again.
#[test]
fn withdrawing_a_request_between_its_session_eviction_and_its_rewrite_completes_it_once() {
    for (name, plane) in planes() {
        let mut h = Harness::new(|config| {
            config.request_timeout = Duration::from_secs(30);
            config.max_pending_requests = 10_000;
        });
        h.set_script(|w, _| match tag_of(w) {
            Some(0) => Act::Evict(EvictionReason::InvalidRequestBody),
            Some(_) => Act::Evict(EvictionReason::NoSession),
            None => Act::Answer,
        });
        // Burn the budget, so the rewrite waits.
        let burners: Vec<RequestId> = (100..112u64)
            .map(|tag| h.submit_quiet(doomed(tag, plane.clone())))
            .collect();
        let victim = h.submit_quiet(doomed(1, plane.clone()));
        h.run();
        let mut withdrew = None;
        for _ in 0..200 {
            if h.completions(victim) > 0 {
                break;
            }
            if h.writes_of(1) == 1 {
                withdrew = Some(h.router.withdraw(h.now, victim));
                h.run();
                break;
            }
            h.advance_by(Duration::from_millis(20));
        }
        let Some(withdrew) = withdrew else {
            continue;
        };
        let writes_then = h.writes_of(1);
        h.advance_to(Duration::from_secs(60));
        assert_eq!(h.completions(victim), 1, "{name}");
        if withdrew {
            assert!(
                matches!(h.outcome(victim), Err(RequestError::Withdrawn)),
                "{name}: {:?}",
                h.outcome(victim)
            );
            assert_eq!(
                h.writes_of(1),
                writes_then,
                "{name}: withdrawn, then written"
            );
        } else {
            assert!(
                !matches!(h.outcome(victim), Err(RequestError::Withdrawn)),
                "{name}: withdraw said no, yet {:?}",
                h.outcome(victim)
            );
        }
        for id in burners {
            assert_eq!(h.completions(id), 1, "{name}");
        }
    }
}

// 7. Shutdown ---------------------------------------------------------------------------------------

/// Shutdown in the middle of a storm of evictions: every request completes exactly once,
/// nothing is dialled or written afterwards, and new requests are refused.
#[test]
fn shutdown_during_an_eviction_storm_completes_everything_once_and_writes_nothing_after() {
    let mut h = Harness::new(|config| {
        config.request_timeout = Duration::from_secs(30);
        config.max_pending_requests = 10_000;
    });
    h.set_script(|w, _| match tag_of(w) {
        Some(tag) if tag % 2 == 0 => Act::Evict(EvictionReason::NoSession),
        Some(_) => Act::Evict(EvictionReason::InvalidRequestOperation),
        None => Act::Answer,
    });
    let planes = planes();
    let mut ids = Vec::new();
    for tag in 0..50u64 {
        let plane = planes[(tag % planes.len() as u64) as usize].1.clone();
        ids.push(h.submit_quiet(doomed(tag, plane)));
        ids.push(h.submit_quiet(send_with_id((tag % 2) as u32, 5_000 + u128::from(tag))));
    }
    h.run();
    h.advance_by(Duration::from_millis(1_500));
    h.router.shutdown(h.now);
    h.shut = true;
    h.run();
    h.advance_by(Duration::from_secs(40));
    for id in &ids {
        assert_eq!(h.completions(*id), 1, "{id}");
    }
    assert!(h.after_shutdown.is_empty(), "{:?}", h.after_shutdown);
    assert!(matches!(
        h.router.submit(h.now, ping()),
        Err(SubmitError::Closed)
    ));
    assert_eq!(h.router.pending_count(), 0);
}

// 8. Login codes as raw commands ---------------------------------------------------------------------

/// A login code as a raw command is refused at submit on every plane, with any body, in the
/// middle of an eviction storm, and nothing is written for it.
#[test]
fn login_codes_are_refused_at_submit_on_every_plane_even_during_a_storm() {
    let mut h = Harness::new(|config| config.max_pending_requests = 10_000);
    h.set_script(|w, _| {
        if w.code == DOOMED {
            Act::Evict(EvictionReason::NoSession)
        } else {
            Act::Answer
        }
    });
    for tag in 0..10 {
        h.submit_quiet(doomed(tag, Plane::Session));
    }
    h.run();
    let pending = h.router.pending_count();
    for login in [38u32, 40, 44, 45] {
        for (name, plane) in planes() {
            for body in [Bytes::new(), Bytes::from_static(&[0; 64])] {
                let request = Request::Command(CommandRequest {
                    code: login,
                    body,
                    plane: plane.clone(),
                });
                assert_eq!(
                    h.router.submit(h.now, request).unwrap_err(),
                    SubmitError::SessionCommand { code: login },
                    "{login} on {name}"
                );
            }
        }
    }
    assert_eq!(h.router.pending_count(), pending);
    h.advance_to(Duration::from_secs(40));
    for login in [38u32, 44, 45] {
        assert_eq!(h.writes_of_code(login), 0, "code {login} was written");
    }
    // Logins are only ever written as sign-ins (register operation), never as a command.
    assert!(
        h.written
            .iter()
            .all(|w| w.code != code::LOGIN_REGISTER || w.register)
    );
}

// 9. Odd arrivals ---------------------------------------------------------------------------------

/// The route lookup (103) a send waits for is evicted with a reason that blames it (an
/// internal request, not the caller's): the send is not ended as evicted for it, completes
/// once, and succeeds on the next session.
#[test]
fn a_blamed_eviction_of_an_internal_lookup_does_not_end_the_send_waiting_for_it() {
    let mut h = Harness::new(|config| config.request_timeout = Duration::from_secs(10));
    let mut evicted = false;
    h.set_script(move |w, _| {
        if w.code == code::GET_POLL_ROUTING && !evicted {
            evicted = true;
            Act::Evict(EvictionReason::InvalidRequestBody)
        } else {
            Act::Answer
        }
    });
    let send = h.submit(send_with_id(1, 42));
    h.advance_to(Duration::from_secs(20));
    assert!(h.outcome(send).is_ok(), "{:?}", h.outcome(send));
    assert_eq!(h.writes_of_message(42).len(), 1);
}

/// An eviction that arrives after the request's deadline ended it (the frame held on the
/// wire past the deadline): the request completed once, as timed out, and is not completed
/// again; the client goes on.
#[test]
fn an_eviction_after_the_deadline_does_not_complete_the_request_twice() {
    for (name, plane) in planes() {
        let mut h = Harness::new(|config| {
            config.request_timeout = Duration::from_secs(1);
            config.attempt_timeout = Duration::from_secs(5);
        });
        h.set_script(|w, _| {
            if w.code == DOOMED {
                Act::Hold
            } else {
                Act::Answer
            }
        });
        let bad = h.submit(doomed(1, plane));
        assert_eq!(h.held.len(), 1, "{name}");
        h.advance_by(Duration::from_millis(1_500));
        assert!(
            matches!(h.outcome(bad), Err(RequestError::TimedOut { .. })),
            "{name}: {:?}",
            h.outcome(bad)
        );
        // The link may have been closed for the late exchange; if not, the late eviction
        // arrives on it.
        let late = !h.held.is_empty() && h.links.contains_key(&h.held[0].0);
        assert!(late, "{name}: the link of the late exchange is gone");
        h.release(Act::Evict(EvictionReason::InvalidRequestBody));
        h.advance_by(Duration::from_secs(5));
        assert_eq!(h.completions(bad), 1, "{name}");
        h.set_script(|_, _| Act::Answer);
        let sent = h.submit(send_with_id(0, 9));
        let pinged = h.submit(ping());
        h.advance_by(Duration::from_secs(2));
        assert!(h.outcome(sent).is_ok(), "{name}: {:?}", h.outcome(sent));
        assert!(h.outcome(pinged).is_ok(), "{name}: {:?}", h.outcome(pinged));
    }
}

/// An eviction delivered one byte at a time ends the request as a whole one does.
#[test]
fn an_eviction_split_byte_by_byte_ends_the_request_as_a_whole_one_does() {
    for (name, plane) in planes() {
        let mut h = Harness::new(|_| {});
        h.set_script(|w, _| {
            if w.code == DOOMED {
                Act::Hold
            } else {
                Act::Answer
            }
        });
        let bad = h.submit(doomed(2, plane));
        let (link, frame) = h.held.pop_front().unwrap();
        let Ok(Frame::Request { header, .. }) = decode_one(&frame) else {
            unreachable!()
        };
        let eviction = eviction_frame(header.client, EvictionReason::InvalidRequestBody);
        for byte in eviction.iter() {
            h.router
                .handle_read(h.now, link, std::slice::from_ref(byte));
            h.run();
        }
        assert_eq!(
            h.outcome(bad).as_ref().unwrap_err(),
            &RequestError::Evicted {
                reason: EvictionReason::InvalidRequestBody,
                code: ErrorCode::InvalidCommand
            },
            "{name}"
        );
        h.set_script(|_, _| Act::Answer);
        h.advance_to(Duration::from_secs(20));
        assert_eq!(h.writes_of(2), 1, "{name}");
    }
}

/// An eviction followed, in the same read, by a reply to the same request (a node that
/// both answers and evicts): the request completes exactly once, and the client goes on.
#[test]
fn an_eviction_with_a_reply_to_the_same_request_behind_it_completes_once() {
    for (name, plane) in planes() {
        let mut h = Harness::new(|_| {});
        h.set_script(|w, _| {
            if w.code == DOOMED {
                Act::Hold
            } else {
                Act::Answer
            }
        });
        let bad = h.submit(doomed(3, plane));
        let (link, frame) = h.held.pop_front().unwrap();
        let Ok(Frame::Request { header, .. }) = decode_one(&frame) else {
            unreachable!()
        };
        let mut both =
            BytesMut::from(&eviction_frame(header.client, EvictionReason::NoSession)[..]);
        ReplyHeader::for_request(&header, 0, 0, 0).encode(&mut both);
        h.router.handle_read(h.now, link, &both);
        h.run();
        h.set_script(|w, _| {
            if w.code == DOOMED {
                Act::Evict(EvictionReason::InvalidRequestBody)
            } else {
                Act::Answer
            }
        });
        h.advance_to(Duration::from_secs(30));
        assert_eq!(h.completions(bad), 1, "{name}: {:?}", h.outcome(bad));
        assert!(h.writes_of(3) <= 2, "{name}");
        let sent = h.submit(send_with_id(0, 9));
        h.advance_by(Duration::from_secs(2));
        assert!(h.outcome(sent).is_ok(), "{name}: {:?}", h.outcome(sent));
    }
}

/// An eviction on an idle coordinator (nothing in flight): no request pays for it, and the
/// next ones succeed on a new session.
#[test]
fn an_unsolicited_eviction_on_an_idle_link_costs_no_request() {
    let mut h = Harness::new(|_| {});
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    let links: Vec<LinkId> = h.links.keys().copied().collect();
    for link in links {
        h.router
            .handle_read(h.now, link, &eviction_frame(0, EvictionReason::NoSession));
        h.run();
    }
    let pinged = h.submit(ping());
    let sent = h.submit(send_with_id(0, 2));
    let sent1 = h.submit(send_with_id(1, 3));
    h.advance_by(Duration::from_secs(3));
    for id in [pinged, sent, sent1] {
        assert!(h.outcome(id).is_ok(), "{:?}", h.outcome(id));
    }
}

/// A send queued behind a held write of its partition (so it would ride the next merged
/// frame) is withdrawn: it completes `Withdrawn`, its message is never written, and the
/// other riders still go.
#[test]
fn a_withdrawn_rider_never_rides_the_merged_frame() {
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
    let riders: Vec<RequestId> = (101..106u128)
        .map(|id| h.submit(send_with_id(0, id)))
        .collect();
    assert!(h.router.withdraw(h.now, riders[2]));
    h.run();
    assert!(matches!(h.outcome(riders[2]), Err(RequestError::Withdrawn)));
    h.set_script(|_, _| Act::Answer);
    h.release(Act::Answer);
    while !h.held.is_empty() {
        h.release(Act::Answer);
    }
    h.advance_by(Duration::from_secs(2));
    assert!(h.outcome(head).is_ok());
    assert!(
        h.writes_of_message(103).is_empty(),
        "the withdrawn rider was written"
    );
    for (i, id) in riders.iter().enumerate() {
        if i != 2 {
            assert!(h.outcome(*id).is_ok(), "{:?}", h.outcome(*id));
        }
    }
}

/// A node that evicts every sign-in for the session (`NoSession` in answer to the login):
/// whatever ends them, at most 2 x (links + 1) links are opened to it in any second.
#[test]
fn a_node_that_evicts_every_sign_in_is_dialled_within_budget() {
    let links_per_node = 2;
    let mut h = Harness::new(|config| {
        config.data_links_per_node = links_per_node;
        config.request_timeout = Duration::from_secs(3);
        config.max_pending_requests = 10_000;
    });
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.node == 1 && w.code == code::LOGIN_REGISTER {
            Act::Evict(EvictionReason::NoSession)
        } else {
            Act::Answer
        }
    });
    // End the data links' sessions so they must sign in again.
    let links: Vec<LinkId> = h
        .links
        .iter()
        .filter(|(_, node)| **node == 1)
        .map(|(link, _)| *link)
        .collect();
    for link in links {
        h.router
            .handle_read(h.now, link, &eviction_frame(0, EvictionReason::NoSession));
        h.run();
    }
    let mut ids = Vec::new();
    for round in 0..20u128 {
        for i in 0..4u128 {
            ids.push(h.submit_quiet(send_with_id(0, 10_000 + round * 10 + i)));
        }
        h.run();
        h.advance_by(Duration::from_millis(250));
    }
    h.advance_by(Duration::from_secs(10));
    let budget = 2 * (links_per_node + 1);
    let tried = h
        .written
        .iter()
        .filter(|w| w.node == 1 && w.code == code::LOGIN_REGISTER)
        .count();
    assert!(tried > budget, "the node was not pressed: {tried} sign-ins");
    let most = h.most_connects_in_a_second(1);
    assert!(most <= budget, "node 1: {most} links opened in one second");
    let logins = h.most_logins_in_a_second(1);
    assert!(logins <= budget, "node 1: {logins} sign-ins in one second");
    for id in ids {
        assert_eq!(h.completions(id), 1);
    }
}

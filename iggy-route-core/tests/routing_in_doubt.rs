//! A request that ends at its deadline says whether it may have taken effect
//! (`RequestError::TimedOut::in_doubt`): a caller may send again one that did not, with no
//! risk of a duplicate, and must not be told "it did not" of one that may have.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]

mod support;

use std::time::{Duration, Instant};

use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::routing::{Attempt, Decision, Routing, Target};
use iggy_route_core::{DeliveryGuarantee, NodeId, RequestError, RequestId};
use support::*;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the routing layer's timers up to `deadline` (nothing answers what they ask) and
/// returns how `id` ended there.
fn ended_at_deadline(routing: &mut Routing, id: RequestId, deadline: Instant) -> RequestError {
    loop {
        let now = routing.poll_timeout().expect("a deadline is pending");
        assert!(now <= deadline, "bounded by the request's deadline");
        routing.handle_timeout(now);
        while let Some(decision) = routing.poll_decision() {
            if let Decision::Completed { request, outcome } = decision
                && request == id
            {
                assert_eq!(now, deadline, "at its deadline");
                return outcome.unwrap_err();
            }
        }
    }
}

fn in_doubt(error: &RequestError) -> bool {
    match error {
        RequestError::TimedOut { in_doubt, .. } => {
            assert_eq!(
                *in_doubt,
                error.in_doubt(),
                "the field and the method agree"
            );
            *in_doubt
        }
        other => panic!("expected TimedOut, got {other:?}"),
    }
}

#[test]
fn a_send_whose_topic_was_never_read_ends_not_in_doubt() {
    let t0 = origin();
    let mut routing = Routing::new(config(), 7, t0);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    let error = ended_at_deadline(&mut routing, id, t0 + TIMEOUT);
    assert!(!in_doubt(&error), "{error}");
}

#[test]
fn a_send_in_flight_at_its_deadline_ends_in_doubt() {
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
    let error = ended_at_deadline(&mut routing, id, t0 + TIMEOUT);
    assert!(in_doubt(&error), "{error}");
}

#[test]
fn a_send_behind_one_in_flight_ends_not_in_doubt() {
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let first = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    let second = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {first} -> node0")]);
    let error = ended_at_deadline(&mut routing, second, t0 + TIMEOUT);
    assert!(!in_doubt(&error), "{error}");
}

#[test]
fn a_send_every_node_refused_ends_not_in_doubt() {
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
    // Refused wherever it goes, until its deadline; lookups are never answered.
    let deadline = t0 + TIMEOUT;
    routing.handle_result(t0, id, Target::Node(NodeId(0)), Attempt::Refused);
    let error = loop {
        let now = routing.poll_timeout().unwrap();
        assert!(now <= deadline, "bounded by the request's deadline");
        routing.handle_timeout(now);
        let mut ended = None;
        while let Some(decision) = routing.poll_decision() {
            match decision {
                Decision::Write {
                    request,
                    target: Target::Node(node),
                    ..
                } => routing.handle_result(now, request, Target::Node(node), Attempt::Refused),
                Decision::Completed { request, outcome } if request == id => {
                    ended = Some(outcome.unwrap_err());
                }
                _ => {}
            }
        }
        if let Some(error) = ended {
            break error;
        }
    };
    assert!(!in_doubt(&error), "{error}");
}

#[test]
fn a_send_written_again_after_a_lost_link_stays_in_doubt_while_it_waits() {
    let t0 = origin();
    let mut settings = config();
    settings.delivery = DeliveryGuarantee::AtLeastOnce;
    let mut routing = warmed_with(settings, t0, 1, &[(0, 0)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
    // Lost in flight (it may be stored), written again, and this time refused: it then
    // waits in its lane, not on the wire, yet its first copy may be in the log.
    routing.handle_result(t0, id, Target::Node(NodeId(0)), Attempt::Unknown);
    assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
    routing.handle_result(t0, id, Target::Node(NodeId(0)), Attempt::Refused);
    drain(&mut routing);
    let error = ended_at_deadline(&mut routing, id, t0 + TIMEOUT);
    assert!(in_doubt(&error), "{error}");
}

#[test]
fn a_plain_poll_in_flight_is_not_in_doubt_and_one_that_commits_is() {
    for (auto_commit, doubt) in [(false, false), (true, true)] {
        let t0 = origin();
        let mut routing = warmed(t0, 1, &[(0, 0)]);
        let id = routing.admit(t0, poll(Some(0), auto_commit)).unwrap();
        let written = drain(&mut routing);
        assert_eq!(written.len(), 1, "{written:?}");
        assert!(
            written[0].starts_with(&format!("write {id}")),
            "{written:?}"
        );
        let error = ended_at_deadline(&mut routing, id, t0 + TIMEOUT);
        assert_eq!(
            in_doubt(&error),
            doubt,
            "auto_commit {auto_commit}: {error}"
        );
    }
}

/// At-least-once: a send lost in flight (it may be stored) is written again. However the
/// copy written again ends (refused for good, the sign-in refused, the router shut down),
/// the send may be stored: it ends `OutcomeUnknown`, never with an error that says "not
/// stored".
#[test]
fn a_send_lost_in_flight_then_failing_otherwise_ends_in_doubt() {
    use iggy_route_core::wire::ErrorCode;

    type End = fn(&mut Routing, Instant, RequestId);
    let ends: [(&str, End); 3] = [
        ("refused for good", |routing, now, id| {
            let unauthorized = RequestError::Server {
                code: ErrorCode::Unauthorized,
            };
            routing.handle_result(
                now,
                id,
                Target::Node(NodeId(0)),
                Attempt::Failed(unauthorized),
            );
        }),
        ("sign-in refused", |routing, now, _| {
            let code = ErrorCode::InvalidCredentials;
            routing.fail_all(now, RequestError::SignIn { code });
        }),
        ("shut down", |routing, now, _| routing.shutdown(now)),
    ];
    for (what, end) in ends {
        let t0 = origin();
        let mut settings = config();
        settings.delivery = DeliveryGuarantee::AtLeastOnce;
        let mut routing = warmed_with(settings, t0, 1, &[(0, 0)]);
        let id = routing
            .admit(t0, send(Partitioning::PartitionId(0)))
            .unwrap();
        assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
        routing.handle_result(t0, id, Target::Node(NodeId(0)), Attempt::Unknown);
        assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
        end(&mut routing, t0, id);
        let outcome = std::iter::from_fn(|| routing.poll_decision()).find_map(|d| match d {
            Decision::Completed { request, outcome } if request == id => Some(outcome),
            _ => None,
        });
        match outcome {
            Some(Err(error @ RequestError::OutcomeUnknown { .. })) => {
                assert!(error.in_doubt(), "{what}");
            }
            other => panic!("{what}: {other:?}"),
        }
    }
}

/// A read has nothing to doubt: one lost in flight and then refused for good ends with
/// that refusal.
#[test]
fn a_poll_lost_in_flight_then_refused_ends_with_the_refusal() {
    use iggy_route_core::wire::ErrorCode;

    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let id = routing.admit(t0, poll(Some(0), false)).unwrap();
    let written = drain(&mut routing);
    let target = if written[0].ends_with("coordinator") {
        Target::Coordinator
    } else {
        Target::Node(NodeId(0))
    };
    routing.handle_result(t0, id, target, Attempt::Unknown);
    drain(&mut routing);
    let unauthorized = RequestError::Server {
        code: ErrorCode::Unauthorized,
    };
    routing.handle_result(t0, id, target, Attempt::Failed(unauthorized.clone()));
    let outcome = std::iter::from_fn(|| routing.poll_decision()).find_map(|d| match d {
        Decision::Completed { request, outcome } if request == id => Some(outcome),
        _ => None,
    });
    assert_eq!(outcome, Some(Err(unauthorized)));
}

/// A sign-in refused on one link fails every request, but a write on the wire on another
/// link may be admitted there: it ends in doubt, and the one queued behind it does not.
#[test]
fn a_refused_sign_in_leaves_a_write_on_the_wire_in_doubt() {
    use iggy_route_core::wire::ErrorCode;

    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let on_the_wire = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    let queued = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(
        drain(&mut routing),
        [format!("write {on_the_wire} -> node0")]
    );
    let code = ErrorCode::InvalidCredentials;
    routing.fail_all(t0, RequestError::SignIn { code });
    let mut ended = std::collections::BTreeMap::new();
    while let Some(decision) = routing.poll_decision() {
        if let Decision::Completed { request, outcome } = decision {
            ended.insert(request, outcome.unwrap_err());
        }
    }
    assert!(
        matches!(ended[&on_the_wire], RequestError::OutcomeUnknown { .. }),
        "{ended:?}"
    );
    assert_eq!(ended[&queued], RequestError::SignIn { code });
}

/// The server's codes that leave the outcome open are in doubt; its other codes are not.
#[test]
fn codes_that_leave_the_outcome_open_are_in_doubt() {
    use iggy_route_core::wire::ErrorCode;

    for (code, doubt) in [
        (ErrorCode::RequestAlreadyApplied, true),
        (ErrorCode::ShardCommunicationError, true),
        (ErrorCode::Unauthorized, false),
        (ErrorCode::TransientNotAccepted, false),
    ] {
        assert_eq!(RequestError::Server { code }.in_doubt(), doubt, "{code:?}");
    }
}

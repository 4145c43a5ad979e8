//! The drivers' table of callers and their `Admission`, on a router that never connects.

// A test reads the clock once, as the instant it starts from.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use iggy_route_core::client::{Admission, Call, Callers, ClientError};
use iggy_route_core::{Config, Credentials, RequestError, Router};

fn router(now: Instant) -> Router {
    let config = Config::new(
        vec!["127.0.0.1:1".to_owned()],
        Credentials::user("iggy", "iggy").unwrap(),
    );
    Router::new(config, 7, now)
}

#[test]
fn a_wait_beyond_what_an_instant_holds_is_still_tried_once() {
    let now = Instant::now();
    assert_eq!(
        Admission::wait_for_room(now, Duration::MAX),
        Admission::WaitForRoom { deadline: now }
    );
    assert_eq!(
        Admission::wait_for_room(now, Duration::from_secs(1)),
        Admission::WaitForRoom {
            deadline: now + Duration::from_secs(1)
        }
    );
}

#[test]
fn callers_hear_their_own_outcome_and_gone_ones_are_named_in_id_order() {
    let now = Instant::now();
    let mut router = router(now);
    let mut callers = Callers::default();
    for name in ["first", "second", "third"] {
        let request = Call::ping().request;
        callers
            .submit(&mut router, now, request, Admission::AtOnce, name)
            .unwrap();
    }
    let ids = callers.abandoned(|_| true);
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
    assert_eq!(callers.abandoned(|name| *name == "second"), vec![ids[1]]);

    let (caller, outcome) = callers
        .completed(ids[1], Err(RequestError::Shutdown))
        .unwrap();
    assert_eq!(caller, "second");
    assert!(matches!(
        outcome,
        Err(ClientError::Request(RequestError::Shutdown))
    ));
    assert!(
        callers
            .completed(ids[1], Err(RequestError::Shutdown))
            .is_none()
    );
    callers.clear();
    assert!(callers.is_empty());
}

#[test]
fn a_request_the_router_refuses_hands_its_caller_back_with_the_error() {
    let now = Instant::now();
    let mut router = router(now);
    let mut callers = Callers::default();
    router.shutdown(now);
    let refused = callers.submit(&mut router, now, Call::ping().request, Admission::AtOnce, 9);
    let (caller, error) = refused.unwrap_err();
    assert_eq!(caller, 9);
    assert!(matches!(error, ClientError::Submit(_)), "{error:?}");
    assert!(callers.is_empty());
}

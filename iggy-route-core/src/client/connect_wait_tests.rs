#![allow(clippy::unwrap_used)]

use std::time::Duration;

use super::ConnectWait;
use crate::client::ClientError;
use crate::config::{Config, Credentials, TlsError};
use crate::event::{Event, LinkRole};
use crate::ids::{LinkId, NodeId};
use crate::request::RequestError;
use crate::wire::ErrorCode;

fn wait(seeds: usize, max_nodes: usize) -> ConnectWait {
    let seeds = (0..seeds)
        .map(|i| format!("127.0.0.1:{}", 8090 + i))
        .collect();
    let config = Config::builder(seeds, Credentials::user("iggy", "iggy").unwrap())
        .connect_timeout(Duration::from_millis(400))
        .max_nodes(max_nodes)
        .build()
        .unwrap();
    ConnectWait::new(&config)
}

fn rejected() -> TlsError {
    TlsError::CertificateRejected {
        reason: "UnknownIssuer".to_owned(),
    }
}

fn signed_in() -> Event {
    Event::LinkUp {
        link: LinkId(1),
        node: NodeId(0),
        role: LinkRole::Coordinator,
    }
}

fn is_tls(outcome: Option<Result<(), ClientError>>, expected: &TlsError) -> bool {
    matches!(outcome, Some(Err(ClientError::Tls(error))) if error == *expected)
}

#[test]
fn the_budget_is_three_connect_timeouts_and_a_bare_give_up_is_a_timeout() {
    let mut wait = wait(1, 64);
    assert_eq!(wait.budget(), Duration::from_millis(1200));
    assert!(matches!(
        wait.give_up(),
        Some(ClientError::ConnectTimedOut { after }) if after == Duration::from_millis(1200)
    ));
    assert!(wait.is_settled());
    assert!(wait.give_up().is_none(), "given up once");
    assert!(
        wait.on_event(&signed_in()).is_none(),
        "nothing after the give-up"
    );
}

#[test]
fn one_seed_not_speaking_tls_ends_the_wait_at_once() {
    let mut wait = wait(1, 64);
    assert!(is_tls(
        wait.on_tls_failure(NodeId(0), TlsError::NotTls),
        &TlsError::NotTls
    ));
    assert!(wait.is_settled());
    assert!(wait.give_up().is_none());
}

#[test]
fn plaintext_nodes_end_the_wait_only_once_every_seed_answered_so() {
    let mut wait = wait(3, 64);
    assert!(wait.on_tls_failure(NodeId(0), TlsError::NotTls).is_none());
    // The same seed twice counts once, and a node learned from the roster is no seed.
    assert!(wait.on_tls_failure(NodeId(0), TlsError::NotTls).is_none());
    assert!(wait.on_tls_failure(NodeId(3), TlsError::NotTls).is_none());
    assert!(
        wait.on_tls_failure(NodeId(u32::MAX), TlsError::NotTls)
            .is_none()
    );
    assert!(wait.on_tls_failure(NodeId(2), TlsError::NotTls).is_none());
    assert!(!wait.is_settled(), "seed 1 may still carry the session");
    assert!(is_tls(
        wait.on_tls_failure(NodeId(1), TlsError::NotTls),
        &TlsError::NotTls
    ));
}

#[test]
fn seeds_beyond_max_nodes_are_never_dialled_so_never_awaited() {
    // Five seeds, but the router keeps two nodes: seeds 0 and 1 are all it dials.
    let mut wait = wait(5, 2);
    assert!(wait.on_tls_failure(NodeId(0), TlsError::NotTls).is_none());
    assert!(is_tls(
        wait.on_tls_failure(NodeId(1), TlsError::NotTls),
        &TlsError::NotTls
    ));
}

#[test]
fn a_fatal_failure_after_a_transient_one_ends_the_wait_with_the_fatal_one() {
    let mut wait = wait(2, 64);
    assert!(
        wait.on_tls_failure(NodeId(0), TlsError::HandshakeTimedOut)
            .is_none()
    );
    assert!(wait.on_tls_failure(NodeId(0), TlsError::NotTls).is_none());
    assert!(is_tls(
        wait.on_tls_failure(NodeId(1), rejected()),
        &rejected()
    ));
    assert!(wait.give_up().is_none(), "the fatal one was the outcome");
}

#[test]
fn a_fatal_failure_from_any_node_ends_the_wait_even_from_a_non_seed() {
    let mismatch = TlsError::NameMismatch {
        name: "node.example".to_owned(),
    };
    let mut wait = wait(1, 64);
    assert!(is_tls(
        wait.on_tls_failure(NodeId(9), mismatch.clone()),
        &mismatch
    ));
}

#[test]
fn the_latest_transient_failure_is_what_a_give_up_reports() {
    let mut wait = wait(2, 64);
    assert!(
        wait.on_tls_failure(NodeId(0), TlsError::HandshakeTimedOut)
            .is_none()
    );
    let other = TlsError::Other("received fatal alert: HandshakeFailure".to_owned());
    assert!(wait.on_tls_failure(NodeId(1), other.clone()).is_none());
    assert!(matches!(wait.give_up(), Some(ClientError::Tls(error)) if error == other));
}

#[test]
fn a_sign_in_settles_the_wait_and_later_failures_are_the_routers() {
    let mut wait = wait(2, 64);
    assert!(
        wait.on_tls_failure(NodeId(0), TlsError::HandshakeTimedOut)
            .is_none()
    );
    assert!(matches!(wait.on_event(&signed_in()), Some(Ok(()))));
    assert!(wait.is_settled());
    assert!(wait.on_tls_failure(NodeId(0), rejected()).is_none());
    assert!(wait.on_tls_failure(NodeId(0), TlsError::NotTls).is_none());
    assert!(wait.on_tls_failure(NodeId(1), TlsError::NotTls).is_none());
    assert!(wait.on_event(&signed_in()).is_none(), "settled once");
    assert!(wait.give_up().is_none());
}

#[test]
fn refused_credentials_settle_the_wait_and_passing_refusals_or_data_links_do_not() {
    let mut wait = wait(1, 64);
    let data_up = Event::LinkUp {
        link: LinkId(2),
        node: NodeId(0),
        role: LinkRole::Data,
    };
    let refused = |fatal| Event::SignInRefused {
        node: NodeId(0),
        code: ErrorCode::InvalidCredentials,
        fatal,
    };
    assert!(wait.on_event(&data_up).is_none());
    assert!(wait.on_event(&refused(false)).is_none());
    assert!(!wait.is_settled());
    assert!(matches!(
        wait.on_event(&refused(true)),
        Some(Err(ClientError::Request(RequestError::SignIn {
            code: ErrorCode::InvalidCredentials
        })))
    ));
}

#[test]
fn a_huge_connect_timeout_saturates_and_with_no_seed_only_the_budget_ends_the_wait() {
    let mut config = Config::new(
        vec!["127.0.0.1:8090".into()],
        Credentials::user("iggy", "iggy").unwrap(),
    );
    config.connect_timeout = Duration::MAX;
    assert_eq!(ConnectWait::new(&config).budget(), Duration::MAX);
    config.seeds.clear();
    let mut no_seeds = ConnectWait::new(&config);
    // With no seed, `NotTls` never counts as "every seed": only the budget ends it.
    assert!(
        no_seeds
            .on_tls_failure(NodeId(0), TlsError::NotTls)
            .is_none()
    );
    assert!(matches!(
        no_seeds.give_up(),
        Some(ClientError::Tls(TlsError::NotTls))
    ));
}

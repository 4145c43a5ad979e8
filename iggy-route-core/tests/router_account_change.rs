//! The credentials a router signs in with follow the signed-in user's own committed changes
//! of password and name, so a reconnect after such a change signs in. Before, every later
//! sign-in offered the credentials the router was built with and was refused for good.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
// A test needs one real instant as the origin of its timeline; every other instant is
// derived from it, and the code under test never reads the clock.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use iggy_route_core::client::Call;
use iggy_route_core::fuzzing::fake_cluster::{FakeCluster, addr};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::Message;
use iggy_route_core::wire::{
    ErrorCode, Frame, LoginRegisterRequest, Operation, ReplyHeader, decode_one,
    put_result_rejection,
};
use iggy_route_core::{CloseReason, Config, Credentials, Event, LinkId, Output, RequestId, Router};

/// A router over a fake 3-node cluster whose user 1 is "owner" (every sign-in reports
/// user id 1), recording what each sign-in offered.
struct Harness {
    router: Router,
    cluster: FakeCluster,
    now: Instant,
    links: BTreeMap<LinkId, usize>,
    sign_ins: Vec<(String, String)>,
    completed: BTreeMap<RequestId, bool>,
    /// Answer the next metadata write with this code in its result section.
    refuse_next_write: Option<ErrorCode>,
    /// Frames written while `hold` is set, answered by `release`.
    held: Vec<(LinkId, Bytes)>,
    hold: bool,
    /// Sign-ins each node refuses before it knows the new credentials (a lagging follower).
    lagging: BTreeMap<usize, usize>,
    closed: Vec<LinkId>,
    events: Vec<Event>,
}

impl Harness {
    fn new() -> Self {
        Self::with_primaries(vec![0])
    }

    /// Partition `p`'s primary is `primaries[p]`; node 0 is the metadata leader.
    fn with_primaries(primaries: Vec<usize>) -> Self {
        Self::with_leader(primaries, 0)
    }

    /// As `with_primaries`, with `leader` as the metadata leader.
    fn with_leader(primaries: Vec<usize>, leader: usize) -> Self {
        let mut cluster = FakeCluster::new(3, primaries);
        cluster.leader = leader;
        let seeds = (0..3).map(addr).collect();
        let credentials = Credentials::user("owner", "owner-pw").unwrap();
        let now = Instant::now();
        let mut harness = Self {
            router: Router::new(Config::new(seeds, credentials), 7, now),
            cluster,
            now,
            links: BTreeMap::new(),
            sign_ins: Vec::new(),
            completed: BTreeMap::new(),
            refuse_next_write: None,
            held: Vec::new(),
            hold: false,
            lagging: BTreeMap::new(),
            closed: Vec::new(),
            events: Vec::new(),
        };
        harness.step();
        harness
    }

    fn step(&mut self) {
        while let Some(output) = self.router.poll_output() {
            match output {
                Output::Connect { link, addr, .. } => {
                    let node = (0..3).find(|&n| addr == self::addr(n)).unwrap();
                    self.links.insert(link, node);
                    self.router.handle_connected(self.now, link);
                }
                Output::Transmit { link, bytes } if self.hold => self.held.push((link, bytes)),
                Output::Transmit { link, bytes } => {
                    let node = self.links[&link];
                    let reply = self.answer(node, &bytes);
                    self.router.handle_read(self.now, link, &reply);
                }
                Output::Close { link } => {
                    self.links.remove(&link);
                    self.closed.push(link);
                }
                Output::Event(event) => self.events.push(event),
                Output::Completed { id, outcome } => {
                    self.completed.insert(id, outcome.is_ok());
                }
            }
        }
    }

    fn answer(&mut self, node: usize, frame: &[u8]) -> Bytes {
        let Ok(Frame::Request { header, body }) = decode_one(frame) else {
            panic!("not a request frame");
        };
        if header.operation == Operation::Register {
            let login = LoginRegisterRequest::decode(&body).unwrap();
            self.sign_ins.push((
                login.username.as_str().to_owned(),
                login.password.expose().to_owned(),
            ));
            let lags = self.lagging.get(&node).is_some_and(|left| *left > 0);
            if lags {
                *self.lagging.entry(node).or_default() -= 1;
            }
            self.cluster.refuse_logins = login.password.expose() == "bad-pw" || lags;
        }
        if header.operation.is_metadata()
            && let Some(code) = self.refuse_next_write.take()
        {
            let mut out = BytesMut::new();
            put_result_rejection(code.as_u32(), &mut out);
            let mut frame = BytesMut::new();
            ReplyHeader::for_request(&header, 0, 0, out.len()).encode(&mut frame);
            frame.extend_from_slice(&out);
            return frame.freeze();
        }
        self.cluster.answer(node, frame).1
    }

    /// Answers every held frame, in the order written, and stops holding.
    fn release(&mut self) {
        self.hold = false;
        for (link, bytes) in std::mem::take(&mut self.held) {
            let node = self.links[&link];
            let reply = self.answer(node, &bytes);
            self.router.handle_read(self.now, link, &reply);
            self.step();
        }
    }

    /// Submits `call` and runs the router until it completes; whether it succeeded.
    fn run<T>(&mut self, call: Call<T>) -> bool {
        let id = self.router.submit(self.now, call.request).unwrap();
        self.step();
        let deadline = self.now + Duration::from_secs(30);
        while !self.completed.contains_key(&id) {
            assert!(self.now < deadline, "the call never completed");
            self.advance();
        }
        self.completed[&id]
    }

    fn advance(&mut self) {
        if let Some(at) = self.router.poll_timeout() {
            self.now = self.now.max(at);
        }
        self.router.handle_timeout(self.now);
        self.step();
    }

    /// Every link is lost (a network blip); the credentials the next sign-in offers.
    fn reconnect(&mut self) -> (String, String) {
        let before = self.sign_ins.len();
        for link in self.links.keys().copied().collect::<Vec<_>>() {
            self.router.handle_closed(self.now, link, CloseReason::Peer);
        }
        self.step();
        let deadline = self.now + Duration::from_secs(30);
        while self.sign_ins.len() == before {
            assert!(self.now < deadline, "no sign-in after the links were lost");
            self.advance();
        }
        self.sign_ins[before].clone()
    }
}

fn offered(name: &str, password: &str) -> (String, String) {
    (name.to_owned(), password.to_owned())
}

#[test]
fn a_committed_change_of_the_own_password_is_what_later_sign_ins_offer() {
    let mut h = Harness::new();
    assert!(h.run(Call::change_password("owner", "owner-pw", "owner-pw-2").unwrap()));
    assert_eq!(h.reconnect(), offered("owner", "owner-pw-2"));
    // Named by the numeric id the sign-in reported (1), a second change is followed too.
    assert!(h.run(Call::change_password(1u32, "owner-pw-2", "owner-pw-3").unwrap()));
    assert_eq!(h.reconnect(), offered("owner", "owner-pw-3"));
}

#[test]
fn a_committed_rename_of_the_own_user_is_what_later_sign_ins_offer() {
    let mut h = Harness::new();
    assert!(h.run(Call::update_user("owner", Some("renamed"), None).unwrap()));
    assert_eq!(h.reconnect(), offered("renamed", "owner-pw"));
    assert!(h.run(Call::update_user(1u32, Some("again"), None).unwrap()));
    assert_eq!(h.reconnect(), offered("again", "owner-pw"));
}

#[test]
fn changes_of_other_users_refused_changes_and_status_changes_leave_the_credentials() {
    let mut h = Harness::new();
    assert!(h.run(Call::change_password("someone", "their-pw", "new-pw").unwrap()));
    assert!(h.run(Call::change_password(2u32, "their-pw", "new-pw").unwrap()));
    assert!(h.run(Call::update_user("someone", Some("owner-2"), None).unwrap()));
    assert!(
        h.run(
            Call::update_user(
                "owner",
                None,
                Some(iggy_route_core::wire::UserStatus::Active)
            )
            .unwrap()
        )
    );
    h.refuse_next_write = Some(ErrorCode::InvalidCredentials);
    assert!(!h.run(Call::change_password("owner", "wrong-pw", "owner-pw-2").unwrap()));
    assert_eq!(h.reconnect(), offered("owner", "owner-pw"));
    let Credentials::UserPassword { username, password } = h.router.credentials() else {
        panic!("the credentials changed kind");
    };
    assert_eq!(
        (username.as_str(), password.expose()),
        ("owner", "owner-pw")
    );
}

fn one_message() -> Vec<Message> {
    vec![Message {
        payload: Bytes::from_static(b"m"),
        ..Message::default()
    }]
}

#[test]
fn a_login_as_another_user_retires_every_link_and_cuts_off_nothing_in_flight() {
    let mut h = Harness::new();
    let send = || Call::send("s", "t", Partitioning::PartitionId(0), one_message()).unwrap();
    assert!(h.run(send()));
    let before: Vec<LinkId> = h.links.keys().copied().collect();
    assert!(before.len() >= 2, "a session and a data link: {before:?}");

    // A send is on the wire when the client signs in as someone else.
    h.hold = true;
    let in_flight = h.router.submit(h.now, send().request).unwrap();
    h.step();
    assert_eq!(h.held.len(), 1, "the send was written");
    let signed_in_before = h.sign_ins.len();
    h.router
        .sign_in_as(h.now, Credentials::user("second", "second-pw").unwrap());
    h.step();
    let busy = h.held[0].0;
    assert!(
        !h.closed.contains(&busy),
        "the busy link waits for its answer"
    );
    assert!(
        before
            .iter()
            .filter(|l| **l != busy)
            .all(|l| h.closed.contains(l)),
        "every idle link closed at once: closed {:?} of {before:?}",
        h.closed
    );
    h.release();
    assert_eq!(
        h.completed.get(&in_flight),
        Some(&true),
        "the send in flight succeeded"
    );
    assert!(h.closed.contains(&busy), "closed once answered");

    // What comes next goes out signed in as the new user only.
    assert!(h.run(send()));
    assert!(h.run(Call::get_cluster_metadata()));
    let since = &h.sign_ins[signed_in_before..];
    assert!(!since.is_empty());
    assert!(
        since.iter().all(|s| *s == offered("second", "second-pw")),
        "{since:?}"
    );
    assert!(h.links.keys().all(|l| !before.contains(l)));
}

#[test]
fn refused_new_credentials_fail_what_waits_and_the_old_ones_work_again() {
    let mut h = Harness::new();
    assert!(h.run(Call::get_cluster_metadata()));
    h.router
        .sign_in_as(h.now, Credentials::user("owner", "bad-pw").unwrap());
    h.step();
    let id = h
        .router
        .submit(h.now, Call::get_cluster_metadata().request)
        .unwrap();
    h.step();
    let deadline = h.now + Duration::from_secs(30);
    while !h.completed.contains_key(&id) {
        assert!(h.now < deadline, "the read never completed");
        h.advance();
    }
    assert!(!h.completed[&id], "refused credentials fail the read");
    assert!(
        h.events
            .iter()
            .any(|e| matches!(e, Event::SignInRefused { fatal: true, .. }))
    );
    h.router
        .sign_in_as(h.now, Credentials::user("owner", "owner-pw").unwrap());
    h.step();
    assert!(h.run(Call::get_cluster_metadata()));
    assert_eq!(h.sign_ins.last(), Some(&offered("owner", "owner-pw")));
}

#[test]
fn a_follower_that_has_not_applied_the_change_yet_is_asked_again_the_leader_is_final() {
    // Partition 0's primary is node 1, a follower; node 0 leads and commits the change.
    let mut h = Harness::with_primaries(vec![1]);
    let send = || Call::send("s", "t", Partitioning::PartitionId(0), one_message()).unwrap();
    assert!(h.run(Call::change_password("owner", "owner-pw", "owner-pw-2").unwrap()));
    // The send opens the first data link to node 1, which refuses the new password twice
    // before it has applied the change: the send waits and succeeds.
    h.lagging.insert(1, 2);
    assert!(
        h.run(send()),
        "the send failed on a lagging follower's refusal"
    );
    assert_eq!(
        h.lagging[&1], 0,
        "both refusals were met and the third sign-in passed"
    );
    assert!(
        !h.events
            .iter()
            .any(|e| matches!(e, Event::SignInRefused { fatal: true, .. }))
    );

    // The leader's refusal is final at once: what waits for a session fails.
    h.router
        .sign_in_as(h.now, Credentials::user("owner", "bad-pw").unwrap());
    h.step();
    let started = h.now;
    assert!(!h.run(Call::get_cluster_metadata()));
    assert!(
        h.now - started < Duration::from_secs(1),
        "{:?}",
        h.now - started
    );
}

#[test]
fn past_the_settling_time_a_followers_refusal_is_final() {
    let mut h = Harness::with_primaries(vec![1]);
    assert!(h.run(Call::change_password("owner", "owner-pw", "owner-pw-2").unwrap()));
    h.now += Duration::from_secs(4);
    h.lagging.insert(1, 1_000);
    let started = h.now;
    let send = Call::send("s", "t", Partitioning::PartitionId(0), one_message()).unwrap();
    assert!(!h.run(send), "a follower refusing for good fails the send");
    assert!(
        h.now - started < Duration::from_secs(1),
        "{:?}",
        h.now - started
    );
}

#[test]
fn a_refusal_of_credentials_already_replaced_fails_nothing() {
    let mut h = Harness::new();
    assert!(h.run(Call::get_cluster_metadata()));
    // A wrong login's sign-in is on the wire when the right one replaces it.
    h.hold = true;
    h.router
        .sign_in_as(h.now, Credentials::user("owner", "bad-pw").unwrap());
    h.step();
    let waiting = h
        .router
        .submit(h.now, Call::get_cluster_metadata().request)
        .unwrap();
    h.step();
    assert!(
        h.sign_ins.is_empty() || h.held.iter().any(|(link, _)| h.links.contains_key(link)),
        "a sign-in with the wrong password is in flight"
    );
    h.router
        .sign_in_as(h.now, Credentials::user("owner", "owner-pw").unwrap());
    h.step();
    h.release();
    let deadline = h.now + Duration::from_secs(30);
    while !h.completed.contains_key(&waiting) {
        assert!(h.now < deadline, "the read never completed");
        h.advance();
    }
    assert!(
        h.completed[&waiting],
        "the read waited for the right credentials"
    );
    assert!(h.sign_ins.contains(&offered("owner", "bad-pw")));
    assert!(!h.events.iter().any(|e| matches!(
        e,
        Event::SignInRefused { fatal: true, .. } | Event::SessionMoved { .. }
    )));
}

#[test]
fn a_login_as_another_user_signs_the_session_in_on_the_metadata_leader() {
    let mut h = Harness::with_leader(vec![0], 2);
    assert!(h.run(Call::get_cluster_metadata()));
    let session_node = |h: &Harness| h.links.values().next().copied();
    assert_eq!(
        session_node(&h),
        Some(0),
        "the session starts on the first seed"
    );
    h.router
        .sign_in_as(h.now, Credentials::user("second", "second-pw").unwrap());
    h.step();
    assert!(h.run(Call::get_cluster_metadata()));
    let nodes: Vec<usize> = h.links.values().copied().collect();
    assert_eq!(nodes, [2], "the new session is on the leader: {nodes:?}");
    assert_eq!(h.router.stats().session_moves, 0);
}

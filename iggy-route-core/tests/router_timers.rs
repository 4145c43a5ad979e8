//! The timer contract of the outer face: after any input and a full drain, `poll_timeout`
//! names `now` or later. A deadline in the past makes an adapter wake at once and find
//! nothing to do (a spin), or hides work that nobody will do.
//!
//! The simulation's seed 90388 found the case kept here: a reply that ends an exchange
//! longer than the heartbeat interval left the link owing a heartbeat since before the
//! reply, and only `handle_timeout` paid such debts.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
// A test needs one real instant as the origin of its timeline; every other instant is
// derived from it, and the code under test never reads the clock.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::fuzzing::fake_cluster::{FakeCluster, addr};
use iggy_route_core::wire::Identifier;
use iggy_route_core::{AdminRequest, Config, Credentials, LinkId, Output, Request, Router};

/// A one-node cluster whose replies the test holds back until it chooses to deliver them.
struct SlowCluster {
    router: Router,
    cluster: FakeCluster,
    now: Instant,
    /// The reply owed on each link, once its frame was written.
    owed: BTreeMap<LinkId, (String, Bytes)>,
}

impl SlowCluster {
    fn new(config: Config) -> Self {
        let now = Instant::now();
        let router = Router::new(config, 7, now);
        let mut slow = Self {
            router,
            cluster: FakeCluster::new(1, vec![0]),
            now,
            owed: BTreeMap::new(),
        };
        slow.drain();
        slow
    }

    /// Drains outputs: connects at once, and keeps each written frame's reply owed.
    fn drain(&mut self) -> Vec<String> {
        let mut written = Vec::new();
        while let Some(output) = self.router.poll_output() {
            match output {
                Output::Connect { link, .. } => self.router.handle_connected(self.now, link),
                Output::Transmit { link, bytes } => {
                    let (name, reply) = self.cluster.answer(0, &bytes);
                    written.push(format!("{link} {name}"));
                    assert!(
                        self.owed.insert(link, (name, reply)).is_none(),
                        "a second frame on {link} before the reply to the first"
                    );
                }
                _ => {}
            }
        }
        if let Some(deadline) = self.router.poll_timeout() {
            assert!(
                deadline >= self.now,
                "after a full drain the router asks to be woken {:?} in the past",
                self.now - deadline
            );
        }
        written
    }

    /// Delivers the reply owed on `link` now, and drains.
    fn reply(&mut self, link: LinkId) -> Vec<String> {
        let (_, reply) = self.owed.remove(&link).unwrap();
        self.router.handle_read(self.now, link, &reply);
        self.drain()
    }

    /// Delivers every owed reply until the router writes nothing more.
    fn settle(&mut self) {
        for _ in 0..100 {
            let Some(&link) = self.owed.keys().next() else {
                return;
            };
            self.reply(link);
        }
        panic!("the exchanges never settled");
    }
}

fn config() -> Config {
    let mut config = Config::new(vec![addr(0)], Credentials::user("iggy", "iggy").unwrap());
    config.heartbeat_interval = Duration::from_secs(1);
    config.attempt_timeout = Duration::from_secs(5);
    config
}

fn get_topic() -> Request {
    Request::Admin(AdminRequest::GetTopic {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
    })
}

/// A read the session's node answers (metadata reads go to the metadata leader).
fn session_read() -> Request {
    iggy_route_core::client::Call::get_cluster_metadata().request
}

#[test]
fn a_reply_after_the_heartbeat_interval_pays_the_heartbeat_at_once_not_in_the_past() {
    let mut slow = SlowCluster::new(config());
    slow.settle();
    let coordinator = LinkId(1);
    slow.router.submit(slow.now, session_read()).unwrap();
    assert_eq!(slow.drain(), ["link1 ROSTER"]);
    // The node answers after 2 s: longer than the heartbeat interval (1 s), shorter than the
    // attempt timeout (5 s). The router was right to sleep until the attempt timeout.
    assert_eq!(
        slow.router.poll_timeout(),
        Some(slow.now + Duration::from_secs(5))
    );
    slow.now += Duration::from_secs(2);
    // The link owes a heartbeat since 1 s ago: it is written with the reply's input, and the
    // next wake-up is that ping's attempt timeout, not an instant already gone.
    assert_eq!(slow.reply(coordinator), ["link1 PING"]);
    assert_eq!(
        slow.router.poll_timeout(),
        Some(slow.now + Duration::from_secs(5))
    );
}

#[test]
fn every_input_after_a_long_silence_leaves_no_deadline_in_the_past() {
    // Inputs arrive late (an adapter busy elsewhere, a reader woken before the timer): each
    // kind of input must still leave the router with nothing overdue.
    let mut slow = SlowCluster::new(config());
    slow.settle();
    for _ in 0..6 {
        slow.now += Duration::from_millis(1_700);
        slow.router.submit(slow.now, get_topic()).unwrap();
        slow.drain();
        slow.now += Duration::from_millis(1_300);
        slow.settle();
    }
}

#[test]
fn the_next_wake_up_says_what_it_is_for() {
    use iggy_route_core::TimerKind;
    use iggy_route_core::routing::RoutingTimer;

    let mut config = config();
    config.request_timeout = Duration::from_secs(3);
    let now = Instant::now();
    let mut router = Router::new(config, 7, now);
    // The coordinator's connect is queued: drain it first.
    assert_eq!(router.next_timer(), Some((now, TimerKind::Output)));
    let Some(Output::Connect { link, .. }) = router.poll_output() else {
        panic!("the coordinator is dialled first");
    };
    assert_eq!(
        router.next_timer(),
        Some((now + Duration::from_secs(3), TimerKind::Connect)),
        "connect_timeout defaults to 3 s"
    );
    router.handle_connected(now, link);
    while router.poll_output().is_some() {}
    // The login is in flight: its reply is due within the attempt timeout.
    assert_eq!(
        router.next_timer(),
        Some((now + Duration::from_secs(5), TimerKind::Reply))
    );

    // Signed in, with nothing to do: the heartbeat; with a request waiting, its deadline
    // comes first.
    let mut slow = SlowCluster::new(self::config());
    slow.settle();
    assert_eq!(
        slow.router.next_timer(),
        Some((slow.now + Duration::from_secs(1), TimerKind::Heartbeat))
    );
    let mut short = self::config();
    short.request_timeout = Duration::from_millis(500);
    let mut slow = SlowCluster::new(short);
    slow.settle();
    slow.router.submit(slow.now, get_topic()).unwrap();
    slow.drain();
    assert_eq!(
        slow.router.next_timer(),
        Some((
            slow.now + Duration::from_millis(500),
            TimerKind::Routing(RoutingTimer::RequestDeadline)
        ))
    );
    assert_eq!(
        slow.router.poll_timeout(),
        slow.router.next_timer().map(|(at, _)| at)
    );
}

//! Adversarial tests of one promise of `iggy_route_tokio::Client` (feature `sdk`) and
//! `iggy_route_mio::Client`: after a committed change of the signed-in user's own password or
//! name, every later sign-in uses the new credentials (others' changes, refused and status-only
//! ones change nothing); `login_user` / `login_with_personal_access_token` as another user makes
//! every later call run as that user, in-flight requests complete once, refused credentials give
//! 42 / 53, restore the previous credentials and leave the trait signed out (40) until a login
//! succeeds; every call returns within its deadline, no reconnect storm, no secret in `Debug`
//! output or logs; and the same program answers as the SDK 0.11.0's `IggyClient`.

#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy::prelude::*;
use iggy_route_core::partitioning::Partitioning as NativePartitioning;
use iggy_route_core::wire::{
    Message as NativeMessage, Password as WirePassword, Permissions as WirePermissions,
    UserStatus as WireStatus,
};
use iggy_route_core::{Config, Credentials};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tokio::sdk::IntoIggyError;

// Refused logins followed by right ones, and their deadlines. Under a directory of its own
// so that Cargo does not take it for a test target.
#[path = "login_adversary/refused_logins.rs"]
mod refused_logins;

fn route_config(cluster: &TestCluster) -> Config {
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(5);
    config
}

/// An iggy-route client signed in as `user`, its session on node 2 (a follower).
async fn route_as(
    cluster: &TestCluster,
    user: &str,
    password: &str,
) -> Arc<iggy_route_tokio::Client> {
    let mut config = route_config(cluster);
    config.credentials = Credentials::user(user, password).unwrap();
    config.seeds.rotate_right(1);
    Arc::new(iggy_route_tokio::Client::connect(config).await.unwrap())
}

fn named(name: &str) -> Identifier {
    Identifier::named(name).unwrap()
}

fn numeric(id: u32) -> Identifier {
    Identifier::numeric(id).unwrap()
}

fn code<T>(result: &Result<T, IggyError>) -> Option<u32> {
    result.as_ref().err().map(IggyError::as_code)
}

/// The user id a login reported, or its error code.
fn uid(result: Result<IdentityInfo, IggyError>) -> Result<u32, u32> {
    result.map(|i| i.user_id).map_err(|e| e.as_code())
}

/// "orders"/"events", 3 partitions, partition p's primary on node p.
fn orders(cluster: &TestCluster) -> (u32, u32) {
    let (s, t) = cluster.create_stream_and_topic("orders", "events", 3);
    for p in 0..3 {
        assert!(cluster.set_primary(s, t, p, p as usize));
    }
    (s, t)
}

/// A user with every global permission.
fn add_admin(cluster: &TestCluster, name: &str, password: &str) -> u32 {
    cluster.with_state(|s| s.add_user(name, password))
}

/// A user who may read streams only (no send, no create).
fn add_reader(cluster: &TestCluster, name: &str, password: &str) -> u32 {
    let mut permissions = WirePermissions::default();
    permissions.global.read_streams = true;
    let password = WirePassword::new(password).unwrap();
    let status = WireStatus::Active;
    cluster.with_state(|s| {
        let now = s.next_timestamp();
        let users = s.users_mut();
        users
            .create(name, password, status, Some(permissions), now)
            .unwrap()
            .id
    })
}

/// User ids of every live session in the cluster, sorted.
fn session_users(cluster: &TestCluster) -> Vec<u32> {
    cluster.with_state(|s| s.sessions().map(|(_, r)| r.user_id).collect())
}

fn login_failures(cluster: &TestCluster) -> u64 {
    (0..3).map(|n| cluster.stats(n).login_failures).sum()
}

const DEADLINE: Duration = Duration::from_millis(6500);

/// Runs `f`, failing the test if it outlasts the 5 s request deadline (plus slack).
async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    let started = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: hung for 20 s"));
    let took = started.elapsed();
    assert!(took <= DEADLINE, "{what}: took {took:?}, deadline 5 s");
    out
}

/// A login through the trait, within the deadline: the user id, or the error code.
async fn login(c: &dyn Client, name: &str, password: &str) -> Result<u32, u32> {
    uid(bounded("login_user", c.login_user(name, password)).await)
}

async fn pat(c: &dyn Client, token: &str) -> Result<u32, u32> {
    uid(bounded("pat", c.login_with_personal_access_token(token)).await)
}

async fn nap(millis: u64) {
    tokio::time::sleep(Duration::from_millis(millis)).await;
}

async fn send(c: &dyn Client, partition: u32, id: u128) -> Option<u32> {
    let message = IggyMessage::builder()
        .id(id)
        .payload(Bytes::from_static(b"x"))
        .build()
        .unwrap();
    let (stream, topic) = (named("orders"), named("events"));
    let key = Partitioning::partition_id(partition);
    code(&c.send_messages(&stream, &topic, &key, &mut [message]).await)
}

/// A send, tried again while the answer is transient (a link lost: 8, 57, 58); its code.
async fn send_settled(c: &dyn Client, partition: u32, id: u128) -> Option<u32> {
    let mut last = None;
    for attempt in 0..6u128 {
        last = bounded("send", send(c, partition, id * 10 + attempt)).await;
        if !matches!(last, Some(8 | 57 | 58)) {
            return last;
        }
        nap(300).await;
    }
    last
}

async fn sends_everywhere(c: &dyn Client, id: u128) -> Vec<Option<u32>> {
    let mut outcomes = Vec::new();
    for p in 0..3 {
        outcomes.push(send_settled(c, p, id + u128::from(p)).await);
    }
    outcomes
}

async fn me(c: &dyn Client) -> Result<Option<u32>, u32> {
    let me = bounded("get_me", c.get_me()).await;
    me.map(|m| m.user_id).map_err(|e| e.as_code())
}

fn drop_all(cluster: &TestCluster) {
    for node in 0..3 {
        cluster.drop_connections(node);
    }
}

fn native_code<T>(r: Result<T, iggy_route_core::client::ClientError>) -> Option<u32> {
    r.err().map(|e| e.into_iggy_error().as_code())
}

/// A blocking send through the mio client, tried again while transient.
fn mio_send(c: &iggy_route_mio::Client, partition: u32) -> Option<u32> {
    let mut last = None;
    for _ in 0..5 {
        let one = vec![NativeMessage::new("m")];
        let key = NativePartitioning::PartitionId(partition);
        last = native_code(c.send("orders", "events", key, one));
        if !matches!(last, Some(8 | 57 | 58)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_in_flight_during_a_login_as_another_user_complete_once_and_later_links_are_its() {
    let cluster = Arc::new(TestCluster::start(3).await);
    let (s, t) = orders(&cluster);
    let bob = add_admin(&cluster, "bob", "bob-pw");
    let route = route_as(&cluster, "iggy", "iggy").await;
    let mut tasks = Vec::new();
    for task in 0..6u128 {
        let c = Arc::clone(&route);
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for i in 0..40u128 {
                let id = 1_000 + task * 100 + i;
                let started = Instant::now();
                let outcome = send(&*c, u32::try_from(task % 3).unwrap(), id).await;
                outcomes.push((id, outcome, started.elapsed()));
                nap(10).await;
            }
            outcomes
        }));
    }
    nap(150).await;
    // Replies of node 1 held: its sends are in flight when the login runs.
    cluster.set_reply_delay(1, Duration::from_millis(300));
    nap(100).await;
    let c: &dyn Client = &*route;
    assert_eq!(login(c, "bob", "bob-pw").await, Ok(bob));
    nap(400).await;
    cluster.set_reply_delay(1, Duration::ZERO);
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.extend(task.await.unwrap());
    }
    let stored: Vec<u128> = (0..3)
        .flat_map(|p| cluster.partition_ids(s, t, p, 0, 10_000))
        .collect();
    let mut problems = Vec::new();
    for (id, outcome, took) in outcomes {
        let times = stored.iter().filter(|&&x| x == id).count();
        if outcome.is_some() || times != 1 || took > DEADLINE {
            problems.push(format!("{id}: {outcome:?}, stored {times}x, {took:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(sends_everywhere(c, 9_000).await, [None, None, None]);
    nap(500).await;
    assert_eq!(me(c).await, Ok(Some(bob)));
    let users = session_users(&cluster);
    assert!(
        !users.is_empty() && users.iter().all(|&u| u == bob),
        "live sessions' users after the login as bob ({bob}): {users:?}"
    );
    route.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_logins_answer_42_or_53_sign_out_and_keep_the_user_the_client_had() {
    let cluster = TestCluster::start(3).await;
    orders(&cluster);
    let reader = add_reader(&cluster, "reader", "reader-pw");
    add_admin(&cluster, "carol", "carol-pw");
    let token = token_of(&cluster, "reader", "reader-pw").await;
    let route = route_as(&cluster, "iggy", "iggy").await;
    let c: &dyn Client = &*route;
    // Own name, wrong password.
    assert_eq!(login(c, "iggy", "not-iggy").await, Err(42));
    assert_eq!(code(&c.get_streams().await), Some(40));
    assert_eq!(send(c, 1, 1).await, Some(40));
    assert_eq!(login(c, "iggy", "iggy").await, Ok(0));
    assert_eq!(send(c, 1, 2).await, None);

    // Signed in as the reader, a refused login as carol leaves it the reader's client.
    assert_eq!(login(c, "reader", "reader-pw").await, Ok(reader));
    assert_eq!(login(c, "carol", "wrong").await, Err(42));
    assert_eq!(code(&c.get_me().await), Some(40));
    assert_eq!(send(c, 2, 3).await, Some(40));
    // The native methods sign in again by themselves: as the reader, not as root or carol.
    assert_eq!(native_code(route.create_stream("native").await), Some(41));
    assert_eq!(login(c, "reader", "reader-pw").await, Ok(reader));
    assert_eq!(me(c).await, Ok(Some(reader)));

    // Another user's token, a bad token, the token again, and a reconnect.
    assert_eq!(login(c, "iggy", "iggy").await, Ok(0));
    assert_eq!(pat(c, &token).await, Ok(reader));
    assert_eq!(sends_everywhere(c, 10).await, [Some(41); 3]);
    assert_eq!(pat(c, "no-such-token").await, Err(53));
    assert_eq!(code(&c.get_streams().await), Some(40));
    assert_eq!(pat(c, &token).await, Ok(reader));
    drop_all(&cluster);
    nap(300).await;
    assert_eq!(sends_everywhere(c, 20).await, [Some(41); 3]);
    assert_eq!(me(c).await, Ok(Some(reader)));
    route.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_as_a_user_deleted_or_repassworded_elsewhere_neither_hangs_nor_storms() {
    for case in ["deleted", "password changed"] {
        let cluster = TestCluster::start(3).await;
        orders(&cluster);
        let bob = add_admin(&cluster, "bob", "bob-pw");
        let route = route_as(&cluster, "iggy", "iggy").await;
        let admin = route_as(&cluster, "iggy", "iggy").await;
        let (c, a): (&dyn Client, &dyn Client) = (&*route, &*admin);
        assert_eq!(login(c, "bob", "bob-pw").await, Ok(bob));
        let changed = match case {
            "deleted" => a.delete_user(&named("bob")).await,
            _ => a.change_password(&named("bob"), "bob-pw", "bob-pw-2").await,
        };
        assert_eq!(code(&changed), None, "{case}");
        nap(700).await;
        drop_all(&cluster);
        let before = login_failures(&cluster);
        let started = Instant::now();
        let mut codes = Vec::new();
        while started.elapsed() < Duration::from_secs(4) {
            codes.push(code(&bounded("get_streams", c.get_streams()).await));
            nap(250).await;
        }
        let failures = login_failures(&cluster) - before;
        assert!(
            failures <= 30,
            "{case}: {failures} refused sign-ins in 4 s: {codes:?}"
        );
        assert_eq!(login(c, "iggy", "iggy").await, Ok(0));
        assert_eq!(send_settled(c, 1, 1).await, None, "{case}");
        assert_eq!(code(&c.create_stream("after").await), None, "{case}");
        route.shutdown().await;
        admin.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_then_login_as_another_and_links_dropped_right_after_a_login_run_as_the_new_user() {
    let cluster = TestCluster::start(3).await;
    orders(&cluster);
    let reader = add_reader(&cluster, "reader", "reader-pw");
    let route = route_as(&cluster, "iggy", "iggy").await;
    let c: &dyn Client = &*route;
    assert_eq!(sends_everywhere(c, 1).await, [None, None, None]);
    bounded("logout", c.logout_user()).await.unwrap();
    assert_eq!(code(&c.get_streams().await), Some(40));
    assert_eq!(login(c, "reader", "reader-pw").await, Ok(reader));
    assert_eq!(sends_everywhere(c, 10).await, [Some(41); 3]);
    // Login as root, then as the reader, and every link dropped the moment it returns.
    assert_eq!(login(c, "iggy", "iggy").await, Ok(0));
    let reader_again = login(c, "reader", "reader-pw").await;
    drop_all(&cluster);
    assert_eq!(reader_again, Ok(reader));
    assert_eq!(sends_everywhere(c, 20).await, [Some(41); 3]);
    assert_eq!(me(c).await, Ok(Some(reader)));
    nap(500).await;
    let users = session_users(&cluster);
    assert!(users.iter().all(|&u| u == reader), "sessions: {users:?}");
    route.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_while_the_session_node_is_paused_or_stopped_returns_in_time_and_is_consistent() {
    for fault in ["paused", "stopped"] {
        let cluster = TestCluster::start(3).await;
        orders(&cluster);
        let reader = add_reader(&cluster, "reader", "reader-pw");
        let route = route_as(&cluster, "iggy", "iggy").await;
        let c: &dyn Client = &*route;
        assert_eq!(sends_everywhere(c, 1).await, [None, None, None]);
        match fault {
            "paused" => cluster.pause_node(2),
            _ => cluster.stop_node(2).await,
        }
        let first = login(c, "reader", "reader-pw").await;
        match fault {
            "paused" => cluster.resume_node(2),
            _ => cluster.restart_node(2).await,
        }
        nap(500).await;
        // Not refused by the server: no answer in time (57) or no node (8, 58); then again.
        if first.is_err_and(|e| matches!(e, 8 | 57 | 58)) {
            assert_eq!(login(c, "reader", "reader-pw").await, Ok(reader), "{fault}");
        } else {
            assert_eq!(first, Ok(reader), "{fault}");
        }
        assert_eq!(me(c).await, Ok(Some(reader)), "{fault}");
        assert_eq!(sends_everywhere(c, 10).await, [Some(41); 3], "{fault}");
        route.shutdown().await;
    }
}

async fn members(c: &dyn Client) -> Result<Option<u32>, u32> {
    let (stream, topic) = (named("orders"), named("events"));
    let group = c.get_consumer_group(&stream, &topic, &named("g")).await;
    let count = group.map(|g| g.map(|g| g.members_count));
    count.map_err(|e| e.as_code())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_as_bob_ends_roots_group_membership_and_then_bobs_own_changes_are_followed() {
    let cluster = TestCluster::start(3).await;
    orders(&cluster);
    let bob = add_admin(&cluster, "bob", "bob-pw");
    let route = route_as(&cluster, "iggy", "iggy").await;
    let c: &dyn Client = &*route;
    let (stream, topic, group) = (named("orders"), named("events"), named("g"));
    c.create_consumer_group(&stream, &topic, "g").await.unwrap();
    c.join_consumer_group(&stream, &topic, &group)
        .await
        .unwrap();
    assert_eq!(sends_everywhere(c, 1).await, [None, None, None]);
    nap(600).await;
    assert_eq!(members(c).await, Ok(Some(1)));
    assert_eq!(login(c, "bob", "bob-pw").await, Ok(bob));
    nap(700).await;
    assert_eq!(
        members(c).await,
        Ok(Some(0)),
        "root's membership after the login"
    );
    bounded("join", c.join_consumer_group(&stream, &topic, &group))
        .await
        .unwrap();
    nap(700).await;
    assert_eq!(members(c).await, Ok(Some(1)));
    let member = Consumer::group(group.clone());
    let strategy = PollingStrategy::offset(0);
    let polled = c.poll_messages(&stream, &topic, None, &member, &strategy, 10, false);
    assert_eq!(code(&bounded("group poll", polled).await), None);
    let users = session_users(&cluster);
    assert!(users.iter().all(|&u| u != 0), "root sessions: {users:?}");
    // Signed in as bob: the user it was built as (root, id 0) is another user now, and
    // bob's own changes, by the id his login reported, are followed.
    let opts = UserUpdateOptions::default();
    let seen = [
        code(&c.change_password(&numeric(0), "iggy", "iggy-2").await),
        code(&c.change_password(&named("iggy"), "iggy-2", "iggy-3").await),
        code(&c.change_password(&numeric(bob), "bob-pw", "bob-pw-2").await),
        code(
            &c.update_user(&numeric(bob), Some("robert"), None, &opts)
                .await,
        ),
    ];
    assert_eq!(seen, [None; 4]);
    drop_all(&cluster);
    nap(300).await;
    assert_eq!(sends_everywhere(c, 10).await, [None; 3]);
    assert_eq!(me(c).await, Ok(Some(bob)));
    assert_eq!(login(c, "iggy", "iggy-3").await, Ok(0));
    route.shutdown().await;
}

/// Two own password changes in flight together, one to the same value by id, a rename; then
/// a newcomer takes the old name with the current password and no permissions (a sign-in
/// with the old name would succeed as the newcomer); every link dropped; every node stopped
/// in turn. The client must stay the owner throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_password_and_name_changes_are_followed_through_reconnects_and_session_moves_tokio() {
    let cluster = TestCluster::start(3).await;
    let (s, t) = orders(&cluster);
    let owner = add_admin(&cluster, "owner", "pw-1");
    let route = route_as(&cluster, "owner", "pw-1").await;
    let c: &dyn Client = &*route;
    let (by_name, by_id) = (named("owner"), numeric(owner));
    let (a, b) = tokio::join!(
        c.change_password(&by_name, "pw-1", "pw-2"),
        c.change_password(&by_id, "pw-2", "pw-3"),
    );
    let now = ["pw-1", "pw-2", "pw-3"]
        .into_iter()
        .find(|pw| cluster.with_state(|s| s.authenticate("owner", pw).is_some()))
        .unwrap();
    let changes = format!("{:?}/{:?}, now {now}", code(&a), code(&b));
    assert_eq!(code(&c.change_password(&by_id, now, now).await), None);
    let opts = UserUpdateOptions::default();
    let renamed = c.update_user(&by_name, Some("owner-2"), None, &opts).await;
    assert_eq!(code(&renamed), None);
    let newcomer = add_reader(&cluster, "owner", now);
    nap(300).await;
    drop_all(&cluster);
    nap(300).await;
    assert_eq!(sends_everywhere(c, 10).await, [None; 3], "{changes}");
    assert_eq!(me(c).await, Ok(Some(owner)), "newcomer is {newcomer}");
    for node in 0..3 {
        cluster.stop_node(node).await;
        for p in 0..3 {
            assert!(cluster.set_primary(s, t, p, (node + 1) % 3));
        }
        let outcome = send_settled(c, node as u32, 100 + node as u128).await;
        assert_eq!(outcome, None, "with node {node} stopped");
        assert_eq!(me(c).await, Ok(Some(owner)), "with node {node} stopped");
        cluster.restart_node(node).await;
        nap(300).await;
    }
    route.shutdown().await;
}

/// The same on the blocking adapter, by numeric id, with native methods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_password_and_name_changes_are_followed_through_reconnects_and_session_moves_mio() {
    let cluster = TestCluster::start(3).await;
    let (s, t) = orders(&cluster);
    let owner = add_admin(&cluster, "owner", "pw-1");
    let mut config = route_config(&cluster);
    config.credentials = Credentials::user("owner", "pw-1").unwrap();
    let mio = tokio::task::spawn_blocking(move || {
        let c = iggy_route_mio::Client::connect(config).unwrap();
        c.change_password("owner", "pw-1", "pw-2").unwrap();
        c.change_password(owner, "pw-2", "pw-3").unwrap();
        c.change_password(owner, "pw-3", "pw-3").unwrap();
        c.update_user(owner, Some("owner-2"), None).unwrap();
        Arc::new(c)
    })
    .await
    .unwrap();
    add_reader(&cluster, "owner", "pw-3");
    drop_all(&cluster);
    nap(300).await;
    for node in [None, Some(0), Some(1), Some(2)] {
        if let Some(node) = node {
            cluster.stop_node(node).await;
            for p in 0..3 {
                assert!(cluster.set_primary(s, t, p, (node + 1) % 3));
            }
        }
        let c = Arc::clone(&mio);
        let (outcomes, took) = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let mut out: Vec<Option<u32>> = (0..3).map(|p| mio_send(&c, p)).collect();
            let streams = match native_code(c.get_streams()) {
                Some(8 | 57 | 58) => native_code(c.get_streams()),
                other => other,
            };
            out.push(streams);
            (out, started.elapsed())
        })
        .await
        .unwrap();
        let stopped = format!("node {node:?} stopped");
        assert_eq!(outcomes, [None; 4], "{stopped}");
        assert!(took < Duration::from_secs(15), "{stopped}: took {took:?}");
        if let Some(node) = node {
            cluster.restart_node(node).await;
            nap(300).await;
        }
    }
    tokio::task::spawn_blocking(move || mio.shutdown())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_foreign_and_status_only_changes_leave_the_sign_in_as_it_was() {
    let cluster = TestCluster::start(3).await;
    orders(&cluster);
    let owner = add_admin(&cluster, "owner", "owner-pw");
    let other = add_admin(&cluster, "other", "other-pw");
    let route = route_as(&cluster, "owner", "owner-pw").await;
    let c: &dyn Client = &*route;
    let opts = UserUpdateOptions::default();
    let (by_name, by_id) = (named("owner"), numeric(owner));
    let seen = [
        code(&c.change_password(&by_name, "not-current", "x-pw-1").await),
        code(&c.change_password(&by_id, "not-current", "x-pw-2").await),
        code(&c.update_user(&by_name, Some("other"), None, &opts).await),
        code(&c.update_user(&by_id, Some("iggy"), None, &opts).await),
        code(
            &c.update_user(&by_name, None, Some(UserStatus::Active), &opts)
                .await,
        ),
        code(&c.update_user(&by_id, Some("owner"), None, &opts).await),
        code(
            &c.change_password(&numeric(other), "other-pw", "other-pw-2")
                .await,
        ),
        code(
            &c.update_user(&named("other"), Some("other-2"), None, &opts)
                .await,
        ),
        // Root's password, by the id 0 no sign-in of this client reported.
        code(&c.change_password(&numeric(0), "iggy", "iggy-2").await),
    ];
    let (refused, taken) = (Some(42), Some(46));
    let expected = [refused, refused, taken, taken, None, None, None, None, None];
    assert_eq!(seen, expected);
    nap(300).await;
    drop_all(&cluster);
    nap(300).await;
    assert_eq!(sends_everywhere(c, 10).await, [None; 3]);
    assert_eq!(me(c).await, Ok(Some(owner)));
    route.shutdown().await;
}

#[derive(Clone, Default)]
struct Lines(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_login_or_changed_secret_reaches_debug_output_or_a_log_line() {
    const BOB: &str = "Bob-secret-71c3";
    const BOB2: &str = "Bob-secret-2-9e4a";
    const WRONG: &str = "Wrong-secret-55d0";
    let lines = Lines::default();
    let writer = lines.clone();
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .try_init();
    let cluster = TestCluster::start(3).await;
    orders(&cluster);
    add_admin(&cluster, "bob", BOB);
    let route = route_as(&cluster, "iggy", "iggy").await;
    let c: &dyn Client = &*route;
    let mut shown = vec![format!("{route:?} {route:#?}")];
    let name = named("bob");
    for result in [
        c.login_user("bob", WRONG).await.map(|_| ()),
        c.login_user("bob", BOB).await.map(|_| ()),
        c.change_password(&name, BOB, BOB2).await,
        c.change_password(&name, WRONG, BOB).await,
    ] {
        shown.push(format!("{result:?}"));
    }
    let never = IggyExpiry::NeverExpire;
    let token = c
        .create_personal_access_token("t", never)
        .await
        .unwrap()
        .token;
    for result in [
        c.login_with_personal_access_token(&token).await,
        c.login_with_personal_access_token(WRONG).await,
        c.login_user("bob", BOB2).await,
    ] {
        shown.push(format!("{result:?}"));
    }
    drop_all(&cluster);
    nap(300).await;
    shown.push(format!("{:?}", sends_everywhere(c, 1).await));
    shown.push(format!("{route:?} {route:#?} {:?}", route.stats()));
    route.shutdown().await;
    let logged = String::from_utf8_lossy(&lines.0.lock().unwrap()).into_owned();
    for secret in [BOB, BOB2, WRONG, token.as_str()] {
        for text in &shown {
            assert!(!text.contains(secret), "Debug output: {text}");
        }
        let line = logged.lines().find(|l| l.contains(secret));
        assert!(line.is_none(), "a log line holds a secret: {line:?}");
    }
}

/// A token `user` creates for itself.
async fn token_of(cluster: &TestCluster, user: &str, password: &str) -> String {
    let owner = route_as(cluster, user, password).await;
    let pat = PersonalAccessTokenClient::create_personal_access_token(
        &*owner,
        "ci",
        IggyExpiry::NeverExpire,
    );
    let token = pat.await.unwrap().token;
    owner.shutdown().await;
    nap(600).await;
    token
}

/// Edge cases of the login commands, as a trace of what the program saw.
async fn edges_program(c: &dyn Client) -> Vec<String> {
    let mut reader = Permissions::default();
    reader.global.read_streams = true;
    let (active, off) = (UserStatus::Active, UserStatus::Inactive);
    let made = c
        .create_user("reader", "reader-pw", active, Some(reader))
        .await;
    let made_too = c.create_user("inactive", "inactive-pw", off, None).await;
    let mut seen = vec![format!("{:?} {:?}", code(&made), code(&made_too))];
    nap(700).await;
    for (name, password) in [
        ("iggy", "wrong-pw"),
        ("nobody", "whatever"),
        ("inactive", "inactive-pw"),
        ("ab", "pw"),
        ("reader", "reader-pw"),
        ("reader", "reader-pw"),
    ] {
        seen.push(format!("{name} {:?}", login(c, name, password).await));
        seen.push(format!("streams {:?}", code(&c.get_streams().await)));
        seen.push(format!("create {:?}", code(&c.create_stream(name).await)));
        seen.push(format!("root {:?}", login(c, "iggy", "iggy").await));
    }
    seen.push(format!("logout {:?}", code(&c.logout_user().await)));
    seen.push(format!("logout twice {:?}", code(&c.logout_user().await)));
    let bogus = uid(c.login_with_personal_access_token("bogus-token").await);
    seen.push(format!("bogus token {bogus:?}"));
    seen.push(format!("me {:?}", code(&c.get_me().await)));
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_and_own_account_edge_cases_answer_as_the_sdk_does() {
    let cluster = TestCluster::start(3).await;
    let sdk = IggyClient::from_connection_string(&cluster.sdk_connection_string(0)).unwrap();
    sdk.connect().await.unwrap();
    let expected = edges_program(&sdk).await;
    let _ = Client::shutdown(&sdk).await;
    let cluster = TestCluster::start(3).await;
    let route = route_as(&cluster, "iggy", "iggy").await;
    let got = edges_program(&*route).await;
    route.shutdown().await;
    assert_eq!(got, expected, "iggy-route (left) vs the SDK (right)");
}

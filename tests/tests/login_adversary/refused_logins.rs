//! A refused login followed at once by a right one, and a refused login under a short
//! deadline: the server's code comes back, the right login succeeds, and the refusals stop.

use super::*;

/// A refused login and at once the right one, `rounds` times for the client's own password,
/// another user's password and another user's token: the failures and the slowest pair.
async fn wrong_then_right(c: &dyn Client, token: &str, reader: u32) -> (Vec<String>, Duration) {
    let mut failed = Vec::new();
    let mut slowest = Duration::ZERO;
    for round in 0..10 {
        for (label, user, id, refusal) in [
            ("own", Some(("iggy", "iggy")), 0, 42),
            ("reader", Some(("reader", "reader-pw")), reader, 42),
            ("token", None, reader, 53),
        ] {
            let started = Instant::now();
            let wrong = match user {
                Some((name, _)) => bounded("wrong", c.login_user(name, "wrong-pw")).await,
                None => bounded("wrong", c.login_with_personal_access_token("bad")).await,
            };
            let right = match user {
                Some((name, pw)) => bounded("right", c.login_user(name, pw)).await,
                None => bounded("right", c.login_with_personal_access_token(token)).await,
            };
            slowest = slowest.max(started.elapsed());
            let (wrong, right) = (code(&wrong), uid(right));
            if wrong != Some(refusal) || right != Ok(id) {
                failed.push(format!("{label} {round}: wrong {wrong:?}, right {right:?}"));
            }
        }
    }
    (failed, slowest)
}

/// Promise: "a later correct login works". The SDK's right login after a refused one always
/// succeeds, in microseconds; iggy-route's takes seconds and is now and then refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_right_login_right_after_a_refused_one_always_succeeds() {
    let cluster = TestCluster::start(3).await;
    let reader = add_reader(&cluster, "reader", "reader-pw");
    let token = token_of(&cluster, "reader", "reader-pw").await;
    let sdk = IggyClient::from_connection_string(&cluster.sdk_connection_string(0)).unwrap();
    sdk.connect().await.unwrap();
    let (sdk_failed, sdk_slowest) = wrong_then_right(&sdk, &token, reader).await;
    let _ = Client::shutdown(&sdk).await;
    let route = route_as(&cluster, "iggy", "iggy").await;
    let (failed, slowest) = wrong_then_right(&*route, &token, reader).await;
    route.shutdown().await;
    assert!(sdk_failed.is_empty(), "the SDK: {sdk_failed:?}");
    assert!(
        failed.is_empty(),
        "{} of 30 right logins failed (slowest pair: iggy-route {slowest:?}, SDK \
         {sdk_slowest:?}):\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// A refused login with a 1 s deadline: the server refuses at once, so each must answer 42
/// (53 for a token), not a timeout. It answered 57 after 1 s, every time. A login's
/// session signs in on the metadata leader, whose refusal is final (only before the
/// client has read who leads may the session's own node, a follower, be asked first), and
/// the client goes back to its own credentials at once: besides the session's sign-in,
/// only links that were connecting meanwhile try the refused credentials, each once, and
/// then the refusals stop. How many links were connecting depends on the machine's
/// speed (on one busy CPU up to five refusals were counted, on two cores three), so the
/// count has a ceiling (two sign-ins of the session and two links per node) and the check
/// that matters is that none follows once the login has been answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_login_answers_the_servers_code_within_a_short_deadline() {
    let cluster = TestCluster::start(3).await;
    let mut config = route_config(&cluster);
    config.request_timeout = Duration::from_secs(1);
    config.seeds.rotate_right(1);
    let route = iggy_route_tokio::Client::connect(config).await.unwrap();
    let c: &dyn Client = &route;
    let mut seen = Vec::new();
    for round in 0..6 {
        let before = login_failures(&cluster);
        let wrong = if round % 2 == 0 {
            c.login_user("iggy", "wrong-pw").await
        } else {
            c.login_with_personal_access_token("bad-token").await
        };
        // What was in flight when the login was answered is answered within moments.
        nap(300).await;
        let settled = login_failures(&cluster);
        nap(1200).await;
        let after = login_failures(&cluster) - settled;
        seen.push((code(&wrong), settled - before, after));
        assert_eq!(login(c, "iggy", "iggy").await, Ok(0), "{seen:?}");
    }
    route.shutdown().await;
    let codes: Vec<Option<u32>> = seen.iter().map(|(code, _, _)| *code).collect();
    let expected = [Some(42), Some(53)].repeat(3);
    assert_eq!(
        codes, expected,
        "the server's code per refused login: {seen:?}"
    );
    assert!(
        seen.iter()
            .all(|(_, refusals, after)| (1..=8).contains(refusals) && *after == 0),
        "refused sign-ins per refused login, and after it: {seen:?}"
    );
}

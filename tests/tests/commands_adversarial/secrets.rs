//! Credentials in `Debug` output and logs.

#[allow(clippy::wildcard_imports)]
use super::*;

#[test]
pub(super) fn credentials_never_appear_in_debug_output() {
    let password = "Dbg-pw-4471x";
    let new_password = "Dbg-new-9930y";
    let token = "Dbg-token-55z";
    let mut shown = Vec::new();
    let create = Call::create_user("dbg-user", password, UserStatus::Active, None).unwrap();
    shown.push(format!("{:?}", create.request));
    shown.push(format!("{create:?}"));
    let change = Call::change_password("dbg-user", password, new_password).unwrap();
    shown.push(format!("{:?}", change.request));
    shown.push(format!("{change:?}"));
    let by_id = Call::change_password(3u32, password, new_password).unwrap();
    shown.push(format!("{by_id:#?}"));
    shown.push(format!(
        "{:?}",
        CreateUserRequest::new("dbg-user", password, UserStatus::Active, None).unwrap()
    ));
    shown.push(format!(
        "{:#?}",
        ChangePasswordRequest::new(Identifier::Numeric(1), password, new_password).unwrap()
    ));
    let secret = Password::new(token).unwrap();
    shown.push(format!("{secret:?} {secret} {secret:#?}"));
    shown.push(format!("{:?}", user("dbg-user", password)));
    shown.push(format!(
        "{:?}",
        Credentials::PersonalAccessToken(secret.clone())
    ));
    shown.push(format!(
        "{:?}",
        Config::new(vec!["127.0.0.1:1".to_owned()], user("dbg-user", password))
    ));
    // The create-token reply as the router hands it over, and as the call reads it.
    let mut body = vec![u8::try_from(token.len()).unwrap()];
    body.extend_from_slice(token.as_bytes());
    let reply = Reply::Payload(ReplyPayload(Bytes::from(body)));
    shown.push(format!("{reply:?} {reply:#?}"));
    let call = Call::create_personal_access_token("dbg", TokenExpiry::Never).unwrap();
    let read = call.reply.extract(reply).unwrap();
    assert_eq!(read.expose(), token);
    shown.push(format!("{read:?}"));
    // Errors about bad passwords.
    let long = format!("{password}{}", "x".repeat(100));
    for error in [
        Call::create_user("dbg-user", &long, UserStatus::Active, None).unwrap_err(),
        Call::change_password(1u32, password, &long).unwrap_err(),
        Call::change_password(1u32, &long, password).unwrap_err(),
    ] {
        shown.push(format!("{error:?} {error}"));
    }
    let shown = shown.join("\n");
    for secret in [password, new_password, token] {
        let found = leaks(&shown, secret);
        assert!(found.is_empty(), "{secret} shown: {found:#?}");
    }
    assert!(shown.contains("***"), "{shown}");
}

/// Every user, password and token command through both adapters under a TRACE capture:
/// no password or token in any line.
#[test]
pub(super) fn credentials_never_reach_a_log_line() {
    let _dog = watchdog("credentials_in_logs", Duration::from_secs(240));
    let world = world();
    let capturing = capture();
    let mut secrets: Vec<String> = Vec::new();
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for (index, adapter) in [Adapter::Tokio, Adapter::Mio].into_iter().enumerate() {
            let first = format!("Log-pw-{index}-a7Q1");
            let second = format!("Log-pw-{index}-b8R2");
            let wrong = format!("Log-pw-{index}-c9S3");
            let late = format!("Log-pw-{index}-d0T4");
            let username = format!("logged-{index}");
            secrets.extend([first.clone(), second.clone(), wrong.clone(), late.clone()]);
            let root = world.connect(adapter, 2);
            let created = call!(
                root,
                create_user(&username, &first, UserStatus::Active, None)
            )
            .unwrap();
            // A duplicate user with its own password: refused by the server.
            let again = call!(
                root,
                create_user(&username, &wrong, UserStatus::Active, None)
            );
            assert!(again.is_err());
            call!(root, change_password(created.id, &first, &second)).unwrap();
            let refused = call!(root, change_password(created.id, &wrong, &first));
            assert!(refused.is_err());
            let shown = format!("{refused:?} {}", refused.as_ref().unwrap_err());
            assert!(
                !shown.contains(&wrong) && !shown.contains(&first),
                "{shown}"
            );

            // Node 1, a follower, knows the new password once its copy catches up (200 ms
            // after the leader in the model, as on a real cluster).
            std::thread::sleep(Duration::from_millis(300));
            let as_user = Cl::connect(
                adapter,
                with_credentials(world.config(1), user(&username, &second)),
            )
            .unwrap();
            let token = call!(
                as_user,
                create_personal_access_token("logged", TokenExpiry::Never)
            )
            .unwrap();
            secrets.push(token.expose().to_owned());
            // Through the generic request too: the reply as the adapter hands it over.
            let call = Call::create_personal_access_token("logged-2", TokenExpiry::Never).unwrap();
            let reply = match &as_user.inner {
                Inner::Tokio(inner) => TOKIO.block_on(inner.request(call.request)),
                Inner::Mio(inner) => inner.request(call.request),
            }
            .unwrap();
            tracing::info!(reply = ?reply, "the reply, as a caller might log it");
            let second_token = call.reply.extract(reply).unwrap();
            secrets.push(second_token.expose().to_owned());
            tracing::info!(token = ?second_token, "the token, as a caller might log it");
            let by_token = Cl::connect(
                adapter,
                with_credentials(
                    world.config(0),
                    Credentials::PersonalAccessToken(token.clone()),
                ),
            )
            .unwrap();
            call!(by_token, get_me()).unwrap();
            call!(by_token, logout_user()).unwrap();
            call!(by_token, get_me()).unwrap();
            // Sign-ins that fail: a wrong password, a deleted token.
            let wrong_sign_in = Cl::connect(
                adapter,
                with_credentials(world.config(0), user(&username, &wrong)),
            );
            assert!(wrong_sign_in.is_err());
            call!(as_user, delete_personal_access_token("logged")).unwrap();
            let stale = Cl::connect(
                adapter,
                with_credentials(world.config(0), Credentials::PersonalAccessToken(token)),
            );
            assert!(stale.is_err());
            // A change of one's own password while the client signs in with the old one,
            // then a logout: the next sign-in is refused, and must not show either.
            call!(as_user, change_password(created.id, &second, &late)).unwrap();
            call!(as_user, logout_user()).unwrap();
            let _ = call!(as_user, get_me());
            drop(as_user);
            // A connection string carrying the password.
            let addrs: Vec<String> = world
                .cluster
                .addrs()
                .iter()
                .map(ToString::to_string)
                .collect();
            let string = format!("iggy://{username}:{late}@{}", addrs.join(","));
            let by_string = match adapter {
                Adapter::Tokio => TOKIO
                    .block_on(iggy_route_tokio::Client::from_connection_string(&string))
                    .map(|c| Cl {
                        inner: Inner::Tokio(c),
                    }),
                Adapter::Mio => {
                    iggy_route_mio::Client::from_connection_string(&string).map(|c| Cl {
                        inner: Inner::Mio(c),
                    })
                }
            }
            .unwrap();
            call!(by_string, ping()).unwrap();
            drop(by_string);
            call!(root, delete_user(created.id)).unwrap();
        }
    }));
    drop(capturing);
    if let Err(panic) = ran {
        std::panic::resume_unwind(panic);
    }
    let logged = String::from_utf8_lossy(&lock(&CAPTURED)).into_owned();
    assert!(
        logged.lines().count() > 50,
        "the capture saw too little to prove anything: {} lines",
        logged.lines().count()
    );
    for secret in &secrets {
        let found = leaks(&logged, secret);
        assert!(found.is_empty(), "{secret} was logged: {found:#?}");
    }
}

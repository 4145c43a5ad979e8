//! Users, permissions, tokens, system reads.

use super::*;
#[allow(unused_imports)]
use super::{
    bad_input::*, breaks::*, faults::*, guards::*, messages::*, probes::*, secrets::*,
    session_states::*,
};

pub(crate) fn alice_permissions(stream: u32) -> Permissions {
    Permissions {
        global: GlobalPermissions {
            read_streams: true,
            ..GlobalPermissions::default()
        },
        streams: Some(BTreeMap::from([(
            stream as usize,
            StreamPermissions {
                read_topics: true,
                send_messages: true,
                ..StreamPermissions::default()
            },
        )])),
    }
}

pub(crate) fn show_user(user: &UserInfoDetails) -> String {
    format!(
        "{} {} {:?} {:?}",
        user.id, user.username, user.status, user.permissions
    )
}

/// Connects as `who`, again while a follower may not know the user or token yet.
pub(crate) async fn connect_as(world: &World, who: Who) -> Result<Arc<dyn Client>, IggyError> {
    let by = Instant::now() + Duration::from_secs(5);
    loop {
        match (world.connect)(who.clone()).await {
            Err(error) if Instant::now() < by && error.as_code() != 0 => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if Instant::now() >= by {
                    return Err(error);
                }
            }
            other => return other,
        }
    }
}

pub(crate) fn users_day<'a>(
    world: &'a World,
    trace: &'a mut Trace,
) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        let root = &*world.a;
        let open = root.create_stream("open").await.unwrap().id;
        root.create_topic(
            &numeric(open),
            "events",
            &TopicCreateOptions {
                partitions_count: Some(1),
                ..TopicCreateOptions::default()
            },
        )
        .await
        .unwrap();
        let closed = root.create_stream("closed").await.unwrap().id;
        root.create_topic(&numeric(closed), "events", &TopicCreateOptions::default())
            .await
            .unwrap();

        let created = root
            .create_user(
                "alice",
                "alice-pw",
                UserStatus::Active,
                Some(alice_permissions(open)),
            )
            .await;
        trace.result("create_user alice", &created, show_user);
        let again = root
            .create_user("alice", "alice-pw", UserStatus::Active, None)
            .await;
        trace.result("create_user alice again", &again, show_user);
        for (label, name, password) in [
            ("empty name", "", "password"),
            ("short name", "ab", "password"),
            ("long name", &"n".repeat(256)[..], "password"),
            ("name of 50", &"n".repeat(50)[..], "password"),
            ("short password", "bob", "pw"),
            ("long password", "bob", &"p".repeat(256)[..]),
            ("password of 100", "carol", &"p".repeat(100)[..]),
        ] {
            let result = root
                .create_user(name, password, UserStatus::Inactive, None)
                .await;
            trace.result(&format!("create_user {label}"), &result, show_user);
        }
        trace.result(
            "get_user by name",
            &root.get_user(&named("alice")).await,
            |u| format!("{:?}", u.as_ref().map(show_user)),
        );
        trace.result(
            "get_user missing",
            &root.get_user(&named("nobody")).await,
            |u| format!("{:?}", u.as_ref().map(show_user)),
        );
        trace.result("get_users", &root.get_users().await, |users| {
            format!(
                "{:?}",
                users
                    .iter()
                    .map(|u| (u.id, u.username.clone(), u.status))
                    .collect::<Vec<_>>()
            )
        });

        // Alice, on a client of her own.
        let alice = connect_as(world, Who::User("alice".into(), "alice-pw".into())).await;
        trace.result("alice connects", &alice, |_| String::new());
        // Past the followers' lag: what another client wrote is everywhere by now.
        tokio::time::sleep(Duration::from_millis(700)).await;
        if let Ok(alice) = &alice {
            trace.result("alice get_me", &alice.get_me().await, |me| {
                format!("{:?}", me.user_id)
            });
            trace.result("alice get_streams", &alice.get_streams().await, |s| {
                format!("{}", s.len())
            });
            trace.result(
                "alice create_stream",
                &alice.create_stream("mine").await,
                |s| s.name.clone(),
            );
            let mut one = vec![message(1, b"alice", None)];
            let sent = alice
                .send_messages(
                    &numeric(open),
                    &named("events"),
                    &Partitioning::partition_id(0),
                    &mut one,
                )
                .await;
            trace.result("alice sends where she may", &sent, show_sent);
            let sent = alice
                .send_messages(
                    &numeric(open),
                    &named("events"),
                    &Partitioning::balanced(),
                    &mut one,
                )
                .await;
            trace.result("alice sends balanced where she may", &sent, show_sent);
            let sent = alice
                .send_messages(
                    &numeric(closed),
                    &named("events"),
                    &Partitioning::partition_id(0),
                    &mut one,
                )
                .await;
            trace.result("alice sends where she may not", &sent, show_sent);
            let sent = alice
                .send_messages(
                    &numeric(closed),
                    &named("events"),
                    &Partitioning::balanced(),
                    &mut one,
                )
                .await;
            trace.result("alice sends balanced where she may not", &sent, show_sent);
            let polled = poll(
                &**alice,
                &numeric(open),
                &named("events"),
                Some(0),
                &Consumer::new(numeric(1)),
                PollingStrategy::first(),
                10,
                false,
            )
            .await;
            trace.result("alice polls where she may not", &polled, show_polled);
            trace.result("alice get_users", &alice.get_users().await, |u| {
                format!("{}", u.len())
            });
            trace.debug(
                "alice creates a token",
                &alice
                    .create_personal_access_token("alice-token", IggyExpiry::NeverExpire)
                    .await
                    .map(|t| !t.token.is_empty()),
            );
            trace.debug(
                "alice's tokens",
                &alice
                    .get_personal_access_tokens()
                    .await
                    .map(|tokens| tokens.iter().map(|t| t.name.clone()).collect::<Vec<_>>()),
            );
            trace.debug(
                "alice changes another's password",
                &alice
                    .change_password(&numeric(0), "iggy", "new-password")
                    .await,
            );
            let _ = alice.shutdown().await;
        }

        // Updates.
        trace.debug(
            "update_user rename and deactivate",
            &root
                .update_user(
                    &named("alice"),
                    Some("alicia"),
                    Some(UserStatus::Inactive),
                    &UserUpdateOptions::default(),
                )
                .await,
        );
        trace.debug(
            "update_user to a taken name",
            &root
                .update_user(
                    &named("alicia"),
                    Some("iggy"),
                    None,
                    &UserUpdateOptions::default(),
                )
                .await,
        );
        trace.debug(
            "update_user to an empty name",
            &root
                .update_user(
                    &named("alicia"),
                    Some(""),
                    None,
                    &UserUpdateOptions::default(),
                )
                .await,
        );
        trace.debug(
            "update_user missing",
            &root
                .update_user(
                    &named("nobody"),
                    Some("x-user"),
                    None,
                    &UserUpdateOptions::default(),
                )
                .await,
        );
        trace.debug(
            "update_permissions",
            &root
                .update_permissions(&named("alicia"), Some(Permissions::root()))
                .await,
        );
        trace.result(
            "get_user after updates",
            &root.get_user(&named("alicia")).await,
            |u| format!("{:?}", u.as_ref().map(show_user)),
        );
        trace.debug(
            "update_permissions missing",
            &root.update_permissions(&named("nobody"), None).await,
        );
        trace.debug(
            "change_password wrong current",
            &root
                .change_password(&named("alicia"), "not-it", "alice-pw-2")
                .await,
        );
        trace.debug(
            "change_password",
            &root
                .change_password(&named("alicia"), "alice-pw", "alice-pw-2")
                .await,
        );
        trace.debug(
            "change_password missing",
            &root
                .change_password(&named("nobody"), "alice-pw", "alice-pw-2")
                .await,
        );
        let inactive = (world.connect)(Who::User("alicia".into(), "alice-pw-2".into())).await;
        trace.result("an inactive user connects", &inactive, |_| String::new());

        // Tokens.
        let token = root
            .create_personal_access_token("ci", IggyExpiry::NeverExpire)
            .await;
        trace.result("create token", &token, |t| t.token.len().to_string());
        trace.debug(
            "create token again",
            &root
                .create_personal_access_token("ci", IggyExpiry::NeverExpire)
                .await
                .map(|t| t.token.len()),
        );
        trace.debug(
            "create token expiring",
            &root
                .create_personal_access_token(
                    "short",
                    IggyExpiry::ExpireDuration(IggyDuration::from(3_600_000_000)),
                )
                .await
                .map(|t| t.token.len()),
        );
        trace.debug(
            "create token empty name",
            &root
                .create_personal_access_token("", IggyExpiry::NeverExpire)
                .await
                .map(|t| t.token.len()),
        );
        trace.debug(
            "create token long name",
            &root
                .create_personal_access_token(&"t".repeat(256), IggyExpiry::NeverExpire)
                .await
                .map(|t| t.token.len()),
        );
        trace.debug(
            "tokens",
            &root.get_personal_access_tokens().await.map(|tokens| {
                let mut tokens: Vec<_> = tokens
                    .iter()
                    .map(|t| (t.name.clone(), t.expiry_at.is_some()))
                    .collect();
                tokens.sort();
                tokens
            }),
        );
        if let Ok(token) = &token {
            let by_token = connect_as(world, Who::Token(token.token.clone())).await;
            trace.result("connect with the token", &by_token, |_| String::new());
            if let Ok(by_token) = by_token {
                trace.result("token get_me", &by_token.get_me().await, |me| {
                    format!("{:?}", me.user_id)
                });
                trace.debug(
                    "token login with itself",
                    &by_token
                        .login_with_personal_access_token(&token.token)
                        .await
                        .map(|i| i.user_id),
                );
                let _ = by_token.shutdown().await;
            }
        }
        trace.debug(
            "delete token",
            &root.delete_personal_access_token("ci").await,
        );
        trace.debug(
            "delete token again",
            &root.delete_personal_access_token("ci").await,
        );
        trace.debug(
            "delete token empty name",
            &root.delete_personal_access_token("").await,
        );
        if let Ok(token) = &token {
            let refused = (world.connect)(Who::Token(token.token.clone())).await;
            trace.result("connect with a deleted token", &refused.map(|_| ()), |_| {
                String::new()
            });
        }

        // Own session.
        trace.debug(
            "login_user as myself",
            &root.login_user("iggy", "iggy").await.map(|i| i.user_id),
        );
        trace.debug("logout_user", &root.logout_user().await);
        trace.debug(
            "get_streams signed out",
            &root.get_streams().await.map(|s| s.len()),
        );
        trace.debug("ping signed out", &root.ping().await);
        trace.debug("logout_user twice", &root.logout_user().await);
        trace.debug(
            "login_user as myself again",
            &root.login_user("iggy", "iggy").await.map(|i| i.user_id),
        );
        trace.debug(
            "get_streams signed in",
            &root.get_streams().await.map(|s| s.len()),
        );

        // Deletes.
        trace.debug("delete_user", &root.delete_user(&named("alicia")).await);
        trace.debug(
            "delete_user again",
            &root.delete_user(&named("alicia")).await,
        );
        trace.debug("delete root", &root.delete_user(&numeric(0)).await);
        trace.debug(
            "get_user deleted",
            &root.get_user(&named("alicia")).await.map(|u| u.is_some()),
        );

        // System reads.
        trace.debug("ping", &root.ping().await);
        trace.result("get_me", &root.get_me().await, |me| {
            format!("{:?} {}", me.user_id, me.transport)
        });
        trace.result(
            "get_client missing",
            &root.get_client(u32::MAX).await,
            |c| format!("{:?}", c.is_some()),
        );
        trace.result("get_stats", &root.get_stats().await, |stats| {
            format!(
                "streams {} topics {} partitions {} segments {} messages {} groups {}",
                stats.streams_count,
                stats.topics_count,
                stats.partitions_count,
                stats.segments_count,
                stats.messages_count,
                stats.consumer_groups_count
            )
        });
        trace.result(
            "get_cluster_metadata",
            &root.get_cluster_metadata().await,
            |m| {
                format!(
                    "{} {:?}",
                    m.name,
                    m.nodes
                        .iter()
                        .map(|n| (n.name.clone(), n.role, n.status))
                        .collect::<Vec<_>>()
                )
            },
        );
        trace.debug(
            "heartbeat_interval",
            &Ok::<_, IggyError>(root.heartbeat_interval().await.as_micros()),
        );
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_of_users_tokens_and_system_reads_gives_the_same_results_as_the_sdk() {
    differential("users day", users_day, false).await;
}

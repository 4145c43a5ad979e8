//! Users, tokens, system reads, logins, disconnects, shutdown and their events.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_tokens_and_system_reads_through_the_sdk_traits() {
    let cluster = TestCluster::start(3).await;
    let client = sdk_client(config(&cluster)).await;

    let me = client.get_me().await.unwrap();
    assert_eq!(me.user_id, Some(0));
    let found = client.get_client(me.client_id).await.unwrap().unwrap();
    assert_eq!((found.client_id, found.user_id), (me.client_id, Some(0)));
    let clients = client.get_clients().await.unwrap();
    assert!(clients.iter().any(|c| c.client_id == me.client_id));
    assert!(client.get_client(u32::MAX).await.unwrap().is_none());
    client.create_stream("s").await.unwrap();
    assert_eq!(client.get_stats().await.unwrap().streams_count, 1);
    let metadata = client.get_cluster_metadata().await.unwrap();
    assert_eq!(metadata.nodes.len(), 3);
    assert_eq!(
        metadata
            .nodes
            .iter()
            .filter(|n| n.role == ClusterNodeRole::Leader)
            .count(),
        1
    );
    assert_eq!(
        client.heartbeat_interval().await.get_duration(),
        Duration::from_secs(5)
    );
    assert_eq!(
        code(client.describe_options(OptionsScope::Topic).await),
        IggyError::FeatureUnavailable.as_code()
    );
    // Sent to the node holding the session, which has no snapshots: its own code.
    let snapshot = client
        .snapshot(
            SnapshotCompression::Deflated,
            vec![SystemSnapshotType::Test],
        )
        .await;
    assert_eq!(code(snapshot), IggyError::InvalidCommand.as_code());

    let permissions = Permissions {
        global: GlobalPermissions::default(),
        streams: Some(BTreeMap::from([(
            0,
            StreamPermissions {
                read_topics: true,
                send_messages: true,
                ..StreamPermissions::default()
            },
        )])),
    };
    let alice = client
        .create_user(
            "alice",
            "alice-pw",
            UserStatus::Active,
            Some(permissions.clone()),
        )
        .await
        .unwrap();
    assert_eq!((alice.id, alice.username.as_str()), (1, "alice"));
    assert_eq!(alice.permissions.as_ref(), Some(&permissions));
    let users = client.get_users().await.unwrap();
    assert_eq!(users.iter().map(|u| u.id).collect::<Vec<_>>(), [0, 1]);
    let read_back = client.get_user(&named("alice")).await.unwrap().unwrap();
    assert_eq!(read_back.permissions, Some(permissions));
    assert!(client.get_user(&named("nobody")).await.unwrap().is_none());
    let taken = client.create_user("alice", "other-pw", UserStatus::Active, None);
    assert_eq!(code(taken.await), IggyError::UserAlreadyExists.as_code());
    let short = client.create_user("al", "alice-pw", UserStatus::Active, None);
    assert_eq!(code(short.await), IggyError::InvalidUsername.as_code());

    let alice = numeric(1);
    client
        .update_user(
            &alice,
            Some("alicia"),
            Some(UserStatus::Inactive),
            &UserUpdateOptions::default(),
        )
        .await
        .unwrap();
    let renamed = client.get_user(&alice).await.unwrap().unwrap();
    assert_eq!(
        (renamed.username.as_str(), renamed.status),
        ("alicia", UserStatus::Inactive)
    );
    // With options the update is the SDK's own body; this cluster drops the block.
    let with_options = UserUpdateOptions {
        raw: BTreeMap::from([("note".to_owned(), "x".to_owned())]),
    };
    client
        .update_user(&alice, Some("alice"), None, &with_options)
        .await
        .unwrap();
    let back = client.get_user(&alice).await.unwrap().unwrap();
    assert_eq!(
        (back.username.as_str(), back.status),
        ("alice", UserStatus::Inactive)
    );
    client.update_permissions(&alice, None).await.unwrap();
    assert_eq!(
        client.get_user(&alice).await.unwrap().unwrap().permissions,
        None
    );
    client
        .change_password(&alice, "alice-pw", "alice-pw-2")
        .await
        .unwrap();
    let too_short = client.change_password(&alice, "alice-pw-2", "pw");
    assert_eq!(code(too_short.await), IggyError::InvalidPassword.as_code());
    client.delete_user(&alice).await.unwrap();
    assert!(client.get_user(&alice).await.unwrap().is_none());
    assert_eq!(
        code(client.delete_user(&numeric(0)).await),
        IggyError::CannotDeleteUser(0).as_code()
    );

    let token = client
        .create_personal_access_token("ci", IggyExpiry::NeverExpire)
        .await
        .unwrap()
        .token;
    assert!(!token.is_empty());
    let tokens = client.get_personal_access_tokens().await.unwrap();
    assert_eq!(
        tokens
            .iter()
            .map(|t| (t.name.as_str(), t.expiry_at))
            .collect::<Vec<_>>(),
        [("ci", None)]
    );
    let mut with_token = config(&cluster);
    with_token.credentials =
        Credentials::PersonalAccessToken(Password::new(token.clone()).unwrap());
    let token_client = sdk_client(with_token).await;
    let identity = token_client
        .login_with_personal_access_token(&token)
        .await
        .unwrap();
    assert_eq!(identity.user_id, 0);
    // Another token: the server's refusal, and signed out until a login succeeds.
    assert_eq!(
        code(
            token_client
                .login_with_personal_access_token("another-token")
                .await
        ),
        IggyError::InvalidPersonalAccessToken.as_code()
    );
    assert_eq!(
        code(token_client.get_streams().await),
        IggyError::Unauthenticated.as_code()
    );
    // A username and password: the token client is root's from now on.
    assert_eq!(
        token_client
            .login_user("iggy", "iggy")
            .await
            .unwrap()
            .user_id,
        0
    );
    assert!(token_client.get_streams().await.is_ok());
    token_client.shutdown().await.unwrap();
    client.delete_personal_access_token("ci").await.unwrap();
    assert!(
        client
            .get_personal_access_tokens()
            .await
            .unwrap()
            .is_empty()
    );
    client.shutdown().await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logins_logouts_disconnects_shutdown_and_their_events() {
    let cluster = TestCluster::start(3).await;
    let client = sdk_client(config(&cluster)).await;
    let mut events = client.subscribe_events().await;

    assert_eq!(client.login_user("iggy", "iggy").await.unwrap().user_id, 0);
    assert_eq!(
        code(client.login_user("iggy", "not-the-password").await),
        IggyError::InvalidCredentials.as_code()
    );
    assert_eq!(
        code(client.login_user("ab", "iggy").await),
        IggyError::InvalidUsername.as_code()
    );
    // A refused login signs the SDK session out, as the SDK's; the right one signs it in.
    assert_eq!(
        code(client.get_streams().await),
        IggyError::Unauthenticated.as_code()
    );
    assert_eq!(client.login_user("iggy", "iggy").await.unwrap().user_id, 0);

    // Signed out, as the SDK: what it checks its session for first is refused, and
    // `get_stats`, which it sends anyway, signs it in again (the SDK does so when the
    // server refuses it), after which everything works again.
    client.logout_user().await.unwrap();
    assert_eq!(
        code(client.get_streams().await),
        IggyError::Unauthenticated.as_code()
    );
    client.ping().await.unwrap();
    client.get_stats().await.unwrap();
    assert!(client.get_streams().await.unwrap().is_empty());
    client.logout_user().await.unwrap();
    assert_eq!(client.login_user("iggy", "iggy").await.unwrap().user_id, 0);
    assert!(client.get_streams().await.unwrap().is_empty());

    // Disconnected, as the SDK: the next call connects again and runs.
    client.disconnect().await.unwrap();
    assert!(client.get_streams().await.unwrap().is_empty());
    client.disconnect().await.unwrap();
    client.ping().await.unwrap();
    client.disconnect().await.unwrap();
    client.connect().await.unwrap();
    client.create_stream("back").await.unwrap();
    assert_eq!(client.get_streams().await.unwrap().len(), 1);

    client.shutdown().await.unwrap();
    assert_eq!(
        code(client.get_streams().await),
        IggyError::ClientShutdown.as_code()
    );
    assert_eq!(
        code(client.connect().await),
        IggyError::ClientShutdown.as_code()
    );
    client.shutdown().await.unwrap();

    let mut seen = Vec::new();
    while let Ok(Ok(event)) = tokio::time::timeout(Duration::from_secs(1), events.recv()).await {
        seen.push(event);
    }
    // In this order, with the session link's own events possibly in between (a logout makes
    // the router sign the link in again).
    let expected = [
        DiagnosticEvent::SignedIn,
        DiagnosticEvent::SignedOut,
        DiagnosticEvent::SignedIn,
        DiagnosticEvent::SignedOut,
        DiagnosticEvent::SignedIn,
        DiagnosticEvent::Disconnected,
        DiagnosticEvent::Connected,
        DiagnosticEvent::SignedIn,
        DiagnosticEvent::Disconnected,
        DiagnosticEvent::Connected,
        DiagnosticEvent::SignedIn,
        DiagnosticEvent::Disconnected,
        DiagnosticEvent::Connected,
        DiagnosticEvent::SignedIn,
        DiagnosticEvent::Shutdown,
    ];
    let mut rest = seen.iter();
    for event in expected {
        assert!(
            rest.any(|seen| *seen == event),
            "{event} missing in order from {seen:?}"
        );
    }
    assert_eq!(seen.last(), Some(&DiagnosticEvent::Shutdown));
    cluster.shutdown().await;
}

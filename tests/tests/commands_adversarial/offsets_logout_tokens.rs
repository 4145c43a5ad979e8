//! Shared scenarios (loopback and real cluster): offsets of a deleted topic, a logout, a token
//! of a deleted user, names and secrets outside ASCII.

#[allow(clippy::wildcard_imports)]
use super::*;

/// A consumer offset stored on a topic that is then deleted: not read back, neither from the
/// deleted topic nor from a new topic under the same name.
pub(super) fn offsets_of_deleted_topic(place: &Place, adapter: Adapter) {
    let client = Cl::connect(adapter, place.root.clone()).unwrap();
    let name = place.name("offs");
    let s = call!(client, create_stream(&name)).unwrap().id;
    let t = call!(client, create_topic(s, "t", 2)).unwrap().summary.id;
    place.spread(s, t, 2);
    for p in 0..2 {
        call!(
            client,
            send(s, t, Partitioning::partition_id(p), messages("m", 4))
        )
        .unwrap();
        call!(client, store_offset(consumer(3), s, t, p, 2)).unwrap();
    }
    call!(client, delete_topic(s, t)).unwrap();
    for p in 0..2 {
        let got = call!(client, get_consumer_offset(consumer(3), s, t, Some(p)));
        assert!(
            matches!(got, Ok(None)) || typed_not_found(&got),
            "the offset of a deleted topic, partition {p}: {got:?}"
        );
        let deleted = call!(client, delete_consumer_offset(consumer(3), s, t, Some(p)));
        assert!(
            typed_not_found(&deleted),
            "delete_consumer_offset on a deleted topic: {deleted:?}"
        );
    }
    let t2 = call!(client, create_topic(s, "t", 2)).unwrap().summary.id;
    place.spread(s, t2, 2);
    for p in 0..2 {
        let got = call!(client, get_consumer_offset(consumer(3), s, "t", Some(p))).unwrap();
        assert_eq!(got, None, "a new topic under the old name, partition {p}");
    }
    call!(client, delete_stream(s)).unwrap();
}

pub(super) fn consumer_offsets_of_a_deleted_topic(adapter: Adapter) {
    let _dog = watchdog("deleted_topic_offsets", Duration::from_secs(120));
    let world = world();
    offsets_of_deleted_topic(&world.place(2, "o"), adapter);
}
both_adapters!(consumer_offsets_of_a_deleted_topic);

/// Logged out, the client signs in again for its next request, whatever it is.
pub(super) fn logout_then_everything(place: &Place, adapter: Adapter) {
    let client = Cl::connect(adapter, place.root.clone()).unwrap();
    let name = place.name("lo");
    let s = call!(client, create_stream(&name)).unwrap().id;
    let t = call!(client, create_topic(s, "t", 2)).unwrap().summary.id;
    place.spread(s, t, 2);
    call!(
        client,
        send(s, t, Partitioning::partition_id(1), messages("m", 3))
    )
    .unwrap();
    let first = call!(client, get_me()).unwrap();
    let mut failures = Vec::new();
    macro_rules! after_logout {
        ($what:expr, $call:expr) => {{
            call!(client, logout_user()).unwrap();
            let result = $call;
            if result.is_err() {
                failures.push(format!("{}: {}", $what, outcome(&result)));
            }
        }};
    }
    call!(client, logout_user()).unwrap();
    let me = call!(client, get_me()).unwrap();
    assert_ne!(me.client.client_id, first.client.client_id, "a new client");
    assert_eq!(me.client.user_id, first.client.user_id);
    after_logout!("ping", call!(client, ping()));
    after_logout!("logout again", call!(client, logout_user()));
    after_logout!("get_stats", call!(client, get_stats()));
    after_logout!("get_clients", call!(client, get_clients()));
    after_logout!("get_streams", call!(client, get_streams()));
    after_logout!("get_stream", call!(client, get_stream(s)));
    after_logout!("get_topics", call!(client, get_topics(s)));
    after_logout!("get_topic", call!(client, get_topic(s, t)));
    after_logout!("get_users", call!(client, get_users()));
    after_logout!("get_user", call!(client, get_user("iggy")));
    after_logout!(
        "get_personal_access_tokens",
        call!(client, get_personal_access_tokens())
    );
    after_logout!(
        "create_stream",
        call!(client, create_stream(&place.name("lo2")))
    );
    after_logout!("create_topic", call!(client, create_topic(s, "t2", 1)));
    after_logout!(
        "create_partitions",
        call!(client, create_partitions(s, t, 1))
    );
    after_logout!(
        "update_topic",
        call!(
            client,
            update_topic(s, "t2", "t3", TopicUpdateOptions::default())
        )
    );
    after_logout!(
        "send",
        call!(
            client,
            send(s, t, Partitioning::partition_id(0), messages("m", 1))
        )
    );
    after_logout!(
        "send balanced",
        call!(client, send(s, t, Partitioning::Balanced, messages("b", 1)))
    );
    after_logout!(
        "poll",
        call!(
            client,
            poll(s, t, Some(1), consumer(1), PollingStrategy::Offset(0), 10)
        )
    );
    after_logout!(
        "store_offset",
        call!(client, store_offset(consumer(1), s, t, 1, 1))
    );
    after_logout!(
        "get_consumer_offset",
        call!(client, get_consumer_offset(consumer(1), s, t, Some(1)))
    );
    after_logout!(
        "delete_consumer_offset",
        call!(client, delete_consumer_offset(consumer(1), s, t, Some(1)))
    );
    let pat = place.name("pat");
    after_logout!(
        "create_personal_access_token",
        call!(
            client,
            create_personal_access_token(&pat, TokenExpiry::Never)
        )
    );
    after_logout!(
        "delete_personal_access_token",
        call!(client, delete_personal_access_token(&pat))
    );
    after_logout!("purge_topic", call!(client, purge_topic(s, t)));
    after_logout!("delete_topic", call!(client, delete_topic(s, "t3")));
    after_logout!("delete_stream", call!(client, delete_stream(s)));
    after_logout!(
        "delete_stream 2",
        call!(client, delete_stream(place.name("lo2").as_str()))
    );
    assert!(
        failures.is_empty(),
        "failed right after a logout: {failures:#?}"
    );
}

pub(super) fn logout_then_every_kind_of_command(adapter: Adapter) {
    let _dog = watchdog("logout", Duration::from_secs(180));
    let world = world();
    logout_then_everything(&world.place(2, "l"), adapter);
}
both_adapters!(logout_then_every_kind_of_command);

/// The smallest form of the logout failure: a topic the client has not read yet (made by
/// someone else), then `logout_user`, then a send. The contract: the next request signs in
/// again. The send needs the topic's partition count; a `get_topic` in its place works.
pub(super) fn logout_then_send_to_a_topic_not_read_yet(adapter: Adapter) {
    let _dog = watchdog("logout_then_send", Duration::from_secs(60));
    let world = world();
    let (s, t) = world
        .cluster
        .create_stream_and_topic("made-elsewhere", "t", 3);
    for session in [LEADER, 2] {
        let client = world.connect(adapter, session);
        call!(client, ping()).unwrap();
        let logins = world.cluster.total_logins();
        call!(client, logout_user()).unwrap();
        let balanced = call!(
            client,
            send(s, t, Partitioning::Balanced, messages("after-logout", 1))
        );
        let read_before = world.requests(session, code::GET_TOPIC);
        call!(client, logout_user()).unwrap();
        let by_name = call!(
            client,
            send(
                "made-elsewhere",
                "t",
                Partitioning::partition_id(2),
                messages("x", 1)
            )
        );
        assert!(
            balanced.is_ok() && by_name.is_ok(),
            "session on node {session}: a balanced send after logout -> {}, a send by name \
             -> {}; the router read the topic {} times, signed in {} times",
            outcome(&balanced),
            outcome(&by_name),
            world.requests(session, code::GET_TOPIC) - read_before,
            world.cluster.total_logins() - logins
        );
    }
}
both_adapters!(logout_then_send_to_a_topic_not_read_yet);

/// A token of a user who is then deleted signs nothing in, and a user made again under the
/// same name does not inherit it.
pub(super) fn token_of_deleted_user(place: &Place, adapter: Adapter) {
    let root = Cl::connect(adapter, place.root.clone()).unwrap();
    let username = place.name("tu");
    let created = call!(
        root,
        create_user(&username, "tu-password", UserStatus::Active, None)
    )
    .unwrap();
    let as_user = place.connect_as(adapter, user(&username, "tu-password"));
    let token = call!(
        as_user,
        create_personal_access_token("tu-token", TokenExpiry::Never)
    )
    .unwrap();
    let by_token = place.connect_as(adapter, Credentials::PersonalAccessToken(token.clone()));
    assert_eq!(
        call!(by_token, get_me()).unwrap().client.user_id,
        created.id
    );
    call!(root, delete_user(created.id)).unwrap();
    assert!(
        place.refused_at_sign_in(adapter, Credentials::PersonalAccessToken(token.clone())),
        "the token of a deleted user still signs in"
    );
    // The deleted user's open sessions: typed answers, whatever they are.
    let me = call!(by_token, get_me());
    let pats = call!(as_user, get_personal_access_tokens());
    assert!(
        me.is_ok() || matches!(&me, Err(ClientError::Request(_))),
        "{me:?}"
    );
    assert!(
        pats.is_ok() || matches!(&pats, Err(ClientError::Request(_))),
        "{pats:?}"
    );
    // Made again under the same name: no token, and the old one still signs nothing in.
    let again = call!(
        root,
        create_user(&username, "tu-password-2", UserStatus::Active, None)
    )
    .unwrap();
    let new_user = place.connect_as(adapter, user(&username, "tu-password-2"));
    let tokens = call!(new_user, get_personal_access_tokens()).unwrap();
    assert!(tokens.is_empty(), "inherited tokens: {tokens:?}");
    assert!(
        place.refused_at_sign_in(adapter, Credentials::PersonalAccessToken(token)),
        "the old token signs in as the new user"
    );
    call!(root, delete_user(again.id)).unwrap();
}

pub(super) fn a_token_of_a_deleted_user(adapter: Adapter) {
    let _dog = watchdog("token_of_deleted_user", Duration::from_secs(120));
    let world = world();
    token_of_deleted_user(&world.place(1, "k"), adapter);
}
both_adapters!(a_token_of_a_deleted_user);

/// Names, usernames, passwords and token names beyond ASCII: each is what comes back and
/// what signs in.
pub(super) fn non_ascii(place: &Place, adapter: Adapter) {
    let root = Cl::connect(adapter, place.root.clone()).unwrap();
    let stream_name = place.name("流-ström");
    let s = call!(root, create_stream(&stream_name)).unwrap().id;
    let t = call!(root, create_topic(stream_name.as_str(), "тема", 1))
        .unwrap()
        .summary
        .id;
    place.spread(s, t, 1);
    let got = call!(root, get_topic(stream_name.as_str(), "тема")).unwrap();
    assert_eq!(got.map(|d| d.summary.id), Some(t));
    call!(
        root,
        send(
            stream_name.as_str(),
            "тема",
            Partitioning::partition_id(0),
            messages("ü", 1)
        )
    )
    .unwrap();
    let username = place.name("ülrich");
    let password = "pässwörd-密码";
    let created = call!(
        root,
        create_user(
            &username,
            password,
            UserStatus::Active,
            Some(Permissions::all())
        )
    )
    .unwrap();
    assert_eq!(created.username.as_str(), username);
    let as_user = place.connect_as(adapter, user(&username, password));
    assert_eq!(call!(as_user, get_me()).unwrap().client.user_id, created.id);
    let token = call!(
        as_user,
        create_personal_access_token("ключ-1", TokenExpiry::Never)
    )
    .unwrap();
    let tokens = call!(as_user, get_personal_access_tokens()).unwrap();
    assert_eq!(
        tokens.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["ключ-1"]
    );
    let by_token = place.connect_as(adapter, Credentials::PersonalAccessToken(token));
    let polled = call!(
        by_token,
        poll(
            stream_name.as_str(),
            "тема",
            Some(0),
            consumer(1),
            PollingStrategy::Offset(0),
            10
        )
    )
    .unwrap();
    assert_eq!(payloads(&polled), ["ü-0"]);
    call!(
        as_user,
        change_password(created.id, password, "nöuveau-пароль")
    )
    .unwrap();
    drop(as_user);
    let again = place.connect_as(adapter, user(&username, "nöuveau-пароль"));
    call!(again, delete_personal_access_token("ключ-1")).unwrap();
    drop(again);
    drop(by_token);
    call!(root, delete_user(created.id)).unwrap();
    call!(root, delete_stream(s)).unwrap();
}

pub(super) fn non_ascii_names_and_secrets_round_trip(adapter: Adapter) {
    let _dog = watchdog("non_ascii", Duration::from_secs(60));
    let world = world();
    non_ascii(&world.place(1, "ü"), adapter);
}
both_adapters!(non_ascii_names_and_secrets_round_trip);

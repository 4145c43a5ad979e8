//! A user with limited permissions gets the server's status, typed.

#[allow(clippy::wildcard_imports)]
use super::*;

pub(super) type Table = Vec<(&'static str, String)>;

/// What a user without any permission gets for each command, as `(command, outcome)`.
pub(super) fn unprivileged_matrix(place: &Place, adapter: Adapter) -> Table {
    let root = Cl::connect(adapter, place.root.clone()).unwrap();
    let name = place.name("locked");
    let s = call!(root, create_stream(&name)).unwrap().id;
    let t = call!(root, create_topic(s, "t", 1)).unwrap().summary.id;
    place.spread(s, t, 1);
    call!(
        root,
        send(s, t, Partitioning::partition_id(0), messages("m", 3))
    )
    .unwrap();
    call!(root, store_offset(consumer(1), s, t, 0, 1)).unwrap();
    let root_me = call!(root, get_me()).unwrap();
    let username = place.name("nobody");
    let nobody = call!(
        root,
        create_user(&username, "nobody-pw", UserStatus::Active, None)
    )
    .unwrap();
    std::thread::sleep(place.settle);
    let client = place.connect_as(adapter, user(&username, "nobody-pw"));
    let mut table: Table = Vec::new();
    macro_rules! row {
        ($what:expr, $result:expr) => {{
            let result = $result;
            table.push(($what, outcome(&result)));
        }};
    }
    row!("ping", call!(client, ping()));
    row!("get_me", call!(client, get_me()));
    row!("get_user self", call!(client, get_user(nobody.id)));
    row!("get_user root", call!(client, get_user(0u32)));
    row!("get_users", call!(client, get_users()));
    row!("get_stats", call!(client, get_stats()));
    row!("get_clients", call!(client, get_clients()));
    row!(
        "get_client root",
        call!(client, get_client(root_me.client.client_id))
    );
    row!("get_streams", call!(client, get_streams()));
    row!("get_stream", call!(client, get_stream(s)));
    row!("get_topics", call!(client, get_topics(s)));
    row!("get_topic", call!(client, get_topic(s, t)));
    row!(
        "create_stream",
        call!(client, create_stream(&place.name("nope")))
    );
    row!("update_stream", call!(client, update_stream(s, "nope")));
    row!("purge_stream", call!(client, purge_stream(s)));
    row!("create_topic", call!(client, create_topic(s, "nope", 1)));
    row!(
        "update_topic",
        call!(
            client,
            update_topic(s, t, "nope", TopicUpdateOptions::default())
        )
    );
    row!("purge_topic", call!(client, purge_topic(s, t)));
    row!(
        "create_partitions",
        call!(client, create_partitions(s, t, 1))
    );
    row!(
        "delete_partitions",
        call!(client, delete_partitions(s, t, 1))
    );
    row!(
        "delete_segments",
        call!(client, delete_segments(s, t, 0, 1))
    );
    row!(
        "send",
        call!(
            client,
            send(s, t, Partitioning::partition_id(0), messages("x", 1))
        )
    );
    row!(
        "poll",
        call!(
            client,
            poll(s, t, Some(0), consumer(1), PollingStrategy::Offset(0), 1)
        )
    );
    row!(
        "store_offset",
        call!(client, store_offset(consumer(1), s, t, 0, 0))
    );
    row!(
        "get_consumer_offset",
        call!(client, get_consumer_offset(consumer(1), s, t, Some(0)))
    );
    row!(
        "delete_consumer_offset",
        call!(client, delete_consumer_offset(consumer(1), s, t, Some(0)))
    );
    row!("flush", call!(client, flush_unsaved_buffer(s, t, 0, false)));
    row!(
        "create_user",
        call!(
            client,
            create_user(&place.name("nope"), "nope-pw", UserStatus::Active, None)
        )
    );
    row!(
        "update_user root",
        call!(client, update_user(0u32, Some("nope-name"), None))
    );
    row!(
        "update_permissions self",
        call!(
            client,
            update_permissions(nobody.id, Some(Permissions::all()))
        )
    );
    row!("delete_user root", call!(client, delete_user(0u32)));
    row!("delete_topic", call!(client, delete_topic(s, t)));
    row!("delete_stream", call!(client, delete_stream(s)));
    row!(
        "create_personal_access_token",
        call!(
            client,
            create_personal_access_token("mine", TokenExpiry::Never)
        )
    );
    row!(
        "get_personal_access_tokens",
        call!(client, get_personal_access_tokens())
    );
    row!(
        "delete_personal_access_token",
        call!(client, delete_personal_access_token("mine"))
    );
    row!("logout_user", call!(client, logout_user()));
    row!("get_me after logout", call!(client, get_me()));
    row!(
        "change_password self",
        call!(
            client,
            change_password(nobody.id, "nobody-pw", "nobody-pw2")
        )
    );
    // Root's things are untouched.
    assert!(call!(root, get_stream(s)).unwrap().is_some());
    assert!(call!(root, get_user(0u32)).unwrap().is_some());
    call!(root, delete_user(nobody.id)).unwrap();
    call!(root, delete_stream(s)).unwrap();
    table
}

pub(super) fn expected_unprivileged() -> Table {
    let ok = [
        "ping",
        "get_me",
        "get_user self",
        "create_personal_access_token",
        "get_personal_access_tokens",
        "delete_personal_access_token",
        "logout_user",
        "get_me after logout",
        "change_password self",
    ];
    let denied = [
        "get_user root",
        "get_users",
        "get_stats",
        "get_clients",
        "get_client root",
        "get_streams",
        "get_stream",
        "get_topics",
        "get_topic",
        "create_stream",
        "update_stream",
        "purge_stream",
        "create_topic",
        "update_topic",
        "purge_topic",
        "create_partitions",
        "delete_partitions",
        "delete_segments",
        "send",
        "poll",
        "store_offset",
        "get_consumer_offset",
        "delete_consumer_offset",
        "create_user",
        "update_user root",
        "update_permissions self",
        "delete_user root",
        "delete_topic",
        "delete_stream",
    ];
    ok.iter()
        .map(|what| (*what, "ok".to_owned()))
        .chain(denied.iter().map(|what| (*what, "Unauthorized".to_owned())))
        // The server has no flush: which answer comes first is its business.
        .chain([("flush", "Unauthorized|FeatureUnavailable".to_owned())])
        .collect()
}

pub(super) fn compare(actual: &Table, expected: &Table) -> Vec<String> {
    let expected: BTreeMap<&str, &String> = expected.iter().map(|(k, v)| (*k, v)).collect();
    actual
        .iter()
        .filter(|(what, got)| {
            expected
                .get(what)
                .is_none_or(|want| !want.split('|').any(|one| one == got.as_str()))
        })
        .map(|(what, got)| {
            format!(
                "{what}: got {got}, expected {}",
                expected.get(what).map_or("?", |want| want.as_str())
            )
        })
        .collect()
}

pub(super) fn a_user_without_permissions_gets_the_server_s_status(adapter: Adapter) {
    let _dog = watchdog("unprivileged", Duration::from_secs(120));
    let world = world();
    let table = unprivileged_matrix(&world.place(2, "z"), adapter);
    for (what, got) in &table {
        if *what == "flush" {
            println!("loopback, {adapter:?}: flush without permissions: {got}");
        }
    }
    let differences = compare(&table, &expected_unprivileged());
    assert!(differences.is_empty(), "{differences:#?}");
}
both_adapters!(a_user_without_permissions_gets_the_server_s_status);

/// A user who may only poll one stream: polls, offsets by id and by name succeed (the
/// client must not need to read the topic for them), the rest is refused.
pub(super) fn poll_only(place: &Place, adapter: Adapter) -> Table {
    let root = Cl::connect(adapter, place.root.clone()).unwrap();
    let name = place.name("pollable");
    let s = call!(root, create_stream(&name)).unwrap().id;
    let t = call!(root, create_topic(s, "t", 2)).unwrap().summary.id;
    place.spread(s, t, 2);
    for p in 0..2 {
        call!(
            root,
            send(s, t, Partitioning::partition_id(p), messages("m", 3))
        )
        .unwrap();
    }
    let username = place.name("poller");
    let granted = Permissions {
        global: GlobalPermissions::default(),
        streams: vec![StreamPermissions {
            stream_id: s,
            poll_messages: true,
            ..StreamPermissions::default()
        }],
    };
    let poller = call!(
        root,
        create_user(&username, "poller-pw", UserStatus::Active, Some(granted))
    )
    .unwrap();
    std::thread::sleep(place.settle);
    let client = place.connect_as(adapter, user(&username, "poller-pw"));
    let mut table: Table = Vec::new();
    macro_rules! row {
        ($what:expr, $result:expr) => {{
            let result = $result;
            table.push(($what, outcome(&result)));
            result
        }};
    }
    macro_rules! row_only {
        ($what:expr, $result:expr) => {{
            let result = $result;
            table.push(($what, outcome(&result)));
        }};
    }
    let polled = row!(
        "poll p1 by id",
        call!(
            client,
            poll(s, t, Some(1), consumer(4), PollingStrategy::Offset(0), 10)
        )
    );
    if let Ok(polled) = polled {
        assert_eq!(payloads(&polled), ["m-0", "m-1", "m-2"]);
    }
    row_only!(
        "poll p0 by name",
        call!(
            client,
            poll(
                name.as_str(),
                "t",
                Some(0),
                consumer(4),
                PollingStrategy::Offset(0),
                10
            )
        )
    );
    row_only!(
        "store_offset p1 by id",
        call!(client, store_offset(consumer(4), s, t, 1, 2))
    );
    let got = row!(
        "get_consumer_offset p1 by id",
        call!(client, get_consumer_offset(consumer(4), s, t, Some(1)))
    );
    if let Ok(got) = got {
        assert_eq!(got.map(|o| o.stored_offset), Some(2));
    }
    row_only!(
        "store_offset p0 by name",
        call!(client, store_offset(consumer(4), name.as_str(), "t", 0, 1))
    );
    row_only!(
        "get_consumer_offset p0 by name",
        call!(
            client,
            get_consumer_offset(consumer(4), name.as_str(), "t", Some(0))
        )
    );
    row_only!(
        "delete_consumer_offset p1",
        call!(client, delete_consumer_offset(consumer(4), s, t, Some(1)))
    );
    row_only!(
        "send",
        call!(
            client,
            send(s, t, Partitioning::partition_id(0), messages("x", 1))
        )
    );
    row_only!("get_topic", call!(client, get_topic(s, t)));
    row_only!("create_topic", call!(client, create_topic(s, "nope", 1)));
    row_only!("purge_topic", call!(client, purge_topic(s, t)));
    call!(root, delete_user(poller.id)).unwrap();
    call!(root, delete_stream(s)).unwrap();
    table
}

pub(super) fn expected_poll_only() -> Table {
    let ok = [
        "poll p1 by id",
        "poll p0 by name",
        "store_offset p1 by id",
        "get_consumer_offset p1 by id",
        "store_offset p0 by name",
        "get_consumer_offset p0 by name",
        "delete_consumer_offset p1",
    ];
    let denied = ["send", "get_topic", "create_topic", "purge_topic"];
    ok.iter()
        .map(|what| (*what, "ok".to_owned()))
        .chain(denied.iter().map(|what| (*what, "Unauthorized".to_owned())))
        .collect()
}

pub(super) fn a_user_who_may_only_poll_polls_and_commits(adapter: Adapter) {
    let _dog = watchdog("poll_only", Duration::from_secs(120));
    let world = world();
    let table = poll_only(&world.place(2, "q"), adapter);
    let differences = compare(&table, &expected_poll_only());
    assert!(differences.is_empty(), "{differences:#?}");
}
both_adapters!(a_user_who_may_only_poll_polls_and_commits);

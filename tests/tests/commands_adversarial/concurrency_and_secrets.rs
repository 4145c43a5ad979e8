//! Many kinds of calls from many threads on one client.

#[allow(clippy::wildcard_imports)]
use super::*;

pub(super) fn concurrent_calls(place: &Place, adapter: Adapter, threads: u32, rounds: u32) {
    let client = Arc::new(Cl::connect(adapter, place.root.clone()).unwrap());
    let me = call!(client, get_me()).unwrap();
    let workers: Vec<_> = (0..threads)
        .map(|thread| {
            let client = Arc::clone(&client);
            let name = place.name(&format!("c{thread}"));
            std::thread::spawn(move || -> Result<(u32, u32), String> {
                let fail =
                    |what: &str, detail: String| format!("thread {thread}: {what}: {detail}");
                let s = call!(client, create_stream(&name))
                    .map_err(|e| fail("create_stream", format!("{e:?}")))?
                    .id;
                let t = call!(client, create_topic(s, "t", 2))
                    .map_err(|e| fail("create_topic", format!("{e:?}")))?
                    .summary
                    .id;
                for round in 0..rounds {
                    let p = round % 2;
                    let payload = format!("{thread}-{round}");
                    let receipt = call!(
                        client,
                        send(
                            s,
                            t,
                            Partitioning::partition_id(p),
                            vec![Message {
                                payload: Bytes::from(payload.clone()),
                                ..Message::default()
                            }]
                        )
                    )
                    .map_err(|e| fail("send", format!("{e:?}")))?;
                    let offset = receipt
                        .base_offset
                        .ok_or_else(|| fail("send", "no offset".into()))?;
                    if receipt.partition_id != p {
                        return Err(fail("send", format!("{receipt:?}")));
                    }
                    let polled = call!(
                        client,
                        poll(
                            s,
                            t,
                            Some(p),
                            consumer(thread),
                            PollingStrategy::Offset(offset),
                            1
                        )
                    )
                    .map_err(|e| fail("poll", format!("{e:?}")))?;
                    if payloads(&polled) != [payload.clone()] {
                        return Err(fail(
                            "poll",
                            format!("{:?} for {payload}", payloads(&polled)),
                        ));
                    }
                    call!(client, store_offset(consumer(thread), s, t, p, offset))
                        .map_err(|e| fail("store_offset", format!("{e:?}")))?;
                    let got = call!(client, get_consumer_offset(consumer(thread), s, t, Some(p)))
                        .map_err(|e| fail("get_consumer_offset", format!("{e:?}")))?;
                    if got.map(|o| o.stored_offset) != Some(offset) {
                        return Err(fail("get_consumer_offset", format!("{got:?} for {offset}")));
                    }
                    let stream = call!(client, get_stream(name.as_str()))
                        .map_err(|e| fail("get_stream", format!("{e:?}")))?;
                    if stream.as_ref().map(|d| (d.id, d.name.as_str())) != Some((s, name.as_str()))
                    {
                        return Err(fail("get_stream", format!("{stream:?}")));
                    }
                    let next = format!("t{round}");
                    call!(
                        client,
                        update_topic(s, t, &next, TopicUpdateOptions::default())
                    )
                    .map_err(|e| fail("update_topic", format!("{e:?}")))?;
                    let topic = call!(client, get_topic(s, next.as_str()))
                        .map_err(|e| fail("get_topic", format!("{e:?}")))?;
                    if topic.as_ref().map(|d| d.summary.id) != Some(t) {
                        return Err(fail("get_topic", format!("{topic:?} as {next}")));
                    }
                    let me_now =
                        call!(client, get_me()).map_err(|e| fail("get_me", format!("{e:?}")))?;
                    if me_now.client.user_id != 0 {
                        return Err(fail("get_me", format!("{me_now:?}")));
                    }
                    call!(client, ping()).map_err(|e| fail("ping", format!("{e:?}")))?;
                    let token = format!("{name}-{round}");
                    call!(
                        client,
                        create_personal_access_token(&token, TokenExpiry::Never)
                    )
                    .map_err(|e| fail("create_pat", format!("{e:?}")))?;
                    let listed = call!(client, get_personal_access_tokens())
                        .map_err(|e| fail("get_pats", format!("{e:?}")))?;
                    if !listed.iter().any(|l| l.name.as_str() == token) {
                        return Err(fail("get_pats", format!("{token} not in {listed:?}")));
                    }
                    call!(client, delete_personal_access_token(&token))
                        .map_err(|e| fail("delete_pat", format!("{e:?}")))?;
                    let users = call!(client, get_users())
                        .map_err(|e| fail("get_users", format!("{e:?}")))?;
                    if !users
                        .iter()
                        .any(|u| u.username.as_str() == "iggy" || u.id == 0)
                    {
                        return Err(fail("get_users", format!("{users:?}")));
                    }
                }
                Ok((s, t))
            })
        })
        .collect();
    let mut made = Vec::new();
    let mut failures = Vec::new();
    for worker in workers {
        match worker.join().unwrap() {
            Ok(ids) => made.push(ids),
            Err(failure) => failures.push(failure),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    let listed = call!(client, get_streams()).unwrap();
    for (s, t) in &made {
        assert!(listed.iter().any(|l| l.id == *s), "stream {s} not listed");
        // Every message of the stream, once, read on the primaries: `rounds` in all.
        let mut stored = 0;
        for p in 0..2 {
            let polled = call!(
                client,
                poll(
                    *s,
                    *t,
                    Some(p),
                    consumer(99),
                    PollingStrategy::Offset(0),
                    1_000
                )
            )
            .unwrap();
            stored += polled.messages.len();
        }
        assert_eq!(stored, usize::try_from(rounds).unwrap(), "stream {s}");
        call!(client, delete_stream(*s)).unwrap();
    }
    assert_eq!(client.stats().session_moves, 0);
    let after = call!(client, get_me()).unwrap();
    assert_eq!(
        after.client.client_id, me.client.client_id,
        "the session moved"
    );
}

pub(super) fn concurrent_calls_of_many_kinds_on_one_client(adapter: Adapter) {
    let _dog = watchdog("concurrent", Duration::from_secs(300));
    let world = world();
    concurrent_calls(&world.place(2, "cc"), adapter, 6, 10);
}
both_adapters!(concurrent_calls_of_many_kinds_on_one_client);

/// Sends keep flowing while another thread logs the session out, again and again.
pub(super) fn sends_while_the_session_logs_out(adapter: Adapter) {
    let _dog = watchdog("sends_while_logout", Duration::from_secs(120));
    let world = world();
    let client = Arc::new(world.connect(adapter, 1));
    let s = call!(client, create_stream("busy")).unwrap().id;
    let t = call!(client, create_topic(s, "t", 3)).unwrap().summary.id;
    for p in 0..3 {
        assert!(world.cluster.set_primary(s, t, p, p as usize));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = (0..3)
        .map(|p| {
            let client = Arc::clone(&client);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut sent = 0u64;
                let mut failed = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    let result = call!(
                        client,
                        send(s, t, Partitioning::partition_id(p), messages("x", 1))
                    );
                    match result {
                        Ok(_) => sent += 1,
                        Err(error) => failed.push(format!("{error:?}")),
                    }
                }
                (sent, failed)
            })
        })
        .collect();
    let mut reads = Vec::new();
    for _ in 0..10 {
        call!(client, logout_user()).unwrap();
        reads.push(outcome(&call!(client, get_topic(s, t))));
        reads.push(outcome(&call!(client, get_me())));
    }
    stop.store(true, Ordering::SeqCst);
    let mut total = 0;
    for sender in senders {
        let (sent, failed) = sender.join().unwrap();
        assert!(failed.is_empty(), "sends failed during logouts: {failed:?}");
        total += sent;
    }
    assert!(total > 0);
    assert!(reads.iter().all(|r| r == "ok"), "{reads:?}");
    let stored: u64 = (0..3).map(|p| world.cluster.partition_len(s, t, p)).sum();
    assert_eq!(stored, total, "stored = acknowledged");
}
both_adapters!(sends_while_the_session_logs_out);

//! Primaries and the metadata leader move while members come and go (section 6).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::{Adapter, Env, Mio, STREAM, Sampler, Spec, TOPIC, Tokio, Watch, finish};

// ---- 6. primaries and the metadata leader move while members come and go -----------------

/// Three members read on threads of their own; primaries move every 30 ms and the metadata
/// leader every 250 ms; a fourth member joins after 300 ms and another leaves after 150
/// messages (one with a commit, the other dropped). Everything is handed out, with only
/// the documented window, and no stored offset goes down.
fn moving_cluster<A: Adapter>() {
    const GROUP: &str = "moving";
    const PARTITIONS: u32 = 6;
    const LEN: u64 = 80;
    const TOTAL: usize = (LEN * PARTITIONS as u64) as usize;
    let env = Env::start(3, PARTITIONS, 1);
    env.fill(PARTITIONS, LEN);
    let watch = Watch::new(GROUP, PARTITIONS, 5);
    let spec = Spec {
        batch: 5,
        ..Spec::new(GROUP)
    };
    let clients: Vec<A::Client> = (0..4).map(|_| A::connect(&env, env.config())).collect();
    let stop = AtomicBool::new(false);
    let sampler_stop = AtomicBool::new(false);
    let moves = AtomicUsize::new(0);
    let give_up = Instant::now() + Duration::from_secs(12);
    let outcomes = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        let _sampler = Sampler::spawn(scope, &env, &watch, &sampler_stop);
        scope.spawn(|| {
            let mut n = 0usize;
            while !stop.load(Ordering::SeqCst) {
                let partition = (n as u32) % PARTITIONS;
                let now = env.cluster.primary(STREAM, TOPIC, partition).unwrap();
                env.cluster
                    .set_primary(STREAM, TOPIC, partition, (now + 1) % 3);
                if n % 8 == 7 {
                    let leader = env.cluster.metadata_leader();
                    env.cluster.set_metadata_leader((leader + 1) % 3);
                }
                n += 1;
                moves.store(n, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(30));
            }
        });
        // (name, client, start after, leave after this many handed to it, how)
        let plan: [(&str, usize, u64, usize, &str); 4] = [
            ("m1", 0, 0, usize::MAX, "stay"),
            ("m2", 1, 0, 150, "shutdown"),
            ("m3", 2, 0, usize::MAX, "stay"),
            ("m4", 3, 300, 100, "drop"),
        ];
        let mut handles = Vec::new();
        for (name, client, start, leave_after, how) in plan {
            let client = &clients[client];
            let (env, watch, outcomes) = (&env, &watch, &outcomes);
            handles.push(scope.spawn(move || {
                std::thread::sleep(Duration::from_millis(start));
                let mut member = A::member(client, spec);
                if start == 0 {
                    A::join(env, &mut member).unwrap();
                }
                let mut mine = 0;
                while watch.distinct() < TOTAL && Instant::now() < give_up && mine < leave_after {
                    if let Some(Ok(_)) =
                        watch.next::<A>(env, name, &mut member, Duration::from_millis(150))
                    {
                        mine += 1;
                    }
                }
                let stats = A::stats(&member);
                let end = match how {
                    "drop" if mine >= leave_after => {
                        drop(member);
                        Ok(())
                    }
                    _ => A::shutdown(env, member, true),
                };
                outcomes
                    .lock()
                    .unwrap()
                    .push(format!("{name}: {mine} handed, {stats:?}, ended {end:?}"));
            }));
        }
        for handle in handles {
            handle.join().unwrap();
        }
        stop.store(true, Ordering::SeqCst);
    });
    println!(
        "[{}] {} moves; {:?}",
        A::NAME,
        moves.load(Ordering::SeqCst),
        outcomes.lock().unwrap()
    );
    watch.assert_clean(A::NAME, &[LEN; PARTITIONS as usize], false);
    for client in clients {
        A::close(&env, client);
    }
    finish::<A>(&env);
}

#[test]
fn primaries_and_leader_move_while_members_come_and_go_tokio() {
    moving_cluster::<Tokio>();
}

#[test]
fn primaries_and_leader_move_while_members_come_and_go_mio() {
    moving_cluster::<Mio>();
}

//! The demo's producer loops, run as the demo runs them (embedded cluster, primaries
//! moving during the load), on a paced load small enough for any machine: every send made
//! is acknowledged once, the schedule is kept, the cluster stores exactly what was
//! acknowledged, and no session moves. A loop that drops a delivery or counts one twice
//! fails here whatever the timing (acknowledged and stored disagree), and so does one that
//! stops before half its schedule.

use std::time::Duration;

use iggy_route_tests::demo::runner::{self, FaultSettings, Runtimes};
use iggy_route_tests::demo::{ClientKind, Load, LoadKind, Scenario};

/// 12 producers of 100-message sends offering 60,000 msg/s for 1.5 s: one send per
/// producer every 20 ms, 75 each (the 76th would be due at the deadline or after it).
const RATE: u64 = 60_000;
const SCHEDULED_MESSAGES: u64 = 12 * 75 * 100;

fn paced_load() -> Load {
    Load {
        kind: LoadKind::Batch100,
        producers: 12,
        partitions: iggy_route_tests::demo::PARTITIONS,
        payload_bytes: 100,
        duration: Duration::from_millis(1_500),
        drain_grace: Duration::from_secs(30),
        sdk_nodelay: true,
        producer_window: None,
        epoch: None,
        outage: None,
        follow_refusal_view: true,
        tls: false,
        rate: Some(RATE),
    }
}

#[test]
fn every_scheduled_send_of_each_loop_is_acknowledged_once_while_primaries_move() {
    let runtimes = Runtimes::new(2).expect("runtimes");
    let faults = FaultSettings {
        // Five moves, the last 250 ms before the deadline: room for its partition's next
        // send even on a slow machine.
        move_every: Duration::from_millis(250),
        crash_node: 1,
        view_change: Duration::from_millis(200),
    };
    for client in [
        ClientKind::RouteTokio,
        ClientKind::RouteMio,
        ClientKind::RouteTokioProducer,
        ClientKind::RouteMioProducer,
    ] {
        let row = runner::run_embedded(
            &runtimes,
            client,
            Scenario::Moving,
            &paced_load(),
            Duration::ZERO,
            &faults,
        )
        .unwrap_or_else(|error| panic!("{client}: {error}"));
        let measurement = &row.measurement;
        assert_eq!(measurement.failed_sends, 0, "{client}: failed sends");
        assert_eq!(measurement.cut_off_sends, 0, "{client}: sends cut off");
        assert_eq!(
            measurement.acked_messages,
            measurement.sends * 100,
            "{client}: every send made acknowledged, each once"
        );
        // A producer that falls behind stops at the deadline; on a loaded machine a few
        // scheduled sends may not be made, but a loop that stops early makes far fewer.
        assert!(
            measurement.acked_messages > SCHEDULED_MESSAGES / 2
                && measurement.acked_messages <= SCHEDULED_MESSAGES,
            "{client}: {} of the {SCHEDULED_MESSAGES} scheduled messages sent",
            measurement.acked_messages
        );
        assert_eq!(
            row.stored_messages,
            Some(measurement.acked_messages),
            "{client}: the cluster stored exactly what was acknowledged"
        );
        assert_eq!(row.session_moves, 0, "{client}: session moves");
        let recovery = row
            .recovery
            .as_ref()
            .expect("a moving run measures recovery");
        assert!(
            recovery.faults.len() >= 5,
            "{client}: the primaries moved during the load ({} moves)",
            recovery.faults.len()
        );
        assert_eq!(
            recovery.unrecovered, 0,
            "{client}: every moved partition took sends again"
        );
    }
}

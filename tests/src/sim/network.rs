//! The simulated network: seeded, sans-IO, in simulated time (after str0m's `netem`).
//!
//! It carries TCP connections between routers and nodes. Each connection delivers its
//! bytes in order in each direction, after a bounded random latency; deliveries of
//! different connections interleave freely. The network makes no decision about what the
//! bytes mean: the simulation pops the next [`Delivery`] and hands it to a router or a node.
//!
//! # Implementation note: faults are cuts, never silent loss
//! TCP does not lose, duplicate or reorder bytes inside one connection: it either delivers
//! them in order or the connection breaks. So this network never drops or repeats a single
//! frame. Its one fault is a **cut**: the connection ends, everything still in flight in
//! either direction is lost, the node side sees the close at once and the router side learns
//! it after a latency (as a closed link, or as a failed connect if it never heard that the
//! connection was up). A router's own `Close` is an abortive close: bytes it wrote that are
//! still in flight are lost too. A write to a cut connection that the router has not yet
//! heard about vanishes, as a write into a reset socket would.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::LinkId;

use super::rng::SimRng;

/// One connection: the router that opened it and the link id it gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConnId {
    /// Index of the router in the simulation.
    pub router: usize,
    /// The router's link id.
    pub link: LinkId,
}

/// What the router has been told about a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouterView {
    /// It asked to connect and heard nothing yet.
    Connecting,
    /// `handle_connected` was delivered.
    Connected,
    /// It closed the link, or was told it closed or failed.
    Gone,
}

#[derive(Debug)]
struct Conn {
    node: usize,
    view: RouterView,
    /// The connection is broken (no more bytes in either direction).
    cut: bool,
    /// Latest delivery instant scheduled towards the node and towards the router: a new
    /// delivery is never earlier, which keeps each direction in order.
    to_node_last: Duration,
    to_router_last: Duration,
}

/// Something the network hands over at its instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The connection request reached the node: the simulation accepts or refuses it.
    Syn(ConnId),
    /// Tell the router the connection is up.
    Connected(ConnId),
    /// Tell the router the connection could not be made.
    ConnectFailed(ConnId),
    /// Bytes for the node.
    ToNode(ConnId, Bytes),
    /// Bytes for the router.
    ToRouter(ConnId, Bytes),
    /// Tell the router the connection closed.
    Closed(ConnId),
}

/// Latency bounds of the network.
#[derive(Debug, Clone, Copy)]
pub struct NetworkConfig {
    /// Shortest one-way latency.
    pub latency_min: Duration,
    /// Longest ordinary one-way latency.
    pub latency_max: Duration,
    /// Percent of deliveries that get a spike instead.
    pub spike_percent: u64,
    /// Longest one-way latency of a spike.
    pub spike_max: Duration,
    /// Percent of frames towards a router that arrive in two reads.
    pub split_percent: u64,
}

/// The network: connections and the deliveries in flight. See the module doc.
#[derive(Debug)]
pub struct Network {
    config: NetworkConfig,
    rng: SimRng,
    conns: BTreeMap<ConnId, Conn>,
    /// Deliveries by (instant, sequence): the sequence keeps equal instants in send order.
    in_flight: BTreeMap<(Duration, u64), Delivery>,
    next_sequence: u64,
}

/// What became of a router's write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteResult {
    /// On its way.
    Sent,
    /// Lost in a cut the router has not heard of yet.
    Lost,
    /// The router wrote to a link it was never told is connected, or after it was gone.
    NotConnected,
}

impl Network {
    /// An empty network.
    pub fn new(config: NetworkConfig, rng: SimRng) -> Self {
        Self {
            config,
            rng,
            conns: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            next_sequence: 0,
        }
    }

    /// When the next delivery is due.
    pub fn next_at(&self) -> Option<Duration> {
        self.in_flight.keys().next().map(|(at, _)| *at)
    }

    /// The next delivery if it is due at or before `now`. Deliveries for a connection that
    /// was cut meanwhile are dropped here, as are notifications the router no longer needs.
    pub fn pop_due(&mut self, now: Duration) -> Option<Delivery> {
        loop {
            let entry = self.in_flight.first_entry()?;
            if entry.key().0 > now {
                return None;
            }
            let delivery = entry.remove();
            if self.is_live(&delivery) {
                self.apply(&delivery);
                return Some(delivery);
            }
        }
    }

    fn is_live(&self, delivery: &Delivery) -> bool {
        let conn = |id: &ConnId| self.conns.get(id);
        match delivery {
            Delivery::Syn(id)
            | Delivery::Connected(id)
            | Delivery::ToNode(id, _)
            | Delivery::ToRouter(id, _) => conn(id).is_some_and(|c| !c.cut),
            Delivery::ConnectFailed(id) | Delivery::Closed(id) => {
                conn(id).is_some_and(|c| c.view != RouterView::Gone)
            }
        }
    }

    fn apply(&mut self, delivery: &Delivery) {
        let (id, view) = match delivery {
            Delivery::Connected(id) => (id, RouterView::Connected),
            Delivery::ConnectFailed(id) | Delivery::Closed(id) => (id, RouterView::Gone),
            Delivery::Syn(_) | Delivery::ToNode(..) | Delivery::ToRouter(..) => return,
        };
        if let Some(conn) = self.conns.get_mut(id) {
            conn.view = view;
        }
    }

    /// The router asked to connect `id` to `node`.
    pub fn connect(&mut self, now: Duration, id: ConnId, node: usize) -> bool {
        if self.conns.contains_key(&id) {
            return false;
        }
        self.conns.insert(
            id,
            Conn {
                node,
                view: RouterView::Connecting,
                cut: false,
                to_node_last: now,
                to_router_last: now,
            },
        );
        self.schedule_to_node(now, id, Delivery::Syn(id));
        true
    }

    /// The node accepted the connection: the router hears of it after a latency.
    pub fn accept(&mut self, now: Duration, id: ConnId) {
        self.schedule_to_router(now, id, Delivery::Connected(id));
    }

    /// The node was not listening: the connect fails.
    pub fn refuse(&mut self, now: Duration, id: ConnId) {
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.cut = true;
        }
        self.schedule_to_router(now, id, Delivery::ConnectFailed(id));
    }

    /// The router wrote `bytes` on `id`.
    pub fn write(&mut self, now: Duration, id: ConnId, bytes: Bytes) -> WriteResult {
        match self.conns.get(&id) {
            Some(conn) if conn.view == RouterView::Connected && conn.cut => WriteResult::Lost,
            Some(conn) if conn.view == RouterView::Connected => {
                self.schedule_to_node(now, id, Delivery::ToNode(id, bytes));
                WriteResult::Sent
            }
            Some(_) | None => WriteResult::NotConnected,
        }
    }

    /// The node answered on `id`; sometimes the bytes arrive in two reads.
    pub fn reply(&mut self, now: Duration, id: ConnId, bytes: Bytes) {
        if self.conns.get(&id).is_none_or(|c| c.cut) {
            return;
        }
        if bytes.len() > 1 && self.rng.chance(self.config.split_percent) {
            let at = 1 + self.rng.index(bytes.len() - 1);
            self.schedule_to_router(now, id, Delivery::ToRouter(id, bytes.slice(..at)));
            self.schedule_to_router(now, id, Delivery::ToRouter(id, bytes.slice(at..)));
        } else {
            self.schedule_to_router(now, id, Delivery::ToRouter(id, bytes));
        }
    }

    /// Break the connection (a fault, a stopped node, or the node closing it). Returns
    /// false if it was already broken. The router hears of it after a latency.
    pub fn cut(&mut self, now: Duration, id: ConnId) -> bool {
        let Some(conn) = self.conns.get_mut(&id) else {
            return false;
        };
        if conn.cut {
            return false;
        }
        conn.cut = true;
        let notice = match conn.view {
            RouterView::Connecting => Delivery::ConnectFailed(id),
            RouterView::Connected => Delivery::Closed(id),
            RouterView::Gone => return true,
        };
        self.schedule_to_router(now, id, notice);
        true
    }

    /// The router closed the link (`Output::Close`). Returns false for a link the network
    /// never saw.
    pub fn close(&mut self, id: ConnId) -> bool {
        let Some(conn) = self.conns.get_mut(&id) else {
            return false;
        };
        conn.cut = true;
        conn.view = RouterView::Gone;
        true
    }

    /// What the router has been told about `id`.
    pub fn view(&self, id: ConnId) -> Option<RouterView> {
        self.conns.get(&id).map(|c| c.view)
    }

    /// The node at the far end of `id`.
    pub fn node_of(&self, id: ConnId) -> Option<usize> {
        self.conns.get(&id).map(|c| c.node)
    }

    /// Connections that are up and that their router knows are up, in a stable order.
    pub fn established(&self) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, c)| !c.cut && c.view == RouterView::Connected)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Connections to `node` that are not cut yet.
    pub fn open_to(&self, node: usize) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, c)| !c.cut && c.node == node)
            .map(|(id, _)| *id)
            .collect()
    }

    fn latency(&mut self) -> Duration {
        let config = self.config;
        if self.rng.chance(config.spike_percent) {
            self.rng.duration(config.latency_max, config.spike_max)
        } else {
            self.rng.duration(config.latency_min, config.latency_max)
        }
    }

    fn schedule_to_node(&mut self, now: Duration, id: ConnId, delivery: Delivery) {
        let at = now + self.latency();
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        conn.to_node_last = conn.to_node_last.max(at);
        let at = conn.to_node_last;
        self.push(at, delivery);
    }

    fn schedule_to_router(&mut self, now: Duration, id: ConnId, delivery: Delivery) {
        let at = now + self.latency();
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        conn.to_router_last = conn.to_router_last.max(at);
        let at = conn.to_router_last;
        self.push(at, delivery);
    }

    fn push(&mut self, at: Duration, delivery: Delivery) {
        self.in_flight.insert((at, self.next_sequence), delivery);
        self.next_sequence += 1;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
mod tests {
    use super::*;

    fn network() -> Network {
        let config = NetworkConfig {
            latency_min: Duration::from_micros(100),
            latency_max: Duration::from_millis(10),
            spike_percent: 10,
            spike_max: Duration::from_millis(50),
            split_percent: 50,
        };
        Network::new(config, SimRng::new(1, 1))
    }

    fn id(link: u64) -> ConnId {
        ConnId {
            router: 0,
            link: LinkId(link),
        }
    }

    fn drain(net: &mut Network) -> Vec<Delivery> {
        let mut out = Vec::new();
        while let Some(at) = net.next_at() {
            while let Some(delivery) = net.pop_due(at) {
                out.push(delivery);
            }
        }
        out
    }

    #[test]
    fn bytes_of_one_connection_arrive_in_order() {
        let mut net = network();
        let now = Duration::ZERO;
        assert!(net.connect(now, id(1), 0));
        assert_eq!(drain(&mut net), vec![Delivery::Syn(id(1))]);
        net.accept(now, id(1));
        assert_eq!(drain(&mut net), vec![Delivery::Connected(id(1))]);
        for byte in 0..50u8 {
            net.write(now, id(1), Bytes::from(vec![byte]));
        }
        let order: Vec<u8> = drain(&mut net)
            .into_iter()
            .map(|d| match d {
                Delivery::ToNode(_, bytes) => bytes[0],
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(order, (0..50).collect::<Vec<u8>>());
    }

    #[test]
    fn a_cut_loses_what_is_in_flight_and_tells_the_router_once() {
        let mut net = network();
        let now = Duration::ZERO;
        net.connect(now, id(1), 0);
        drain(&mut net);
        net.accept(now, id(1));
        drain(&mut net);
        assert_eq!(
            net.write(now, id(1), Bytes::from_static(b"x")),
            WriteResult::Sent
        );
        net.reply(now, id(1), Bytes::from_static(b"y"));
        assert!(net.cut(now, id(1)));
        assert!(!net.cut(now, id(1)));
        assert_eq!(
            net.write(now, id(1), Bytes::from_static(b"z")),
            WriteResult::Lost
        );
        assert_eq!(drain(&mut net), vec![Delivery::Closed(id(1))]);
        assert_eq!(
            net.write(now, id(1), Bytes::from_static(b"z")),
            WriteResult::NotConnected
        );
    }

    #[test]
    fn writes_before_the_connect_is_reported_are_rejected() {
        let mut net = network();
        net.connect(Duration::ZERO, id(1), 0);
        assert_eq!(
            net.write(Duration::ZERO, id(1), Bytes::from_static(b"x")),
            WriteResult::NotConnected
        );
        assert!(!net.connect(Duration::ZERO, id(1), 0), "link ids are fresh");
    }
}

//! Name resolution off the I/O thread.
//!
//! The core hands out `host:port` strings. Looking a name up (`getaddrinfo`) blocks, for as
//! long as the system resolver likes (seconds, when a DNS server does not answer), and the
//! I/O thread must never block: every socket and every deadline of the client waits on it.
//! So a numeric address is parsed in place, and a name is looked up on a short-lived helper
//! thread that hands its answer back through a channel and wakes the loop with the client's
//! `mio::Waker`. Lookups are bounded: one thread per distinct name at a time (a link that
//! needs a name already being looked up waits for that lookup), and at most
//! [`MAX_LOOKUPS`] names at once.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::mpsc;

use iggy_route_core::{ConnectError, LinkId};
use mio::Waker;

/// How a name becomes addresses: the system resolver in production; tests swap in slow or
/// scripted ones.
pub(crate) type Lookup = Arc<dyn Fn(&str) -> io::Result<Vec<SocketAddr>> + Send + Sync>;

/// The system resolver: every address `host:port` resolves to, in the resolver's order.
pub(crate) fn system_lookup() -> Lookup {
    Arc::new(|addr: &str| Ok(addr.to_socket_addrs()?.collect()))
}

/// Names looked up at once. A router dials a handful of nodes; this only stops a resolver
/// that hangs from costing a thread per reconnect attempt.
pub(crate) const MAX_LOOKUPS: usize = 8;

/// What `resolve` could say at once.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Resolution {
    /// A numeric address: connect now.
    Ready(Vec<SocketAddr>),
    /// A helper thread is looking the name up; the answer comes from `take_done`.
    Pending,
}

/// A finished lookup, as the helper thread sends it.
type Done = (String, io::Result<Vec<SocketAddr>>);

pub(crate) struct Resolver {
    lookup: Lookup,
    waker: Arc<Waker>,
    done_sender: mpsc::Sender<Done>,
    done: mpsc::Receiver<Done>,
    /// Names being looked up, and the links waiting for each (possibly none any more:
    /// the entry stays until its thread answers, so the count of threads stays bounded).
    waiting: HashMap<String, Vec<LinkId>>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("waiting", &self.waiting)
            .finish_non_exhaustive()
    }
}

impl Resolver {
    pub(crate) fn new(lookup: Lookup, waker: Arc<Waker>) -> Self {
        let (done_sender, done) = mpsc::channel();
        Self {
            lookup,
            waker,
            done_sender,
            done,
            waiting: HashMap::new(),
        }
    }

    /// Starts resolving `addr` for `link`.
    pub(crate) fn resolve(&mut self, link: LinkId, addr: &str) -> Result<Resolution, ConnectError> {
        if let Ok(socket_addr) = addr.parse::<SocketAddr>() {
            return Ok(Resolution::Ready(vec![socket_addr]));
        }
        if let Some(links) = self.waiting.get_mut(addr) {
            links.push(link);
            return Ok(Resolution::Pending);
        }
        if self.waiting.len() >= MAX_LOOKUPS {
            // The router treats it as a failed connect: it backs off and tries again.
            return Err(ConnectError::Other(
                "too many name lookups in progress".to_owned(),
            ));
        }
        let (lookup, name) = (Arc::clone(&self.lookup), addr.to_owned());
        let (sender, waker) = (self.done_sender.clone(), Arc::clone(&self.waker));
        std::thread::Builder::new()
            .name("iggy-route-resolve".to_owned())
            .spawn(move || {
                let result = lookup(&name);
                // Once the client is gone nobody listens, and that is fine.
                if sender.send((name, result)).is_ok() {
                    let _ = waker.wake();
                }
            })
            .map_err(|error| ConnectError::Other(error.to_string()))?;
        self.waiting.insert(addr.to_owned(), vec![link]);
        Ok(Resolution::Pending)
    }

    /// `link` no longer wants an answer (the router closed it, say at its connect timeout).
    pub(crate) fn cancel(&mut self, link: LinkId) {
        for links in self.waiting.values_mut() {
            links.retain(|&waiting| waiting != link);
        }
    }

    /// Every lookup that finished since the last call: each link that still waits, with its
    /// addresses, or `ConnectError::Resolve` when the name did not resolve to any.
    pub(crate) fn take_done(&mut self) -> Vec<(LinkId, Result<Vec<SocketAddr>, ConnectError>)> {
        let mut answers = Vec::new();
        while let Ok((name, result)) = self.done.try_recv() {
            let addrs = match result {
                Ok(addrs) if !addrs.is_empty() => Ok(addrs),
                Ok(_) | Err(_) => Err(ConnectError::Resolve),
            };
            let links = self.waiting.remove(&name).unwrap_or_default();
            answers.extend(links.into_iter().map(|link| (link, addrs.clone())));
        }
        answers
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::{Duration, Instant};

    use mio::{Events, Poll, Token};

    use super::*;

    const WAKE: Token = Token(7);

    fn slow_lookup(addr: &str) -> io::Result<Vec<SocketAddr>> {
        std::thread::sleep(Duration::from_millis(300));
        match addr {
            "two.test:9" => Ok(vec![
                SocketAddr::from((Ipv4Addr::LOCALHOST, 9)),
                SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), 9)),
            ]),
            "none.test:9" => Ok(Vec::new()),
            _ => Err(io::Error::other("no such host")),
        }
    }

    /// Waits (bounded) for the waker, then takes what finished: answers are only looked
    /// for after a wake-up, so a lookup that did not wake the poll fails the test.
    fn wait_done(
        poll: &mut Poll,
        resolver: &mut Resolver,
    ) -> Vec<(LinkId, Result<Vec<SocketAddr>, ConnectError>)> {
        let mut events = Events::with_capacity(4);
        let until = Instant::now() + Duration::from_secs(3);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no lookup finished within 3 s");
            poll.poll(&mut events, Some(left)).unwrap();
            if events.iter().any(|event| event.token() == WAKE) {
                let done = resolver.take_done();
                if !done.is_empty() {
                    return done;
                }
            }
        }
    }

    fn resolver() -> (Poll, Resolver) {
        let poll = Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), WAKE).unwrap());
        (poll, Resolver::new(Arc::new(slow_lookup), waker))
    }

    #[test]
    fn numeric_addresses_need_no_lookup() {
        let (_poll, mut resolver) = resolver();
        let ready = resolver.resolve(LinkId(1), "127.0.0.1:8090").unwrap();
        assert_eq!(
            ready,
            Resolution::Ready(vec![SocketAddr::from((Ipv4Addr::LOCALHOST, 8090))])
        );
        let v6 = resolver.resolve(LinkId(2), "[::1]:8090").unwrap();
        assert!(matches!(v6, Resolution::Ready(addrs) if addrs[0].is_ipv6()));
    }

    #[test]
    fn a_slow_lookup_runs_off_the_calling_thread_and_wakes_the_poll() {
        let (mut poll, mut resolver) = resolver();
        let started = Instant::now();
        let pending = resolver.resolve(LinkId(1), "two.test:9").unwrap();
        // The lookup takes 300 ms; the caller (the I/O thread) must not wait for it.
        assert!(started.elapsed() < Duration::from_millis(100));
        assert_eq!(pending, Resolution::Pending);
        // A second link for the same name joins the lookup in progress.
        assert_eq!(
            resolver.resolve(LinkId(2), "two.test:9").unwrap(),
            Resolution::Pending
        );
        let done = wait_done(&mut poll, &mut resolver);
        assert_eq!(done.len(), 2, "{done:?}");
        for (_, addrs) in &done {
            assert_eq!(addrs.as_ref().unwrap().len(), 2, "every address is kept");
        }
    }

    #[test]
    fn names_that_do_not_resolve_report_resolve_errors() {
        let (mut poll, mut resolver) = resolver();
        resolver.resolve(LinkId(1), "none.test:9").unwrap();
        resolver.resolve(LinkId(2), "bad.test:9").unwrap();
        let mut done = wait_done(&mut poll, &mut resolver);
        if done.len() < 2 {
            done.extend(wait_done(&mut poll, &mut resolver));
        }
        assert_eq!(done.len(), 2);
        assert!(done.iter().all(|(_, r)| *r == Err(ConnectError::Resolve)));
    }

    #[test]
    fn cancelled_links_get_no_answer_and_lookups_are_bounded() {
        let (mut poll, mut resolver) = resolver();
        resolver.resolve(LinkId(1), "two.test:9").unwrap();
        resolver.cancel(LinkId(1));
        for n in 1..MAX_LOOKUPS {
            let name = format!("host{n}.test:9");
            assert_eq!(
                resolver.resolve(LinkId(10 + n as u64), &name).unwrap(),
                Resolution::Pending
            );
        }
        // Every slot is taken (the cancelled lookup still holds its thread).
        assert!(matches!(
            resolver.resolve(LinkId(99), "one-too-many.test:9"),
            Err(ConnectError::Other(_))
        ));
        let until = Instant::now() + Duration::from_secs(3);
        let mut answered = Vec::new();
        while answered.len() < MAX_LOOKUPS - 1 {
            answered.extend(wait_done(&mut poll, &mut resolver));
            assert!(Instant::now() < until);
        }
        assert!(answered.iter().all(|(link, _)| *link != LinkId(1)));
        // The slots are free again.
        assert_eq!(
            resolver.resolve(LinkId(100), "two.test:9").unwrap(),
            Resolution::Pending
        );
    }
}

//! Paused nodes. A paused server process (SIGSTOP) is not a crashed one: its connections
//! stay up, the kernel still accepts new ones and buffers what clients write, and once
//! resumed the process reads all of it and answers, with the cluster's state as it then
//! is. Here a paused node's incoming bytes are held, in arrival order, until its resume.
//!
//! A router that gives up on a silent link closes it, but the bytes it had written are
//! already in the node's buffer: the node still reads them after the resume, and only then
//! sees the close. A cut (a reset connection, or the node killed) loses them.

use bytes::Bytes;

use super::network::ConnId;

/// What paused nodes hold. See the module doc.
#[derive(Debug)]
pub struct Pauses {
    paused: Vec<bool>,
    /// Per node: the bytes that reached it while paused, in arrival order.
    held: Vec<Vec<(ConnId, Bytes)>>,
    /// Per node: connections the router closed while the node was paused and holding some
    /// of their bytes; the node closes them after reading those.
    closed: Vec<Vec<ConnId>>,
    /// Pauses that ended with a resume.
    pub resumes: u64,
    /// Writes read after a resume, and those of them on links the router had closed.
    pub reads: u64,
    /// See `reads`.
    pub reads_closed: u64,
}

/// What a node does when it resumes: read `held` in order, then close `closed`.
#[derive(Debug, Default)]
pub struct Resumed {
    /// Bytes to hand to the node, in the order they arrived.
    pub held: Vec<(ConnId, Bytes)>,
    /// Connections the node closes once it has read them.
    pub closed: Vec<ConnId>,
}

impl Pauses {
    /// `nodes` nodes, none paused.
    pub fn new(nodes: usize) -> Self {
        Self {
            paused: vec![false; nodes],
            held: vec![Vec::new(); nodes],
            closed: vec![Vec::new(); nodes],
            resumes: 0,
            reads: 0,
            reads_closed: 0,
        }
    }

    /// Whether `node` is paused.
    pub fn is_paused(&self, node: usize) -> bool {
        self.paused.get(node).copied().unwrap_or(false)
    }

    /// Pause `node` (a no-op if it already is).
    pub fn pause(&mut self, node: usize) {
        if let Some(paused) = self.paused.get_mut(node) {
            *paused = true;
        }
    }

    /// End the pause of `node` and hand back what it must now read and close; nothing if
    /// it was not paused.
    pub fn resume(&mut self, node: usize) -> Resumed {
        match self.paused.get_mut(node) {
            Some(paused) if *paused => {
                *paused = false;
                let resumed = Resumed {
                    held: std::mem::take(&mut self.held[node]),
                    closed: std::mem::take(&mut self.closed[node]),
                };
                self.resumes += 1;
                self.reads += resumed.held.len() as u64;
                self.reads_closed += resumed
                    .held
                    .iter()
                    .filter(|(id, _)| resumed.closed.contains(id))
                    .count() as u64;
                resumed
            }
            Some(_) | None => Resumed::default(),
        }
    }

    /// `bytes` reached the paused `node` on `id`.
    pub fn hold(&mut self, node: usize, id: ConnId, bytes: Bytes) {
        if let Some(held) = self.held.get_mut(node) {
            held.push((id, bytes));
        }
    }

    /// The router closed `id` to `node`: true when the node is paused and holds bytes of
    /// it, so that it closes the connection only after its resume.
    pub fn defer_close(&mut self, node: usize, id: ConnId) -> bool {
        let holds = self.is_paused(node) && self.held[node].iter().any(|(held, _)| *held == id);
        if holds {
            self.closed[node].push(id);
        }
        holds
    }

    /// Whether the router closed `id` and its paused node has not seen the close yet.
    pub fn is_closing(&self, id: ConnId) -> bool {
        self.closed.iter().any(|closed| closed.contains(&id))
    }

    /// `id` was cut: what its node held of it is lost.
    pub fn cut(&mut self, id: ConnId) {
        for held in &mut self.held {
            held.retain(|(held, _)| *held != id);
        }
    }

    /// `node` was killed: it is no longer paused and what it held is lost. Returns the
    /// connections whose close it had deferred, for the caller to close now.
    pub fn kill(&mut self, node: usize) -> Vec<ConnId> {
        let Some(paused) = self.paused.get_mut(node) else {
            return Vec::new();
        };
        *paused = false;
        self.held[node].clear();
        std::mem::take(&mut self.closed[node])
    }
}

//! What a follower knows of a user's sign-in after the user's password or name changed.
//! On a real 3-node cluster, a follower refused a user's new password (and accepted the
//! old one) for a while after the metadata leader had committed the change: it checks a
//! sign-in against the users as of its metadata horizon (`ClusterState::metadata_horizon`),
//! as it answers metadata reads. The leader knows the change at once.

use std::collections::VecDeque;

use iggy_route_core::wire::Password;

/// Replaced credentials remembered, at most; older ones are past every horizon.
const REMEMBERED_MAX: usize = 256;

/// Credentials a user signed in with until a change replaced them.
#[derive(Debug)]
struct Replaced {
    /// When the change committed (µs, the model's clock).
    until: u64,
    user: u32,
    username: String,
    password: Password,
}

/// The credentials each user had before its committed changes, newest last.
#[derive(Debug, Default)]
pub(super) struct SignInHistory {
    replaced: VecDeque<Replaced>,
}

/// What a node with a horizon knows of a user's sign-in.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum KnownSignIn<'a> {
    /// No change of the user after the horizon: its current credentials.
    Current,
    /// Changed since the horizon: the credentials it had then.
    AsOf {
        username: &'a str,
        password: &'a str,
    },
}

impl SignInHistory {
    /// `user` signed in with `username` and `password` until `at` (µs).
    pub(super) fn replaced(&mut self, at: u64, user: u32, username: &str, password: &Password) {
        if self.replaced.len() == REMEMBERED_MAX {
            self.replaced.pop_front();
        }
        self.replaced.push_back(Replaced {
            until: at,
            user,
            username: username.to_owned(),
            password: password.clone(),
        });
    }

    /// The sign-in of `user` a node whose copy is complete up to `horizon` (µs) knows: the
    /// credentials of the oldest change after the horizon, if any.
    pub(super) fn known_at(&self, user: u32, horizon: u64) -> KnownSignIn<'_> {
        self.replaced
            .iter()
            .find(|replaced| replaced.user == user && replaced.until > horizon)
            .map_or(KnownSignIn::Current, |replaced| KnownSignIn::AsOf {
                username: &replaced.username,
                password: replaced.password.expose(),
            })
    }
}
